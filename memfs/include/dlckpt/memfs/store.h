/* dlckpt/memfs/store.h — the C API of memfs (see dlckpt/memfs/memfs.h for semantics).
 *
 * A dlckpt_store_t is an opaque handle on one attached store; descriptors
 * returned by dlckpt_open are private to that handle. Every call is
 * thread-safe and returns -1 (or NULL) with errno set on error;
 * dlckpt_last_error() then names the store, path and cause. */
#ifndef DLCKPT_MEMFS_STORE_H_
#define DLCKPT_MEMFS_STORE_H_

#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlckpt_store dlckpt_store_t;

typedef struct dlckpt_store_options {
  uint64_t capacity;   /* bytes of file data, all versions together */
  uint32_t block_size; /* power of two in [4 KiB, 16 MiB] */
  uint32_t max_files;  /* 0: dlckpt::memfs::DefaultMaxFiles(capacity) */
  uint32_t max_open;
  int prefault;        /* non-zero: allocate every page at creation */
  const char* job;     /* identity recorded in the store; may be NULL */
  const char* node;
  int rank;
  int compression;           /* DLCKPT_COMPRESS_NONE or DLCKPT_COMPRESS_LZ4 */
  double compress_threshold; /* in (0, 1]: see StoreOptions in dlckpt/memfs/memfs.h */
  uint32_t chunk_size;       /* 0: default */
} dlckpt_store_options_t;

#define DLCKPT_COMPRESS_NONE 0
#define DLCKPT_COMPRESS_LZ4 1

#define DLCKPT_ATTACH_READONLY 0
#define DLCKPT_ATTACH_OWNER 1

void dlckpt_store_options_init(dlckpt_store_options_t* options);
/* Writes "/dlckpt.<job>.<node>.r<rank>" into buf; -1/EINVAL on bad parts,
 * -1/ERANGE if it does not fit. */
int dlckpt_store_name(const char* job, const char* node, int rank, char* buf, size_t len);

dlckpt_store_t* dlckpt_store_create(const char* name, const dlckpt_store_options_t* options);
dlckpt_store_t* dlckpt_store_attach(const char* name, int mode);
/* Detaches (an owner keeps its working files for the next owner). */
int dlckpt_store_detach(dlckpt_store_t* store);
/* Detaches and removes the store. */
int dlckpt_store_destroy(dlckpt_store_t* store);
int dlckpt_store_unlink(const char* name);

int dlckpt_store_commit(dlckpt_store_t* store, uint64_t* epoch);
int dlckpt_store_acknowledge(dlckpt_store_t* store, uint64_t epoch);
int dlckpt_store_rollback(dlckpt_store_t* store);
int dlckpt_store_restore(dlckpt_store_t* store, uint64_t epoch);
int dlckpt_store_verify(dlckpt_store_t* store, uint64_t epoch);
/* Acknowledged and pending epochs (0: none). */
int dlckpt_store_epochs(dlckpt_store_t* store, uint64_t* acknowledged, uint64_t* pending);

int dlckpt_open(dlckpt_store_t* store, const char* path, int flags, mode_t mode);
int dlckpt_close(dlckpt_store_t* store, int fd);
ssize_t dlckpt_read(dlckpt_store_t* store, int fd, void* buf, size_t len);
ssize_t dlckpt_write(dlckpt_store_t* store, int fd, const void* buf, size_t len);
ssize_t dlckpt_pread(dlckpt_store_t* store, int fd, void* buf, size_t len, off_t offset);
ssize_t dlckpt_pwrite(dlckpt_store_t* store, int fd, const void* buf, size_t len, off_t offset);
off_t dlckpt_lseek(dlckpt_store_t* store, int fd, off_t offset, int whence);
int dlckpt_ftruncate(dlckpt_store_t* store, int fd, off_t size);
int dlckpt_truncate(dlckpt_store_t* store, const char* path, off_t size);
int dlckpt_fstat(dlckpt_store_t* store, int fd, struct stat* st);
int dlckpt_stat(dlckpt_store_t* store, const char* path, struct stat* st);
int dlckpt_fsync(dlckpt_store_t* store, int fd);
int dlckpt_unlink(dlckpt_store_t* store, const char* path);
int dlckpt_rename(dlckpt_store_t* store, const char* from, const char* to);

/* The message of this thread's last dlckpt error ("" if none). */
const char* dlckpt_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* DLCKPT_MEMFS_STORE_H_ */

/* core_c.h — the C boundary between libintercept's entry points (the
 * __wrap_* functions of the static archive and the interposers of the preload
 * library, both generated from entry_points.c) and its core.
 *
 * Protocol: each dlckpt_ic_X returns non-zero when dlckpt handled the call,
 * with the call's result in *out (and errno set on failure); zero means "not
 * ours": the entry point passes the call to the OS unchanged (errno
 * untouched). Calls made from inside dlckpt itself, and every call while the
 * core is disabled, are "not ours". All functions are thread-safe and never
 * throw. */
#ifndef DLCKPT_LIBINTERCEPT_CORE_C_H_
#define DLCKPT_LIBINTERCEPT_CORE_C_H_

#include <dirent.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(hidden)

struct statx;
struct statfs;
struct statvfs;

#ifndef __cplusplus
/* The number of memfs descriptors in the process (a std::atomic<long> on the
 * C++ side). While it is zero no descriptor call can be for memfs, so the
 * entry points go straight to the OS. */
extern long dlckpt_ic_fd_count;
#define DLCKPT_NO_MEMFS_FDS() (__atomic_load_n(&dlckpt_ic_fd_count, __ATOMIC_ACQUIRE) == 0)
#endif

/* ---- descriptors ---- */
int dlckpt_ic_close(int fd, int* out);
/* Forgets memfs descriptors in [lo, hi] that the OS is about to close
 * (close_range without CLOSE_RANGE_CLOEXEC, closefrom). Never handles. */
void dlckpt_ic_forget_range(unsigned lo, unsigned hi);
int dlckpt_ic_read(int fd, void* buf, size_t len, ssize_t* out);
int dlckpt_ic_write(int fd, const void* buf, size_t len, ssize_t* out);
int dlckpt_ic_pread(int fd, void* buf, size_t len, off_t off, ssize_t* out);
int dlckpt_ic_pwrite(int fd, const void* buf, size_t len, off_t off, ssize_t* out);
/* off < 0: at (and advancing) the current offset. */
int dlckpt_ic_readv(int fd, const struct iovec* iov, int cnt, off_t off, ssize_t* out);
int dlckpt_ic_writev(int fd, const struct iovec* iov, int cnt, off_t off, ssize_t* out);
int dlckpt_ic_lseek(int fd, off_t off, int whence, off_t* out);
int dlckpt_ic_fstat(int fd, struct stat* st, int* out);
int dlckpt_ic_ftruncate(int fd, off_t len, int* out);
int dlckpt_ic_fsync(int fd, int* out);
int dlckpt_ic_dup(int fd, int* out);
/* dup2 (is_dup2 != 0) or dup3. */
int dlckpt_ic_dup3(int oldfd, int newfd, int flags, int is_dup2, int* out);
int dlckpt_ic_fcntl(int fd, int cmd, void* arg, int* out);
int dlckpt_ic_ioctl(int fd, unsigned long request, void* arg, int* out);
int dlckpt_ic_flock(int fd, int op, int* out);
int dlckpt_ic_lockf(int fd, int cmd, int* out);
int dlckpt_ic_isatty(int fd, int* out);
int dlckpt_ic_fchmod(int fd, mode_t mode, int* out);
/* fallocate semantics (-1/errno); posix_fallocate callers convert. */
int dlckpt_ic_fallocate(int fd, int mode, off_t off, off_t len, int* out);
/* posix_fadvise semantics (returns an errno value, not -1). */
int dlckpt_ic_fadvise(int fd, int* out);
/* Non-zero if fd is a memfs descriptor: mmap of it fails with ENODEV. */
int dlckpt_ic_mmap_refused(int fd);
/* copy_file_range / sendfile between descriptors of which at least one is
 * memfs, done with reads and writes. in_off/out_off may be NULL. */
int dlckpt_ic_copy(int in_fd, off_t* in_off, int out_fd, off_t* out_off, size_t len,
                   ssize_t* out);

/* ---- paths (dirfd may be AT_FDCWD) ---- */
int dlckpt_ic_open(int dirfd, const char* path, int flags, mode_t mode, int* out);
/* flags: AT_SYMLINK_NOFOLLOW, AT_EMPTY_PATH, AT_NO_AUTOMOUNT. */
int dlckpt_ic_stat(int dirfd, const char* path, struct stat* st, int flags, int* out);
int dlckpt_ic_statx(int dirfd, const char* path, int flags, unsigned mask, struct statx* stx,
                    int* out);
/* statfs / statvfs of memfs `path` (NULL: of descriptor fd): the store's
 * capacity, free blocks and file table; without a store, the geometry one
 * would be created with (none is created). See fs_stats.cc. */
int dlckpt_ic_statfs(int fd, const char* path, struct statfs* buf, int* out);
int dlckpt_ic_statvfs(int fd, const char* path, struct statvfs* buf, int* out);
int dlckpt_ic_access(int dirfd, const char* path, int mode, int flags, int* out);
/* flags: AT_REMOVEDIR. */
int dlckpt_ic_unlink(int dirfd, const char* path, int flags, int* out);
int dlckpt_ic_remove(const char* path, int* out);
int dlckpt_ic_rename(int olddirfd, const char* oldpath, int newdirfd, const char* newpath,
                     unsigned flags, int* out);
int dlckpt_ic_mkdir(int dirfd, const char* path, mode_t mode, int* out);
int dlckpt_ic_truncate(const char* path, off_t len, int* out);
int dlckpt_ic_chmod(int dirfd, const char* path, mode_t mode, int flags, int* out);
/* mkstemp family: tmpl ends with "XXXXXX" followed by suffixlen bytes. */
int dlckpt_ic_mkstemp(char* tmpl, int suffixlen, int flags, int* out);

/* The path an OS call must use for (dirfd, path) once dlckpt declined it:
 * `path` itself, or (in a thread-local buffer, valid until this thread's
 * second next call) the absolute path when the process sits in a memfs
 * working directory, or when "/dlckpt/../x" climbs out of a prefix the OS
 * could not walk through. */
const char* dlckpt_ic_os_path(int dirfd, const char* path);

/* ---- working directory: a memfs directory becomes a virtual cwd ---- */
int dlckpt_ic_chdir(const char* path, int* out);
int dlckpt_ic_fchdir(int fd, int* out);
/* After a successful chdir/fchdir by the OS: the virtual cwd is gone. */
void dlckpt_ic_cwd_changed(void);
int dlckpt_ic_getcwd(char* buf, size_t size, char** out);
int dlckpt_ic_get_current_dir_name(char** out);

/* ---- extended attributes, links, times (path NULL: dirfd is the file) ---- */
#define DLCKPT_XATTR_GET 0
#define DLCKPT_XATTR_LIST 1
#define DLCKPT_XATTR_SET 2
int dlckpt_ic_xattr(int dirfd, const char* path, int op, ssize_t* out);
int dlckpt_ic_readlink(int dirfd, const char* path, ssize_t* out);
int dlckpt_ic_utime(int dirfd, const char* path, int* out);

/* ---- stdio ---- */
int dlckpt_ic_fopen(const char* path, const char* mode, FILE** out);
int dlckpt_ic_fdopen(int fd, const char* mode, FILE** out);
int dlckpt_ic_freopen(const char* path, const char* mode, FILE* stream, FILE** out);

/* ---- directories ---- */
int dlckpt_ic_opendir(const char* path, DIR** out);
int dlckpt_ic_fdopendir(int fd, DIR** out);
/* Non-zero if d was made by dlckpt_ic_opendir/fdopendir. */
int dlckpt_ic_is_memdir(DIR* d);
struct dirent* dlckpt_ic_readdir(DIR* d);
struct dirent64* dlckpt_ic_readdir64(DIR* d);
int dlckpt_ic_readdir_r(DIR* d, struct dirent* entry, struct dirent** result);
int dlckpt_ic_readdir64_r(DIR* d, struct dirent64* entry, struct dirent64** result);
int dlckpt_ic_closedir(DIR* d);
int dlckpt_ic_dirfd(DIR* d);
void dlckpt_ic_rewinddir(DIR* d);
long dlckpt_ic_telldir(DIR* d);
void dlckpt_ic_seekdir(DIR* d, long loc);
int dlckpt_ic_scandir(const char* path, struct dirent*** namelist,
                      int (*filter)(const struct dirent*),
                      int (*compar)(const struct dirent**, const struct dirent**), int* out);
int dlckpt_ic_scandir64(const char* path, struct dirent64*** namelist,
                        int (*filter)(const struct dirent64*),
                        int (*compar)(const struct dirent64**, const struct dirent64**),
                        int* out);

/* ---- lifecycle ---- */
/* Exit-time: flushes stdio streams, then detaches the store (it keeps its
 * working files). Later memfs calls fail with EIO. Idempotent. */
void dlckpt_ic_shutdown(void);
/* Before exec and _exit: detaches the store so its working files survive
 * (memfs keeps them only on a clean detach). Descriptors go stale (EBADF) if
 * exec fails. Does nothing in a vfork child (it shares the parent's memory).
 * `final` (for _exit): later memfs calls fail with EIO. */
void dlckpt_ic_before_exec(int final);
/* Before posix_spawn, system, popen and vfork (which start a child without
 * running fork handlers): detaches the store if this process attached it only for
 * metadata, so the child may own it (core.h, Process::pinned). */
void dlckpt_ic_before_spawn(void);
/* After the application's MPI_Init / MPI_Init_thread succeeded (the preload
 * library interposes both): attaches the process store, creating it (and
 * pre-touching its pages, memfs's DLCKPT_PRETOUCH) if it does not exist, so
 * that this cost is not paid inside the application's first timed open
 * (issue 36: 0.29 s for 256 MiB in IOR's first iteration). The store is
 * attached as by a metadata call: not pinned, so a child started before the
 * first memfs open may still take it. Does nothing when the core is
 * disabled, when a store is attached, or when $DLCKPT_STORE_EARLY is 0, off,
 * no or false. Never fails the caller: a store that cannot be made now
 * (EBUSY, no space) is left, silently, to the first call under the prefix,
 * which reports it as before. Leaves errno as it was. */
void dlckpt_ic_store_early(void);
/* Turns the core off for good (every call then passes to the OS), printing
 * `why` on stderr once. Used by the preload library when the executable
 * already carries the static wrappers. */
void dlckpt_ic_disable(const char* why);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* DLCKPT_LIBINTERCEPT_CORE_C_H_ */

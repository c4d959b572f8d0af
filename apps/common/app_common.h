/* app_common.h — helpers shared by the proxy applications (heat2d in C,
 * sppm-mini in C++, sweep3d-mini in Fortran through app_common.f90).
 *
 * What lives here is what does not depend on an application's language or
 * file format: waiting for MPI without spinning, the restart agreement, the
 * state checksum, option parsing and a few file-system calls. It knows
 * nothing of dlckpt: the optional calls into it are dlckpt_hooks.h, which
 * builds on this file (never the other way round). Every function is called
 * from the thread that initialised MPI. Functions that take a communicator
 * are collective over it. */
#ifndef DLCKPT_APPS_APP_COMMON_H_
#define DLCKPT_APPS_APP_COMMON_H_

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- waiting without spinning. MPICH busy-polls in blocking calls, which on
 * oversubscribed cores slows every rank; these test and sleep briefly. */
void app_wait(MPI_Request* request);
void app_waitall(int count, MPI_Request* requests);
void app_waitall_f(int count, MPI_Fint* requests);  /* Fortran handles */
void app_barrier(MPI_Comm comm);
double app_max_double(double value, MPI_Comm comm);  /* all ranks get the max */
double app_min_double(double value, MPI_Comm comm);
double app_sum_double(double value, MPI_Comm comm);  /* diagnostics only */
int app_any(int flag, MPI_Comm comm);                /* logical OR */

/* ---- restart agreement. Each rank passes the iterations its valid
 * checkpoint slots hold (held[s] < 0: slot s missing or unusable). Returns
 * the newest iteration every rank holds, or -1. Also returns the newest
 * iteration any rank holds, how many ranks lack it and the lowest such rank
 * (for the message explaining an older or fresh start). */
long long app_agree_restart(const long long held[2], MPI_Comm comm, long long* newest_anywhere,
                            int* ranks_lacking_newest, int* first_rank_lacking_newest);

/* ---- checksums. app_hash_bytes: an order-dependent 64-bit hash of a byte
 * range (file integrity), chainable through `seed`. */
uint64_t app_hash_bytes(const void* data, size_t len, uint64_t seed);

/* An order-independent digest of one field of the global state: the sum
 * (mod 2^64) over the block's cells of a hash of (field, global cell index,
 * value bits). count[d] cells along dimension d (d = 0 fastest), element
 * strides stride[d], the block's first cell at global coordinates origin[d]
 * of a global array of extent global[d]. Because it depends only on global
 * positions and values, the combined digest is the same for every
 * decomposition that computes the same numbers. */
uint64_t app_checksum_block(const double* first, int field, const long long origin[3],
                            const long long global[3], const long long count[3],
                            const long long stride[3]);

/* Sums the ranks' digests (mod 2^64); the result is valid on rank 0. */
uint64_t app_checksum_combine(uint64_t local, MPI_Comm comm);

/* Writes 16 lower-case hex digits and a NUL into out[17]. */
void app_format_hex(uint64_t value, char* out);

/* ---- files and time. */
/* mkdir -p, except that the top-level directory of an absolute path (such
 * as /dlckpt) is never created: it must be a mount or exist already.
 * 0, or -1 with errno. */
int app_mkdir_p(const char* path);
/* fsync a closed file and the directory that holds it (so a new file's name
 * is durable too): 0, or -1 with errno. */
int app_make_durable(const char* path);
/* 0 if path opens for reading, else the errno of open() (ENOENT: missing).
 * Uses open() rather than stat() or access(): the one call every I/O
 * interposer of /dlckpt paths must handle. */
int app_open_status(const char* path);
void app_sleep_ms(int ms);
void app_sleep_us(int us);
double app_now(void);                     /* seconds, monotonic */

/* ---- options. Parses text as a decimal integer in [min, max] into *out:
 * 0, or -1 after printing "<app>: --<name>: expected an integer ..." to
 * stderr when `report` is non-zero (rank 0 reports, the others stay quiet). */
int app_parse_count(const char* app, const char* name, const char* text, long long min,
                    long long max, long long* out, int report);

/* ---- the same for Fortran, which passes communicators as MPI_Fint. */
long long app_agree_restart_f(const long long held[2], MPI_Fint comm, long long* newest_anywhere,
                              int* ranks_lacking_newest, int* first_rank_lacking_newest);
uint64_t app_checksum_combine_f(uint64_t local, MPI_Fint comm);

#ifdef __cplusplus
}
#endif

#endif /* DLCKPT_APPS_APP_COMMON_H_ */

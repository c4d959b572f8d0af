/* app_common.c — see app_common.h. */
#define _GNU_SOURCE
#include "app_common.h"

#include "dlckpt/base/mpi_wait.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- waiting without spinning ------------------------------------------ */

static void nap_us(long us) {
  struct timespec ts = {0, us * 1000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* dlckpt's one sleeping wait (dlckpt/base/mpi_wait.h); an MPI error ends the job. */
void app_waitall(int count, MPI_Request* requests) {
  int rc = dlckpt_mpi_waitall(count, requests);
  if (rc != MPI_SUCCESS) {
    fprintf(stderr, "app_waitall: MPI error %d\n", rc);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
}

void app_wait(MPI_Request* request) { app_waitall(1, request); }

void app_waitall_f(int count, MPI_Fint* requests) {
  MPI_Request local[16];
  MPI_Request* reqs = count > 16 ? malloc(sizeof(MPI_Request) * (size_t)count) : local;
  if (reqs == NULL) {
    fprintf(stderr, "app_waitall: out of memory for %d requests\n", count);
    MPI_Abort(MPI_COMM_WORLD, 2);
    return;
  }
  for (int i = 0; i < count; i++) reqs[i] = MPI_Request_f2c(requests[i]);
  app_waitall(count, reqs);
  for (int i = 0; i < count; i++) requests[i] = MPI_Request_c2f(reqs[i]);
  if (reqs != local) free(reqs);
}

void app_barrier(MPI_Comm comm) {
  MPI_Request r;
  MPI_Ibarrier(comm, &r);
  app_wait(&r);
}

static double reduce_double(double value, MPI_Op op, MPI_Comm comm) {
  double out = 0;
  MPI_Request r;
  MPI_Iallreduce(&value, &out, 1, MPI_DOUBLE, op, comm, &r);
  app_wait(&r);
  return out;
}

double app_max_double(double value, MPI_Comm comm) { return reduce_double(value, MPI_MAX, comm); }
double app_min_double(double value, MPI_Comm comm) { return reduce_double(value, MPI_MIN, comm); }
double app_sum_double(double value, MPI_Comm comm) { return reduce_double(value, MPI_SUM, comm); }

int app_any(int flag, MPI_Comm comm) {
  int in = flag != 0, out = 0;
  MPI_Request r;
  MPI_Iallreduce(&in, &out, 1, MPI_INT, MPI_LOR, comm, &r);
  app_wait(&r);
  return out;
}

/* ---- restart agreement --------------------------------------------------- */

long long app_agree_restart(const long long held[2], MPI_Comm comm, long long* newest_anywhere,
                            int* ranks_lacking_newest, int* first_rank_lacking_newest) {
  int nprocs = 1;
  MPI_Comm_size(comm, &nprocs);
  long long* all = malloc(sizeof(long long) * 2 * (size_t)nprocs);
  if (all == NULL) {
    fprintf(stderr, "app_agree_restart: out of memory for %d ranks\n", nprocs);
    MPI_Abort(comm, 2);
  }
  long long mine[2] = {held[0], held[1]};
  MPI_Request r;
  MPI_Iallgather(mine, 2, MPI_LONG_LONG, all, 2, MPI_LONG_LONG, comm, &r);
  app_wait(&r);

  /* rank_holds(p, it): does rank p hold iteration it in a valid slot? */
#define RANK_HOLDS(p, it) (all[2 * (p)] == (it) || all[2 * (p) + 1] == (it))
  long long newest = -1;
  for (int i = 0; i < 2 * nprocs; i++) {
    if (all[i] > newest) newest = all[i];
  }
  int lacking = 0, first_lacking = -1;
  if (newest >= 0) {
    for (int p = 0; p < nprocs; p++) {
      if (!RANK_HOLDS(p, newest)) {
        if (first_lacking < 0) first_lacking = p;
        lacking++;
      }
    }
  }
  /* Candidates are rank 0's iterations: an iteration every rank holds is
   * among them. Take the newest held everywhere. */
  long long chosen = -1;
  for (int s = 0; s < 2; s++) {
    long long it = all[s];
    if (it < 0 || it <= chosen) continue;
    int everywhere = 1;
    for (int p = 1; p < nprocs && everywhere; p++) everywhere = RANK_HOLDS(p, it);
    if (everywhere) chosen = it;
  }
#undef RANK_HOLDS
  free(all);
  if (newest_anywhere) *newest_anywhere = newest;
  if (ranks_lacking_newest) *ranks_lacking_newest = lacking;
  if (first_rank_lacking_newest) *first_rank_lacking_newest = first_lacking;
  return chosen;
}

/* ---- checksums ------------------------------------------------------------ */

/* The finaliser of SplitMix64: a bijective 64-bit mixer. */
static inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

uint64_t app_hash_bytes(const void* data, size_t len, uint64_t seed) {
  const unsigned char* p = (const unsigned char*)data;
  /* Four independent lanes of 8-byte words keep the multiplier pipeline full. */
  uint64_t h[4] = {seed ^ 0x243f6a8885a308d3ULL, seed ^ 0x13198a2e03707344ULL,
                   seed ^ 0xa4093822299f31d0ULL, seed ^ 0x082efa98ec4e6c89ULL};
  const uint64_t k1 = 0x87c37b91114253d5ULL, k2 = 0x4cf5ad432745937fULL;
  size_t i = 0;
  for (; i + 32 <= len; i += 32) {
    for (int lane = 0; lane < 4; lane++) {
      uint64_t w;
      memcpy(&w, p + i + 8 * lane, 8);
      h[lane] = rotl64(h[lane] ^ (w * k1), 31) * k2;
    }
  }
  uint64_t acc = mix64(h[0]) ^ rotl64(mix64(h[1]), 16) ^ rotl64(mix64(h[2]), 32) ^
                 rotl64(mix64(h[3]), 48);
  for (; i + 8 <= len; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    acc = rotl64(acc ^ (w * k1), 31) * k2;
  }
  for (; i < len; i++) acc = (acc ^ p[i]) * 0x100000001b3ULL;
  return mix64(acc ^ (uint64_t)len);
}

uint64_t app_checksum_block(const double* first, int field, const long long origin[3],
                            const long long global[3], const long long count[3],
                            const long long stride[3]) {
  uint64_t sum = 0;
  const uint64_t field_key = mix64((uint64_t)field * 0x9e3779b97f4a7c15ULL + 1);
  for (long long c2 = 0; c2 < count[2]; c2++) {
    for (long long c1 = 0; c1 < count[1]; c1++) {
      const double* row = first + c2 * stride[2] + c1 * stride[1];
      const uint64_t base =
          ((uint64_t)(origin[2] + c2) * (uint64_t)global[1] + (uint64_t)(origin[1] + c1)) *
              (uint64_t)global[0] +
          (uint64_t)origin[0];
      for (long long c0 = 0; c0 < count[0]; c0++) {
        uint64_t bits;
        memcpy(&bits, row + c0 * stride[0], 8);
        sum += mix64(bits ^ mix64((base + (uint64_t)c0) ^ field_key));
      }
    }
  }
  return sum;
}

uint64_t app_checksum_combine(uint64_t local, MPI_Comm comm) {
  uint64_t total = 0;
  MPI_Request r;
  /* Integer addition mod 2^64 is associative and commutative: exact in any order. */
  MPI_Ireduce(&local, &total, 1, MPI_UINT64_T, MPI_SUM, 0, comm, &r);
  app_wait(&r);
  return total;
}

void app_format_hex(uint64_t value, char* out) {
  snprintf(out, 17, "%016llx", (unsigned long long)value);
}

/* ---- files and time ------------------------------------------------------ */

int app_mkdir_p(const char* path) {
  char buf[4096];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof buf) {
    errno = n == 0 ? ENOENT : ENAMETOOLONG;
    return -1;
  }
  memcpy(buf, path, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (buf[i] != '/' && buf[i] != '\0') continue;
    /* Never create a top-level directory of an absolute path (/dlckpt). */
    if (buf[0] == '/' && memchr(buf + 1, '/', i - 1) == NULL) continue;
    char saved = buf[i];
    buf[i] = '\0';
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
    buf[i] = saved;
  }
  struct stat st;
  if (stat(path, &st) != 0) return -1;
  if (!S_ISDIR(st.st_mode)) {
    errno = ENOTDIR;
    return -1;
  }
  return 0;
}

static int fsync_one(const char* path) {
  int fd;
  do {
    fd = open(path, O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return -1;
  int rc = fsync(fd);
  int saved = errno;
  close(fd);
  errno = saved;
  return rc;
}

int app_make_durable(const char* path) {
  if (fsync_one(path) != 0) return -1;
  char dir[4096];
  const char* slash = strrchr(path, '/');
  if (slash == NULL) return fsync_one(".");
  size_t n = slash == path ? 1 : (size_t)(slash - path);
  if (n >= sizeof dir) {
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy(dir, path, n);
  dir[n] = '\0';
  return fsync_one(dir);
}

int app_open_status(const char* path) {
  int fd;
  do {
    fd = open(path, O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return errno;
  close(fd);
  return 0;
}

void app_sleep_ms(int ms) {
  if (ms <= 0) return;
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

double app_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void app_sleep_us(int us) {
  if (us > 0) nap_us(us);
}

/* ---- options --------------------------------------------------------------- */

int app_parse_count(const char* app, const char* name, const char* text, long long min,
                    long long max, long long* out, int report) {
  char* end = NULL;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < min || v > max) {
    if (report)
      fprintf(stderr, "%s: --%s: expected an integer in [%lld, %lld], got '%s'\n", app, name,
              min, max, text);
    return -1;
  }
  *out = v;
  return 0;
}

/* ---- entry points for Fortran (communicators as MPI_Fint handles) -------- */

long long app_agree_restart_f(const long long held[2], MPI_Fint comm, long long* newest_anywhere,
                              int* ranks_lacking_newest, int* first_rank_lacking_newest) {
  return app_agree_restart(held, MPI_Comm_f2c(comm), newest_anywhere, ranks_lacking_newest,
                           first_rank_lacking_newest);
}

uint64_t app_checksum_combine_f(uint64_t local, MPI_Fint comm) {
  return app_checksum_combine(local, MPI_Comm_f2c(comm));
}

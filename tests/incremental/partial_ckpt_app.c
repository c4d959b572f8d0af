/* A test and benchmark application for incremental encode: every rank holds
 * a deterministic state of --kib KiB, and each iteration changes only a
 * chosen fraction of it (--rewrite-fraction F: a stretch of F of the words,
 * at a position that moves every iteration). Its checkpoint file under
 * /dlckpt is written whole once, then only the changed stretch and the
 * fixed-size header are rewritten in place (pwrite), before
 * dlckpt_checkpoint(): memfs's copy-on-write then knows which blocks changed.
 * On restart it reads the checkpoint back and checks it byte for byte
 * against a recomputation. The last line on rank 0 is "checksum: <hex>" of
 * the final global state, the same with or without failures.
 *
 *   partial_ckpt_app [--iters N] [--kib K] [--rewrite-fraction F] [--sleep-ms S] */
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dlckpt/dlckpt.h"

#define TEST_APP_NAME "partial_ckpt_app"
#include "../common/test_app.h"

#define HEADER 64

/* The stretch of words iteration `it` changes: [*start, *start + n). */
static void stretch(size_t words, size_t n, int it, size_t* start) {
  size_t span = words - n + 1;
  *start = (size_t)(mix((uint64_t)it + 12345) % span);
}

static void step(uint64_t* state, size_t words, size_t n, int it) {
  size_t s;
  stretch(words, n, it, &s);
  for (size_t i = s; i < s + n; ++i) state[i] = mix(state[i] + (uint64_t)it);
}

static void init_state(uint64_t* state, size_t words, int rank) {
  for (size_t i = 0; i < words; ++i) state[i] = mix(((uint64_t)rank << 32) ^ i);
}

static void put(int rank, int fd, const void* buf, size_t len, off_t off) {
  const char* p = buf;
  while (len > 0) {
    ssize_t w = pwrite(fd, p, len, off);
    if (w <= 0) die(rank, "pwrite checkpoint");
    p += w;
    off += w;
    len -= (size_t)w;
  }
}

int main(int argc, char** argv) {
  int iters = 10, kib = 1024, sleep = 20;
  double fraction = 0.1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--kib")) kib = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--sleep-ms")) sleep = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--rewrite-fraction")) fraction = atof(argv[i + 1]);
  }
  if (!(fraction > 0 && fraction <= 1)) fraction = 1;
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (dlckpt_init(MPI_COMM_WORLD) != 0) die(rank, "dlckpt_init");

  size_t words = (size_t)kib * 1024 / 8;
  size_t n = (size_t)((double)words * fraction);
  if (n < 1) n = 1;
  if (n > words) n = words;
  uint64_t* state = malloc(words * 8);
  uint64_t* expect = malloc(words * 8);
  init_state(state, words, rank);
  int start = 0;
  int whole = 1; /* the next checkpoint writes the whole file */
  char path[256];
  snprintf(path, sizeof path, "/dlckpt/partial_app/rank%d.ckpt", rank);
  long long restarted = dlckpt_restarted_epoch();
  if (restarted > 0) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) die(rank, "open checkpoint after restart");
    char head[HEADER + 1] = {0};
    int r = -1, it = -1;
    size_t w = 0;
    if (pread(fd, head, HEADER, 0) != HEADER ||
        sscanf(head, "partial rank %d iter %d words %zu", &r, &it, &w) != 3 || r != rank || w != words) {
      fprintf(stderr, "partial_ckpt_app rank %d: bad checkpoint header in %s\n", rank, path);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (pread(fd, state, words * 8, HEADER) != (ssize_t)(words * 8)) die(rank, "read checkpoint");
    char extra;
    if (pread(fd, &extra, 1, HEADER + (off_t)(words * 8)) != 0) {
      fprintf(stderr, "partial_ckpt_app rank %d: checkpoint %s is longer than written\n", rank, path);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    close(fd);
    init_state(expect, words, rank);
    for (int k = 0; k <= it; ++k) step(expect, words, n, k);
    if (memcmp(expect, state, words * 8) != 0) {
      fprintf(stderr, "partial_ckpt_app rank %d: restored checkpoint of iteration %d differs from what was written\n",
              rank, it);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    start = it + 1;
    whole = 0;
    if (rank == 0) {
      printf("partial_ckpt_app: restarted from epoch %lld (iteration %d), checkpoint verified\n", restarted, it);
    }
  }
  mkdir("/dlckpt/partial_app", 0755);
  for (int it = start; it < iters; ++it) {
    step(state, words, n, it);
    uint64_t mine = state[0], left = 0;
    MPI_Sendrecv(&mine, 1, MPI_UINT64_T, (rank + 1) % size, 0, &left, 1, MPI_UINT64_T,
                 (rank + size - 1) % size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    sleep_ms(sleep);
    int fd = open(path, O_RDWR | O_CREAT, 0644);
    if (fd < 0) die(rank, "open checkpoint");
    char head[HEADER];
    memset(head, ' ', HEADER);
    int hl = snprintf(head, HEADER, "partial rank %d iter %d words %zu", rank, it, words);
    head[hl] = ' ';
    head[HEADER - 1] = '\n';
    put(rank, fd, head, HEADER, 0);
    if (whole) {
      put(rank, fd, state, words * 8, HEADER);
      whole = 0;
    } else {
      size_t s;
      stretch(words, n, it, &s);
      put(rank, fd, state + s, n * 8, HEADER + (off_t)(s * 8));
    }
    if (close(fd) != 0) die(rank, "close checkpoint");
    if (dlckpt_checkpoint() != 0) die(rank, "dlckpt_checkpoint");
    if (rank == 0) printf("partial_ckpt_app: iteration %d checkpointed\n", it);
    fflush(stdout);
  }
  uint64_t total = global_checksum(state, words, rank);
  if (dlckpt_finalize() != 0) die(rank, "dlckpt_finalize");
  if (rank == 0) printf("checksum: %016llx\n", (unsigned long long)total);
  free(state);
  free(expect);
  MPI_Finalize();
  return 0;
}

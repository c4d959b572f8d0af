/* A test application for dlckpt-run: every rank evolves a deterministic state
 * and checkpoints it each iteration through C stdio into /dlckpt, then calls
 * dlckpt_checkpoint(). On restart it reads its checkpoint back. The last line
 * on rank 0 is "checksum: <hex>" of the final global state, the same with or
 * without failures.
 *
 *   ckpt_app [--iters N] [--kib K] [--sleep-ms S] [--write-pieces P] */
#include <errno.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "dlckpt/dlckpt.h"

#define TEST_APP_NAME "ckpt_app"
#include "../common/test_app.h"

int main(int argc, char** argv) {
  int iters = 10, kib = 256, sleep = 50, pieces = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--kib")) kib = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--sleep-ms")) sleep = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--write-pieces")) pieces = atoi(argv[i + 1]);
  }
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (dlckpt_init(MPI_COMM_WORLD) != 0) die(rank, "dlckpt_init");

  size_t words = (size_t)kib * 1024 / 8;
  uint64_t* state = malloc(words * 8);
  uint64_t* expect = malloc(words * 8);
  for (size_t i = 0; i < words; ++i) state[i] = mix(((uint64_t)rank << 32) ^ i);
  int start = 0;
  char path[256];
  snprintf(path, sizeof path, "/dlckpt/ckpt_app/rank%d.ckpt", rank);
  long long restarted = dlckpt_restarted_epoch();
  if (restarted > 0) {
    FILE* f = fopen(path, "rb");
    if (!f) die(rank, "open checkpoint after restart");
    int r = -1, it = -1;
    size_t w = 0;
    /* The header line alone: fscanf's "\n" would also eat the data's leading
     * bytes that happen to be whitespace. */
    char header[128];
    if (!fgets(header, sizeof header, f) ||
        sscanf(header, "ckpt_app rank %d iter %d words %zu", &r, &it, &w) != 3 || r != rank || w != words) {
      fprintf(stderr, "ckpt_app rank %d: bad checkpoint header in %s\n", rank, path);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (fread(state, 8, words, f) != words) die(rank, "read checkpoint");
    char extra;
    if (fread(&extra, 1, 1, f) != 0) {
      fprintf(stderr, "ckpt_app rank %d: checkpoint %s is longer than written\n", rank, path);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    fclose(f);
    /* The state evolves per rank only, so the restored bytes can be checked
     * against a recomputation: byte for byte. */
    for (size_t i = 0; i < words; ++i) expect[i] = mix(((uint64_t)rank << 32) ^ i);
    for (int k = 0; k <= it; ++k) {
      for (size_t i = 0; i < words; ++i) expect[i] = mix(expect[i] + (uint64_t)k);
    }
    if (memcmp(expect, state, words * 8) != 0) {
      fprintf(stderr, "ckpt_app rank %d: restored checkpoint of iteration %d differs from what was written\n",
              rank, it);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    start = it + 1;
    if (rank == 0) printf("ckpt_app: restarted from epoch %lld (iteration %d), checkpoint verified\n", restarted, it);
  }
  mkdir("/dlckpt/ckpt_app", 0755);
  uint64_t coupling = 0;
  for (int it = start; it < iters; ++it) {
    for (size_t i = 0; i < words; ++i) state[i] = mix(state[i] + (uint64_t)it);
    /* A neighbour exchange keeps the ranks in step, as a real code would be. */
    uint64_t mine = state[0], left = 0;
    MPI_Sendrecv(&mine, 1, MPI_UINT64_T, (rank + 1) % size, 0, &left, 1, MPI_UINT64_T,
                 (rank + size - 1) % size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    coupling ^= left;
    sleep_ms(sleep);
    FILE* f = fopen(path, "wb");
    if (!f) die(rank, "fopen checkpoint");
    fprintf(f, "ckpt_app rank %d iter %d words %zu\n", rank, it, words);
    size_t per = (words + (size_t)pieces - 1) / (size_t)pieces;
    for (size_t off = 0; off < words; off += per) {
      size_t n = off + per > words ? words - off : per;
      if (fwrite(state + off, 8, n, f) != n) die(rank, "fwrite checkpoint");
      if (pieces > 1) sleep_ms(sleep / pieces);
    }
    if (fclose(f) != 0) die(rank, "fclose checkpoint");
    if (dlckpt_checkpoint() != 0) die(rank, "dlckpt_checkpoint");
    if (rank == 0) printf("ckpt_app: iteration %d checkpointed\n", it);
    fflush(stdout);
  }
  (void)coupling;
  uint64_t total = global_checksum(state, words, rank);
  if (dlckpt_finalize() != 0) die(rank, "dlckpt_finalize");
  if (rank == 0) printf("checksum: %016llx\n", (unsigned long long)total);
  free(state);
  free(expect);
  MPI_Finalize();
  return 0;
}

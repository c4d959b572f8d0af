/* A test application of the memory interface (dlckpt_protect): no file I/O.
 * Every rank protects its iteration counter (region 0) and a state of
 * --words 64-bit words (region 1); with --grow also a history (region 2)
 * whose length changes every iteration (it grows for three iterations, then
 * shrinks for two, and moves with realloc), re-protected before each
 * checkpoint. Every iteration mixes the state with its ring neighbour's
 * (MPI_Sendrecv), then checkpoints. On restart, the history is sized from
 * dlckpt_region_size(2) and every region comes back through dlckpt_recover().
 * Rank 0 prints "restarted from iteration K" after a restart (K > 0: the
 * counter came back) and, last,
 * "checksum: <hex>" of every rank's state and history: the same with or
 * without failures.
 * With --sparse P (dirty-page tracking), an iteration changes only about P %
 * of the state: a few spans across pages and single words at positions drawn
 * from (rank, iteration), and a region 3 of random bytes at unaligned bounds
 * is written once before the first checkpoint and never again; it joins the
 * checksum.
 *
 *   mem_app [--iters N] [--words W] [--sleep-ms S] [--grow] [--sparse P] */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlckpt/dlckpt.h"

#define TEST_APP_NAME "mem_app"
#include "../common/test_app.h"

/* The history's length at iteration `it`: 3 up, 2 down, around `base`. */
static size_t history_words(int it, size_t base) {
  static const int shape[5] = {1, 2, 3, 2, 1};
  return base * (size_t)shape[it % 5] + (size_t)it;
}

int main(int argc, char** argv) {
  int iters = 10, sleep = 50, grow = 0, sparse = 0;
  size_t words = 8192;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--grow")) grow = 1;
    else if (i + 1 < argc && !strcmp(argv[i], "--iters")) iters = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--words")) words = (size_t)atol(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--sleep-ms")) sleep = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--sparse")) sparse = atoi(argv[++i]);
  }
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (dlckpt_init(MPI_COMM_WORLD) != 0) die(rank, "dlckpt_init");

  int it = 0;
  uint64_t* state = malloc(words * 8);
  uint64_t* peer = malloc(words * 8);
  size_t hwords = history_words(0, words / 4);
  uint64_t* history = calloc(hwords, 8);
  for (size_t i = 0; i < words; ++i) state[i] = mix(((uint64_t)rank << 32) ^ i);
  if (dlckpt_protect(0, &it, sizeof it) != 0) die(rank, "dlckpt_protect");
  if (dlckpt_protect(1, state, words * 8) != 0) die(rank, "dlckpt_protect");
  if (grow && dlckpt_protect(2, history, hwords * 8) != 0) die(rank, "dlckpt_protect");
  /* --sparse: constant bytes at unaligned bounds (inside a larger block). */
  const size_t cbytes = 3 * 4096 + 123;
  unsigned char* cblock = malloc(cbytes + 64);
  unsigned char* constants = cblock + 13;
  for (size_t i = 0; i < cbytes; ++i) constants[i] = (unsigned char)mix(((uint64_t)rank << 24) ^ i);
  if (sparse && dlckpt_protect(3, constants, cbytes) != 0) die(rank, "dlckpt_protect");

  if (dlckpt_restarted_epoch() > 0) {
    if (grow) {
      long long bytes = dlckpt_region_size(2);
      if (bytes < 0) die(rank, "dlckpt_region_size");
      hwords = (size_t)bytes / 8;
      history = realloc(history, hwords * 8 + 8);
      if (dlckpt_protect(2, history, hwords * 8) != 0) die(rank, "dlckpt_protect");
    }
    if (dlckpt_recover() != 0) die(rank, "dlckpt_recover");
    if (grow && hwords != history_words(it, words / 4)) {
      fprintf(stderr, "mem_app rank %d: history of %zu words after iteration %d\n", rank, hwords, it);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    /* Only a recovered counter says so (run_app.sh checks for the line). */
    if (rank == 0 && it > 0) printf("restarted from iteration %d\n", it);
  }

  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  for (; it < iters;) {
    MPI_Sendrecv(state, (int)words, MPI_UINT64_T, right, 0, peer, (int)words, MPI_UINT64_T, left, 0,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (!sparse) {
      for (size_t i = 0; i < words; ++i) state[i] = mix(state[i] ^ (peer[(i * 7) % words] + (uint64_t)it));
    } else {
      /* About `sparse` % of the words in three spans, and five single words. */
      uint64_t h = mix(((uint64_t)rank << 40) ^ (uint64_t)it);
      size_t span = words * (size_t)sparse / 300 + 1;
      for (int k = 0; k < 3; ++k) {
        size_t start = (size_t)(mix(h + (uint64_t)k) % words);
        for (size_t i = start; i < start + span && i < words; ++i) {
          state[i] = mix(state[i] ^ (peer[(i * 7) % words] + (uint64_t)it));
        }
      }
      for (int k = 0; k < 5; ++k) {
        size_t i = (size_t)(mix(h ^ (0x1000u + (uint64_t)k)) % words);
        state[i] = mix(state[i] + peer[i] + (uint64_t)k);
      }
    }
    ++it;
    if (grow) {
      size_t n = history_words(it, words / 4);
      history = realloc(history, n * 8 + 8);
      for (size_t i = hwords; i < n; ++i) history[i] = 0;  // grown: fresh words
      for (size_t i = 0; i < n; ++i) history[i] = mix(history[i] + state[i % words]);
      hwords = n;
      if (dlckpt_protect(2, history, hwords * 8) != 0) die(rank, "dlckpt_protect");
    }
    sleep_ms(sleep);
    if (dlckpt_checkpoint() != 0) die(rank, "dlckpt_checkpoint");
  }
  uint64_t sum = global_checksum(state, words, rank);
  if (grow) sum ^= mix(global_checksum(history, hwords, rank));
  if (sparse) {
    uint64_t c = 0;
    for (size_t i = 0; i < cbytes; ++i) c = mix(c ^ constants[i]);
    sum ^= mix(global_checksum(&c, 1, rank) + 1);
  }
  if (dlckpt_finalize() != 0) die(rank, "dlckpt_finalize");
  if (rank == 0) printf("checksum: %016llx\n", (unsigned long long)sum);
  free(state);
  free(peer);
  free(history);
  free(cblock);
  MPI_Finalize();
  return 0;
}

/* Helpers shared by the C test applications under tests/ (not installed): a
 * 64-bit mixer for deterministic states, a millisecond sleep, and a fatal
 * error. Header-only (static functions); an application defines
 * TEST_APP_NAME, its name in error messages, before including it. */
#ifndef DLCKPT_TESTS_COMMON_TEST_APP_H_
#define DLCKPT_TESTS_COMMON_TEST_APP_H_

#include <errno.h>
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "dlckpt/dlckpt.h"

#ifndef TEST_APP_NAME
#error "define TEST_APP_NAME before including test_app.h"
#endif

/* A bijective 64-bit mixer (the finaliser of MurmurHash3). */
static inline uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

static inline void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* "<name> rank R: WHAT: <why>" (dlckpt_last_error() for a dlckpt_ call, else
 * strerror(errno)), then the whole job ends with MPI_Abort. */
static inline void die(int rank, const char* what) {
  const char* detail = strncmp(what, "dlckpt_", 7) == 0 ? dlckpt_last_error() : strerror(errno);
  fprintf(stderr, "%s rank %d: %s: %s\n", TEST_APP_NAME, rank, what, detail);
  /* Hydra kills the job's output forwarding with MPI_Abort: let it drain. */
  sleep_ms(300);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

/* The checksum of every rank's state, combined on rank 0 (the same with or
 * without failures when the states are): mixes each rank's words and rank,
 * XORs them across ranks. Collective over MPI_COMM_WORLD; rank 0's result. */
static inline uint64_t global_checksum(const uint64_t* state, size_t words, int rank) {
  uint64_t h = 0;
  for (size_t i = 0; i < words; ++i) h = mix(h ^ state[i]);
  h = mix(h + (uint64_t)rank);
  uint64_t total = 0;
  MPI_Reduce(&h, &total, 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
  return total;
}

#endif /* DLCKPT_TESTS_COMMON_TEST_APP_H_ */

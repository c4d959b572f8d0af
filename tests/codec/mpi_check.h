// mpi_check.h — checks for the codec's MPI test programs (header-only).
//
// CHECK(cond, fmt, ...) counts a failure on this rank and prints where, with
// the message, on stderr; the program goes on. Start and Finish begin and
// end main: Finish sums every rank's failures (waiting without spinning),
// prints "<name>: PASS|FAIL (N failed checks)" on rank 0, finalises MPI and
// returns main's exit status (0 when no rank failed a check).
#ifndef DLCKPT_TESTS_CODEC_MPI_CHECK_H_
#define DLCKPT_TESTS_CODEC_MPI_CHECK_H_

#include <mpi.h>

#include <cstdio>

#include "dlckpt/base/mpi.h"

namespace dlckpt::mpitest {

inline int g_rank = 0;
inline int g_failures = 0;

// MPI_Init; sets g_rank; returns the number of ranks.
inline int Start(int* argc, char*** argv) {
  MPI_Init(argc, argv);
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

inline int Finish(const char* name) {
  int total = 0;
  MPI_Request req;
  MPI_Iallreduce(&g_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
  if (!mpi::Wait(&req, "the failed checks").ok()) total = 1;
  if (g_rank == 0) std::printf("%s: %s (%d failed checks)\n", name, total == 0 ? "PASS" : "FAIL", total);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}

}  // namespace dlckpt::mpitest

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      ++dlckpt::mpitest::g_failures;                                                               \
      std::fprintf(stderr, "rank %d: CHECK failed at line %d: %s: ", dlckpt::mpitest::g_rank, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                                           \
      std::fprintf(stderr, "\n");                                                                  \
    }                                                                                              \
  } while (0)

#endif  // DLCKPT_TESTS_CODEC_MPI_CHECK_H_

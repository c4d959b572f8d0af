// Helpers shared by the MPI benchmark programs (dlckpt-ior, dlckpt-bench-ckpt,
// dlckpt-bench-ckpt-baselines). Header-only; not thread-safe beyond what MPI is.
#ifndef DLCKPT_BENCH_BENCH_MPI_H_
#define DLCKPT_BENCH_BENCH_MPI_H_

#include <mpi.h>

#include <cstdint>

#include "bench_mix.h"
#include "dlckpt/base/mpi_wait.h"

namespace dlckpt::bench {

// Completes `req` without spinning (dlckpt/base/mpi_wait.h): ranks
// oversubscribe the cores here, and a spinning MPI_Wait would take the CPU
// from the ranks it waits for (docs/design.md: busy-polling).
inline void WaitRequest(MPI_Request* req) { (void)dlckpt_mpi_wait(req); }

// A barrier of MPI_COMM_WORLD that waits as WaitRequest does.
inline void Barrier() {
  MPI_Request req;
  MPI_Ibarrier(MPI_COMM_WORLD, &req);
  WaitRequest(&req);
}

}  // namespace dlckpt::bench

#endif  // DLCKPT_BENCH_BENCH_MPI_H_

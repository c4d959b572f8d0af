// Helpers shared by the MPI benchmark programs (dlckpt-ior, dlckpt-bench-ckpt,
// dlckpt-bench-ckpt-baselines, dlckpt-bench-codec-mpi,
// dlckpt-bench-delta-encode): the start of main, the option loop, and waits
// and reductions that do not spin. Header-only; not thread-safe beyond what
// MPI is.
#ifndef DLCKPT_BENCH_BENCH_MPI_H_
#define DLCKPT_BENCH_BENCH_MPI_H_

#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>

#include "bench_mix.h"
#include "dlckpt/base/mpi_wait.h"
#include "dlckpt/base/version.h"

namespace dlckpt::bench {

// Completes `req` without spinning (dlckpt/base/mpi_wait.h): ranks
// oversubscribe the cores here, and a spinning MPI_Wait would take the CPU
// from the ranks it waits for (docs/design.md: busy-polling).
inline void WaitRequest(MPI_Request* req) { (void)dlckpt_mpi_wait(req); }

// A barrier of `comm`, its request completed by `wait`.
inline void Barrier(MPI_Comm comm = MPI_COMM_WORLD, void (*wait)(MPI_Request*) = WaitRequest) {
  MPI_Request req;
  MPI_Ibarrier(comm, &req);
  wait(&req);
}

// `op` over every rank's `v` in `comm` (`type`: T's MPI datatype), the
// request completed by `wait`. Collective over comm.
template <class T>
T AllReduce(T v, MPI_Datatype type, MPI_Op op, MPI_Comm comm = MPI_COMM_WORLD,
            void (*wait)(MPI_Request*) = WaitRequest) {
  T out{};
  MPI_Request req;
  MPI_Iallreduce(&v, &out, 1, type, op, comm, &req);
  wait(&req);
  return out;
}

// The start of a benchmark's main. Answers --version and --help/-h
// (dlckpt/base/version.h; `usage` on stdout) before MPI starts. Otherwise
// initialises MPI, sets *rank and *size (each may be null) and calls
// parse(argc, argv, args) on the arguments as MPI_Init left them; when that
// returns false, rank 0 prints `usage` on stderr and MPI is finalised.
// Returns the status main must return at once (0 after --version or --help,
// 2 after a bad command line), or nullopt to go on.
template <class Args>
std::optional<int> StartMain(int* argc, char*** argv, const char* usage, bool (*parse)(int, char**, Args*),
                             Args* args, int* rank, int* size) {
  if (dlckpt_version_requested(*argc, *argv)) return 0;
  if (dlckpt_help_requested(*argc, *argv)) {
    std::fputs(usage, stdout);
    return 0;
  }
  MPI_Init(argc, argv);
  int r = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (rank != nullptr) *rank = r;
  if (size != nullptr) *size = n;
  if (!parse(*argc, *argv, args)) {
    if (r == 0) std::fputs(usage, stderr);
    MPI_Finalize();
    return 2;
  }
  return std::nullopt;
}

// The options argv[1..argc) of program `prog` (after MPI_Init): an option
// named in `switches` sets its bool; any other takes the next argument as its
// value and is handed to value(option, value), which returns false (after its
// own message) for an unknown option or a bad value. Returns false at that,
// at --help/-h, or at an option missing its value ("<prog>: <option> needs a
// value" on stderr from rank 0); true when every option was taken.
template <class Value>
bool ParseOptions(int argc, char** argv, const char* prog,
                  std::initializer_list<std::pair<const char*, bool*>> switches, Value&& value) {
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "--help" || f == "-h") return false;
    bool is_switch = false;
    for (const auto& [name, flag] : switches) {
      if (f == name) {
        *flag = true;
        is_switch = true;
      }
    }
    if (is_switch) continue;
    if (i + 1 >= argc) {
      int rank = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      if (rank == 0) std::fprintf(stderr, "%s: %s needs a value\n", prog, f.c_str());
      return false;
    }
    if (!value(f, std::string(argv[++i]))) return false;
  }
  return true;
}

}  // namespace dlckpt::bench

#endif  // DLCKPT_BENCH_BENCH_MPI_H_

// Helpers shared by the MPI benchmark programs (dlckpt-ior, dlckpt-bench-ckpt,
// dlckpt-bench-ckpt-baselines, dlckpt-bench-codec-mpi,
// dlckpt-bench-delta-encode): the start of main and its option helpers, and waits
// and reductions that do not spin. Header-only; not thread-safe beyond what
// MPI is.
#ifndef DLCKPT_BENCH_BENCH_MPI_H_
#define DLCKPT_BENCH_BENCH_MPI_H_

#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench_mix.h"
#include "dlckpt/base/cli.h"
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

// The start of an MPI benchmark's main. Answers --version and --help/-h
// (dlckpt/base/version.h; app.help() on stdout) before MPI starts. Otherwise
// initialises MPI, sets *rank and *size (each may be null), parses the
// arguments MPI_Init left with `app` (dlckpt/base/cli.h: an unknown option
// gets the closest known one) and calls check(), which returns "" when the
// values go together, else what is wrong. After a bad command line rank 0
// prints "<program>: <message>" and a pointer to --help on stderr and MPI is
// finalised. Returns the status main must return at once (0 after --version
// or --help, 2 after a bad command line), or nullopt to go on.
inline std::optional<int> StartMain(int* argc, char*** argv, CLI::App& app, int* rank, int* size,
                                    const std::function<std::string()>& check = nullptr) {
  if (dlckpt_version_requested(*argc, *argv)) return 0;
  if (dlckpt_help_requested(*argc, *argv)) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  }
  MPI_Init(argc, argv);
  int r = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (rank != nullptr) *rank = r;
  if (size != nullptr) *size = n;
  Status st = cli::ParseArgs(app, std::vector<std::string>(*argv + 1, *argv + *argc));
  if (st.ok() && check) {
    if (std::string why = check(); !why.empty()) st = Status::InvalidArgument(why);
  }
  if (!st.ok()) {
    if (r == 0) {
      std::fprintf(stderr, "%s: %s\n(%s --help lists the options)\n", app.get_name().c_str(), st.message().c_str(),
                   app.get_name().c_str());
    }
    MPI_Finalize();
    return 2;
  }
  return std::nullopt;
}

// As above, with the App made here: named `program`, its options defined by
// define(app, args) (bound to *args, which must outlive the parse).
template <class Args>
std::optional<int> StartMain(int* argc, char*** argv, const char* program, void (*define)(CLI::App&, Args*),
                             Args* args, int* rank, int* size) {
  CLI::App app("", program);
  define(app, args);
  return StartMain(argc, argv, app, rank, size);
}

// The group shapes "m:k,m:k,..." (data and parity members, each >= 1, m + k
// <= max_members), or std::nullopt when `s` is not such a list.
inline std::optional<std::vector<std::pair<int, int>>> ParseShapes(const std::string& s, int max_members) {
  std::vector<std::pair<int, int>> out;
  size_t p = 0;
  while (p <= s.size()) {
    size_t q = s.find(',', p);
    if (q == std::string::npos) q = s.size();
    const std::string item = s.substr(p, q - p);
    int m = 0, k = 0;
    char end = 0;
    if (std::sscanf(item.c_str(), "%d:%d%c", &m, &k, &end) != 2 || m < 1 || k < 1 || m + k > max_members) {
      return std::nullopt;
    }
    out.emplace_back(m, k);
    p = q + 1;
  }
  return out;
}

// A CLI11 callback's rejection of a value: `option`: '`value`' is not `expected`.
[[noreturn]] inline void RejectValue(const std::string& option, const std::string& value, const std::string& expected) {
  throw CLI::ValidationError(option, "'" + value + "' is not " + expected);
}

}  // namespace dlckpt::bench

#endif  // DLCKPT_BENCH_BENCH_MPI_H_

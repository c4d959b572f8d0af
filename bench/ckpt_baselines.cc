// dlckpt-bench-ckpt-baselines: the baselines of the checkpoint study, the
// terms of the thesis' chapter 7 model measured with the plain tools.
//
//   mpiexec -n 1 dlckpt-bench-ckpt-baselines --mib 16,64,256
//     memcpy of M MiB (pre-faulted buffers)                 -> MemCopyTime
//     ec_encode_data, 1 source x 1 coefficient, M MiB        -> RSEncodingTime
//       (what each rank of the original design does per spare)
//     ec_encode_data, m sources x k parities of 16 MiB each, for the study's
//       (m, k): raw ISA-L encode rate of a whole group on one core
//   mpiexec -n N dlckpt-bench-ckpt-baselines --mib 16,64,256
//     MPI_Reduce(MPI_BXOR, MPI_UINT64_T) of M MiB per rank onto the last rank
//     (the spare, contributing zeros), N = group size   -> ReductionTime
//
// One line per measurement: memcpy and ISA-L the best of --reps in CPU time
// of the thread (wall time beside it), MPI_Reduce the median wall time of the
// slowest rank over --reps:
//   BASELINE memcpy mib=<M> seconds=<cpu s> wall_seconds=<s> gbs=<GB/s>
//   BASELINE isal_mul mib=<M> seconds=<cpu s> wall_seconds=<s> gbs=<GB/s>
//   BASELINE isal_group m=<m> k=<k> mib_per_source=16 seconds=<cpu s> wall_seconds=<s>
//            gbs=<GB/s of source data>
//   BASELINE mpi_reduce ranks=<N> mib=<M> seconds=<s> gbs=<GB/s of all ranks' input>
// Waiting never spins (the reduction is MPI_Ireduce tested with short sleeps;
// a blocking MPI_Reduce busy-polls and, oversubscribed, slows every rank).
#include <isa-l/erasure_code.h>
#include <mpi.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench_mpi.h"

namespace {

using dlckpt::bench::Barrier;
using dlckpt::bench::WaitRequest;

int g_rank = 0, g_size = 1;

// 64-byte aligned, pre-touched buffer.
struct Buffer {
  explicit Buffer(size_t n) : size(n) {
    void* p = nullptr;
    if (posix_memalign(&p, 64, std::max<size_t>(n, 64)) != 0) {
      std::fprintf(stderr, "dlckpt-bench-ckpt-baselines: out of memory (%zu bytes)\n", n);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    data = static_cast<uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) data[i] = static_cast<uint8_t>(i * 131 + 7);
  }
  ~Buffer() { std::free(data); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  uint8_t* data = nullptr;
  size_t size = 0;
};

double ThreadCpuSeconds() {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// Best of `reps` runs in CPU time of this thread (a loaded machine takes the
// CPU away, not the work), and the best wall time for reference.
struct Timing {
  double cpu = 1e30, wall = 1e30;
};
template <class Fn>
Timing Best(int reps, Fn&& fn) {
  Timing t;
  for (int r = 0; r < reps; ++r) {
    double w0 = MPI_Wtime(), c0 = ThreadCpuSeconds();
    fn();
    t.cpu = std::min(t.cpu, ThreadCpuSeconds() - c0);
    t.wall = std::min(t.wall, MPI_Wtime() - w0);
  }
  return t;
}

std::vector<size_t> ParseList(const std::string& s) {
  std::vector<size_t> out;
  std::stringstream is(s);
  std::string item;
  while (std::getline(is, item, ',')) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v == 0) return {};
    out.push_back(static_cast<size_t>(v));
  }
  return out;
}

void Local(const std::vector<size_t>& mibs, const std::vector<std::pair<int, int>>& groups, int reps) {
  for (size_t mib : mibs) {
    size_t n = mib << 20;
    Buffer src(n), dst(n);
    Timing s = Best(reps, [&] { std::memcpy(dst.data, src.data, n); });
    std::printf("BASELINE memcpy mib=%zu seconds=%.6f wall_seconds=%.6f gbs=%.3f\n", mib, s.cpu, s.wall,
                static_cast<double>(n) / s.cpu / 1e9);
    // One coefficient: the per-spare scaling of the original design.
    unsigned char coef[1] = {0x8e}, tables[32];
    ec_init_tables(1, 1, coef, tables);
    unsigned char* in[1] = {src.data};
    unsigned char* out[1] = {dst.data};
    s = Best(reps, [&] { ec_encode_data(static_cast<int>(n), 1, 1, tables, in, out); });
    std::printf("BASELINE isal_mul mib=%zu seconds=%.6f wall_seconds=%.6f gbs=%.3f\n", mib, s.cpu, s.wall,
                static_cast<double>(n) / s.cpu / 1e9);
    std::fflush(stdout);
  }
  // A whole group's encode on one core (Cauchy matrix, as the codec).
  const size_t per = 16 << 20;
  for (auto [m, k] : groups) {
    std::vector<unsigned char> matrix(static_cast<size_t>((m + k) * m));
    gf_gen_cauchy1_matrix(matrix.data(), m + k, m);
    std::vector<unsigned char> tables(static_cast<size_t>(32 * m * k));
    ec_init_tables(m, k, matrix.data() + m * m, tables.data());
    std::vector<std::unique_ptr<Buffer>> bufs;
    std::vector<unsigned char*> in, out;
    for (int i = 0; i < m; ++i) {
      bufs.push_back(std::make_unique<Buffer>(per));
      in.push_back(bufs.back()->data);
    }
    for (int j = 0; j < k; ++j) {
      bufs.push_back(std::make_unique<Buffer>(per));
      out.push_back(bufs.back()->data);
    }
    Timing s = Best(reps, [&] { ec_encode_data(static_cast<int>(per), m, k, tables.data(), in.data(), out.data()); });
    std::printf("BASELINE isal_group m=%d k=%d mib_per_source=16 seconds=%.6f wall_seconds=%.6f gbs=%.3f\n", m,
                k, s.cpu, s.wall, static_cast<double>(per) * m / s.cpu / 1e9);
    std::fflush(stdout);
  }
}

void Reduce(const std::vector<size_t>& mibs, int reps) {
  int root = g_size - 1;
  for (size_t mib : mibs) {
    size_t n = mib << 20;
    Buffer send(n);
    if (g_rank == root) std::memset(send.data, 0, n);  // the spare contributes nothing
    std::unique_ptr<Buffer> recv;
    if (g_rank == root) recv = std::make_unique<Buffer>(n);
    std::vector<double> times;
    for (int r = 0; r < reps + 1; ++r) {  // the first is a warm-up
      Barrier();
      double t0 = MPI_Wtime();
      MPI_Request req;
      MPI_Ireduce(send.data, recv ? recv->data : nullptr, static_cast<int>(n / 8), MPI_UINT64_T, MPI_BXOR,
                  root, MPI_COMM_WORLD, &req);
      WaitRequest(&req);
      double slowest = dlckpt::bench::AllReduce(MPI_Wtime() - t0, MPI_DOUBLE, MPI_MAX);
      if (r > 0) times.push_back(slowest);
    }
    std::sort(times.begin(), times.end());
    double med = times[times.size() / 2];
    if (g_rank == 0) {
      std::printf("BASELINE mpi_reduce ranks=%d mib=%zu seconds=%.6f gbs=%.3f\n", g_size, mib, med,
                  static_cast<double>(n) * (g_size - 1) / med / 1e9);
      std::fflush(stdout);
    }
  }
}

// The command line.
struct Args {
  std::vector<size_t> mibs = {16, 64, 256};
  std::vector<std::pair<int, int>> groups = {{4, 1}, {8, 1}, {8, 2}, {12, 3}};
  int reps = 3;
};

// dlckpt-bench-ckpt-baselines' options, filling *a.
void DefineOptions(CLI::App& app, Args* a) {
  dlckpt::cli::SetUsage(app, "usage: mpiexec -n N dlckpt-bench-ckpt-baselines [--mib 16,64,256] [--groups 4:1,8:2] "
                             "[--reps R]");
  app.description("N = 1: memcpy and ISA-L; N > 1: MPI_Reduce over N ranks");
  app.add_option_function<std::string>(
         "--mib",
         [a](const std::string& v) {
           a->mibs = ParseList(v);
           if (a->mibs.empty()) dlckpt::bench::RejectValue("--mib", v, "a list of positive MiB counts");
         },
         "checkpoint sizes per rank, MiB (16,64,256)")
      ->option_text("LIST");
  app.add_option_function<std::string>(
         "--groups",
         [a](const std::string& v) {
           auto groups = dlckpt::bench::ParseShapes(v, 255);
           if (!groups) dlckpt::bench::RejectValue("--groups", v, "a list m:k,... (m + k <= 255)");
           a->groups = std::move(*groups);
         },
         "group shapes data:parity for ISA-L (4:1,8:1,8:2,12:3)")
      ->option_text("LIST");
  app.add_option_function<int>(
         "--reps", [a](int v) { a->reps = std::max(1, v); }, "repetitions; the best (memcpy, ISA-L) or median (3)")
      ->option_text("R");
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (auto rc = dlckpt::bench::StartMain(&argc, &argv, "dlckpt-bench-ckpt-baselines", DefineOptions, &a, &g_rank, &g_size)) return *rc;
  if (g_size == 1) {
    Local(a.mibs, a.groups, a.reps);
  } else {
    Reduce(a.mibs, a.reps);
  }
  MPI_Finalize();
  return 0;
}

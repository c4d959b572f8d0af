// dlckpt-bench-dirty: dirty-page tracking of protected regions (issue 34,
// "only what changed"), run under dlckpt-run (incremental encode on).
//
// Every rank protects one region of --mib MiB (a std::vector: private
// anonymous memory, not page-aligned) and checkpoints it twice (the first
// copy is whole). Then, --reps times: 1 %, 10 % and 50 % of the region's
// pages changed (in a rotating order), each twice in a row (only the second
// counts: a steady state; the first delta encode after a full one also
// copies the spare's whole parity slot), then 100 % once (the full
// checkpoint: every page changed, which is also what every checkpoint cost
// before tracking, when a whole rewrite looked 100 % changed; once only, as
// two in a row make the range hot, dirty_pages.h). A case changes one stretch of that many
// pages at an offset drawn per step (the same on every rank, as an SPMD code
// would), every word in it changed; then dlckpt_checkpoint() (synchronous
// encode). Timed:
//   ckpt   = the slowest rank's dlckpt_checkpoint() (application-visible)
//   encode = the codec's encode-begin .. encode-end of that epoch, from the
//            job's event file ($DLCKPT_EVENTS, set by dlckpt-run)
// and the encode-delta event's bytes sent / image bytes.
//
// Tracking while computing: the same compute loop (--sweeps passes, each
// writing every word) on two arrays of --mib MiB, one registered with a
// dirty::Tracker and re-armed (Collect) before each interval as a checkpoint
// does, one not; --intervals intervals each, alternating. Dense: the loop
// covers the whole array (after two intervals the range is hot and left
// unprotected for 8, see dirty_pages.h); sparse: a stretch of 10 % of it,
// elsewhere each interval (tracked throughout); sparse long: the same with
// 8 x --sweeps passes per interval. overhead = (sum on - sum off) / sum off
// over all ranks. FAULT: one first write to a protected page.
//
// Also, on rank 0: whether the soft-dirty bit works here (clear_refs 4,
// write, pagemap bit 55), and which tracking the tracker chose.
//
// Output (rank 0): CASE lines with the medians, then
//   METRIC dirty_encode_ratio_{1,10,50}pct  <encode / full encode> x
//   METRIC dirty_ckpt_ratio_{1,10,50}pct    <ckpt / full ckpt> x
//   METRIC dirty_tracking_overhead{,_sparse10,_sparse10_long} <percent> %
//
//   dlckpt-run --nodes 4 --spares 1 -- dlckpt-bench-dirty [--mib 64] [--reps 3]
//        [--sweeps 8] [--intervals 20]
#include <fcntl.h>
#include "bench_mpi.h"
#include <mpi.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dirty_pages.h"
#include "dlckpt/base/events.h"
#include "dlckpt/dlckpt.h"

namespace {

int g_rank = 0, g_size = 1;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "dlckpt-bench-dirty: rank %d: %s\n", g_rank, what.c_str());
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

// Without spinning (bench_mpi.h): a rank done with its checkpoint must not
// take the CPU from the ranks still finishing theirs.
double Max(double v) { return dlckpt::bench::AllReduce(v, MPI_DOUBLE, MPI_MAX); }
double Sum(double v) { return dlckpt::bench::AllReduce(v, MPI_DOUBLE, MPI_SUM); }

uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb93fe53d5a7ULL;
  return x ^ (x >> 33);
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The codec's encode of each epoch, from the event file (rank 0).
class EncodeLog {
 public:
  EncodeLog() {
    const char* p = std::getenv("DLCKPT_EVENTS");
    if (p != nullptr && *p != '\0') follower_.emplace(p);
  }
  struct Encode {
    double seconds = -1;
    uint64_t bytes = 0, total = 0;  // encode-delta: bytes encoded / image bytes
  };
  // The encode of `epoch`, once its encode-end was written (before the
  // codec answers the checkpoint).
  Encode Of(uint64_t epoch) {
    if (follower_) {
      for (const auto& e : follower_->Poll()) {
        if (e.kind == dlckpt::events::Kind::kEncodeBegin) begin_[e.epoch] = e.ns;
        if (e.kind == dlckpt::events::Kind::kEncodeDelta) {
          done_[e.epoch].bytes = e.bytes;
          done_[e.epoch].total = e.total;
        }
        if (e.kind == dlckpt::events::Kind::kEncodeEnd && begin_.count(e.epoch)) {
          done_[e.epoch].seconds = static_cast<double>(e.ns - begin_[e.epoch]) / 1e9;
        }
      }
    }
    auto it = done_.find(epoch);
    return it == done_.end() ? Encode{} : it->second;
  }

 private:
  std::optional<dlckpt::events::Follower> follower_;
  std::map<uint64_t, int64_t> begin_;
  std::map<uint64_t, Encode> done_;
};

// Soft-dirty: does pagemap bit 55 come back after clear_refs 4 and a write?
std::string ProbeSoftDirty() {
  const long page = sysconf(_SC_PAGESIZE);
  auto* m = static_cast<volatile char*>(
      mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (m == MAP_FAILED) return "mmap failed";
  m[0] = 1;
  std::string out;
  int c = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (c < 0 || write(c, "4", 1) != 1) out = std::string("clear_refs: ") + std::strerror(errno);
  if (c >= 0) close(c);
  m[0] = 2;
  int p = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  uint64_t entry = 0;
  const off_t off = static_cast<off_t>(reinterpret_cast<uintptr_t>(m) / static_cast<uintptr_t>(page) * 8);
  if (p < 0 || pread(p, &entry, 8, off) != 8) out = std::string("pagemap: ") + std::strerror(errno);
  if (p >= 0) close(p);
  munmap(const_cast<char*>(m), page);
  if (!out.empty()) return "unavailable (" + out + ")";
  return (entry >> 55) & 1 ? "available (bit 55 set after a write)"
                           : "unavailable (bit 55 stays 0 after clear_refs 4 and a write: CONFIG_MEM_SOFT_DIRTY off)";
}

void Sweep(uint64_t* d, size_t n, int sweeps) {
  for (int s = 0; s < sweeps; ++s) {
    for (size_t i = 0; i < n; ++i) d[i] = d[i] * 6364136223846793005ULL + 1442695040888963407ULL;
  }
}

}  // namespace

constexpr char kAbout[] =
    "Checkpoint and encode of protected regions at 1/10/50 % of pages changed against\n"
    "a full checkpoint, with dirty-page tracking on (DLCKPT_DIRTY_TRACKING=on unless\n"
    "set), and the cost of tracking while computing; ends with METRIC lines.";

struct Args {
  size_t mib = 64;
  int reps = 3, sweeps = 8, intervals = 20;
};

// dlckpt-bench-dirty's options, filling *a.
void DefineOptions(CLI::App& app, Args* a) {
  dlckpt::cli::SetUsage(app, "usage: dlckpt-run --nodes N --spares K -- dlckpt-bench-dirty [options]");
  app.description(kAbout);
  app.add_option("--mib", a->mib, "MiB per rank's region (64)")->check(CLI::PositiveNumber);
  app.add_option("--reps", a->reps, "repetitions of each case; medians reported (3)")->check(CLI::PositiveNumber);
  app.add_option("--sweeps", a->sweeps, "passes of the compute loop per interval (8)")->check(CLI::PositiveNumber);
  app.add_option("--intervals", a->intervals, "intervals, tracking on and off each (20)")->check(CLI::PositiveNumber);
}

int main(int argc, char** argv) {
  Args args;
  // What this measures: tracking on, unless the caller says otherwise.
  setenv("DLCKPT_DIRTY_TRACKING", "on", 0);
  if (auto rc = dlckpt::bench::StartMain(&argc, &argv, "dlckpt-bench-dirty", DefineOptions, &args, &g_rank, &g_size)) {
    return *rc;
  }
  const size_t mib = args.mib;
  const int reps = args.reps, sweeps = args.sweeps, intervals = args.intervals;
  if (dlckpt_init(MPI_COMM_WORLD) != 0) Die(std::string("dlckpt_init: ") + dlckpt_last_error());
  if (g_rank == 0) {
    std::printf("SOFTDIRTY %s\n", ProbeSoftDirty().c_str());
    auto t = dlckpt::dirty::Tracker::Create(std::getenv("DLCKPT_DIRTY_TRACKING"));
    using Mode = dlckpt::dirty::Tracker::Mode;
    std::printf("TRACKING %s%s\n",
                t->mode() == Mode::kUffdAsync  ? "userfaultfd async write protection + PAGEMAP_SCAN"
                : t->mode() == Mode::kUffdSync ? "userfaultfd write protection, handler thread, blocks + PAGEMAP_SCAN"
                                               : ("whole copies (" + t->reason() + ")").c_str(),
                t->sync_refused().empty() ? "" : (" (sync refused: " + t->sync_refused() + ")").c_str());
  }

  // --- checkpoints at 100 / 1 / 10 / 50 % of the pages changed.
  const size_t bytes = mib << 20, words = bytes / 8, page_words = 4096 / 8, pages = bytes / 4096;
  std::vector<uint64_t> data(words);
  for (size_t i = 0; i < words; ++i) data[i] = Mix((static_cast<uint64_t>(g_rank) << 40) ^ i);
  if (dlckpt_protect(0, data.data(), bytes) != 0) Die(std::string("dlckpt_protect: ") + dlckpt_last_error());
  EncodeLog log;
  for (int w = 0; w < 2; ++w) {
    if (dlckpt_checkpoint() != 0) Die(std::string("dlckpt_checkpoint: ") + dlckpt_last_error());
  }
  const int cases[] = {100, 1, 10, 50};
  std::map<int, std::vector<double>> ckpt, enc, sent;
  uint64_t step = 0;
  for (int r = 0; r < reps; ++r) {
    // 1, 10 and 50 % (rotating), each twice in a row, the second measured;
    // then 100 % once (measured; a second one in a row would make the range
    // hot: dirty_pages.h).
    for (int kk = 0; kk < 7; ++kk) {
      const int k = kk / 2;
      const bool measured = kk == 6 || kk % 2 == 1;
      const int pct = kk == 6 ? 100 : cases[1 + (k + r) % 3];
      const size_t n = std::max<size_t>(1, pages * static_cast<size_t>(pct) / 100);
      const size_t first = n >= pages ? 0 : Mix(++step) % (pages - n + 1);
      for (size_t i = first * page_words; i < (first + n) * page_words && i < words; ++i) data[i] = Mix(data[i] + step);
      dlckpt::bench::Barrier();
      const double t0 = MPI_Wtime();
      if (dlckpt_checkpoint() != 0) Die(std::string("dlckpt_checkpoint: ") + dlckpt_last_error());
      const double c = Max(MPI_Wtime() - t0);
      const long long epoch = dlckpt_protected_epoch();
      if (g_rank == 0) {
        EncodeLog::Encode e = log.Of(static_cast<uint64_t>(epoch));
        const double fraction = e.total > 0 ? static_cast<double>(e.bytes) / static_cast<double>(e.total) : 1.0;
        if (measured) {
          ckpt[pct].push_back(c);
          enc[pct].push_back(e.seconds);
          sent[pct].push_back(fraction);
        }
        std::printf("STEP rep %d changed %d%% epoch %lld ckpt %.4f encode %.4f encoded_bytes %.3f%s\n", r, pct, epoch,
                    c, e.seconds, fraction, measured ? "" : " (first of two: not in the medians)");
        std::fflush(stdout);
      }
    }
  }

  // --- tracking while computing: the same loop, tracked and not; dense
  // (every page written every interval: the range turns hot), sparse (one
  // stretch of 10 % of the pages written every interval: tracked
  // throughout), and sparse with 8 times the passes per interval (a cost per
  // interval shrinks with its length).
  double on[3] = {0, 0, 0}, off[3] = {0, 0, 0};
  for (int mode = 0; mode < 3; ++mode) {
    std::vector<uint64_t> a(words, 1), b(words, 1);
    auto t = dlckpt::dirty::Tracker::Create(std::getenv("DLCKPT_DIRTY_TRACKING"));
    const int h = t->Register(a.data(), bytes);
    t->Collect();
    const size_t span = mode == 0 ? words : words / 10;
    for (int i = 0; i < intervals; ++i) {
      for (int which = 0; which < 2; ++which) {
        const bool tracked = (which + i) % 2 == 0;
        std::vector<uint64_t>& v = tracked ? a : b;
        const size_t at = mode == 0 ? 0 : (Mix(static_cast<uint64_t>(i)) % 10) * (words / 10);
        const double t0 = MPI_Wtime();
        if (tracked) t->Collect();  // re-armed as at a checkpoint
        Sweep(v.data() + at, span, mode == 2 ? 8 * sweeps : sweeps);
        (tracked ? on[mode] : off[mode]) += MPI_Wtime() - t0;
      }
    }
    t->Unregister(h);
    on[mode] = Sum(on[mode]);
    off[mode] = Sum(off[mode]);
  }
  // One Collect (the re-arm a checkpoint does) of a --mib region, rank 0:
  // nothing written since the last one, and one stretch of 10 % written.
  double collect_idle_ms = 0, collect_10_ms = 0;
  if (g_rank == 0) {
    std::vector<uint64_t> a(words, 1);
    auto t = dlckpt::dirty::Tracker::Create(std::getenv("DLCKPT_DIRTY_TRACKING"));
    const int h = t->Register(a.data(), bytes);
    t->Collect();
    std::vector<double> idle, ten;
    for (int i = 0; i < 5; ++i) {
      double t0 = MPI_Wtime();
      t->Collect();
      idle.push_back((MPI_Wtime() - t0) * 1e3);
      for (size_t w = (words / 10) * static_cast<size_t>(i % 9); w < (words / 10) * static_cast<size_t>(i % 9 + 1); w += page_words) a[w]++;
      t0 = MPI_Wtime();
      t->Collect();
      ten.push_back((MPI_Wtime() - t0) * 1e3);
    }
    collect_idle_ms = Median(idle);
    collect_10_ms = Median(ten);
    t->Unregister(h);
  }
  // One write fault of a protected page, alone (rank 0, 4096 pages).
  double fault_us = 0;
  if (g_rank == 0) {
    std::vector<uint64_t> f(4096 * page_words, 1);
    auto t = dlckpt::dirty::Tracker::Create(std::getenv("DLCKPT_DIRTY_TRACKING"));
    const int h = t->Register(f.data(), f.size() * 8);
    t->Collect();
    t->Collect();
    const double t0 = MPI_Wtime();
    for (size_t p = 1; p < 4095; ++p) f[p * page_words] = p;
    fault_us = (MPI_Wtime() - t0) / 4094 * 1e6;
    t->Unregister(h);
  }

  if (g_rank == 0) {
    const double full_c = Median(ckpt[100]), full_e = Median(enc[100]);
    std::printf("CASE changed ckpt_s encode_s encoded_bytes (medians of %d; %d ranks x %zu MiB)\n", reps, g_size, mib);
    for (int pct : {100, 1, 10, 50}) {
      std::printf("CASE %d%% %.4f %.4f %.3f\n", pct, Median(ckpt[pct]), Median(enc[pct]), Median(sent[pct]));
    }
    std::printf("COMPUTE dense tracked %.3f s untracked %.3f s; sparse (10 %%) tracked %.3f s untracked %.3f s; "
                "sparse with %d sweeps tracked %.3f s untracked %.3f s (all ranks, %d intervals x %d sweeps of %zu "
                "MiB)\n",
                on[0], off[0], on[1], off[1], 8 * sweeps, on[2], off[2], intervals, sweeps, mib);
    std::printf("FAULT %.1f us per first write to a protected page (rank 0, alone)\n", fault_us);
    std::printf("COLLECT %.2f ms with nothing written, %.2f ms with 10 %% of the pages written (%zu MiB, rank 0, "
                "medians of 5)\n",
                collect_idle_ms, collect_10_ms, mib);
    for (int pct : {1, 10, 50}) {
      const double er = full_e > 0 ? Median(enc[pct]) / full_e : 0, cr = full_c > 0 ? Median(ckpt[pct]) / full_c : 0;
      std::printf("METRIC dirty_encode_ratio_%dpct %.3f x target <= %s\n", pct, er, pct == 10 ? "0.15" : "1");
      std::printf("METRIC dirty_ckpt_ratio_%dpct %.3f x target <= %s\n", pct, cr, pct == 10 ? "0.2" : "1");
    }
    std::printf("METRIC dirty_tracking_overhead %.2f %% target <= 3\n",
                off[0] > 0 ? (on[0] - off[0]) / off[0] * 100 : 0);
    std::printf("METRIC dirty_tracking_overhead_sparse10 %.2f %% target <= 3\n",
                off[1] > 0 ? (on[1] - off[1]) / off[1] * 100 : 0);
    std::printf("METRIC dirty_tracking_overhead_sparse10_long %.2f %% target <= 3\n",
                off[2] > 0 ? (on[2] - off[2]) / off[2] * 100 : 0);
  }
  if (dlckpt_finalize() != 0) Die(std::string("dlckpt_finalize: ") + dlckpt_last_error());
  MPI_Finalize();
  return 0;
}

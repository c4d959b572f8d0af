// dlckpt-bench-ckpt: the checkpoint micro-benchmark of the thesis' §6.2.
//
// Every rank holds --mib MiB of data (pre-touched, random-looking), and each
// iteration writes it with fwrite in --record-sized pieces into
// /dlckpt/ckpt_study/rank<R>.ckpt (memfs through libintercept), closes it and
// calls dlckpt_checkpoint() (commit, encode onto the spares by the codec when
// run under dlckpt-run, acknowledge). Timed on every rank with MPI_Wtime,
// after a barrier:
//   write  = last fclose end - first write start          (MemCopyTime)
//   ckpt   = last dlckpt_checkpoint return - last fclose end
//   encode = the codec's encode-begin .. encode-end of the epoch, read from
//            the job's event file ($DLCKPT_EVENTS; 0 without dlckpt-run)
//   overhead = ckpt - encode  (commit CRCs, protocol, acknowledge, barriers)
// One line per iteration:
//   ITER <i> epoch <E> write <s> ckpt <s> encode <s> total <s>
// and, from rank 0 at the end, the medians over the measured iterations:
//   RESULT ranks=<R> mib=<M> iters=<I> write=<s> encode=<s> overhead=<s>
//          total=<s> throughput_gbs=<GB/s of all ranks' data>
//
// --report-cold: the first checkpoints against the later ones (issue 21,
// item 5: fresh store pages are slow on their first write on some virtual
// machines; memfs pre-touches them at creation, $DLCKPT_PRETOUCH=0 does not).
// Rank 0 then also prints, counting every iteration (warm-up included):
//   INIT <s>   dlckpt_init, slowest rank (it creates or attaches the store)
//   COLD write1 <s> total1 <s> write10 <s> total10 <s> warm_write <s>
//        warm_total <s>   (checkpoint 1, checkpoint 10 or the last if fewer,
//                          and the medians of checkpoints 2..)
//   METRIC first_ckpt_vs_tenth <write1/write10> x target <= 1.2
//   METRIC first_ckpt_vs_tenth_total <total1/total10> x target <= 1.2
//
// After a recovery (dlckpt-run relaunched the job) every rank reads its
// checkpoint back and checks it word by word ("RELOAD <s>" = slowest rank),
// then takes --after-restart more checkpoints and stops.
//
// Waiting never spins: barriers and reductions are non-blocking calls tested
// with short sleeps.
#include <mpi.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "dlckpt/dlckpt.h"
#include "dlckpt/base/events.h"

#include "bench_mpi.h"

namespace {

using dlckpt::bench::Barrier;
using dlckpt::bench::WaitRequest;
using dlckpt::bench::Mix;

int g_rank = 0, g_size = 1;

double Reduce(double v, MPI_Op op) { return dlckpt::bench::AllReduce(v, MPI_DOUBLE, op); }

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "dlckpt-bench-ckpt: rank %d: %s\n", g_rank, what.c_str());
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

struct Args {
  size_t mib = 64;
  int iters = 3;
  int warmup = 1;
  size_t record = 1 << 20;
  int after_restart = 1;
  int compute_ms = 0;
  int idle_ms = 0;
  int setup_ms = 0;
  std::string dir = "/dlckpt/ckpt_study";
  bool report_cold = false;
};

// dlckpt-bench-ckpt's options, filling *a.
void DefineOptions(CLI::App& app, Args* a) {
  dlckpt::cli::SetUsage(app, "usage: dlckpt-run [...] -- dlckpt-bench-ckpt [options]");
  app.description(
      "Each rank checkpoints M MiB through fwrite into memfs and dlckpt_checkpoint(),\n"
      "W + I times; prints ITER lines and a RESULT line of medians. After a recovery:\n"
      "reloads, K more.");
  // A count in [lo, hi] into *field.
  auto count = [&app](const char* name, auto* field, long long lo, long long hi, const char* text,
                      const char* help) {
    app.add_option_function<long long>(
           name,
           [name, field, lo, hi](long long n) {
             if (n < lo || n > hi) {
               dlckpt::bench::RejectValue(name, std::to_string(n),
                                          "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
             }
             *field = static_cast<std::remove_reference_t<decltype(*field)>>(n);
           },
           help)
        ->option_text(text);
  };
  constexpr long long kMaxInt = 2147483647;
  constexpr long long kMaxMs = 3600000;
  count("--mib", &a->mib, 1, kMaxInt, "M", "MiB each rank checkpoints (64)");
  count("--iters", &a->iters, 1, kMaxInt, "I", "timed checkpoints (3)");
  count("--warmup", &a->warmup, 0, kMaxInt, "W", "untimed checkpoints first (1)");
  app.add_option_function<long long>(
         "--record",
         [a](long long n) {
           if (n < 8 || n % 8 != 0) dlckpt::bench::RejectValue("--record", std::to_string(n), "a multiple of 8 >= 8");
           a->record = static_cast<size_t>(n);
         },
         "bytes per fwrite (1048576)")
      ->option_text("BYTES");
  count("--after-restart", &a->after_restart, 0, kMaxInt, "K", "checkpoints after a recovery (1)");
  count("--compute-ms", &a->compute_ms, 0, kMaxMs, "C",
        "each rank computes C ms (CPU-bound, untimed) after every checkpoint, the time an asynchronous "
        "encode has to finish (0)");
  count("--idle-ms", &a->idle_ms, 0, kMaxMs, "S", "each rank sleeps S ms instead (a compute phase on other cores)");
  count("--setup-ms", &a->setup_ms, 0, kMaxMs, "S",
        "each rank sleeps S ms between dlckpt_init and the first checkpoint (an application's setup; the "
        "codec warms up meanwhile)");
  app.add_option("--dir", a->dir, "the checkpoint directory (/dlckpt/ckpt_study)")->option_text("/dlckpt/...");
  app.add_flag("--report-cold", a->report_cold,
               "also INIT, COLD and METRIC lines comparing checkpoint 1 with checkpoint 10 (warm-up included; use "
               "--warmup 0 --iters 10)");
}

// The codec's encode times, from the job's event file (rank 0 only).
class EncodeClock {
 public:
  EncodeClock() {
    const char* p = std::getenv("DLCKPT_EVENTS");
    if (p != nullptr && *p != '\0') follower_.emplace(p);
  }
  // The newest epoch whose events::EncodeEnd has been written, and the
  // seconds since its events::EncodeBegin. False when there is none (no event
  // file: no codec). The codec writes encode-end before it answers the
  // application, so the line is there when dlckpt_checkpoint returns.
  bool Latest(uint64_t* epoch, double* seconds) {
    if (!follower_) return false;
    for (const auto& e : follower_->Poll()) {
      if (e.kind == dlckpt::events::Kind::kEncodeBegin) begin_[e.epoch] = e.ns;
      if (e.kind == dlckpt::events::Kind::kEncodeEnd && begin_.count(e.epoch)) {
        done_[e.epoch] = static_cast<double>(e.ns - begin_[e.epoch]) / 1e9;
      }
    }
    if (done_.empty()) return false;
    *epoch = done_.rbegin()->first;
    *seconds = done_.rbegin()->second;
    return true;
  }

 private:
  std::optional<dlckpt::events::Follower> follower_;
  std::map<uint64_t, int64_t> begin_;
  std::map<uint64_t, double> done_;
};

// A CPU-bound compute phase of `ms` milliseconds over `data` (it stays
// unchanged: the mix is folded into a sink the compiler must keep).
volatile uint64_t g_sink = 0;
void Compute(int ms, const std::vector<uint64_t>& data) {
  if (ms <= 0) return;
  const double until = MPI_Wtime() + ms / 1000.0;
  uint64_t acc = 0;
  size_t i = 0;
  while (MPI_Wtime() < until) {
    for (int k = 0; k < 4096; ++k, ++i) acc = Mix(acc ^ data[i % data.size()]);
  }
  g_sink = g_sink + acc;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (auto rc = dlckpt::bench::StartMain(&argc, &argv, "dlckpt-bench-ckpt", DefineOptions, &a, &g_rank, &g_size)) return *rc;
  double init_t0 = MPI_Wtime();
  if (dlckpt_init(MPI_COMM_WORLD) != 0) Die(std::string("dlckpt_init: ") + dlckpt_last_error());
  double init_s = Reduce(MPI_Wtime() - init_t0, MPI_MAX);

  size_t bytes = a.mib << 20;
  std::vector<uint64_t> data(bytes / 8);
  for (size_t i = 0; i < data.size(); ++i) data[i] = Mix((static_cast<uint64_t>(g_rank) << 40) ^ i);
  char path[512];
  std::snprintf(path, sizeof path, "%s/rank%d.ckpt", a.dir.c_str(), g_rank);
  EncodeClock clock;
  if (a.setup_ms > 0) {
    struct timespec ts = {a.setup_ms / 1000, static_cast<long>(a.setup_ms % 1000) * 1000000L};
    nanosleep(&ts, nullptr);
  }

  int todo = a.warmup + a.iters;
  bool restarted = dlckpt_restarted_epoch() > 0;
  if (restarted) {
    // Read the rebuilt (or surviving) checkpoint back and check it.
    std::vector<uint64_t> back(data.size(), 1);  // touched before the clock starts
    Barrier();
    double t0 = MPI_Wtime();
    FILE* f = std::fopen(path, "rb");
    if (f == nullptr) Die(std::string("reopen ") + path + ": " + std::strerror(errno));
    size_t got = std::fread(back.data(), 1, bytes, f);
    std::fclose(f);
    double start = Reduce(t0, MPI_MIN), end = Reduce(MPI_Wtime(), MPI_MAX);
    if (got != bytes || std::memcmp(back.data(), data.data(), bytes) != 0) {
      Die(std::string("the restored checkpoint ") + path + " differs from what was written");
    }
    if (g_rank == 0) {
      std::printf("RELOAD %.6f (epoch %lld, %zu MiB per rank, verified)\n", end - start,
                  dlckpt_restarted_epoch(), a.mib);
    }
    todo = a.after_restart;
  } else if (mkdir(a.dir.c_str(), 0755) != 0 && errno != EEXIST) {
    Die("mkdir " + a.dir + ": " + std::strerror(errno));
  }

  std::vector<double> writes, encodes, overheads, totals;
  std::vector<double> every_write, every_total;  // --report-cold: every iteration
  for (int it = 0; it < todo; ++it) {
    Barrier();
    double t0 = MPI_Wtime();
    FILE* f = std::fopen(path, "wb");
    if (f == nullptr) Die(std::string("fopen ") + path + ": " + std::strerror(errno));
    const char* p = reinterpret_cast<const char*>(data.data());
    for (size_t off = 0; off < bytes; off += a.record) {
      size_t n = std::min(a.record, bytes - off);
      if (std::fwrite(p + off, 1, n, f) != n) Die(std::string("fwrite ") + path + ": " + std::strerror(errno));
    }
    if (std::fclose(f) != 0) Die(std::string("fclose ") + path + ": " + std::strerror(errno));
    double t1 = MPI_Wtime();
    if (dlckpt_checkpoint() != 0) Die(std::string("dlckpt_checkpoint: ") + dlckpt_last_error());
    double t2 = MPI_Wtime();
    double start = Reduce(t0, MPI_MIN), written = Reduce(t1, MPI_MAX), done = Reduce(t2, MPI_MAX);
    Compute(a.compute_ms, data);
    if (a.idle_ms > 0) {
      struct timespec ts = {a.idle_ms / 1000, static_cast<long>(a.idle_ms % 1000) * 1000000L};
      nanosleep(&ts, nullptr);
    }
    if (g_rank != 0) continue;
    uint64_t epoch = 0;
    double enc = 0;
    if (!clock.Latest(&epoch, &enc)) enc = 0;  // no codec: local commits
    double w = written - start, c = done - written;
    std::printf("ITER %d epoch %llu write %.6f ckpt %.6f encode %.6f total %.6f%s\n", it,
                static_cast<unsigned long long>(epoch), w, c, enc, done - start,
                restarted ? " after-restart" : (it < a.warmup ? " warmup" : ""));
    std::fflush(stdout);
    every_write.push_back(w);
    every_total.push_back(done - start);
    if (restarted || it >= a.warmup) {
      writes.push_back(w);
      encodes.push_back(enc);
      overheads.push_back(std::max(0.0, c - enc));
      totals.push_back(done - start);
    }
  }
  if (g_rank == 0 && !totals.empty()) {
    double total = Median(totals);
    std::printf("RESULT ranks=%d mib=%zu iters=%zu write=%.6f encode=%.6f overhead=%.6f total=%.6f "
                "throughput_gbs=%.3f%s\n",
                g_size, a.mib, totals.size(), Median(writes), Median(encodes), Median(overheads), total,
                static_cast<double>(bytes) * g_size / total / 1e9, restarted ? " after-restart" : "");
    std::fflush(stdout);
  }
  if (g_rank == 0 && a.report_cold && !restarted && !every_write.empty()) {
    size_t tenth = std::min<size_t>(9, every_write.size() - 1);
    double w1 = every_write[0], t1 = every_total[0];
    double w10 = every_write[tenth], t10 = every_total[tenth];
    std::vector<double> ww(every_write.begin() + (every_write.size() > 1 ? 1 : 0), every_write.end());
    std::vector<double> wt(every_total.begin() + (every_total.size() > 1 ? 1 : 0), every_total.end());
    std::printf("INIT %.6f\n", init_s);
    std::printf("COLD write1 %.6f total1 %.6f write%zu %.6f total%zu %.6f warm_write %.6f warm_total %.6f\n",
                w1, t1, tenth + 1, w10, tenth + 1, t10, Median(ww), Median(wt));
    std::printf("METRIC first_ckpt_vs_tenth %.2f x target <= 1.2\n", w10 > 0 ? w1 / w10 : 0.0);
    std::printf("METRIC first_ckpt_vs_tenth_total %.2f x target <= 1.2\n", t10 > 0 ? t1 / t10 : 0.0);
    std::fflush(stdout);
  }
  if (dlckpt_finalize() != 0) Die(std::string("dlckpt_finalize: ") + dlckpt_last_error());
  MPI_Finalize();
  return 0;
}

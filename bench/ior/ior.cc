// ior.cc — options, reduction and reports of dlckpt-ior (see ior.h).
#include "ior.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <utility>

#include "dlckpt/base/strings.h"
#include "dlckpt/base/units.h"

namespace dlckpt::ior {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kMB = 1000.0 * 1000.0;
constexpr double kKiB = 1024.0;

std::string Fmt(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Fmt(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

}  // namespace

std::string HumanReadable(uint64_t v) {
  const uint64_t gib = uint64_t{1} << 30, mib = uint64_t{1} << 20;
  if (v >= gib) {
    if (v % gib) return Fmt("%.2f GiB", static_cast<double>(v) / static_cast<double>(gib));
    return Fmt("%llu GiB", static_cast<unsigned long long>(v / gib));
  }
  if (v >= mib) {
    if (v % mib) return Fmt("%.2f MiB", static_cast<double>(v) / static_cast<double>(mib));
    return Fmt("%llu MiB", static_cast<unsigned long long>(v / mib));
  }
  return Fmt("%llu bytes", static_cast<unsigned long long>(v));
}

std::string PrettyDouble(double v) {
  if (v < 0 || std::isnan(v)) return "   -       ";
  int precision = v < 1 ? 6 : v < 3600 ? 2 : 0;
  return Fmt("%-10.*f ", precision, v);
}

PhaseResult Reduce(Access access, int iteration, const Timers& t, double min_latency, uint64_t agg_bytes,
                   uint64_t transfer_size) {
  PhaseResult r;
  r.access = access;
  r.iteration = iteration;
  r.open = t[1] - t[0];
  r.xfer = t[3] - t[2];
  r.close = t[5] - t[4];
  r.total = t[5] - t[0];
  r.agg_bytes = agg_bytes;
  r.bw = r.total > 0 ? static_cast<double>(agg_bytes) / r.total : 0;
  double ops = static_cast<double>(agg_bytes) / static_cast<double>(transfer_size);
  r.iops = r.xfer > 0 ? ops / r.xfer : 0;
  r.latency = min_latency;
  return r;
}

std::string TimeString(time_t t) {
  struct tm tm;
  localtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%a %b %e %H:%M:%S %Y", &tm);
  return buf;
}

std::string FsLine(uint64_t total, uint64_t free, uint64_t inodes, uint64_t free_inodes) {
  double size = static_cast<double>(total) / (1 << 30);
  const char* unit = "GiB";
  if (size > 1024) {
    size /= 1024;
    unit = "TiB";
  }
  double used = total ? (1.0 - static_cast<double>(free) / static_cast<double>(total)) * 100 : 0;
  double used_inodes =
      inodes ? (1.0 - static_cast<double>(free_inodes) / static_cast<double>(inodes)) * 100 : 0;
  return Fmt("%.1f %s   Used FS: %2.1f%%   Inodes: %.1f Mi   Used Inodes: %2.1f%%", size, unit, used,
             static_cast<double>(inodes) / kMiB, used_inodes);
}

FsStrings FsJson(const FsStats& fs) {
  FsStrings out;
  if (!fs.valid) return out;
  double size = static_cast<double>(fs.total_bytes) / (1 << 30);
  const char* unit = "GiB";
  if (size > 1024) {
    size /= 1024;
    unit = "TiB";
  }
  auto pct = [](uint64_t total, uint64_t free) {
    return total ? (1.0 - static_cast<double>(free) / static_cast<double>(total)) * 100 : 0.0;
  };
  out.capacity = Fmt("%.1f %s", size, unit);
  out.used_capacity = Fmt("%2.1f%%", pct(fs.total_bytes, fs.free_bytes));
  out.inodes = Fmt("%.1f Mi", static_cast<double>(fs.total_inodes) / kMiB);
  out.used_inodes = Fmt("%2.1f%%", pct(fs.total_inodes, fs.free_inodes));
  return out;
}

Summary Summarize(const Options& o, const RunInfo& info, Access access) {
  Summary s;
  std::vector<double> bw, ops, times;
  for (const auto& p : info.phases) {
    if (p.access != access || p.total <= 0) continue;
    bw.push_back(static_cast<double>(p.agg_bytes) / p.total);
    ops.push_back(static_cast<double>(p.agg_bytes) / static_cast<double>(o.transfer_size) / p.total);
    times.push_back(p.total);
    if (p.stonewalled) {
      ++s.stonewall_count;
      s.stonewall_time += p.stonewall_time;
      s.stonewall_bytes += static_cast<double>(p.pairs_sum) * static_cast<double>(o.transfer_size);
    }
  }
  if (s.stonewall_count > 0) {
    s.stonewall_time /= s.stonewall_count;
    s.stonewall_bytes /= s.stonewall_count;
  }
  s.count = static_cast<int>(bw.size());
  if (bw.empty()) return s;
  auto stats = [](const std::vector<double>& v, double* mx, double* mn, double* mean, double* sd) {
    *mx = *std::max_element(v.begin(), v.end());
    *mn = *std::min_element(v.begin(), v.end());
    double sum = 0;
    for (double x : v) sum += x;
    *mean = sum / static_cast<double>(v.size());
    double var = 0;
    for (double x : v) var += (x - *mean) * (x - *mean);
    *sd = std::sqrt(var / static_cast<double>(v.size()));  // IOR: population deviation
  };
  stats(bw, &s.bw_max, &s.bw_min, &s.bw_mean, &s.bw_sd);
  stats(ops, &s.ops_max, &s.ops_min, &s.ops_mean, &s.ops_sd);
  double sum = 0;
  for (double t : times) sum += t;
  s.mean_time = sum / static_cast<double>(times.size());
  return s;
}

namespace {

// The summaries of the accesses that ran: write, then read.
std::vector<std::pair<Access, Summary>> Summaries(const Options& o, const RunInfo& info) {
  std::vector<std::pair<Access, Summary>> out;
  for (Access a : {Access::kWrite, Access::kRead}) {
    Summary s = Summarize(o, info, a);
    if (s.count > 0) out.emplace_back(a, s);
  }
  return out;
}

const char* Name(Access a) { return a == Access::kWrite ? "write" : "read"; }

uint64_t AggregateBytes(const Options& o, const RunInfo& info) {
  return o.block_size * o.segments * static_cast<uint64_t>(info.tasks);
}

// ---- the default (text) report ----

// IOR's line after a stonewalled phase: the transfers ("pairs") the ranks
// had done at the deadline and the data they had moved.
std::string StonewallLine(const Options& o, const RunInfo& info, const PhaseResult& p) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  double per = static_cast<double>(o.transfer_size);
  return Fmt("stonewalling pairs accessed min: %llu max: %llu -- min data: %.1f GiB mean data: %.1f GiB "
             "time: %.1fs\n",
             static_cast<unsigned long long>(p.pairs_min), static_cast<unsigned long long>(p.pairs_max),
             static_cast<double>(p.pairs_min) * per / kGiB,
             static_cast<double>(p.pairs_sum) * per / kGiB / static_cast<double>(info.tasks > 0 ? info.tasks : 1),
             p.stonewall_time);
}

std::string KeyVal(const std::string& key, const std::string& value) {
  return Fmt("%-20s: ", key.c_str()) + value + "\n";
}

std::string TextReport(const Options& o, const RunInfo& info) {
  std::string out;
  out += std::string("IOR-") + kIorVersion + ": MPI Coordinated Test of Parallel I/O\n";
  out += KeyVal("Began", info.began);
  out += KeyVal("Command line", info.command_line);
  out += KeyVal("Machine", info.machine);
  out += KeyVal("TestID", "0");
  out += KeyVal("StartTime", info.start_time);
  out += KeyVal("Path", info.path);
  if (!info.fs_line.empty()) out += KeyVal("FS", info.fs_line);
  out += "\nOptions: \n";
  out += KeyVal("api", o.api);
  out += KeyVal("apiVersion", "");
  out += KeyVal("test filename", o.test_file);
  out += KeyVal("access", o.file_per_proc ? "file-per-process" : "single-shared-file");
  out += KeyVal("type", "independent");  // -c is ignored under POSIX
  out += KeyVal("segments", std::to_string(o.segments));
  out += KeyVal("ordering in a file", o.random_offset ? "random" : "sequential");
  if (o.reorder) {
    out += KeyVal("ordering inter file", "constant task offset");
    out += KeyVal("task offset", std::to_string(o.task_offset));
  } else if (o.reorder_random) {
    out += KeyVal("ordering inter file", "random task offset");
    out += KeyVal("task offset", std::to_string(o.task_offset));
    out += KeyVal("reorder random seed", std::to_string(o.random_seed));
  } else {
    out += KeyVal("ordering inter file", "no tasks offsets");
  }
  out += KeyVal("nodes", std::to_string(info.nodes));
  out += KeyVal("tasks", std::to_string(info.tasks));
  out += KeyVal("clients per node", std::to_string(info.tasks_per_node));
  out += KeyVal("repetitions", std::to_string(o.repetitions));
  out += KeyVal("xfersize", HumanReadable(o.transfer_size));
  out += KeyVal("blocksize", HumanReadable(o.block_size));
  out += KeyVal("aggregate filesize", HumanReadable(AggregateBytes(o, info)));
  if (o.deadline > 0) {
    out += KeyVal("stonewallingTime", std::to_string(o.deadline));
    out += KeyVal("stoneWallingWearOut", o.wear_out ? "1" : "0");
  }
  out += KeyVal("dlckpt target", info.target);
  out += "\nResults: \n";
  out += "\n";
  out += "access    bw(MiB/s)  IOPS       Latency(s)  block(KiB) xfer(KiB)  open(s)    wr/rd(s)   close(s)   total(s)   iter\n";
  out += "------    ---------  ----       ----------  ---------- ---------  --------   --------   --------   --------   ----\n";
  size_t next_remove = 0;
  for (size_t i = 0; i < info.phases.size(); ++i) {
    const PhaseResult& p = info.phases[i];
    out += Fmt("%-10s", Name(p.access));
    out += PrettyDouble(p.bw / kMiB) + PrettyDouble(p.iops) + PrettyDouble(p.latency) +
           PrettyDouble(static_cast<double>(o.block_size) / kKiB) +
           PrettyDouble(static_cast<double>(o.transfer_size) / kKiB) + PrettyDouble(p.open) +
           PrettyDouble(p.xfer) + PrettyDouble(p.close) + PrettyDouble(p.total);
    out += Fmt("%-4d\n", p.iteration);
    if (p.stonewalled) out += StonewallLine(o, info, p);
    bool last_of_iteration = i + 1 == info.phases.size() || info.phases[i + 1].iteration != p.iteration;
    while (last_of_iteration && next_remove < info.removes.size() &&
           info.removes[next_remove].iteration <= p.iteration) {
      const RemoveResult& r = info.removes[next_remove++];
      // IOR aligns these dashes with the header (Latency(s) is one wider).
      out += "remove    -          -          -           -          -          -          -          -          ";
      out += PrettyDouble(r.seconds) + Fmt("%-4d\n", r.iteration);
    }
  }
  for (const auto& [a, s] : Summaries(o, info)) {
    out += Fmt(a == Access::kWrite ? "Max Write: %.2f MiB/sec (%.2f MB/sec)\n"
                                   : "Max Read:  %.2f MiB/sec (%.2f MB/sec)\n",
               s.bw_max / kMiB, s.bw_max / kMB);
  }
  out += "\nSummary of all tests:";
  out += "\n";
  out += Fmt("%-9s %10s %10s %10s %10s %10s %10s %10s %10s %10s", "Operation", "Max(MiB)", "Min(MiB)",
             "Mean(MiB)", "StdDev", "Max(OPs)", "Min(OPs)", "Mean(OPs)", "StdDev", "Mean(s)");
  out += " Stonewall(s) Stonewall(MiB) Test# #Tasks tPN reps fPP reord reordoff reordrand seed segcnt ";
  out += Fmt("%8s %8s %9s %5s", " blksiz", "xsize", "aggs(MiB)", "API");
  out += " RefNum\n";
  for (const auto& [a, s] : Summaries(o, info)) {
    out += Fmt("%-9s ", Name(a));
    out += Fmt("%10.2f %10.2f %10.2f %10.2f ", s.bw_max / kMiB, s.bw_min / kMiB, s.bw_mean / kMiB, s.bw_sd / kMiB);
    out += Fmt("%10.2f %10.2f %10.2f %10.2f ", s.ops_max, s.ops_min, s.ops_mean, s.ops_sd);
    out += Fmt("%10.5f ", s.mean_time);
    if (s.stonewall_count > 0) {
      out += Fmt("%10.2f %13.2f ", s.stonewall_time, s.stonewall_bytes / kMiB);
    } else {
      out += Fmt("%10s %13s ", "NA", "NA");
    }
    out += Fmt("%5d %6d %3d %4d %3d %5d %8d %9d %4d ", 0, info.tasks, info.tasks_per_node, o.repetitions,
               o.file_per_proc ? 1 : 0, o.reorder ? 1 : 0, o.task_offset, o.reorder_random ? 1 : 0,
               o.random_seed);
    out += Fmt("%6llu %8llu %8llu ", static_cast<unsigned long long>(o.segments),
               static_cast<unsigned long long>(o.block_size), static_cast<unsigned long long>(o.transfer_size));
    out += Fmt("%9.1f %3s %6d\n", static_cast<double>(AggregateBytes(o, info)) / kMiB, o.api.c_str(), 0);
  }
  out += KeyVal("Finished", info.finished);
  return out;
}

// ---- JSON ----

std::string Quote(const std::string& s) {
  std::string out;
  AppendJsonString(&out, s);
  return out;
}

// A small writer of one JSON object per nesting level, IOR's layout (two
// spaces per level, one member per line).
class Json {
 public:
  void Open(const std::string& key, char bracket) {
    Member(key);
    out_ += bracket;
    out_ += "\n";
    first_.push_back(true);
  }
  void Close(char bracket) {
    first_.pop_back();
    out_ += "\n" + Indent() + bracket;
  }
  void Str(const std::string& key, const std::string& v) {
    Member(key);
    out_ += Quote(v);
  }
  void Int(const std::string& key, long long v) {
    Member(key);
    out_ += std::to_string(v);
  }
  void Dbl(const std::string& key, double v) {
    Member(key);
    out_ += std::isfinite(v) ? Fmt("%.4f", v) : std::string("null");
  }
  std::string Take() { return out_ + "\n"; }

 private:
  std::string Indent() const { return std::string(2 * first_.size(), ' '); }
  void Member(const std::string& key) {
    if (!first_.empty()) {
      if (!first_.back()) out_ += ",\n";
      first_.back() = false;
      out_ += Indent();
    }
    if (!key.empty()) out_ += Quote(key) + ": ";
  }
  std::string out_;
  std::vector<bool> first_;
};

std::string JsonReport(const Options& o, const RunInfo& info) {
  Json j;
  j.Open("", '{');
  j.Str("Version", kIorVersion);
  j.Str("Began", info.began);
  j.Str("Command line", info.command_line);
  j.Str("Machine", info.machine);
  j.Open("tests", '[');
  j.Open("", '{');
  j.Int("TestID", 0);
  j.Str("StartTime", info.start_time);
  j.Str("Path", info.path);
  if (info.fs.valid) {  // IOR's keys and string forms
    FsStrings fs = FsJson(info.fs);
    j.Str("Capacity", fs.capacity);
    j.Str("Used Capacity", fs.used_capacity);
    j.Str("Inodes", fs.inodes);
    j.Str("Used Inodes", fs.used_inodes);
  }
  j.Open("Parameters", '{');
  j.Int("testID", 0);
  j.Int("refnum", 0);
  j.Str("api", o.api);
  j.Str("testFileName", o.test_file);
  j.Int("nodes", info.nodes);
  j.Int("tasksPerNode", info.tasks_per_node);
  j.Int("repetitions", o.repetitions);
  j.Int("interTestDelay", o.inter_test_delay);
  j.Int("intraTestBarriers", o.intra_barriers);
  j.Int("fsync", o.fsync);
  j.Int("readFile", o.read);
  j.Int("writeFile", o.write);
  j.Int("filePerProc", o.file_per_proc);
  j.Int("reorderTasks", o.reorder);
  j.Int("taskPerNodeOffset", o.task_offset);
  j.Int("checkWrite", o.check_write);
  j.Int("checkRead", o.check_read);
  j.Int("keepFile", o.keep_file);
  j.Int("verbose", o.verbose);
  j.Int("segmentCount", static_cast<long long>(o.segments));
  j.Int("transferSize", static_cast<long long>(o.transfer_size));
  j.Int("blockSize", static_cast<long long>(o.block_size));
  j.Int("deadlineForStonewalling", o.deadline);
  j.Int("stoneWallingWearOut", o.wear_out);
  j.Int("multiFile", o.multi_file);
  j.Int("fsyncPerWrite", o.fsync_per_write);
  j.Int("useExistingTestFile", o.use_existing);
  j.Int("uniqueDir", o.unique_dir);
  j.Int("singleXferAttempt", o.single_xfer);
  j.Int("quitOnError", o.quit_on_error);
  j.Int("randomOffset", o.random_offset);
  j.Int("reorderTasksRandom", o.reorder_random);
  j.Int("reorderTasksRandomSeed", o.random_seed);
  j.Int("collective", o.collective);
  j.Str("dataPacketType", DataPacketName(o.packet));
  j.Int("dlckptCheckpoint", o.dlckpt_checkpoint);
  j.Close('}');
  j.Open("Options", '{');
  j.Str("api", o.api);
  j.Str("apiVersion", "");
  j.Str("test filename", o.test_file);
  j.Str("access", o.file_per_proc ? "file-per-process" : "single-shared-file");
  j.Str("type", "independent");
  j.Int("segments", static_cast<long long>(o.segments));
  j.Str("ordering in a file", o.random_offset ? "random" : "sequential");
  j.Str("ordering inter file", o.reorder           ? "constant task offset"
                               : o.reorder_random ? "random task offset"
                                                  : "no tasks offsets");
  if (o.reorder || o.reorder_random) j.Int("task offset", o.task_offset);
  if (o.reorder_random) j.Int("reorder random seed", o.random_seed);
  if (o.deadline > 0) {
    j.Int("stonewallingTime", o.deadline);
    j.Int("stoneWallingWearOut", o.wear_out);
  }
  j.Int("nodes", info.nodes);
  j.Int("tasks", info.tasks);
  j.Int("clients per node", info.tasks_per_node);
  j.Int("repetitions", o.repetitions);
  j.Str("xfersize", HumanReadable(o.transfer_size));
  j.Str("blocksize", HumanReadable(o.block_size));
  j.Str("aggregate filesize", HumanReadable(AggregateBytes(o, info)));
  j.Str("dlckpt target", info.target);
  j.Close('}');
  j.Open("Results", '[');
  for (int it = 0; it < o.repetitions; ++it) {
    j.Open("", '[');
    for (const auto& p : info.phases) {
      if (p.iteration != it) continue;
      j.Open("", '{');
      j.Str("access", Name(p.access));
      j.Dbl("bwMiB", p.bw / kMiB);
      j.Dbl("blockKiB", static_cast<double>(o.block_size) / kKiB);
      j.Dbl("xferKiB", static_cast<double>(o.transfer_size) / kKiB);
      j.Dbl("iops", p.iops);
      j.Dbl("latency", p.latency);
      j.Dbl("openTime", p.open);
      j.Dbl("wrRdTime", p.xfer);
      j.Dbl("closeTime", p.close);
      j.Dbl("totalTime", p.total);
      if (p.stonewalled) {
        j.Int("stonewallPairsMin", static_cast<long long>(p.pairs_min));
        j.Int("stonewallPairsMax", static_cast<long long>(p.pairs_max));
        j.Dbl("stonewallTime", p.stonewall_time);
      }
      j.Close('}');
    }
    for (const auto& r : info.removes) {
      if (r.iteration != it) continue;
      j.Open("", '{');
      j.Str("access", "remove");
      j.Dbl("totalTime", r.seconds);
      j.Close('}');
    }
    j.Close(']');
  }
  j.Close(']');
  j.Open("max", '{');
  for (const auto& [a, s] : Summaries(o, info)) {
    j.Dbl(std::string(Name(a)) + "MiB", s.bw_max / kMiB);
    j.Dbl(std::string(Name(a)) + "MB", s.bw_max / kMB);
  }
  j.Close('}');
  j.Close('}');
  j.Close(']');
  j.Open("summary", '[');
  for (const auto& [a, s] : Summaries(o, info)) {
    j.Open("", '{');
    j.Str("operation", Name(a));
    j.Str("API", o.api);
    j.Int("TestID", 0);
    j.Int("ReferenceNumber", 0);
    j.Int("segmentCount", static_cast<long long>(o.segments));
    j.Int("blockSize", static_cast<long long>(o.block_size));
    j.Int("transferSize", static_cast<long long>(o.transfer_size));
    j.Int("numTasks", info.tasks);
    j.Int("tasksPerNode", info.tasks_per_node);
    j.Int("repetitions", o.repetitions);
    j.Int("filePerProc", o.file_per_proc);
    j.Int("reorderTasks", o.reorder);
    j.Int("taskPerNodeOffset", o.task_offset);
    j.Int("reorderTasksRandom", o.reorder_random);
    j.Int("reorderTasksRandomSeed", o.random_seed);
    j.Dbl("bwMaxMIB", s.bw_max / kMiB);
    j.Dbl("bwMinMIB", s.bw_min / kMiB);
    j.Dbl("bwMeanMIB", s.bw_mean / kMiB);
    j.Dbl("bwStdMIB", s.bw_sd / kMiB);
    j.Dbl("OPsMax", s.ops_max);
    j.Dbl("OPsMin", s.ops_min);
    j.Dbl("OPsMean", s.ops_mean);
    j.Dbl("OPsSD", s.ops_sd);
    j.Dbl("MeanTime", s.mean_time);
    if (s.stonewall_count > 0) {
      j.Dbl("StoneWallTime", s.stonewall_time);
      j.Dbl("StoneWallbwMeanMIB", s.stonewall_bytes / kMiB / (s.stonewall_time > 0 ? s.stonewall_time : 1));
    }
    j.Dbl("xsizeMiB", static_cast<double>(AggregateBytes(o, info)) / kMiB);
    j.Close('}');
  }
  j.Close(']');
  j.Str("Finished", info.finished);
  j.Close('}');
  return j.Take();
}

}  // namespace

std::string FormatReport(const Options& o, const RunInfo& info) {
  return o.format == Format::kJson ? JsonReport(o, info) : TextReport(o, info);
}

}  // namespace dlckpt::ior

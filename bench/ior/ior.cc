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

#include <nlohmann/json.hpp>

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

using Json = nlohmann::ordered_json;

// A figure as IOR prints it in JSON (%.4f): rounded to 4 decimals; null when
// not finite.
Json Dbl(double v) {
  if (!std::isfinite(v)) return nullptr;
  return std::round(v * 1e4) / 1e4;
}

std::string JsonReport(const Options& o, const RunInfo& info) {
  Json test = {{"TestID", 0}, {"StartTime", info.start_time}, {"Path", info.path}};
  if (info.fs.valid) {  // IOR's keys and string forms
    FsStrings fs = FsJson(info.fs);
    test["Capacity"] = fs.capacity;
    test["Used Capacity"] = fs.used_capacity;
    test["Inodes"] = fs.inodes;
    test["Used Inodes"] = fs.used_inodes;
  }
  // IOR writes its flags as the integers 0 and 1.
  const auto flag = [](bool b) { return b ? 1 : 0; };
  // IOR's fields in IOR's order.
  test["Parameters"] = {{"testID", 0}, {"refnum", 0}, {"api", o.api}, {"testFileName", o.test_file},
                        {"nodes", info.nodes}, {"tasksPerNode", info.tasks_per_node}, {"repetitions", o.repetitions},
                        {"interTestDelay", o.inter_test_delay}, {"intraTestBarriers", flag(o.intra_barriers)},
                        {"fsync", flag(o.fsync)}, {"readFile", flag(o.read)}, {"writeFile", flag(o.write)},
                        {"filePerProc", flag(o.file_per_proc)}, {"reorderTasks", flag(o.reorder)},
                        {"taskPerNodeOffset", o.task_offset}, {"checkWrite", flag(o.check_write)},
                        {"checkRead", flag(o.check_read)}, {"keepFile", flag(o.keep_file)}, {"verbose", o.verbose},
                        {"segmentCount", o.segments}, {"transferSize", o.transfer_size}, {"blockSize", o.block_size},
                        {"deadlineForStonewalling", o.deadline}, {"stoneWallingWearOut", flag(o.wear_out)},
                        {"multiFile", flag(o.multi_file)}, {"fsyncPerWrite", flag(o.fsync_per_write)},
                        {"useExistingTestFile", flag(o.use_existing)}, {"uniqueDir", flag(o.unique_dir)},
                        {"singleXferAttempt", flag(o.single_xfer)}, {"quitOnError", flag(o.quit_on_error)},
                        {"randomOffset", flag(o.random_offset)}, {"reorderTasksRandom", flag(o.reorder_random)},
                        {"reorderTasksRandomSeed", o.random_seed}, {"collective", flag(o.collective)},
                        {"dataPacketType", DataPacketName(o.packet)},
                        {"dlckptCheckpoint", flag(o.dlckpt_checkpoint)}};
  Json opts = {{"api", o.api},
               {"apiVersion", ""},
               {"test filename", o.test_file},
               {"access", o.file_per_proc ? "file-per-process" : "single-shared-file"},
               {"type", "independent"},
               {"segments", o.segments},
               {"ordering in a file", o.random_offset ? "random" : "sequential"},
               {"ordering inter file", o.reorder          ? "constant task offset"
                                       : o.reorder_random ? "random task offset"
                                                          : "no tasks offsets"}};
  if (o.reorder || o.reorder_random) opts["task offset"] = o.task_offset;
  if (o.reorder_random) opts["reorder random seed"] = o.random_seed;
  if (o.deadline > 0) {
    opts["stonewallingTime"] = o.deadline;
    opts["stoneWallingWearOut"] = flag(o.wear_out);
  }
  opts["nodes"] = info.nodes;
  opts["tasks"] = info.tasks;
  opts["clients per node"] = info.tasks_per_node;
  opts["repetitions"] = o.repetitions;
  opts["xfersize"] = HumanReadable(o.transfer_size);
  opts["blocksize"] = HumanReadable(o.block_size);
  opts["aggregate filesize"] = HumanReadable(AggregateBytes(o, info));
  opts["dlckpt target"] = info.target;
  test["Options"] = std::move(opts);

  Json results = Json::array();
  for (int it = 0; it < o.repetitions; ++it) {
    Json iteration = Json::array();
    for (const auto& p : info.phases) {
      if (p.iteration != it) continue;
      Json r = {{"access", Name(p.access)},
                {"bwMiB", Dbl(p.bw / kMiB)},
                {"blockKiB", Dbl(static_cast<double>(o.block_size) / kKiB)},
                {"xferKiB", Dbl(static_cast<double>(o.transfer_size) / kKiB)},
                {"iops", Dbl(p.iops)},
                {"latency", Dbl(p.latency)},
                {"openTime", Dbl(p.open)},
                {"wrRdTime", Dbl(p.xfer)},
                {"closeTime", Dbl(p.close)},
                {"totalTime", Dbl(p.total)}};
      if (p.stonewalled) {
        r["stonewallPairsMin"] = p.pairs_min;
        r["stonewallPairsMax"] = p.pairs_max;
        r["stonewallTime"] = Dbl(p.stonewall_time);
      }
      iteration.push_back(std::move(r));
    }
    for (const auto& r : info.removes) {
      if (r.iteration != it) continue;
      iteration.push_back({{"access", "remove"}, {"totalTime", Dbl(r.seconds)}});
    }
    results.push_back(std::move(iteration));
  }
  test["Results"] = std::move(results);
  Json max = Json::object();
  Json summary = Json::array();
  for (const auto& [a, s] : Summaries(o, info)) {
    max[std::string(Name(a)) + "MiB"] = Dbl(s.bw_max / kMiB);
    max[std::string(Name(a)) + "MB"] = Dbl(s.bw_max / kMB);
    Json sum = {{"operation", Name(a)},
                {"API", o.api},
                {"TestID", 0},
                {"ReferenceNumber", 0},
                {"segmentCount", o.segments},
                {"blockSize", o.block_size},
                {"transferSize", o.transfer_size},
                {"numTasks", info.tasks},
                {"tasksPerNode", info.tasks_per_node},
                {"repetitions", o.repetitions},
                {"filePerProc", flag(o.file_per_proc)},
                {"reorderTasks", flag(o.reorder)},
                {"taskPerNodeOffset", o.task_offset},
                {"reorderTasksRandom", flag(o.reorder_random)},
                {"reorderTasksRandomSeed", o.random_seed},
                {"bwMaxMIB", Dbl(s.bw_max / kMiB)},
                {"bwMinMIB", Dbl(s.bw_min / kMiB)},
                {"bwMeanMIB", Dbl(s.bw_mean / kMiB)},
                {"bwStdMIB", Dbl(s.bw_sd / kMiB)},
                {"OPsMax", Dbl(s.ops_max)},
                {"OPsMin", Dbl(s.ops_min)},
                {"OPsMean", Dbl(s.ops_mean)},
                {"OPsSD", Dbl(s.ops_sd)},
                {"MeanTime", Dbl(s.mean_time)}};
    if (s.stonewall_count > 0) {
      sum["StoneWallTime"] = Dbl(s.stonewall_time);
      sum["StoneWallbwMeanMIB"] = Dbl(s.stonewall_bytes / kMiB / (s.stonewall_time > 0 ? s.stonewall_time : 1));
    }
    sum["xsizeMiB"] = Dbl(static_cast<double>(AggregateBytes(o, info)) / kMiB);
    summary.push_back(std::move(sum));
  }
  test["max"] = std::move(max);
  Json doc = {{"Version", kIorVersion},
              {"Began", info.began},
              {"Command line", info.command_line},
              {"Machine", info.machine},
              {"tests", Json::array({std::move(test)})},
              {"summary", std::move(summary)},
              {"Finished", info.finished}};
  // Invalid UTF-8 (a file name) is replaced rather than thrown on.
  return doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace

std::string FormatReport(const Options& o, const RunInfo& info) {
  return o.format == Format::kJson ? JsonReport(o, info) : TextReport(o, info);
}

}  // namespace dlckpt::ior

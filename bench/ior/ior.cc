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

Result<uint64_t> Size(const std::string& opt, const std::string& v) {
  auto r = ParseSize(v);
  if (!r.ok()) return Status::InvalidArgument(opt + ": '" + v + "' is not a size (e.g. 4096, 64k, 16m, 1g)");
  return *r;
}

Result<int64_t> Int(const std::string& opt, const std::string& v, int64_t lo, int64_t hi) {
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || x < lo || x > hi) {
    return Status::InvalidArgument(opt + ": '" + v + "' is not an integer in [" + std::to_string(lo) +
                                   ", " + std::to_string(hi) + "]");
  }
  return static_cast<int64_t>(x);
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// -O key=value[,key=value...]
Status ParseModuleOptions(const std::string& v, Options* o) {
  std::istringstream is(v);
  std::string item;
  while (std::getline(is, item, ',')) {
    size_t eq = item.find('=');
    if (eq == std::string::npos) return Status::InvalidArgument("-O '" + item + "': want key=value");
    std::string key = item.substr(0, eq), val = item.substr(eq + 1);
    if (key == "summaryFormat") {
      std::string l = Lower(val);
      if (l == "json") {
        o->format = Format::kJson;
      } else if (l == "default") {
        o->format = Format::kDefault;
      } else {
        return Status::InvalidArgument("-O summaryFormat=" + val + ": supported are default and JSON");
      }
    } else if (key == "summaryFile") {
      if (val.empty()) return Status::InvalidArgument("-O summaryFile= needs a path");
      o->summary_file = val;
    } else {
      return Status::InvalidArgument("-O " + key + ": unsupported (supported: summaryFormat, summaryFile)");
    }
  }
  return Status::OK();
}

}  // namespace

std::string UsageText() {
  return R"(usage: mpiexec -n N dlckpt-ior [OPTIONS]

IOR's command line for the POSIX API, reporting in IOR's formats. Paths under
/dlckpt go to this rank's memfs store (libintercept); other paths to the OS.

  -a S    API: POSIX (the only one)
  -b N    block size: contiguous bytes per task per segment (default 1m)
  -t N    transfer size: bytes per I/O call (default 256k)
  -s N    segments (default 1)
  -F      file per process (else one shared file; /dlckpt needs -F with > 1 task)
  -w      write phase          -r   read phase  (neither -w nor -r: both)
  -e      fsync before close (counted in close(s))
  -C      reorder tasks for reads: task i reads the data of task i + Q*tasksPerNode
          (another node's; nodes are told apart by $DLCKPT_NODE, else the host name)
  -Q N    task per node offset for -C (default 1)
  -i N    repetitions (default 1)
  -o S    test file name (default testFile; -F appends .<rank, 8 digits>)
  -k      keep the file(s) (else removed after each repetition, timed as "remove")
  -W      check write: read back and verify after the write phase (untimed)
  -R      check read: verify the data after the read phase (untimed)
  -g      barriers between open, transfer and close
  -d N    seconds to wait before each phase
  -v      more output (repeatable)
  -O S    summaryFormat=default|JSON, summaryFile=PATH (comma-separated)
  --dlckpt.checkpoint
          /dlckpt only: end each write phase with the collective dlckpt_checkpoint()
          (commit + encode onto the spares under dlckpt-run + acknowledge), timed in
          close(s): the figure of a checkpoint, write + encode
  -h, --help

Sizes take k, m, g (binary). Sizes up to what fits in memory: under dlckpt-run
give --capacity >= 2 x (segments x block size) + 10 %; without it set
DLCKPT_STORE_CAPACITY (default 256M).
)";
}

Result<Options> ParseOptions(std::span<const std::string> args) {
  Options o;
  const std::string flags = "FwreCkWRgvh";
  const std::string valued = "abtsioOQd";
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help") {
      o.help = true;
      return o;
    }
    if (a == "--dlckpt.checkpoint") {
      o.dlckpt_checkpoint = true;
      continue;
    }
    if (a.size() < 2 || a[0] != '-' || a[1] == '-') {
      return Status::InvalidArgument("unexpected argument '" + a + "' (see --help)");
    }
    for (size_t p = 1; p < a.size(); ++p) {
      char c = a[p];
      if (flags.find(c) != std::string::npos) {
        switch (c) {
          case 'F': o.file_per_proc = true; break;
          case 'w': o.write = true; break;
          case 'r': o.read = true; break;
          case 'e': o.fsync = true; break;
          case 'C': o.reorder = true; break;
          case 'k': o.keep_file = true; break;
          case 'W': o.check_write = true; break;
          case 'R': o.check_read = true; break;
          case 'g': o.intra_barriers = true; break;
          case 'v': ++o.verbose; break;
          case 'h': o.help = true; return o;
        }
        continue;
      }
      if (valued.find(c) == std::string::npos) {
        return Status::InvalidArgument(std::string("unknown option -") + c + " (see --help)");
      }
      std::string opt = std::string("-") + c;
      std::string v = a.substr(p + 1);
      if (!v.empty() && v[0] == '=') v = v.substr(1);
      if (v.empty() && p + 1 == a.size()) {
        if (i + 1 >= args.size()) return Status::InvalidArgument(opt + " needs a value");
        v = args[++i];
      }
      switch (c) {
        case 'a':
          if (v != "POSIX" && v != "posix") {
            return Status::InvalidArgument("-a " + v + ": only the POSIX API is supported");
          }
          o.api = "POSIX";
          break;
        case 'b': { DLCKPT_ASSIGN_OR_RETURN(o.block_size, Size(opt, v)); break; }
        case 't': { DLCKPT_ASSIGN_OR_RETURN(o.transfer_size, Size(opt, v)); break; }
        case 's': { DLCKPT_ASSIGN_OR_RETURN(int64_t n, Int(opt, v, 1, int64_t{1} << 40)); o.segments = static_cast<uint64_t>(n); break; }
        case 'i': { DLCKPT_ASSIGN_OR_RETURN(int64_t n, Int(opt, v, 1, 1000000)); o.repetitions = static_cast<int>(n); break; }
        case 'Q': { DLCKPT_ASSIGN_OR_RETURN(int64_t n, Int(opt, v, 1, 1000000)); o.task_offset = static_cast<int>(n); break; }
        case 'd': { DLCKPT_ASSIGN_OR_RETURN(int64_t n, Int(opt, v, 0, 86400)); o.inter_test_delay = static_cast<int>(n); break; }
        case 'o':
          if (v.empty()) return Status::InvalidArgument("-o needs a file name");
          o.test_file = v;
          break;
        case 'O': DLCKPT_RETURN_IF_ERROR(ParseModuleOptions(v, &o)); break;
      }
      break;  // the value used the rest of this argument
    }
  }
  if (o.transfer_size == 0 || o.transfer_size % 8 != 0) {
    return Status::InvalidArgument("-t " + std::to_string(o.transfer_size) +
                                   ": the transfer size must be a positive multiple of 8 bytes");
  }
  if (o.block_size == 0 || o.block_size % o.transfer_size != 0) {
    return Status::InvalidArgument("-b " + std::to_string(o.block_size) +
                                   ": the block size must be a multiple of the transfer size (" +
                                   std::to_string(o.transfer_size) + ")");
  }
  if (o.block_size > (uint64_t{1} << 50) / o.segments) {
    return Status::InvalidArgument("-b x -s: too large");
  }
  if (!o.write && !o.read && !o.check_write && !o.check_read) o.write = o.read = true;
  return o;
}

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

Summary Summarize(const Options& o, const RunInfo& info, Access access) {
  Summary s;
  std::vector<double> bw, ops, times;
  for (const auto& p : info.phases) {
    if (p.access != access || p.total <= 0) continue;
    bw.push_back(static_cast<double>(p.agg_bytes) / p.total);
    ops.push_back(static_cast<double>(p.agg_bytes) / static_cast<double>(o.transfer_size) / p.total);
    times.push_back(p.total);
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

std::string KeyVal(const std::string& key, const std::string& value) {
  return Fmt("%-20s: ", key.c_str()) + value + "\n";
}

std::string TextReport(const Options& o, const RunInfo& info) {
  std::string out;
  out += std::string(kVersion) + ": MPI Coordinated Test of Parallel I/O\n";
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
  out += KeyVal("type", "independent");
  out += KeyVal("segments", std::to_string(o.segments));
  out += KeyVal("ordering in a file", "sequential");
  if (o.reorder) {
    out += KeyVal("ordering inter file", "constant task offset");
    out += KeyVal("task offset", std::to_string(o.task_offset));
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
    out += Fmt("%10s %13s ", "NA", "NA");
    out += Fmt("%5d %6d %3d %4d %3d %5d %8d %9d %4d ", 0, info.tasks, info.tasks_per_node, o.repetitions,
               o.file_per_proc ? 1 : 0, o.reorder ? 1 : 0, o.task_offset, 0, 0);
    out += Fmt("%6llu %8llu %8llu ", static_cast<unsigned long long>(o.segments),
               static_cast<unsigned long long>(o.block_size), static_cast<unsigned long long>(o.transfer_size));
    out += Fmt("%9.1f %3s %6d\n", static_cast<double>(AggregateBytes(o, info)) / kMiB, o.api.c_str(), 0);
  }
  out += KeyVal("Finished", info.finished);
  return out;
}

// ---- JSON ----

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += Fmt("\\u%04x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
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
  j.Str("Version", kVersion);
  j.Str("Began", info.began);
  j.Str("Command line", info.command_line);
  j.Str("Machine", info.machine);
  j.Open("tests", '[');
  j.Open("", '{');
  j.Int("TestID", 0);
  j.Str("StartTime", info.start_time);
  j.Str("Path", info.path);
  if (!info.fs_line.empty()) j.Str("FS", info.fs_line);
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
  j.Int("dlckptCheckpoint", o.dlckpt_checkpoint);
  j.Close('}');
  j.Open("Options", '{');
  j.Str("api", o.api);
  j.Str("apiVersion", "");
  j.Str("test filename", o.test_file);
  j.Str("access", o.file_per_proc ? "file-per-process" : "single-shared-file");
  j.Str("type", "independent");
  j.Int("segments", static_cast<long long>(o.segments));
  j.Str("ordering in a file", "sequential");
  j.Str("ordering inter file", o.reorder ? "constant task offset" : "no tasks offsets");
  if (o.reorder) j.Int("task offset", o.task_offset);
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
    j.Int("reorderTasksRandom", 0);
    j.Int("reorderTasksRandomSeed", 0);
    j.Dbl("bwMaxMIB", s.bw_max / kMiB);
    j.Dbl("bwMinMIB", s.bw_min / kMiB);
    j.Dbl("bwMeanMIB", s.bw_mean / kMiB);
    j.Dbl("bwStdMIB", s.bw_sd / kMiB);
    j.Dbl("OPsMax", s.ops_max);
    j.Dbl("OPsMin", s.ops_min);
    j.Dbl("OPsMean", s.ops_mean);
    j.Dbl("OPsSD", s.ops_sd);
    j.Dbl("MeanTime", s.mean_time);
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

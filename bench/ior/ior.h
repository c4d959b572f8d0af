// ior.h — dlckpt-ior: IOR's command line (POSIX subset) and output formats,
// so that figures measured into /dlckpt can be set beside IOR figures.
//
// This header holds what is pure computation and therefore unit-tested: the
// option parser, the per-iteration timer reduction and the text and JSON
// reports. The MPI driver (ior_main.cc) does the I/O and calls these.
//
// Output follows IOR 3.3's default format (the header block, "Options:", the
// per-iteration "Results:" table, "Max Write: X MiB/sec (Y MB/sec)",
// "Summary of all tests:" and "Finished") and, with -O summaryFormat=JSON,
// IOR's JSON document (keys "tests", "Results", "max", "summary"). It was
// reproduced from IOR's documentation and published outputs; no IOR code is
// used. Thread safety: plain values and pure functions.
#ifndef DLCKPT_BENCH_IOR_H_
#define DLCKPT_BENCH_IOR_H_

#include <array>
#include <cstdint>
#include <ctime>
#include <span>
#include <string>
#include <vector>

#include "dlckpt/base/status.h"

namespace dlckpt::ior {

inline constexpr char kVersion[] = "dlckpt-ior 0.1.0 (IOR-3.3.0 format)";

enum class Format { kDefault, kJson };

struct Options {
  std::string api = "POSIX";          // -a (only POSIX)
  uint64_t block_size = 1ull << 20;   // -b bytes per task per segment
  uint64_t transfer_size = 256 << 10; // -t bytes per I/O call
  uint64_t segments = 1;              // -s
  bool file_per_proc = false;         // -F
  bool write = false;                 // -w
  bool read = false;                  // -r
  bool fsync = false;                 // -e fsync before close (in close time)
  bool reorder = false;               // -C read another node's data
  int task_offset = 1;                // -Q nodes to shift by with -C
  int repetitions = 1;                // -i
  std::string test_file = "testFile"; // -o
  bool keep_file = false;             // -k
  bool check_write = false;           // -W verify after write (untimed)
  bool check_read = false;            // -R verify after read (untimed)
  bool intra_barriers = false;        // -g barriers between open, transfer, close
  int inter_test_delay = 0;           // -d seconds before each phase
  int verbose = 0;                    // -v (repeatable)
  Format format = Format::kDefault;   // -O summaryFormat=default|JSON
  std::string summary_file;           // -O summaryFile=PATH ("" = stdout)
  // --dlckpt.checkpoint: under /dlckpt, every write phase ends with the
  // collective dlckpt_checkpoint() (commit, encode onto the spares under
  // dlckpt-run, acknowledge), timed as part of close(s): a dlckpt checkpoint
  // is write + encode, as -e makes a disk write durable.
  bool dlckpt_checkpoint = false;
  bool help = false;
};

// Parses the arguments after argv[0]. Accepts "-b 16m", "-b16m" and "-b=16m",
// bundled flags ("-wrFe"), sizes with k/m/g (binary). InvalidArgument naming
// the option on anything unknown, malformed or inconsistent (IOR's rules: the
// transfer size divides the block size and is a multiple of 8 bytes).
Result<Options> ParseOptions(std::span<const std::string> args);
std::string UsageText();

// IOR's HumanReadable(BASE_TWO): "1 MiB", "1.50 GiB", "262144 bytes".
std::string HumanReadable(uint64_t bytes);
// IOR's pretty-printed double: width 10, left-justified, 6 decimals below 1,
// 2 below 3600, none above; negative prints "-". Followed by one space.
std::string PrettyDouble(double v);

enum class Access { kWrite, kRead };

// One rank's six timestamps of one phase (seconds, MPI_Wtime): open start,
// open end, transfer start, transfer end, close start, close end.
using Timers = std::array<double, 6>;

// The phase as IOR reports it, from the minimum of every start and the
// maximum of every end over the ranks.
struct PhaseResult {
  Access access = Access::kWrite;
  int iteration = 0;
  double open = 0, xfer = 0, close = 0, total = 0;  // seconds
  double bw = 0;        // bytes/s: aggregate bytes / total
  double iops = 0;      // transfers / xfer (first start to last end)
  double latency = 0;   // smallest per-rank mean time per transfer
  uint64_t agg_bytes = 0;
};

// `reduced`: the timers reduced over the ranks (indexes 0, 2, 4 the minima,
// 1, 3, 5 the maxima); `min_latency` already reduced (MPI_MIN).
PhaseResult Reduce(Access access, int iteration, const Timers& reduced, double min_latency,
                   uint64_t agg_bytes, uint64_t transfer_size);

struct RemoveResult {
  int iteration = 0;
  double seconds = 0;
};

// What the report needs besides the options.
struct RunInfo {
  std::string command_line;   // argv joined by spaces
  std::string machine;        // "Linux <nodename>"
  std::string began, start_time, finished;  // IOR's time strings
  std::string path;           // rank 0's file
  std::string fs_line;        // "80.0 GiB   Used FS: 18.2%   Inodes: ..." or ""
  std::string target;         // "memfs (libintercept, store ...)" / "OS (ext4)"
  int tasks = 1;
  int nodes = 1;
  int tasks_per_node = 1;
  std::vector<PhaseResult> phases;   // in execution order
  std::vector<RemoveResult> removes;
};

// IOR's "ctime" string without the newline: "Tue May  9 12:14:07 2023".
std::string TimeString(time_t t);
// IOR's FS line for a statvfs-like description.
std::string FsLine(uint64_t total_bytes, uint64_t free_bytes, uint64_t total_inodes,
                   uint64_t free_inodes);

// The whole report in the chosen format.
std::string FormatReport(const Options& o, const RunInfo& info);

// Summary statistics of one operation over the iterations (bytes/s, ops/s,
// seconds), as in "Summary of all tests".
struct Summary {
  double bw_max = 0, bw_min = 0, bw_mean = 0, bw_sd = 0;
  double ops_max = 0, ops_min = 0, ops_mean = 0, ops_sd = 0;
  double mean_time = 0;
  int count = 0;
};
Summary Summarize(const Options& o, const RunInfo& info, Access access);

}  // namespace dlckpt::ior

#endif  // DLCKPT_BENCH_IOR_H_

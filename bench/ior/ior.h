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

inline constexpr char kVersion[] = "dlckpt-ior 0.2.0 (IOR-3.3.0 format)";
// IOR's version field: the banner line is "IOR-<this>: MPI Coordinated Test
// of Parallel I/O", as IOR prints it, so that tools that look for "^IOR-"
// find it; the "+dlckpt" suffix (IOR's form for builds of IOR's own
// branches, "+dev") says which program wrote it.
inline constexpr char kIorVersion[] = "3.3.0+dlckpt";

enum class Format { kDefault, kJson };

// -l: what the data of every transfer holds (all verifiable by -W/-R).
//  kGeneric: dlckpt-ior's default, pseudo-random words with the first word
//            of each transfer replaced by its file offset;
//  kOffset: every 8-byte word holds its own file offset;
//  kIncompressible: pseudo-random words, no offsets (LZ4 cannot shrink it);
//  kTimestamp: every word holds the run's timestamp signature (rank 0's
//            start time, seconds) in the high 32 bits and the writer's rank
//            in the low 32 bits.
enum class DataPacket { kGeneric, kOffset, kIncompressible, kTimestamp };

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
  // IOR options added for issue 21 (see UsageText):
  bool random_offset = false;          // -z transfers in a random order
  int deadline = 0;                    // -D stonewalling: seconds per phase (0 = none)
  bool wear_out = false;               // -O stoneWallingWearOut=1 (needs -D)
  bool multi_file = false;             // -m a new file per repetition (name.<rep>)
  bool fsync_per_write = false;        // -Y fsync after every transfer (timed)
  bool use_existing = false;           // -E write into existing file(s), no O_CREAT
  bool unique_dir = false;             // -u file per process in DIR/<rank>/ (needs -F)
  bool single_xfer = false;            // -x one attempt per transfer: short = error
  bool quit_on_error = false;          // -q stop at the first data check error
  DataPacket packet = DataPacket::kGeneric;  // -l
  bool collective = false;             // -c accepted; POSIX has no collective I/O
  bool reorder_random = false;         // -Z read a random other node's data
  int random_seed = 0;                 // -X seed of -Z (and of -z)
  std::string script;                  // -f the script file read, "" = none
  bool help = false;
};

// Parses the arguments after argv[0]. Accepts "-b 16m", "-b16m" and "-b=16m",
// bundled flags ("-wrFe"), sizes with k/m/g (binary). InvalidArgument naming
// the option on anything unknown, malformed or inconsistent (IOR's rules: the
// transfer size divides the block size and is a multiple of 8 bytes). -f
// reads the script file at its place on the command line (options after it
// override the script's); an unreadable script is an error naming the path
// and errno. (ior_options.cc)
Result<Options> ParseOptions(std::span<const std::string> args);
std::string UsageText();

// Applies one IOR directive "key=value" (IOR's long option names, case-
// insensitive: blockSize, transferSize, segmentCount, filePerProc, ...,
// stoneWallingWearOut, summaryFormat, summaryFile) to *o, as -O and script
// lines do. `where` names the source in errors ("-O", "script:3").
Status ApplyDirective(const std::string& item, const std::string& where, Options* o);

// Applies an IOR script (-f): lines up to "IOR START" are skipped; then
// "key=value" directives (several per line, comma-separated), blank lines and
// '#' comments, at most one "RUN", up to "IOR STOP". A script with more than
// one test (directives after a RUN) is refused: dlckpt-ior runs one test per
// invocation. `name` names the file in errors.
Status ApplyScript(const std::string& text, const std::string& name, Options* o);

// The order in which a rank issues its `count` transfers: 0..count-1, or with
// `random` a permutation drawn from `seed` (the same on every rank for the
// same seed, as IOR's -z shares one seed).
std::vector<uint64_t> TransferOrder(uint64_t count, bool random, uint64_t seed);

// -Z: the rank whose data `rank` reads: on a node drawn at random among the
// nodes at least `task_offset` nodes away (ranks are placed node by node,
// `tasks_per_node` each), the task at the same place on that node. Returns
// `rank` when there is no such node (one node, or task_offset >= nodes).
int RandomReadOwner(int rank, int tasks, int tasks_per_node, int task_offset, uint64_t seed);

// Fills the words of the transfer at file offset `offset` of `owner`'s data
// in repetition `rep` with the -l pattern; `signature` is kTimestamp's.
void FillTransfer(DataPacket packet, int owner, int rep, uint64_t offset, uint32_t signature,
                  std::span<uint64_t> words);
const char* DataPacketName(DataPacket p);  // "g", "o", "i", "t" as IOR prints them

// IOR's HumanReadable(BASE_TWO): "1 MiB", "1.50 GiB", "262144 bytes".
std::string HumanReadable(uint64_t bytes);
// IOR's pretty-printed double: width 10, left-justified, 6 decimals below 1,
// 2 below 3600, none above; negative prints "-". Followed by one space.
std::string PrettyDouble(double v);

enum class Access { kWrite, kRead };

// A file system's size for the "FS" line and IOR's JSON keys.
struct FsStats {
  bool valid = false;
  uint64_t total_bytes = 0, free_bytes = 0, total_inodes = 0, free_inodes = 0;
};

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
  uint64_t agg_bytes = 0;   // bytes moved by all ranks (less than planned if stonewalled)
  // -D: the transfers ("pairs") each rank had done at the deadline, their
  // minimum and maximum over the ranks and sum; the deadline's time after the
  // phase's start (0: not stonewalled).
  bool stonewalled = false;
  uint64_t pairs_min = 0, pairs_max = 0, pairs_sum = 0;
  double stonewall_time = 0;
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
  FsStats fs;                 // the same as numbers (JSON); fs.valid false: none
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
// IOR's JSON strings of the same: "Capacity" ("80.0 GiB"), "Used Capacity"
// ("18.2%"), "Inodes" ("5.0 Mi"), "Used Inodes" ("2.3%").
struct FsStrings {
  std::string capacity, used_capacity, inodes, used_inodes;
};
FsStrings FsJson(const FsStats& fs);

// The whole report in the chosen format.
std::string FormatReport(const Options& o, const RunInfo& info);

// Summary statistics of one operation over the iterations (bytes/s, ops/s,
// seconds), as in "Summary of all tests".
struct Summary {
  double bw_max = 0, bw_min = 0, bw_mean = 0, bw_sd = 0;
  double ops_max = 0, ops_min = 0, ops_mean = 0, ops_sd = 0;
  double mean_time = 0;
  int count = 0;
  // Stonewalled phases (-D) among them: the mean deadline time and the mean
  // data all ranks had moved by then (bytes).
  int stonewall_count = 0;
  double stonewall_time = 0, stonewall_bytes = 0;
};
Summary Summarize(const Options& o, const RunInfo& info, Access access);

}  // namespace dlckpt::ior

#endif  // DLCKPT_BENCH_IOR_H_

// Options of dlckpt-run and their parsing (separate from main so tests can
// call it). Not thread-safe; plain values.
#ifndef DLCKPT_COORDINATOR_RUN_OPTIONS_H_
#define DLCKPT_COORDINATOR_RUN_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "dlckpt/base/status.h"
#include "dlckpt/base/version.h"

namespace dlckpt::run {

// When to kill a node: after a checkpoint, at a time, or in a phase.
struct KillTrigger {
  enum Kind { kCheckpoint, kCommit, kTime, kWrite, kEncode, kRecover, kDrain } kind = kTime;
  uint64_t epoch = 0;    // checkpoint:E, commit:E, drain:E, phase:write:E, phase:encode:E (0: the first one)
  double seconds = 0;    // time:T
  double delay = 0;      // "+D": seconds after the trigger
  int occurrence = 1;    // phase:recover:N
};

struct KillSpec {
  std::vector<std::string> nodes;  // nodes to kill, or ranks (as text) to crash
  bool ranks = false;              // --crash-rank: kill application processes only
  bool poweroff = false;           // --poweroff-node: silence first, then kill (see KillNodes)
  KillTrigger at;
  std::string text;  // as given, for messages
};

struct Options {
  int nodes = 2;
  int ranks_per_node = 1;
  int spares = 1;
  int group_size = 0;        // 0: all data nodes in one group
  int spares_per_group = 0;  // 0: 1 for xor, 2 for rs
  std::string scheme;        // "" → from spares_per_group
  std::string parity = "auto";  // "spares", "spread" or "auto": where parity lives (codec --parity)
  std::string on_spares_exhausted = "continue";  // or "halt": no spare to host lost ranks
  std::string job;
  std::string run_dir;
  uint64_t capacity = 256ull << 20;
  uint32_t max_files = 0;        // --max-files: file table entries per store (DLCKPT_MAX_FILES of
                                 // the ranks); 0: memfs's default for the capacity
  std::string config;            // the configuration file read ("" = none)
  std::string veloc_config;      // --veloc-config: VeloC's configuration file read ("" = none)
  // Lines for stderr (dlckpt-run prints them before the run): settings read
  // and ignored, each with why (a VeloC configuration file's keys).
  std::vector<std::string> notes;
  std::string encode = "sync";  // "sync" or "async": DLCKPT_ENCODE of the ranks
  int codec_nice = -1;          // --codec-nice; -1: 0 for sync, 10 for async
  std::string compress;  // "" (the environment decides), "none" or "lz4": DLCKPT_COMPRESS of the ranks
  std::vector<std::string> hosts;  // real or virtual hosts instead of virtual nodes;
                                   // {"slurm"}: the allocation's, resolved at setup
  std::string node_prefix = "vn";
  std::string launcher_exec;
  std::string kill_command;
  std::string mpiexec = DLCKPT_MPIEXEC;  // the launcher of the MPI dlckpt was built with
  std::vector<std::string> mpiexec_args;  // --mpiexec-args, split on white space
  std::string mpi_flavor = DLCKPT_MPI_FLAVOR;  // "mpich" or "openmpi": the dialect of --mpiexec
  std::string launcher = "mpiexec";       // "mpiexec" (the MPI's own: Hydra's mpiexec or Open MPI's
                                          // mpirun) or "srun" (Slurm)
  std::string srun = "srun";
  std::vector<std::string> srun_args;     // --srun-args, split on white space
  std::vector<KillSpec> kills;
  double mtbf = 0;
  double weibull_shape = 1;
  int max_failures = 1;
  uint64_t seed = 1;
  int max_recoveries = 5;
  double timeout = 0;
  double detect_timeout = 30;      // seconds to wait for both jobs to end after a failure
  double heartbeat_timeout = 1.5;  // seconds of silence before a node is declared lost
  std::string heartbeat_address;   // where codec processes send heartbeats ("" = guess)
  std::string codec;
  bool preload = false;
  bool keep = false;
  bool resume = false;             // the first launch may resume the job's stores
  bool oversubscribe = false;      // skip CheckMachineLimits
  double term_grace = 1;           // on SIGTERM/SIGINT/SIGHUP: seconds between the jobs' SIGTERM and SIGKILL
  bool verbose = false;
  // The second level (dlckpt/persist/persist.h): drains to a persistent file system.
  std::string persist;              // --persist DIR; "" = none
  int persist_every = 10;           // drain epochs E with E % N == 0
  int persist_keep = 2;             // complete drained epochs kept
  uint64_t persist_bandwidth = 0;   // bytes per second per rank; 0 = unlimited
  std::string restart_from;         // --restart-from DIR: the first launch restores from it
  double halt_seconds = 0;          // drain and stop after this long (0 = never)
  std::vector<std::string> program;  // after "--"
  // --halt JOB: no run; ask the running dlckpt-run of job JOB (found through
  // its run directory, --run-dir or /tmp/dlckpt-run.JOB) to halt (HaltJob).
  std::string halt;
};

// Bound of --max-files, as the preload's DLCKPT_MAX_FILES and dlckpt-fuse's.
inline constexpr uint32_t kMaxMaxFiles = 1u << 20;

// Bounds of --capacity (bytes per store): at least one memfs block's worth of
// room to work in, at most what any machine here could hold in memory.
inline constexpr uint64_t kMinCapacity = 1ull << 20;  // 1 MiB
inline constexpr uint64_t kMaxCapacity = 1ull << 40;  // 1 TiB

// Parses argv (through CLI11). Returns EINVAL with a message for bad input
// (for an unknown option, with the closest known one: "unknown option --node;
// did you mean --nodes?"); sets *help when --help was given. Pure: looks at
// nothing but argv, the environment and the configuration file (see
// CheckMachineLimits).
Result<Options> ParseOptions(int argc, char** argv, bool* help);

// Where options come from, lowest precedence first: the defaults; the
// configuration file (--config FILE, else $DLCKPT_CONFIG); VeloC's
// configuration file (--veloc-config FILE, else $DLCKPT_VELOC_CONFIG, else
// the configuration file's veloc-config; VelocConfigTokens); the environment
// (EnvOptions); the command line. A later source overrides a value; flags
// and --kill-node/--at pairs add up. `argv` excludes the program name; `env`
// looks a variable up (null: unset).
using EnvFn = std::function<const char*(const char*)>;
Result<Options> ParseOptions(const std::vector<std::string>& argv, bool* help, const EnvFn& env);

// The environment variable of each option that has one ("DLCKPT_NODES" ->
// "nodes", "DLCKPT_STORE_CAPACITY" -> "capacity", ...). Failure injection
// (--kill-node, --at, --mtbf, ...) has none.
const std::vector<std::pair<std::string, std::string>>& EnvOptions();

// A configuration file's text as option tokens: one option per line, "name
// value", "name = value" or a flag's name alone ("keep", or "keep = false"),
// with the long option's name without "--"; '#' starts a comment. Errors name
// path:line (an unknown name with the closest known option).
Result<std::vector<std::string>> ConfigTokens(const std::string& path, const std::string& text);

// VeloC's configuration file (`text`, read from `path`) as dlckpt-run option
// tokens (veloc/README.md has the table): persistent -> --persist DIR (not
// when persistent_interval = -1, which turns VeloC's flushes off);
// persistent_interval = 0 (flush every checkpoint) -> --persist-every 1;
// max_versions = N > 0 -> --persist-keep N; mode -> --encode. The keys with
// no dlckpt meaning, and values that cannot be mapped (an interval in
// seconds), each give one line in *notes: "VeloC configuration file
// PATH:LINE: KEY = VALUE is ignored by dlckpt: WHY (veloc/README.md)"; scratch (VELOC_Init's) and
// ec_interval = 0 (what dlckpt always does) give none. Errors name PATH:LINE
// (a line that is not "key = value", an interval that is not an integer of
// at least -1, max_versions below 0). Values are checked where the tokens
// are applied (a mode but sync or async).
struct VelocToken {
  size_t line = 0;                  // of the key in `path`
  std::vector<std::string> tokens;  // one option and its value
};
Result<std::vector<VelocToken>> VelocConfigTokens(const std::string& path, const std::string& text,
                                                  std::vector<std::string>* notes);

// What this machine can run, for CheckMachineLimits.
struct MachineLimits {
  long online_cpus = 1;          // sysconf(_SC_NPROCESSORS_ONLN)
  uint64_t max_processes = 0;    // RLIMIT_NPROC when it applies (not root, finite); 0: no limit
  uint64_t shm_bytes = 0;        // size of the /dev/shm file system; 0: unknown
};
inline constexpr int kProcessesPerCpu = 64;
// The codec's nice value under --encode async when --codec-nice is not given
// (bench/README.md, "Asynchronous encode", has the measurement behind it).
inline constexpr int kAsyncCodecNice = 10;
// Reads the limits of the calling process's machine (sysconf, getrlimit, statvfs).
MachineLimits ThisMachine();
// With virtual nodes (no --hosts) every process of both jobs runs on this
// machine: nodes x ranks-per-node application ranks plus one codec process per
// node (data and spare). Refuses (EINVAL, with the numbers) more of them than
// kProcessesPerCpu x online CPUs or than RLIMIT_NPROC, and stores (data ranks x
// --capacity, pre-faulted) larger than /dev/shm. OK with --oversubscribe or
// --hosts (the processes then spread over hosts this machine cannot see).
Status CheckMachineLimits(const Options& o, const MachineLimits& m);
Result<KillTrigger> ParseTrigger(const std::string& text);
// The text of --help: every option by group (generated by CLI11 from the
// options ParseOptions knows), where options come from, the exit statuses.
std::string Usage();

}  // namespace dlckpt::run

#endif  // DLCKPT_COORDINATOR_RUN_OPTIONS_H_

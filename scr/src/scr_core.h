// The parts of the SCR API that need neither MPI nor a store, so that unit
// tests reach them: configuration parameters, the SCR_Need_checkpoint policy,
// path normalisation and the dataset record kept beside a checkpoint.
#ifndef DLCKPT_SCR_SRC_SCR_CORE_H_
#define DLCKPT_SCR_SRC_SCR_CORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlckpt/base/status.h"
#include "dlckpt/base/strings.h"

namespace dlckpt::scr {

// --- messages

// How much of an argument (a file or dataset name, a parameter) a message
// quotes.
inline constexpr size_t kShownBytes = 200;
// `text` as a message quotes it: whole if it has at most kShownBytes bytes,
// else its first kShownBytes bytes and "... (N bytes)", so that an argument
// of any size gives a message of bounded size. Every message of the SCR layer
// that repeats an argument quotes it through Shown.
std::string Shown(std::string_view text);

// --- configuration

// One SCR_Config request: "KEY=VALUE" (set), "KEY=" (unset) or "KEY" (get).
// A multi-item descriptor ("CKPT=0 TYPE=XOR SET_SIZE=8") is a set of its
// first key with the whole text as value; "CKPT=0 TYPE" is a get of the
// sub-key TYPE of that descriptor. Keys are case-insensitive (upper-cased).
struct ConfigOp {
  enum Kind { kSet, kUnset, kGet } kind = kGet;
  std::string key;
  std::string value;      // kSet: the value
  std::string sub_key;    // kGet of a descriptor's item ("" otherwise)
};
// InvalidArgument for an empty request, a key with characters outside
// [A-Za-z0-9_], or an item without '=' other than the last.
Result<ConfigOp> ParseConfig(std::string_view text);

// Parameter values from three sources, first match wins: the environment
// (through `getenv`, replaceable for tests), values set with SCR_Config,
// then a configuration file (SCR_CONF_FILE: KEY=VALUE lines, '#' comments).
class Config {
 public:
  using GetEnv = std::function<const char*(const char*)>;
  explicit Config(GetEnv getenv);
  Config();  // the process environment

  void Set(const std::string& key, std::string value);
  void Unset(const std::string& key);
  // The value SCR_Config set, if any (not the environment's).
  const std::string* AppValue(const std::string& key) const;
  // The effective value.
  std::optional<std::string> Get(const std::string& key) const;
  // Reads `path` into the file layer. NotFound if it does not exist. Never
  // blocks and never reads without bound: anything but a regular file (a
  // FIFO, a device, a directory) is refused, and so is a file larger than
  // kMaxConfigBytes (Env::ReadFile).
  static constexpr size_t kMaxConfigBytes = size_t{1} << 20;
  Status LoadFile(const std::string& path);
  // Where the effective value comes from (kNone: not set).
  enum class Source { kNone, kEnvironment, kApplication, kFile };
  Source From(const std::string& key) const;
  // Typed views of Get; InvalidArgument naming the key for a malformed value.
  Result<long> Int(const std::string& key, long dflt) const;
  Result<double> Double(const std::string& key, double dflt) const;

 private:
  GetEnv getenv_;
  std::map<std::string, std::string> app_;
  std::map<std::string, std::string> file_;
};

// --- parameters dlckpt does not take from the application

// One line each (no trailing newline) for the parameters of `c` that the
// application cannot change under dlckpt, in a fixed order:
//  - the job layout and the flush (SCR_SET_SIZE, SCR_SET_FAILURES,
//    SCR_COPY_TYPE, SCR_FLUSH) when set by SCR_Config or SCR_CONF_FILE: each
//    names the dlckpt-run option it maps to (dlckpt-run reads them from the
//    job's environment, where they say nothing here);
//  - every parameter of IgnoredParameters() set from any source.
// Each line starts with the parameter's name. SCR_Init prints them on rank 0.
std::vector<std::string> ParameterNotes(const Config& c);
// The parameters (and descriptor keys) accepted and ignored, with why; each
// is listed in scr/README.md.
using IgnoredParameter = IgnoredSetting;  // dlckpt/base/strings.h
const std::vector<IgnoredParameter>& IgnoredParameters();

// --- SCR_Need_checkpoint

struct CheckpointPolicy {
  long interval = 0;         // SCR_CHECKPOINT_INTERVAL: every N-th call (0: off)
  double seconds = 0;        // SCR_CHECKPOINT_SECONDS: at least this long after the last one
  double overhead = 0;       // SCR_CHECKPOINT_OVERHEAD: percent of run time spent checkpointing
};

// The decision of SCR_Need_checkpoint from the calls, the clock and the cost
// of past checkpoints (times in seconds, any origin). With no parameter set
// every call says yes (as SCR does). Otherwise yes if any set criterion
// holds: `interval` calls since the last checkpoint; `seconds` since the last
// one ended (or since the start); the average checkpoint cost over (the time
// since the last one + that cost) within `overhead` percent (yes while no
// checkpoint has been timed).
class NeedCheckpoint {
 public:
  NeedCheckpoint(CheckpointPolicy policy, double now);
  bool Ask(double now);          // one SCR_Need_checkpoint call
  void Started(double now);      // SCR_Start_output of a checkpoint
  void Completed(double now);    // its SCR_Complete_output (kept or not)
  const CheckpointPolicy& policy() const { return policy_; }

 private:
  CheckpointPolicy policy_;
  long calls_ = 0;
  double last_end_;
  double started_ = -1;
  double total_cost_ = 0;
  long timed_ = 0;
};

// --- paths

// The absolute, lexically normalised form of `name` ("//", "/./", "/../"
// resolved; a trailing "/" dropped) relative to `base` (absolute). Fails
// (InvalidArgument) for an empty name, a name with a newline, one that
// resolves to "/", or a result of SCR_MAX_FILENAME bytes or more.
Result<std::string> NormalizePath(std::string_view name, std::string_view base);
// The last component of a normalised path.
std::string_view BaseName(std::string_view path);

// --- the dataset record

// What a rank keeps beside its files of a checkpoint: the dataset's id, name
// and flags, and the (normalised) names of the files it wrote.
struct Dataset {
  uint64_t id = 0;
  std::string name;
  int flags = 0;
  std::vector<std::string> files;
};
std::string SerializeDataset(const Dataset& d);
// Corruption for anything SerializeDataset did not write.
Result<Dataset> ParseDataset(std::string_view text);
// The name SCR_Start_output(NULL, ...) gives dataset `id`.
std::string DefaultDatasetName(uint64_t id);
// The file of `d` that a restart's SCR_Route_file designates, given its
// normalised name `normalized`: that file if listed; else, as SCR 3.1 matches a restart
// file, the one file of `d` whose last component equals the last component of
// `normalized`, whatever the directory part ("scr.dataset.1/rank_00000.ckpt" finds
// "/work/ckpt.4/rank_00000.ckpt"). "" if none matches, or several do and none
// exactly (*ambiguous is then set, when given).
std::string FindFile(const Dataset& d, const std::string& normalized, bool* ambiguous = nullptr);

}  // namespace dlckpt::scr

#endif  // DLCKPT_SCR_SRC_SCR_CORE_H_

// ior_options.cc — dlckpt-ior's command line, IOR directives (-O, -f
// scripts), and the pure helpers of the options that change the I/O: the
// transfer order (-z), the reader's data owner (-Z) and the data patterns
// (-l). See ior.h. Written from IOR's documentation; no IOR code is used.
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <utility>

#include "dlckpt/base/cli.h"
#include "dlckpt/base/units.h"
#include "ior.h"

#include "../bench_mix.h"

namespace dlckpt::ior {

namespace {

// The pseudo-random words of the patterns.
using bench::Mix;

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

Result<bool> Bool(const std::string& opt, const std::string& v) {
  DLCKPT_ASSIGN_OR_RETURN(int64_t n, Int(opt, v, 0, 1));
  return n != 0;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  size_t b = s.find_last_not_of(" \t\r\n");
  return s.substr(a, b - a + 1);
}

Result<DataPacket> Packet(const std::string& opt, const std::string& v) {
  std::string l = Lower(v);
  if (l == "g" || l == "generic") return DataPacket::kGeneric;
  if (l == "o" || l == "offset") return DataPacket::kOffset;
  if (l == "i" || l == "incompressible") return DataPacket::kIncompressible;
  if (l == "t" || l == "timestamp") return DataPacket::kTimestamp;
  return Status::InvalidArgument(opt + " " + v + ": supported data packet types are offset (o), incompressible (i), "
                                 "timestamp (t) and generic (g, the default)");
}

// Options IOR has that dlckpt-ior does not implement, and why (named in the
// error, so that a user's IOR command line fails with a reason).
const char* Unsupported(char c) {
  switch (c) {
    case 'A': return "test reference numbers (-A) are not kept";
    case 'B': return "O_DIRECT (-B) is not supported: /dlckpt is memory, and the baselines use the page cache";
    case 'G': return "-G (timestamp signature) is not settable: -l timestamp uses rank 0's start time";
    case 'H': return "-H (show hints) applies to MPIIO hints; only the POSIX API is supported";
    case 'I': return "-I (individual data sets) applies to HDF5; only the POSIX API is supported";
    case 'j': return "-j (outlier threshold) is not implemented";
    case 'J': return "-J (alignment) applies to MPIIO/HDF5; only the POSIX API is supported";
    case 'K': return "-K (keep file with error) is not implemented: use -k";
    case 'n': return "-n (no fill) applies to HDF5; only the POSIX API is supported";
    case 'N': return "-N (number of tasks) is not supported: give mpiexec -n";
    case 'p': return "-p (preallocate) applies to MPIIO; only the POSIX API is supported";
    case 'P': return "-P (shared file pointer) applies to MPIIO; only the POSIX API is supported";
    case 'S': return "-S (strided datatype) applies to MPIIO; only the POSIX API is supported";
    case 'T': return "-T (maximum time per test) is not implemented: use -D (stonewalling) to bound a phase";
    case 'U': return "-U (hints file) applies to MPIIO; only the POSIX API is supported";
    case 'V': return "-V (file view) applies to MPIIO; only the POSIX API is supported";
    default: return nullptr;
  }
}

// Applies the value of one short option with an argument.
Status ApplyValued(char c, const std::string& v, Options* o) {
  std::string opt = std::string("-") + c;
  switch (c) {
    case 'a':
      if (v != "POSIX" && v != "posix") {
        return Status::InvalidArgument("-a " + v + ": only the POSIX API is supported");
      }
      o->api = "POSIX";
      return Status::OK();
    case 'b': { DLCKPT_ASSIGN_OR_RETURN(o->block_size, Size(opt, v)); return Status::OK(); }
    case 't': { DLCKPT_ASSIGN_OR_RETURN(o->transfer_size, Size(opt, v)); return Status::OK(); }
    case 's': { DLCKPT_ASSIGN_OR_RETURN(int64_t n, Int(opt, v, 1, int64_t{1} << 40)); o->segments = static_cast<uint64_t>(n); return Status::OK(); }
    case 'i': { DLCKPT_ASSIGN_OR_RETURN(int64_t n, Int(opt, v, 1, 1000000)); o->repetitions = static_cast<int>(n); return Status::OK(); }
    case 'Q': { DLCKPT_ASSIGN_OR_RETURN(int64_t n, Int(opt, v, 1, 1000000)); o->task_offset = static_cast<int>(n); return Status::OK(); }
    case 'd': { DLCKPT_ASSIGN_OR_RETURN(int64_t n, Int(opt, v, 0, 86400)); o->inter_test_delay = static_cast<int>(n); return Status::OK(); }
    case 'D': { DLCKPT_ASSIGN_OR_RETURN(int64_t n, Int(opt, v, 0, 86400)); o->deadline = static_cast<int>(n); return Status::OK(); }
    case 'X': { DLCKPT_ASSIGN_OR_RETURN(int64_t n, Int(opt, v, -2147483647, 2147483647)); o->random_seed = static_cast<int>(n); return Status::OK(); }
    case 'l': { DLCKPT_ASSIGN_OR_RETURN(o->packet, Packet(opt, v)); return Status::OK(); }
    case 'o':
      if (v.empty()) return Status::InvalidArgument("-o needs a file name");
      o->test_file = v;
      return Status::OK();
    case 'O': {
      std::istringstream is(v);
      std::string item;
      while (std::getline(is, item, ',')) DLCKPT_RETURN_IF_ERROR(ApplyDirective(item, "-O", o));
      return Status::OK();
    }
    case 'f': {
      std::ifstream in(v);
      if (!in) {
        int e = errno ? errno : ENOENT;
        return Status::FromErrno(e, "-f " + v + ": cannot read the script");
      }
      std::stringstream text;
      text << in.rdbuf();
      DLCKPT_RETURN_IF_ERROR(ApplyScript(text.str(), v, o));
      o->script = v;
      return Status::OK();
    }
  }
  return Status::InvalidArgument(opt + ": internal error (no handler)");
}

// The -O / script directives (keys in lower case) that give the value of
// one of the command line's options.
struct ValuedDirective {
  std::string_view key;
  char option;
};
constexpr ValuedDirective kValuedDirectives[] = {
    {"api", 'a'},
    {"testfile", 'o'},
    {"blocksize", 'b'},
    {"transfersize", 't'},
    {"segmentcount", 's'},
    {"repetitions", 'i'},
    {"tasknodeoffset", 'Q'},
    {"taskpernodeoffset", 'Q'},
    {"intertestdelay", 'd'},
    {"deadlineforstonewalling", 'D'},
    {"reordertasksrandomseed", 'X'},
    {"datapackettype", 'l'},
};

// The options without a value: the letter of the command line's -X (0 for
// none) and the key of the -O / script directive (lower case), which sets
// the field to its value (as Bool takes it), where -X sets it to true.
struct BoolOption {
  char letter;
  std::string_view key;
  bool Options::*field;
};
constexpr BoolOption kBoolOptions[] = {
    // The phases and their checks.
    {'w', "writefile", &Options::write}, {'r', "readfile", &Options::read},
    {'W', "checkwrite", &Options::check_write}, {'R', "checkread", &Options::check_read},
    {'q', "quitonerror", &Options::quit_on_error},
    // The files.
    {'F', "fileperproc", &Options::file_per_proc}, {'m', "multifile", &Options::multi_file},
    {'u', "uniquedir", &Options::unique_dir}, {'E', "useexistingtestfile", &Options::use_existing},
    {'k', "keepfile", &Options::keep_file},
    // The transfers.
    {'e', "fsync", &Options::fsync}, {'Y', "fsyncperwrite", &Options::fsync_per_write},
    {'x', "singlexferattempt", &Options::single_xfer}, {'z', "randomoffset", &Options::random_offset},
    {'g', "intratestbarriers", &Options::intra_barriers}, {'c', "collective", &Options::collective},
    {0, "stonewallingwearout", &Options::wear_out},
    // Whose data a rank reads back.
    {'C', "reordertasks", &Options::reorder}, {0, "reordertasksconstant", &Options::reorder},
    {'Z', "reordertasksrandom", &Options::reorder_random},
};

const BoolOption* FindBoolOption(char letter) {
  for (const BoolOption& b : kBoolOptions) {
    if (b.letter != 0 && b.letter == letter) return &b;
  }
  return nullptr;
}

template <class Directive, size_t N>
const Directive* FindDirective(const Directive (&table)[N], std::string_view key) {
  for (const Directive& d : table) {
    if (d.key == key) return &d;
  }
  return nullptr;
}

}  // namespace

Status ApplyDirective(const std::string& raw, const std::string& where, Options* o) {
  std::string item = Trim(raw);
  size_t eq = item.find('=');
  if (eq == std::string::npos) return Status::InvalidArgument(where + " '" + item + "': want key=value");
  std::string key = Trim(item.substr(0, eq)), val = Trim(item.substr(eq + 1));
  std::string k = Lower(key), opt = where + " " + key;
  if (k == "summaryformat") {
    std::string l = Lower(val);
    if (l == "json") {
      o->format = Format::kJson;
    } else if (l == "default") {
      o->format = Format::kDefault;
    } else {
      return Status::InvalidArgument(where + " summaryFormat=" + val + ": supported are default and JSON");
    }
    return Status::OK();
  }
  if (k == "summaryfile") {
    if (val.empty()) return Status::InvalidArgument(where + " summaryFile= needs a path");
    o->summary_file = val;
    return Status::OK();
  }
  if (const auto* d = FindDirective(kValuedDirectives, k)) return ApplyValued(d->option, val, o);
  if (const auto* d = FindDirective(kBoolOptions, k)) {
    DLCKPT_ASSIGN_OR_RETURN(o->*(d->field), Bool(opt, val));
    return Status::OK();
  }
  if (k == "verbose") {
    DLCKPT_ASSIGN_OR_RETURN(int64_t n, Int(opt, val, 0, 10));
    o->verbose = static_cast<int>(n);
    return Status::OK();
  }
  return Status::InvalidArgument(opt + ": unsupported (supported: summaryFormat, summaryFile, stoneWallingWearOut "
                                 "and the long names of the supported options, e.g. blockSize; see --help)");
}

Status ApplyScript(const std::string& text, const std::string& name, Options* o) {
  std::istringstream in(text);
  std::string line;
  int n = 0;
  bool started = false, ran = false, stopped = false;
  while (std::getline(in, line)) {
    ++n;
    std::string t = Trim(line);
    std::string l = Lower(t);
    if (!started) {
      started = l == "ior start";
      continue;
    }
    if (t.empty() || t[0] == '#') continue;
    if (l == "ior stop") {
      stopped = true;
      break;
    }
    if (l == "run") {
      ran = true;
      continue;
    }
    std::string where = name + ":" + std::to_string(n);
    if (ran) {
      return Status::InvalidArgument(where + ": a second test after RUN; dlckpt-ior runs one test per invocation "
                                     "(split the script, one RUN each)");
    }
    std::istringstream items(t);
    std::string item;
    while (std::getline(items, item, ',')) {
      if (!Trim(item).empty()) DLCKPT_RETURN_IF_ERROR(ApplyDirective(item, where, o));
    }
  }
  if (!started) return Status::InvalidArgument("-f " + name + ": no 'IOR START' line");
  if (!stopped) return Status::InvalidArgument("-f " + name + ": no 'IOR STOP' line");
  return Status::OK();
}

namespace {

// The options with a value: the letter, the value's name and the help line.
struct ValuedDoc {
  char letter;
  const char* value;
  const char* help;
};
constexpr ValuedDoc kValuedDocs[] = {
    {'a', "S", "API: POSIX (the only one)"},
    {'b', "N", "block size: contiguous bytes per task per segment (default 1m)"},
    {'t', "N", "transfer size: bytes per I/O call (default 256k)"},
    {'s', "N", "segments (default 1)"},
    {'Q', "N", "task per node offset for -C and -Z (default 1)"},
    {'X', "N", "random seed of -Z and -z (default 0)"},
    {'D', "N", "stonewalling: stop each phase's transfers after N seconds (0: off)"},
    {'i', "N", "repetitions (default 1)"},
    {'o', "S", "test file name (default testFile; -F appends .<rank, 8 digits>)"},
    {'l', "S", "data packet type: offset, incompressible, timestamp (o, i, t), generic (g)"},
    {'d', "N", "seconds to wait before each phase"},
    {'f', "S",
     "IOR script: \"IOR START\", key=value lines (IOR's long option names), "
     "at most one \"RUN\", \"IOR STOP\"; applied where -f stands"},
    {'O', "S",
     "key=value[,key=value]: summaryFormat=default|JSON, summaryFile=PATH, "
     "stoneWallingWearOut=0|1 (with -D: after the deadline every task goes on "
     "to the largest number of transfers any task reached, so all move the "
     "same data), or any long option name (e.g. blockSize=4m)"},
};

// The help lines of the options without a value (kBoolOptions' letters).
struct FlagDoc {
  char letter;
  const char* help;
};
constexpr FlagDoc kFlagDocs[] = {
    {'F', "file per process (else one shared file; /dlckpt needs -F with > 1 task)"},
    {'w', "write phase (neither -w nor -r: both)"},
    {'r', "read phase"},
    {'e', "fsync before close (counted in close(s))"},
    {'Y', "fsync after every write (counted in wr/rd(s))"},
    {'C',
     "reorder tasks for reads: task i reads the data of task i + Q*tasksPerNode "
     "(another node's; nodes are told apart by $DLCKPT_NODE, else the host name)"},
    {'Z',
     "reorder tasks for reads at random: each task reads the data of a task on a "
     "node drawn at random among those at least Q nodes away (-X seeds it)"},
    {'z', "random offsets: each task issues its transfers in a random order"},
    {'m', "multiple files: repetition R uses the file name <-o>.R"},
    {'u', "unique directory per task: <dir of -o>/<rank>/<name> (needs -F)"},
    {'E', "use existing file(s): the write opens without O_CREAT"},
    {'k', "keep the file(s) (else removed after each repetition, timed as \"remove\")"},
    {'W', "check write: read back and verify after the write phase (untimed)"},
    {'R', "check read: verify the data after the read phase (untimed)"},
    {'q', "quit on error: stop at the first data check that finds wrong data"},
    {'x', "single transfer attempt: a short read or write is an error (no retry)"},
    {'c', "collective I/O: accepted, ignored with a note (the POSIX API has none)"},
    {'g', "barriers between open, transfer and close"},
};

constexpr char kUnsupportedLetters[] = "ABGHIjJKnNpPSTUV";

constexpr char kDescription[] =
    R"(IOR's command line for the POSIX API, reporting in IOR's formats. Paths under
/dlckpt go to this rank's memfs store (libintercept); other paths to the OS.)";

constexpr char kFooter[] =
    R"(Sizes take k, m, g (binary). Sizes up to what fits in memory: under dlckpt-run
give --capacity >= 2 x (segments x block size) + 10 %; without it set
DLCKPT_STORE_CAPACITY (default 256M). Other IOR options are refused with the
reason (e.g. -B: O_DIRECT, -T: use -D).)";

// dlckpt-ior's command line. Every option applies to *o when CLI11 meets it,
// so that later ones override earlier ones and -f's script; the first error
// goes to *error and ends the parse.
void DefineOptions(CLI::App& app, Options* o, Status* error) {
  cli::SetUsage(app, "usage: mpiexec -n N dlckpt-ior [OPTIONS]", 24);
  app.description(kDescription);
  app.footer(kFooter);
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->group("Options");
  // Stops the parse at a failed option, keeping its status for ParseOptions.
  auto fail = [error](Status st) {
    *error = std::move(st);
    throw CLI::ValidationError(error->message());
  };
  for (const ValuedDoc& d : kValuedDocs) {
    const char c = d.letter;
    app.add_option_function<std::string>(
           std::string("-") + c,
           [o, c, fail](const std::string& value) {
             // "-b=16m": IOR's form of a value joined by '='.
             const std::string v = !value.empty() && value[0] == '=' ? value.substr(1) : value;
             if (Status st = ApplyValued(c, v, o); !st.ok()) fail(std::move(st));
           },
           d.help)
        ->option_text(d.value)
        ->trigger_on_parse();
  }
  for (const FlagDoc& d : kFlagDocs) {
    const BoolOption* b = FindBoolOption(d.letter);
    app.add_flag_callback(std::string("-") + d.letter, [o, b] { o->*(b->field) = true; }, d.help)
        ->trigger_on_parse();
  }
  app.add_flag_callback("-v", [o] { ++o->verbose; }, "more output (repeatable)")->trigger_on_parse();
  app.add_flag_callback(
         "--dlckpt.checkpoint", [o] { o->dlckpt_checkpoint = true; },
         "/dlckpt only: end each write phase with the collective dlckpt_checkpoint() "
         "(commit + encode onto the spares under dlckpt-run + acknowledge), timed in "
         "close(s): the figure of a checkpoint, write + encode")
      ->trigger_on_parse();
  // IOR's options that dlckpt-ior refuses, with the reason; not listed in --help.
  for (const char* c = kUnsupportedLetters; *c != '\0'; ++c) {
    const char letter = *c;
    app.add_flag_callback(
           std::string("-") + letter,
           [letter, fail] {
             fail(Status::InvalidArgument(std::string("option -") + letter + " is not supported: " +
                                          Unsupported(letter)));
           },
           "")
        ->group("")
        ->trigger_on_parse();
  }
  app.set_help_flag("-h,--help", "this text");
}

}  // namespace

std::string UsageText() {
  CLI::App app("", "dlckpt-ior");
  Options o;
  Status error;
  DefineOptions(app, &o, &error);
  return app.help();
}

Result<Options> ParseOptions(std::span<const std::string> args) {
  Options o;
  Status error;
  CLI::App app("", "dlckpt-ior");
  DefineOptions(app, &o, &error);
  bool help = false;
  const Status st = cli::ParseArgs(app, std::vector<std::string>(args.begin(), args.end()), &help);
  if (!error.ok()) return error;
  if (!st.ok()) return Status::InvalidArgument(st.message());
  if (help) {
    Options h;
    h.help = true;
    return h;
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
  if (o.wear_out && o.deadline == 0) {
    return Status::InvalidArgument("-O stoneWallingWearOut=1 needs -D SECONDS (stonewalling)");
  }
  if (o.unique_dir && !o.file_per_proc) {
    return Status::InvalidArgument("-u (unique directory per task) needs -F (file per process)");
  }
  if (o.reorder && o.reorder_random) {
    return Status::InvalidArgument("-C and -Z both reorder the reads: give one");
  }
  if (!o.write && !o.read && !o.check_write && !o.check_read) o.write = o.read = true;
  return o;
}

std::vector<uint64_t> TransferOrder(uint64_t count, bool random, uint64_t seed) {
  std::vector<uint64_t> order(count);
  for (uint64_t k = 0; k < count; ++k) order[k] = k;
  if (random && count > 1) {
    std::mt19937_64 rng(Mix(seed ^ 0x5eedULL));
    for (uint64_t k = count - 1; k > 0; --k) {  // Fisher-Yates
      uint64_t j = rng() % (k + 1);
      std::swap(order[k], order[j]);
    }
  }
  return order;
}

int RandomReadOwner(int rank, int tasks, int tasks_per_node, int task_offset, uint64_t seed) {
  if (tasks_per_node <= 0 || tasks <= 0) return rank;
  int nodes = (tasks + tasks_per_node - 1) / tasks_per_node;
  if (task_offset >= nodes) return rank;
  std::mt19937_64 rng(Mix(seed ^ (static_cast<uint64_t>(rank) << 20) ^ 0x2a5eULL));
  int span = nodes - task_offset;  // node distances task_offset .. nodes-1
  int shift = task_offset + static_cast<int>(rng() % static_cast<uint64_t>(span));
  return (rank + shift * tasks_per_node) % tasks;
}

void FillTransfer(DataPacket packet, int owner, int rep, uint64_t offset, uint32_t signature,
                  std::span<uint64_t> words) {
  const uint64_t base = (static_cast<uint64_t>(owner) << 40) ^ (static_cast<uint64_t>(rep) << 32);
  switch (packet) {
    case DataPacket::kGeneric:
      // The same words in every transfer; the first one is the offset.
      for (size_t i = 0; i < words.size(); ++i) words[i] = Mix(base ^ i);
      if (!words.empty()) words[0] = offset;
      break;
    case DataPacket::kOffset:
      for (size_t i = 0; i < words.size(); ++i) words[i] = offset + 8 * i;
      break;
    case DataPacket::kIncompressible:
      for (size_t i = 0; i < words.size(); ++i) words[i] = Mix(base ^ Mix(offset + 8 * i));
      break;
    case DataPacket::kTimestamp:
      for (size_t i = 0; i < words.size(); ++i) {
        words[i] = (static_cast<uint64_t>(signature) << 32) | static_cast<uint32_t>(owner);
      }
      break;
  }
}

const char* DataPacketName(DataPacket p) {
  switch (p) {
    case DataPacket::kGeneric: return "g";
    case DataPacket::kOffset: return "o";
    case DataPacket::kIncompressible: return "i";
    case DataPacket::kTimestamp: return "t";
  }
  return "g";
}

}  // namespace dlckpt::ior

#include "run_options.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string_view>

#include "dlckpt/base/cli.h"
#include "dlckpt/base/env.h"
#include "dlckpt/base/names.h"
#include "dlckpt/base/strings.h"
#include "dlckpt/base/units.h"
#include "text.h"

namespace dlckpt::run {
namespace {

// The text of --help around the options (Usage() puts the options' own, by
// group, in between).
constexpr char kUsageLine[] = "usage: dlckpt-run [OPTIONS] -- PROGRAM [ARGS...]";

constexpr char kDescription[] = R"(Runs an MPI application with diskless checkpointing: launches the codec service
and the application (mpiexec, mpirun or srun), and when a node dies rebuilds its checkpoint on a
spare node and relaunches the application, which resumes from its last
checkpoint. By default the cluster is simulated on this machine with virtual
nodes vn0, vn1, ...: the first --nodes hold application ranks, the next --spares
are spare nodes.)";

constexpr char kLayout[] = "layout";
constexpr char kSecondLevel[] = "second level (a persistent, e.g. parallel, file system; docs/design.md)";
constexpr char kInjection[] =
    "failure injection (virtual nodes: kills the node's processes and destroys its shared memory)";
constexpr char kDetection[] = "failure detection (besides the launcher noticing dead processes)";
constexpr char kControl[] = "control";

constexpr char kFooter[] = R"(An option's value follows it as the next word or after '=' (--nodes=4); the
program follows "--" or starts at the first word that is not an option's. An
unknown option is refused with the closest known one.

Options come from, lowest precedence first: the defaults; the configuration
file (one option per line: "nodes = 4", "encode async", "keep"; '#' comments;
any option above but --config); VeloC's configuration file (--veloc-config:
persistent, persistent_interval = 0, max_versions and mode as --persist,
--persist-every 1, --persist-keep and --encode; one line on stderr for each key
it ignores); the environment (SCR_SET_SIZE, SCR_SET_FAILURES
and SCR_COPY_TYPE as --group-size, --spares-per-group and --scheme, SCR_FLUSH=N as
--persist-every N --persist ${SCR_PREFIX:-.}/.dlckpt, then
DLCKPT_<OPTION>, which wins), DLCKPT_<OPTION> for the
layout, launch and control options (DLCKPT_NODES, DLCKPT_SPARES,
DLCKPT_GROUP_SIZE, DLCKPT_ENCODE, DLCKPT_JOB, DLCKPT_KEEP=1, ...; the capacity
is DLCKPT_STORE_CAPACITY), but not failure injection; the command line. A later
source overrides an earlier one's value; flags and kills add up. docs/
environment.md lists every DLCKPT_* variable.

SIGTERM, SIGINT or SIGHUP stop the run: both jobs (each in its own process
group) get SIGTERM, then SIGKILL after --term-grace; their stores, parity and
the run directory are removed (unless --keep); dlckpt-run prints a summary
saying "terminated by SIGTERM" (or the signal it got) and exits with 128 + the
signal's number (143 for SIGTERM). A second signal kills the jobs at once, and
dlckpt-run ends within --term-grace whatever it waits for (a drain, a
--kill-command): every process of the job is killed, its stores and run
directory removed (unless --keep); a third signal ends it so at once. The same
signal sent again by the same process within 2 s (timeout(1) signals its
child and then its process group) counts once.

At the end dlckpt-run prints a summary (checkpoints, recoveries, time per
phase) and exits with the status it names: the application's status; 3 when
recovery was impossible (more failures than spares in a group, and no
drained epoch with --persist), 4 when the
recovery limit was reached, 5 when the job could not be set up or launched
(also for an unsafe run directory, or a store of the job that another user
planted), 6 when the job id is in use by another
running dlckpt-run, 7 when halted (--halt-seconds, SIGUSR1, SIGTERM with
--persist, --on-spares-exhausted halt) with a complete drained epoch to --restart-from (3 without one),
124 at --timeout, 128 + N after signal N; 2 for bad options
(also for a job this machine cannot run, see --oversubscribe).)";

}  // namespace

namespace {

Result<double> ParseSeconds(const std::string& s, const std::string& what) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !(v >= 0) || v > 1e9) {
    return Status::InvalidArgument(what + ": '" + s + "' is not a number of seconds");
  }
  return v;
}

Result<int64_t> ParseInt(const std::string& s, const std::string& what, int64_t lo, int64_t hi) {
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v < lo || v > hi) {
    return Status::InvalidArgument(what + ": '" + s + "' is not an integer in [" +
                                   std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return static_cast<int64_t>(v);
}

}  // namespace

Result<KillTrigger> ParseTrigger(const std::string& text) {
  KillTrigger t;
  std::string spec = text;
  size_t plus = spec.find('+');
  if (plus != std::string::npos) {
    DLCKPT_ASSIGN_OR_RETURN(t.delay, ParseSeconds(spec.substr(plus + 1), "--at " + text));
    spec = spec.substr(0, plus);
  }
  std::vector<std::string> parts = Split(spec, ':');
  auto bad = [&] {
    return Status::InvalidArgument("--at '" + text +
                                   "': want checkpoint:E, commit:E, drain:E, time:T, phase:write[:E], "
                                   "phase:encode[:E] or phase:recover[:N], optionally +D");
  };
  if (parts.empty()) return bad();
  if ((parts[0] == "checkpoint" || parts[0] == "commit" || parts[0] == "drain") && parts.size() == 2) {
    t.kind = parts[0] == "commit" ? KillTrigger::kCommit
             : parts[0] == "drain" ? KillTrigger::kDrain
                                   : KillTrigger::kCheckpoint;
    DLCKPT_ASSIGN_OR_RETURN(int64_t e, ParseInt(parts[1], "--at " + text, 1, INT64_MAX));
    t.epoch = static_cast<uint64_t>(e);
  } else if (parts[0] == "time" && parts.size() == 2) {
    t.kind = KillTrigger::kTime;
    DLCKPT_ASSIGN_OR_RETURN(t.seconds, ParseSeconds(parts[1], "--at " + text));
  } else if (parts[0] == "phase" && (parts.size() == 2 || parts.size() == 3)) {
    if (parts[1] == "write") {
      t.kind = KillTrigger::kWrite;
    } else if (parts[1] == "encode") {
      t.kind = KillTrigger::kEncode;
    } else if (parts[1] == "recover") {
      t.kind = KillTrigger::kRecover;
    } else {
      return bad();
    }
    if (parts.size() == 3) {
      DLCKPT_ASSIGN_OR_RETURN(int64_t n, ParseInt(parts[2], "--at " + text, 1, INT64_MAX));
      if (t.kind == KillTrigger::kRecover) {
        t.occurrence = static_cast<int>(std::min<int64_t>(n, 1 << 30));
      } else {
        t.epoch = static_cast<uint64_t>(n);
      }
    }
  } else {
    return bad();
  }
  return t;
}

const std::vector<std::pair<std::string, std::string>>& EnvOptions() {
  static const auto* const kList = [] {
    auto* list = new std::vector<std::pair<std::string, std::string>>();
    for (const char* option :
         {"nodes", "ranks-per-node", "spares", "group-size", "spares-per-group", "scheme", "parity", "on-spares-exhausted", "capacity", "max-files", "compress",
          "encode", "codec-nice", "hosts", "launcher", "srun", "srun-args", "launcher-exec", "mpiexec",
          "mpiexec-args", "kill-command", "max-recoveries", "timeout", "job", "run-dir", "codec", "term-grace",
          "heartbeat-timeout", "heartbeat-address", "preload", "keep", "oversubscribe", "verbose",
          "resume", "persist", "persist-every", "persist-keep", "persist-bandwidth", "restart-from",
          "halt-seconds", "veloc-config"}) {
      std::string var = "DLCKPT_";
      for (const char* c = option; *c; ++c) var += *c == '-' ? '_' : static_cast<char>(std::toupper(*c));
      // The libraries' name for the store capacity, which dlckpt-run sets for the ranks.
      if (var == "DLCKPT_CAPACITY") var = "DLCKPT_STORE_CAPACITY";
      list->emplace_back(var, option);
    }
    return list;
  }();
  return *kList;
}

namespace {

using ApplyFn = std::function<Status(Options&, const std::string&)>;

// dlckpt-run's options as a CLI::App. Each option's callback checks its value
// and applies it to the Options of the current Apply as the option is parsed,
// so in command-line order: a later value overrides an earlier one, and a
// --kill-node's --at follows it.
class OptionParser {
 public:
  OptionParser();
  OptionParser(const OptionParser&) = delete;
  OptionParser& operator=(const OptionParser&) = delete;

  // Applies the options in `args` (one source) to *o. Returns the first error
  // (a bad value, an unknown option with the closest known one) or OK; --help
  // sets *help and returns OK. What follows the options ("--" and the words
  // after it, or the first word that is not an option's value and the words
  // after it) is the program: it goes to *program without the "--", and is an
  // error when `program` is null.
  Status Apply(const std::vector<std::string>& args, Options* o, bool* help, std::vector<std::string>* program);
  // At the end of a source: a --kill-node, --poweroff-node or --crash-rank
  // still waiting for its --at is an error. Forgets it either way.
  Status EndOfSource();

  // The option whose long name is `name` (without "--"), or null.
  const CLI::Option* Find(std::string_view name) const;
  static bool IsFlag(const CLI::Option& opt) { return opt.get_expected_max() == 0; }
  const CLI::App& app() const { return app_; }
  std::string Help() const { return app_.help(); }

 private:
  // An option with a value (`text` names it in the help).
  void Value(const std::string& name, const std::string& text, const std::string& group, const std::string& help,
             ApplyFn apply);
  void Flag(const std::string& names, bool Options::*field, const std::string& group, const std::string& help);
  // --kill-node, --poweroff-node or --crash-rank: waits for its --at.
  ApplyFn Kill(const std::string& name);
  void AddLayoutOptions();
  void AddSecondLevelOptions();
  void AddFailureOptions();
  void AddControlOptions();

  CLI::App app_{"", "dlckpt-run"};
  Options* target_ = nullptr;
  Status error_;  // the first error of the current Apply
  std::vector<std::string> pending_kill_;  // a kill waiting for its --at
  bool pending_ranks_ = false;
  bool pending_poweroff_ = false;
};

// What the options' values are.
ApplyFn Count(int Options::*field, const std::string& name, int64_t lo, int64_t hi) {
  return [=](Options& o, const std::string& v) -> Status {
    DLCKPT_ASSIGN_OR_RETURN(int64_t n, ParseInt(v, name, lo, hi));
    o.*field = static_cast<int>(n);
    return Status::OK();
  };
}

// One of `allowed`, which `want` lists for the message.
ApplyFn Choice(std::string Options::*field, const std::string& name, std::vector<std::string> allowed,
               const std::string& want) {
  return [=](Options& o, const std::string& v) -> Status {
    if (std::find(allowed.begin(), allowed.end(), v) == allowed.end()) {
      return Status::InvalidArgument(name + ": want " + want + ", not '" + v + "'");
    }
    o.*field = v;
    return Status::OK();
  };
}

ApplyFn Text(std::string Options::*field) {
  return [=](Options& o, const std::string& v) {
    o.*field = v;
    return Status::OK();
  };
}

// Words split at white space, added to those of earlier occurrences.
ApplyFn Words(std::vector<std::string> Options::*field) {
  return [=](Options& o, const std::string& v) {
    std::istringstream is(v);
    for (std::string w; is >> w;) (o.*field).push_back(w);
    return Status::OK();
  };
}

// A number of seconds; `wrong` (when given) says what is wrong with one ("": nothing).
ApplyFn Seconds(double Options::*field, const std::string& name,
                std::function<std::string(double)> wrong = nullptr) {
  return [=](Options& o, const std::string& v) -> Status {
    DLCKPT_ASSIGN_OR_RETURN(double seconds, ParseSeconds(v, name));
    if (wrong) {
      if (std::string why = wrong(seconds); !why.empty()) return Status::InvalidArgument(why);
    }
    o.*field = seconds;
    return Status::OK();
  };
}

OptionParser::OptionParser() {
  app_.description(kDescription);
  app_.footer(kFooter);
  cli::SetUsage(app_, kUsageLine, 26);
  // The program follows the options: CLI11 leaves it in remaining().
  app_.prefix_command();
  app_.set_help_flag();  // added again last, in "control"
  AddLayoutOptions();
  AddSecondLevelOptions();
  AddFailureOptions();
  AddControlOptions();
  app_.set_help_flag("-h,--help", "this help")->group(kControl);
}

void OptionParser::Value(const std::string& name, const std::string& text, const std::string& group,
                         const std::string& help, ApplyFn apply) {
  app_.add_option(
          name,
          [this, apply = std::move(apply)](const CLI::results_t& r) {
            // After an error or an unknown option (left in remaining()) nothing
            // applies: the first of them is the one reported.
            if (error_.ok() && app_.remaining().empty()) error_ = apply(*target_, r.empty() ? "" : r.back());
            return true;
          },
          help)
      ->option_text(text)
      ->group(group)
      ->trigger_on_parse();
}

void OptionParser::Flag(const std::string& names, bool Options::*field, const std::string& group,
                        const std::string& help) {
  app_.add_flag_callback(
          names,
          [this, field] {
            if (error_.ok() && app_.remaining().empty()) target_->*field = true;
          },
          help)
      ->group(group)
      ->trigger_on_parse();
}

ApplyFn OptionParser::Kill(const std::string& name) {
  return [this, name](Options&, const std::string& v) -> Status {
    pending_kill_ = Split(v, ',');
    pending_ranks_ = name == "--crash-rank";
    pending_poweroff_ = name == "--poweroff-node";
    if (pending_kill_.empty()) return Status::InvalidArgument(name + " needs a list");
    if (pending_ranks_) {
      for (const auto& r : pending_kill_) DLCKPT_RETURN_IF_ERROR(ParseInt(r, name, 0, 1 << 24).status());
    }
    return Status::OK();
  };
}

void OptionParser::AddLayoutOptions() {
  Value("--nodes", "N", kLayout, "data nodes (default 2)", Count(&Options::nodes, "--nodes", 1, 100000));
  Value("--ranks-per-node", "R", kLayout, "application ranks per data node (default 1)",
        Count(&Options::ranks_per_node, "--ranks-per-node", 1, 4096));
  Value("--spares", "S", kLayout, "spare nodes (default 1)", Count(&Options::spares, "--spares", 0, 100000));
  Value("--group-size", "G", kLayout, "data nodes per group (default: all in one group)",
        Count(&Options::group_size, "--group-size", 1, 100000));
  Value("--spares-per-group", "K", kLayout,
        "parity chunks per stripe: the parity nodes of each group, or the losses a spread group survives (default 1 "
        "for xor, 2 for rs)",
        Count(&Options::spares_per_group, "--spares-per-group", 1, 32));
  Value("--scheme", "xor|rs", kLayout, "erasure code (default xor when K = 1, else rs)",
        Choice(&Options::scheme, "--scheme", {"xor", "rs"}, "xor or rs"));
  Value("--parity", "spares|spread|auto", kLayout,
        "where parity lives: on K spare nodes per group (spares), spread over each group's data nodes, about "
        "K/(G-K) of their checkpoint each, with spare nodes only hosting replacements (spread), or on spares while "
        "a group has them and spread once a recovery used them up (auto, the default). When no spare node is left "
        "to host a lost node's ranks, they run on a surviving node (oversubscribed) and the run goes on",
        Choice(&Options::parity, "--parity", {"spares", "spread", "auto"}, "spares, spread or auto"));
  Value("--on-spares-exhausted", "continue|halt", kLayout,
        "when no spare node is left to host a lost node's ranks: run them on a survivor (continue, the default), or "
        "rebuild them there, drain that epoch to --persist and stop (halt: exit 7, ready for --restart-from in a "
        "larger allocation)",
        Choice(&Options::on_spares_exhausted, "--on-spares-exhausted", {"continue", "halt"}, "continue or halt"));
  Value("--capacity", "SIZE", kLayout, "memfs store capacity per rank, 1M to 1T (default 256M)",
        [](Options& o, const std::string& v) -> Status {
          auto size = ParseSize(v);
          if (!size.ok()) return size.status().Prefixed("--capacity");
          if (*size < kMinCapacity || *size > kMaxCapacity) {
            return Status::InvalidArgument("--capacity " + v + ": a store's capacity must be between 1M and 1T");
          }
          o.capacity = *size;
          return Status::OK();
        });
  Value("--max-files", "N", kLayout,
        "files and directories each store holds, 1 to 1M (default: one per 32 KiB of --capacity, at least 1024: "
        "8192 for 256M; sets DLCKPT_MAX_FILES for the ranks). A full table gives ENOSPC and a line naming it; "
        "mdtest -n 10000 needs --max-files 10100 or so",
        [](Options& o, const std::string& v) -> Status {
          DLCKPT_ASSIGN_OR_RETURN(int64_t n, ParseInt(v, "--max-files", 1, kMaxMaxFiles));
          o.max_files = static_cast<uint32_t>(n);
          return Status::OK();
        });
  Value("--compress", "none|lz4", kLayout,
        "compress the stores' checkpoint data with LZ4 (sets DLCKPT_COMPRESS for the ranks; see memfs.h)",
        Choice(&Options::compress, "--compress", {"none", "lz4"}, "none or lz4"));
  Value("--encode", "sync|async", kLayout,
        "sync (default): dlckpt_checkpoint returns once the epoch is protected; async: once every store committed "
        "it, while the codec encodes it (sets DLCKPT_ENCODE for the ranks; see dlckpt/dlckpt.h)",
        Choice(&Options::encode, "--encode", {"sync", "async"}, "sync or async"));
  Value("--codec-nice", "N", kLayout,
        "run the codec's encode and rebuild work at nice N (0-19; default 0 for sync, 10 for async, so that the "
        "application computing meanwhile keeps the CPU)",
        [](Options& o, const std::string& v) -> Status {
          char* end = nullptr;
          long n = std::strtol(v.c_str(), &end, 10);
          if (v.empty() || *end || n < 0 || n > 19) {
            return Status::InvalidArgument("--codec-nice: want 0 to 19, not '" + v + "'");
          }
          o.codec_nice = static_cast<int>(n);
          return Status::OK();
        });
  Value("--hosts", "H1,H2,...", kLayout,
        "use these hosts (first N data, then spares) instead of virtual nodes; node identity is the host name; "
        "ranks are placed in order (Hydra: -hosts H:COUNT,...; Open MPI: an app context per run of ranks, "
        "--host H:SLOTS; srun --distribution=arbitrary); --run-dir must then "
        "be visible on every host\n"
        "--hosts slurm: the hosts of the Slurm allocation (SLURM_JOB_NODELIST), the first N + S of them",
        [](Options& o, const std::string& v) {
          o.hosts = Split(v, ',');
          return Status::OK();
        });
  Value("--launcher", "mpiexec|srun", kLayout,
        "launch both jobs with the MPI's own launcher (default: Hydra's mpiexec for MPICH, mpirun for Open MPI, "
        "as built: " DLCKPT_MPI_FLAVOR ") or with Slurm's srun --mpi=pmi2 (MPICH; inside or outside an "
        "allocation; virtual nodes then run on this host)",
        Choice(&Options::launcher, "--launcher", {"mpiexec", "srun"}, "mpiexec or srun"));
  Value("--srun", "PATH", kLayout, "srun to use (default srun)", Text(&Options::srun));
  Value("--srun-args", "\"ARGS\"", kLayout,
        "extra srun arguments (split at white space), e.g. \"--partition=debug --time=60\"",
        Words(&Options::srun_args));
  Value("--launcher-exec", "PATH", kLayout,
        "start remote processes with PATH instead of ssh: Hydra -launcher ssh -launcher-exec PATH, Open MPI "
        "--mca plm_rsh_agent PATH (virtual hosts of tests/vhost)",
        Text(&Options::launcher_exec));
  Value("--mpiexec-args", "\"ARGS\"", kLayout,
        "extra mpiexec arguments (split at white space) for both jobs, e.g. from tests/vhost/dlckpt-vhost "
        "mpiexec-args; a -genv LD_PRELOAD (Hydra) or -x LD_PRELOAD=V (Open MPI) in them is merged with --preload's",
        Words(&Options::mpiexec_args));
  Value("--kill-command", "CMD", kLayout,
        "how to kill a node in --hosts mode, run with sh -c; \"{node}\" is replaced by the node, \"{how}\" by crash "
        "or poweroff (also used to fence a node that stopped answering heartbeats, with poweroff)",
        Text(&Options::kill_command));
}

void OptionParser::AddSecondLevelOptions() {
  Value("--persist", "DIR", kSecondLevel,
        "drain every Nth protected epoch to DIR/<job>/epoch.<E>/ in the background (one file per checkpoint file "
        "and a MANIFEST with each file's rank, size and CRC32C); when a failure exceeds what parity rebuilds, "
        "restart from the newest complete drained epoch",
        Text(&Options::persist));
  Value("--persist-every", "N", kSecondLevel,
        "drain epochs whose number is a multiple of N (default 10); a drain still running when the next is due "
        "makes that one skipped (reported)",
        Count(&Options::persist_every, "--persist-every", 1, 1000000000));
  Value("--persist-keep", "K", kSecondLevel, "keep the newest K complete drained epochs (default 2)",
        Count(&Options::persist_keep, "--persist-keep", 1, 1000000));
  Value("--persist-bandwidth", "R", kSecondLevel,
        "cap each rank's drain at R bytes/s (e.g. 200M; default 0 = unlimited)",
        [](Options& o, const std::string& v) -> Status {
          auto b = ParseSize(v);
          if (!b.ok()) {
            return Status::InvalidArgument("--persist-bandwidth: '" + v +
                                           "' is not a byte rate (e.g. 200M, 0 = unlimited)");
          }
          o.persist_bandwidth = *b;
          return Status::OK();
        });
  Value("--restart-from", "DIR", kSecondLevel,
        "start from the newest complete drained epoch in DIR (a --persist DIR or its job directory), every file's "
        "CRC verified; the job must have as many ranks",
        Text(&Options::restart_from));
  Value("--halt-seconds", "S", kSecondLevel,
        "after S seconds, drain the newest protected epoch, wait for it and stop the job (exit 7); also on SIGUSR1 "
        "(srun --signal=USR1@T) and, with --persist, on SIGTERM",
        Seconds(&Options::halt_seconds, "--halt-seconds"));
}

void OptionParser::AddFailureOptions() {
  Value("--kill-node", "N1[,N2] --at WHEN", kInjection,
        "kill node(s) when WHEN happens; repeatable.\n"
        "WHEN: checkpoint:E (after checkpoint E is protected), commit:E (once every store committed E: with "
        "--encode async, when dlckpt_checkpoint returns), drain:E (while the ranks drain epoch E to --persist DIR: "
        "they hold it 5 s + D before publishing, so the kill lands inside), time:T (T s after the first launch), "
        "phase:write[:E] (while the application writes checkpoint E), phase:encode[:E] (while the codec encodes), "
        "phase:recover[:N] (during the rebuild of the N-th recovery); each may end in +D (D s later). For the "
        "phases the ranks hold their first write of that checkpoint, or the codec that encode or rebuild, "
        "1 s + D, so the kill lands inside it",
        Kill("--kill-node"));
  Value("--poweroff-node", "N1[,N2] --at WHEN", kInjection,
        "power node(s) off: silent first, then dead (no launcher notices; heartbeats must). Virtual nodes: their "
        "processes are stopped (SIGSTOP) and their shared memory destroyed; the processes are killed once the loss "
        "is detected. Hosts: --kill-command with {how}",
        Kill("--poweroff-node"));
  Value("--crash-rank", "R1[,R2] --at WHEN", kInjection,
        "kill only the application process(es) of these ranks (a process crash, no node lost)",
        Kill("--crash-rank"));
  Value("--at", "WHEN", kInjection,
        "when the --kill-node, --poweroff-node or --crash-rank just before it acts (WHEN: see --kill-node)",
        [this](Options& o, const std::string& v) -> Status {
          if (pending_kill_.empty()) {
            return Status::InvalidArgument("--at must follow --kill-node, --poweroff-node or --crash-rank");
          }
          DLCKPT_ASSIGN_OR_RETURN(KillTrigger t, ParseTrigger(v));
          o.kills.push_back(KillSpec{pending_kill_, pending_ranks_, pending_poweroff_, t, v});
          pending_kill_.clear();
          return Status::OK();
        });
  Value("--mtbf", "SECONDS", kInjection, "kill random live nodes at exponential intervals",
        Seconds(&Options::mtbf, "--mtbf", [](double s) { return s > 0 ? "" : "--mtbf must be positive"; }));
  Value("--weibull-shape", "K", kInjection, "Weibull inter-failure times instead (shape K)",
        Seconds(&Options::weibull_shape, "--weibull-shape",
                [](double k) { return k > 0 ? "" : "--weibull-shape must be positive"; }));
  Value("--max-failures", "N", kInjection, "random kills at most (default 1)",
        Count(&Options::max_failures, "--max-failures", 0, 1000000));
  Value("--seed", "S", kInjection, "random seed (default 1)", [](Options& o, const std::string& v) -> Status {
    DLCKPT_ASSIGN_OR_RETURN(int64_t n, ParseInt(v, "--seed", 0, INT64_MAX));
    o.seed = static_cast<uint64_t>(n);
    return Status::OK();
  });
  Value("--heartbeat-timeout", "S", kDetection,
        "declare a node lost after S seconds without a heartbeat from its codec process (default 1.5; heartbeats "
        "every 0.2 s); catches power-offs",
        Seconds(&Options::heartbeat_timeout, "--heartbeat-timeout",
                [](double s) { return s >= 0.1 ? "" : "--heartbeat-timeout must be at least 0.1 s"; }));
  Value("--heartbeat-address", "A", kDetection,
        "address the codec processes send heartbeats to (default: 127.0.0.1 for virtual nodes, else the local "
        "address on the route to the first host)",
        Text(&Options::heartbeat_address));
}

void OptionParser::AddControlOptions() {
  Value("--max-recoveries", "M", kControl, "give up after M recoveries (default 5)",
        Count(&Options::max_recoveries, "--max-recoveries", 0, 1000000));
  Value("--timeout", "SECONDS", kControl, "stop the whole run after SECONDS (default: none)",
        Seconds(&Options::timeout, "--timeout"));
  Value("--job", "ID", kControl,
        "job id, 1-63 of [A-Za-z0-9_-] (default dlckpt<pid> and 6 random hex digits); a job id in use by a running "
        "dlckpt-run (it holds RUN_DIR/lock) is refused",
        [](Options& o, const std::string& v) -> Status {
          if (!ValidJobName(v)) return Status::InvalidArgument("--job '" + v + "': want 1-63 of [A-Za-z0-9_-]");
          o.job = v;
          return Status::OK();
        });
  Value("--run-dir", "DIR", kControl,
        "rendezvous, events and logs (default /tmp/dlckpt-run.<job>); created with mode 0700. An existing one is "
        "used only if it is a directory (not a symbolic link) owned by this user with no access for group and others",
        Text(&Options::run_dir));
  Value("--codec", "PATH", kControl, "the dlckpt-codec executable (default: beside dlckpt-run)",
        Text(&Options::codec));
  Value("--mpiexec", "PATH", kControl,
        "the MPI launcher for both jobs (default " DLCKPT_MPIEXEC ", the launcher of the MPI dlckpt was built with, "
        DLCKPT_MPI_FLAVOR ", bound at build time: `mpiexec` in PATH is not used); it must launch that MPI",
        Text(&Options::mpiexec));
  Flag("--preload", &Options::preload, kControl, "run the application with LD_PRELOAD=libdlckpt_preload.so");
  Flag("--keep", &Options::keep, kControl,
       "keep stores, parity and the run directory at the end "
       "(also when stopped by a signal)");
  Flag("--resume", &Options::resume, kControl,
       "let the first launch restart from the checkpoint the job's stores already hold (a --keep run of the same "
       "--job); without it the application starts from empty stores (relaunches after a recovery always "
       "resume; sets DLCKPT_RESUME for the ranks)");
  Flag("--oversubscribe", &Options::oversubscribe, kControl,
       "run even if this machine cannot: with virtual nodes every process runs here, and dlckpt-run refuses more "
       "than 64 per online CPU (N x R application ranks + one codec process per data and spare node) or than "
       "RLIMIT_NPROC, and stores (N x R x --capacity, all "
       "allocated up front) larger than /dev/shm");
  Value("--term-grace", "SECONDS", kControl,
        "on a signal, seconds the jobs get between SIGTERM and SIGKILL (default 1); after a second signal, the most "
        "dlckpt-run takes to end",
        Seconds(&Options::term_grace, "--term-grace",
                [](double s) { return s <= 3600 ? "" : "--term-grace: at most 3600 s"; }));
  Flag("-v,--verbose", &Options::verbose, kControl, "print every event");
  Value("--config", "FILE", kControl, "read options from FILE (default: $DLCKPT_CONFIG)", Text(&Options::config));
  Value("--veloc-config", "FILE", kControl,
        "read VeloC's configuration file FILE (the one the application gives VELOC_Init): persistent becomes "
        "--persist DIR, persistent_interval = 0 --persist-every 1 (-1: no drains), max_versions --persist-keep, mode "
        "--encode; every other key (and an interval in seconds) is reported on stderr as ignored, with why "
        "(veloc/README.md). Above the configuration file, below the environment and the command line (default: "
        "$DLCKPT_VELOC_CONFIG; none: nothing is read)",
        Text(&Options::veloc_config));
  Value("--halt", "JOB", kControl,
        "run nothing: ask the running dlckpt-run of job JOB (this user's, found through /tmp/dlckpt-run.JOB or "
        "--run-dir) to halt, as SIGUSR1 does (SCR's scr_halt): with --persist it drains the newest protected epoch "
        "and exits 7, without it stops and exits 3. Exits 0 once the request was delivered, 1 when no such job runs "
        "or it is another user's",
        [](Options& o, const std::string& v) -> Status {
          if (!ValidJobName(v)) {
            return Status::InvalidArgument("--halt '" + v + "': want a job id, 1-63 of [A-Za-z0-9_-]");
          }
          o.halt = v;
          return Status::OK();
        });
}

Status OptionParser::Apply(const std::vector<std::string>& args, Options* o, bool* help,
                           std::vector<std::string>* program) {
  target_ = o;
  error_ = Status::OK();
  bool asked = false;
  const Status parsed = cli::ParseArgs(app_, args, &asked);
  target_ = nullptr;
  if (asked) {
    *help = true;
    return Status::OK();
  }
  // A bad value comes before anything CLI11 found wrong (an unknown option
  // stops the callbacks, a missing value is at the end).
  DLCKPT_RETURN_IF_ERROR(error_);
  if (!parsed.ok() && !args.empty() && args.back().rfind("--", 0) == 0) {
    if (const CLI::Option* opt = Find(std::string_view(args.back()).substr(2)); opt != nullptr && !IsFlag(*opt)) {
      return Status::InvalidArgument(args.back() + " needs a value");
    }
  }
  DLCKPT_RETURN_IF_ERROR(parsed);
  std::vector<std::string> rest = app_.remaining();
  if (!rest.empty() && rest.front() == "--") rest.erase(rest.begin());
  if (program != nullptr) {
    *program = std::move(rest);
  } else if (!rest.empty()) {
    return Status::InvalidArgument("'" + rest.front() + "' is not an option");
  }
  return Status::OK();
}

Status OptionParser::EndOfSource() {
  const bool waiting = !pending_kill_.empty();
  pending_kill_.clear();
  if (waiting) return Status::InvalidArgument("--kill-node, --poweroff-node or --crash-rank without --at");
  return Status::OK();
}

const CLI::Option* OptionParser::Find(std::string_view name) const {
  for (const CLI::Option* opt : app_.get_options()) {
    if (opt->check_lname(std::string(name))) return opt;
  }
  return nullptr;
}

}  // namespace

std::string Usage() { return OptionParser().Help(); }


namespace {

// The options of one line of a configuration file.
struct ConfigLine {
  size_t line = 0;
  std::vector<std::string> tokens;  // never empty
};

// ConfigTokens by line, checking names against `parser`'s options (lines
// without an option, such as "keep = false", left out).
Result<std::vector<ConfigLine>> ConfigLines(const std::string& path, const std::string& text,
                                            const OptionParser& parser) {
  std::vector<ConfigLine> out;
  size_t line_no = 0, start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    line = line.substr(0, line.find('#'));
    auto trim = [](std::string t) {
      const char* ws = " \t\r";
      size_t b = t.find_first_not_of(ws);
      if (b == std::string::npos) return std::string();
      return t.substr(b, t.find_last_not_of(ws) - b + 1);
    };
    line = trim(line);
    if (line.empty()) continue;
    const std::string where = path + ":" + std::to_string(line_no);
    size_t sep = line.find_first_of(" \t=");
    std::string name = trim(line.substr(0, sep));
    std::string value = sep == std::string::npos ? "" : trim(line.substr(sep));
    if (!value.empty() && value[0] == '=') value = trim(value.substr(1));
    if (name.rfind("--", 0) == 0) name = name.substr(2);
    if (name == "config" || name == "help" || name == "halt" || name.empty()) {
      return Status::InvalidArgument(where + ": '" + name + "' cannot be set in a configuration file");
    }
    const CLI::Option* opt = parser.Find(name);
    if (opt == nullptr) return cli::UnknownOption(parser.app(), "--" + name).Prefixed(where);
    if (OptionParser::IsFlag(*opt)) {
      if (value.empty() || value == "1" || value == "true" || value == "yes") {
        out.push_back({line_no, {"--" + name}});
      } else if (value != "0" && value != "false" && value != "no") {
        return Status::InvalidArgument(where + ": " + name + " is a flag: want true or false, not '" + value + "'");
      }
      continue;
    }
    if (value.empty()) return Status::InvalidArgument(where + ": " + name + " needs a value");
    out.push_back({line_no, {"--" + name, value}});
  }
  return out;
}

bool IsKill(const std::string& option) {
  return option == "--kill-node" || option == "--poweroff-node" || option == "--crash-rank";
}

}  // namespace

Result<std::vector<std::string>> ConfigTokens(const std::string& path, const std::string& text) {
  OptionParser parser;
  DLCKPT_ASSIGN_OR_RETURN(std::vector<ConfigLine> lines, ConfigLines(path, text, parser));
  std::vector<std::string> tokens;
  for (const ConfigLine& l : lines) tokens.insert(tokens.end(), l.tokens.begin(), l.tokens.end());
  return tokens;
}

Result<Options> ParseOptions(int argc, char** argv, bool* help) {
  return ParseOptions(std::vector<std::string>(argv + std::min(argc, 1), argv + argc), help,
                      [](const char* name) -> const char* { return std::getenv(name); });
}

Result<Options> ParseOptions(const std::vector<std::string>& argv, bool* help, const EnvFn& env) {
  Options o;
  *help = false;
  OptionParser parser;
  std::vector<std::string> program;
  // The command line alone first: its --help, its errors and its --config.
  std::string config, veloc;
  if (const char* c = env("DLCKPT_CONFIG")) config = c;
  if (const char* c = env("DLCKPT_VELOC_CONFIG")) veloc = c;
  {
    Options scratch;
    DLCKPT_RETURN_IF_ERROR(parser.Apply(argv, &scratch, help, &program));
    if (*help) return scratch;
    DLCKPT_RETURN_IF_ERROR(parser.EndOfSource());
    if (!scratch.config.empty()) config = scratch.config;
    if (!scratch.veloc_config.empty()) veloc = scratch.veloc_config;
  }
  // 1. The configuration file: --config FILE, else $DLCKPT_CONFIG. Every error
  // names FILE:LINE of the option at fault.
  if (!config.empty()) {
    auto text = Env::Default()->ReadFile(config, 1 << 20);
    if (!text.ok()) return text.status().Prefixed("configuration file");
    auto lines = ConfigLines(config, *text, parser);
    if (!lines.ok()) return Status::Error(lines.status().code(), "configuration file " + lines.status().message());
    auto where = [&](size_t line) { return "configuration file " + config + ":" + std::to_string(line); };
    size_t kill_line = 0;  // of the latest --kill-node, --poweroff-node or --crash-rank
    for (const ConfigLine& l : *lines) {
      if (IsKill(l.tokens.front())) kill_line = l.line;
      Status s = parser.Apply(l.tokens, &o, help, nullptr);
      if (!s.ok()) return s.Prefixed(where(l.line));
    }
    if (Status s = parser.EndOfSource(); !s.ok()) return s.Prefixed(where(kill_line));
    o.config = config;
  }
  // 1b. VeloC's configuration file: --veloc-config FILE, else
  // $DLCKPT_VELOC_CONFIG, else the configuration file's veloc-config. Its keys
  // as options; errors name FILE:LINE.
  if (veloc.empty()) veloc = o.veloc_config;
  if (!veloc.empty()) {
    auto text = Env::Default()->ReadFile(veloc, 1 << 20);
    if (!text.ok()) return text.status().Prefixed("VeloC configuration file");
    auto tokens = VelocConfigTokens(veloc, *text, &o.notes);
    if (!tokens.ok()) {
      return Status::Error(tokens.status().code(), "VeloC configuration file " + tokens.status().message());
    }
    for (const VelocToken& t : *tokens) {
      Status s = parser.Apply(t.tokens, &o, help, nullptr);
      if (!s.ok()) return s.Prefixed("VeloC configuration file " + veloc + ":" + std::to_string(t.line));
    }
    o.veloc_config = veloc;
  }
  // 2. SCR's names for the same settings (an SCR application's job script),
  // then DLCKPT_<OPTION>, in the environment.
  static const std::pair<const char*, const char*> kScrOptions[] = {
      {"SCR_SET_SIZE", "group-size"}, {"SCR_SET_FAILURES", "spares-per-group"}, {"SCR_COPY_TYPE", "scheme"}};
  for (const auto& [var, option] : kScrOptions) {
    const char* v = env(var);
    if (v == nullptr || *v == '\0') continue;
    std::string value = v;
    if (std::string(var) == "SCR_COPY_TYPE") {
      std::transform(value.begin(), value.end(), value.begin(), [](unsigned char c) { return std::tolower(c); });
      if (value != "xor" && value != "rs") {
        return Status::InvalidArgument(std::string(var) + "=" + v +
                                       ": dlckpt encodes with XOR or RS only (SINGLE and PARTNER have no "
                                       "equivalent); unset it or set XOR or RS");
      }
    }
    Status s = parser.Apply({"--" + std::string(option), value}, &o, help, nullptr);
    if (!s.ok()) return s.Prefixed(std::string("environment ") + var);
  }
  // SCR_FLUSH=N (N > 0): every N-th checkpoint goes to SCR_PREFIX (default the
  // working directory), here the second level under SCR_PREFIX/.dlckpt.
  if (const char* flush = env("SCR_FLUSH"); flush != nullptr && *flush != '\0' && std::string(flush) != "0") {
    const char* prefix = env("SCR_PREFIX");
    std::string dir = std::string(prefix != nullptr && *prefix != '\0' ? prefix : ".") + "/.dlckpt";
    Status s = parser.Apply({"--persist-every", flush, "--persist", dir}, &o, help, nullptr);
    if (!s.ok()) return s.Prefixed("environment SCR_FLUSH");
  }
  // 2b. DLCKPT_<OPTION>.
  for (const auto& [var, option] : EnvOptions()) {
    const char* v = env(var.c_str());
    if (v == nullptr || *v == '\0') continue;
    std::vector<std::string> tokens;
    const CLI::Option* opt = parser.Find(option);
    if (opt != nullptr && OptionParser::IsFlag(*opt)) {
      std::string f = v;
      if (f == "1" || f == "true" || f == "yes") {
        tokens.push_back("--" + option);
      } else if (f != "0" && f != "false" && f != "no") {
        return Status::InvalidArgument(var + "=" + f + ": want 1 or 0 (a flag)");
      }
    } else {
      tokens = {"--" + option, v};
    }
    Status s = parser.Apply(tokens, &o, help, nullptr);
    if (!s.ok()) return s.Prefixed("environment " + var);
  }
  // 3. The command line.
  DLCKPT_RETURN_IF_ERROR(parser.Apply(argv, &o, help, &program));
  DLCKPT_RETURN_IF_ERROR(parser.EndOfSource());
  o.program = std::move(program);
  if (!o.halt.empty()) {
    if (!o.program.empty()) return Status::InvalidArgument("--halt JOB runs nothing: give no program");
    return o;  // only the run directory matters
  }
  if (o.program.empty()) return Status::InvalidArgument("no program given (dlckpt-run [OPTIONS] -- PROGRAM ...)");

  if (o.spares_per_group == 0) o.spares_per_group = o.scheme == "rs" ? 2 : 1;
  if (o.scheme.empty()) o.scheme = o.spares_per_group == 1 ? "xor" : "rs";
  if (o.scheme == "xor" && o.spares_per_group != 1) {
    return Status::InvalidArgument("--scheme xor has exactly one parity per group; use --scheme rs for " +
                                   std::to_string(o.spares_per_group) + " spares per group");
  }
  if (o.group_size == 0) o.group_size = o.nodes;
  const bool slurm_hosts = o.hosts == std::vector<std::string>{"slurm"};
  if (o.launcher == "srun" && (!o.mpiexec_args.empty() || !o.launcher_exec.empty())) {
    return Status::InvalidArgument("--mpiexec-args and --launcher-exec are for --launcher mpiexec; "
                                   "give srun's options with --srun-args");
  }
  if (!o.hosts.empty() && !slurm_hosts && static_cast<int>(o.hosts.size()) != o.nodes + o.spares) {
    return Status::InvalidArgument("--hosts lists " + std::to_string(o.hosts.size()) +
                                   " hosts but --nodes + --spares is " +
                                   std::to_string(o.nodes + o.spares));
  }
  if (!o.hosts.empty() && o.kill_command.empty()) {
    for (const auto& k : o.kills) {
      if (!k.ranks) return Status::InvalidArgument("killing hosts (--kill-node, --poweroff-node) needs --kill-command");
    }
    if (o.mtbf > 0) return Status::InvalidArgument("--mtbf with --hosts needs --kill-command");
  }
  if (o.group_size > o.nodes) {
    return Status::InvalidArgument("--group-size " + std::to_string(o.group_size) + " is larger than --nodes " +
                                   std::to_string(o.nodes) + ": a group holds at most every data node");
  }
  // Kill targets that cannot exist are refused now, not found missing at the end.
  const int ranks = o.nodes * o.ranks_per_node;
  for (const auto& k : o.kills) {
    for (const auto& target : k.nodes) {
      if (k.ranks) {
        char* end = nullptr;
        long r = std::strtol(target.c_str(), &end, 10);
        if (target.empty() || *end != '\0' || r < 0 || r >= ranks) {
          return Status::InvalidArgument("--crash-rank " + target + ": the job has ranks 0 to " +
                                         std::to_string(ranks - 1));
        }
      } else if (o.hosts.empty()) {
        const std::string& p = o.node_prefix;
        char* end = nullptr;
        long n = target.compare(0, p.size(), p) == 0 && target.size() > p.size()
                     ? std::strtol(target.c_str() + p.size(), &end, 10)
                     : -1;
        if (n < 0 || end == nullptr || *end != '\0' || n >= o.nodes + o.spares) {
          return Status::InvalidArgument("--kill-node " + target + ": no such node (the virtual nodes are " + p +
                                         "0 to " + p + std::to_string(o.nodes + o.spares - 1) + ")");
        }
      } else if (!slurm_hosts && std::find(o.hosts.begin(), o.hosts.end(), target) == o.hosts.end()) {
        return Status::InvalidArgument("--kill-node " + target + ": not one of --hosts");
      }
    }
  }
  if (o.on_spares_exhausted == "halt" && o.persist.empty()) {
    return Status::InvalidArgument("--on-spares-exhausted halt drains the newest epoch to --persist DIR: give one");
  }
  int groups = (o.nodes + o.group_size - 1) / o.group_size;
  if (o.parity != "spares" && o.nodes / groups <= o.spares_per_group &&
      o.spares < groups * o.spares_per_group) {
    return Status::InvalidArgument(
        "--parity " + o.parity + ": parity spread over a group needs more than " +
        std::to_string(o.spares_per_group) + " data node(s) per group, but --nodes " + std::to_string(o.nodes) +
        " in " + std::to_string(groups) + " group(s) leave " + std::to_string(o.nodes / groups) +
        "; give more --nodes, a larger --group-size, or spare nodes for --parity spares");
  }
  if (o.parity == "spares" && o.spares < groups * o.spares_per_group) {
    // Plain words: what is needed, why, what was given and what would do.
    auto count = [](int n, const std::string& what) {
      return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
    };
    const int need = groups * o.spares_per_group;
    return Status::InvalidArgument(
        "--parity spares needs " + count(need, "spare node") + " (" + std::to_string(o.spares_per_group) +
        " per group for " + count(groups, "group") + " of at most " + count(o.group_size, "data node") +
        "); --spares is " + std::to_string(o.spares) + ": give --spares " + std::to_string(need) +
        ", a larger --group-size, or --parity auto");
  }
  return o;
}

}  // namespace dlckpt::run

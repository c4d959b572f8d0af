#include "run_options.h"

#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <iterator>
#include <sstream>
#include <string_view>

#include "dlckpt/base/env.h"
#include "dlckpt/base/names.h"
#include "dlckpt/base/units.h"
#include "text.h"

namespace dlckpt::run {

const char kUsage[] = R"(usage: dlckpt-run [OPTIONS] -- PROGRAM [ARGS...]

Runs an MPI application with diskless checkpointing: launches the codec service
and the application (mpiexec or srun), and when a node dies rebuilds its checkpoint on a
spare node and relaunches the application, which resumes from its last
checkpoint. By default the cluster is simulated on this machine with virtual
nodes vn0, vn1, ...: the first --nodes hold application ranks, the next --spares
are spare nodes.

layout:
  --nodes N               data nodes (default 2)
  --ranks-per-node R      application ranks per data node (default 1)
  --spares S              spare nodes (default 1)
  --group-size G          data nodes per group (default: all in one group)
  --spares-per-group K    parity chunks per stripe: the parity nodes of each
                          group, or the losses a spread group survives (default
                          1 for xor, 2 for rs)
  --scheme xor|rs         erasure code (default xor when K = 1, else rs)
  --parity spares|spread|auto
                          where parity lives: on K spare nodes per group
                          (spares), spread over each group's data nodes, about
                          K/(G-K) of their checkpoint each, with spare nodes
                          only hosting replacements (spread), or on spares
                          while a group has them and spread once a recovery
                          used them up (auto, the default). When no spare node
                          is left to host a lost node's ranks, they run on a
                          surviving node (oversubscribed) and the run goes on
  --on-spares-exhausted continue|halt
                          when no spare node is left to host a lost node's
                          ranks: run them on a survivor (continue, the
                          default), or rebuild them there, drain that epoch to
                          --persist and stop (halt: exit 7, ready for
                          --restart-from in a larger allocation)
  --capacity SIZE         memfs store capacity per rank, 1M to 1T (default 256M)
  --max-files N           files and directories each store holds, 1 to 1M
                          (default: one per 32 KiB of --capacity, at least
                          1024: 8192 for 256M; sets DLCKPT_MAX_FILES for the
                          ranks). A full table gives ENOSPC and a line naming
                          it; mdtest -n 10000 needs --max-files 10100 or so
  --compress none|lz4     compress the stores' checkpoint data with LZ4 (sets
                          DLCKPT_COMPRESS for the ranks; see memfs.h)
  --encode sync|async     sync (default): dlckpt_checkpoint returns once the
                          epoch is protected; async: once every store committed
                          it, while the codec encodes it (sets DLCKPT_ENCODE for
                          the ranks; see dlckpt/dlckpt.h)
  --codec-nice N          run the codec's encode and rebuild work at nice N
                          (0-19; default 0 for sync, 10 for async, so that the
                          application computing meanwhile keeps the CPU)
  --hosts H1,H2,...       use these hosts (first N data, then spares) instead of
                          virtual nodes; node identity is the host name; ranks
                          are placed in order (mpiexec -hosts H:COUNT,...; srun
                          --distribution=arbitrary); --run-dir must then be
                          visible on every host
                          --hosts slurm: the hosts of the Slurm allocation
                          (SLURM_JOB_NODELIST), the first N + S of them
  --launcher mpiexec|srun launch both jobs with Hydra's mpiexec (default) or
                          with Slurm's srun --mpi=pmi2 (inside or outside an
                          allocation; virtual nodes then run on this host)
  --srun PATH             srun to use (default srun)
  --srun-args "ARGS"      extra srun arguments (split at white space), e.g.
                          "--partition=debug --time=60"
  --launcher-exec PATH    give mpiexec -launcher ssh -launcher-exec PATH (virtual
                          hosts of tests/vhost)
  --mpiexec-args "ARGS"   extra mpiexec arguments (split at white space) for
                          both jobs, e.g. from tests/vhost/dlckpt-vhost
                          mpiexec-args; a -genv LD_PRELOAD in them is merged
                          with --preload's
  --kill-command CMD      how to kill a node in --hosts mode, run with sh -c;
                          "{node}" is replaced by the node, "{how}" by crash or
                          poweroff (also used to fence a node that stopped
                          answering heartbeats, with poweroff)

second level (a persistent, e.g. parallel, file system; docs/design.md):
  --persist DIR           drain every Nth protected epoch to DIR/<job>/epoch.<E>/
                          in the background (one file per checkpoint file and a
                          MANIFEST with each file's rank, size and CRC32C); when
                          a failure exceeds what parity rebuilds, restart from
                          the newest complete drained epoch
  --persist-every N       drain epochs whose number is a multiple of N (default
                          10); a drain still running when the next is due makes
                          that one skipped (reported)
  --persist-keep K        keep the newest K complete drained epochs (default 2)
  --persist-bandwidth R   cap each rank's drain at R bytes/s (e.g. 200M; default
                          0 = unlimited)
  --restart-from DIR      start from the newest complete drained epoch in DIR
                          (a --persist DIR or its job directory), every file's
                          CRC verified; the job must have as many ranks
  --halt-seconds S        after S seconds, drain the newest protected epoch,
                          wait for it and stop the job (exit 7); also on
                          SIGUSR1 (srun --signal=USR1@T) and, with --persist, on
                          SIGTERM

failure injection (virtual nodes: kills the node's processes and destroys its
shared memory):
  --kill-node N1[,N2] --at WHEN   kill node(s) when WHEN happens; repeatable.
                          WHEN: checkpoint:E (after checkpoint E is protected),
                          commit:E (once every store committed E: with --encode
                          async, when dlckpt_checkpoint returns), drain:E (while
                          the ranks drain epoch E to --persist DIR: they hold
                          it 5 s + D before publishing, so the kill lands inside), time:T (T s
                          after the first launch), phase:write[:E] (while the
                          application writes checkpoint E), phase:encode[:E]
                          (while the codec encodes), phase:recover[:N] (during
                          the rebuild of the N-th recovery); each may end in +D
                          (D s later). For the phases the codec holds that
                          encode or rebuild 1 s + D, so the kill lands inside it
  --poweroff-node N1[,N2] --at WHEN   power node(s) off: silent first, then
                          dead (no launcher notices; heartbeats must). Virtual
                          nodes: their processes are stopped (SIGSTOP) and their
                          shared memory destroyed; the processes are killed once
                          the loss is detected. Hosts: --kill-command with {how}
  --crash-rank R1[,R2] --at WHEN   kill only the application process(es) of
                          these ranks (a process crash, no node lost)
  --mtbf SECONDS          kill random live nodes at exponential intervals
  --weibull-shape K       Weibull inter-failure times instead (shape K)
  --max-failures N        random kills at most (default 1)
  --seed S                random seed (default 1)

failure detection (besides the launcher noticing dead processes):
  --heartbeat-timeout S   declare a node lost after S seconds without a
                          heartbeat from its codec process (default 1.5;
                          heartbeats every 0.2 s); catches power-offs
  --heartbeat-address A   address the codec processes send heartbeats to
                          (default: 127.0.0.1 for virtual nodes, else the
                          local address on the route to the first host)

control:
  --max-recoveries M      give up after M recoveries (default 5)
  --timeout SECONDS       stop the whole run after SECONDS (default: none)
  --job ID                job id, 1-63 of [A-Za-z0-9_-] (default dlckpt<pid>
                          and 6 random hex digits); a job id in use by a
                          running dlckpt-run (it holds RUN_DIR/lock) is refused
  --run-dir DIR           rendezvous, events and logs (default /tmp/dlckpt-run.<job>);
                          created with mode 0700. An existing one is used only
                          if it is a directory (not a symbolic link) owned by
                          this user with no access for group and others
  --codec PATH            the dlckpt-codec executable (default: beside dlckpt-run)
  --mpiexec PATH          mpiexec to use (default mpiexec)
  --preload               run the application with LD_PRELOAD=libdlckpt_preload.so
  --keep                  keep stores, parity and the run directory at the end
                          (also when stopped by a signal)
  --resume                let the first launch restart from the checkpoint the
                          job's stores already hold (a --keep run of the same
                          --job); without it the application starts from
                          empty stores (relaunches after a recovery always
                          resume; sets DLCKPT_RESUME for the ranks)
  --oversubscribe         run even if this machine cannot: with virtual nodes
                          every process runs here, and dlckpt-run refuses more
                          than 64 per online CPU (N x R application ranks + one
                          codec process per data and spare node) or than
                          RLIMIT_NPROC, and stores (N x R x --capacity, all
                          allocated up front) larger than /dev/shm
  --term-grace SECONDS    on a signal, seconds the jobs get between SIGTERM and
                          SIGKILL (default 1); after a second signal, the most
                          dlckpt-run takes to end
  -v, --verbose           print every event
  --config FILE           read options from FILE (default: $DLCKPT_CONFIG)
  --halt JOB              run nothing: ask the running dlckpt-run of job JOB
                          (this user's, found through /tmp/dlckpt-run.JOB or
                          --run-dir) to halt, as SIGUSR1 does (SCR's scr_halt):
                          with --persist it drains the newest protected epoch
                          and exits 7, without it stops and exits 3. Exits 0
                          once the request was delivered, 1 when no such job
                          runs or it is another user's
  -h, --help              this help

Options come from, lowest precedence first: the defaults; the configuration
file (one option per line: "nodes = 4", "encode async", "keep"; '#' comments;
any option above but --config); the environment (SCR_SET_SIZE, SCR_SET_FAILURES
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
directory removed (unless --keep); a third signal ends it so at once.

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
(also for a job this machine cannot run, see --oversubscribe).
)";

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

namespace {

// Options without a value ("--NAME" on the command line): each sets its field.
struct FlagOption {
  std::string_view name;
  bool Options::*field;
};
constexpr FlagOption kFlagOptions[] = {{"keep", &Options::keep},
                                       {"preload", &Options::preload},
                                       {"oversubscribe", &Options::oversubscribe},
                                       {"verbose", &Options::verbose},
                                       {"resume", &Options::resume}};

// The flag option `name` (without "--"), or null.
const FlagOption* FindFlagOption(std::string_view name) {
  for (const FlagOption& f : kFlagOptions) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

}  // namespace

const std::vector<std::pair<std::string, std::string>>& EnvOptions() {
  static const auto* const kList = [] {
    auto* list = new std::vector<std::pair<std::string, std::string>>();
    for (const char* option :
         {"nodes", "ranks-per-node", "spares", "group-size", "spares-per-group", "scheme", "parity", "on-spares-exhausted", "capacity", "max-files", "compress",
          "encode", "codec-nice", "hosts", "launcher", "srun", "srun-args", "launcher-exec", "mpiexec",
          "mpiexec-args", "kill-command", "max-recoveries", "timeout", "job", "run-dir", "codec", "term-grace",
          "heartbeat-timeout", "heartbeat-address", "preload", "keep", "oversubscribe", "verbose",
          "resume", "persist", "persist-every", "persist-keep", "persist-bandwidth", "restart-from",
          "halt-seconds"}) {
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

// Applies the options in args[0..] to `o`, up to "--" or the first word that
// is not an option; *next is the index after them (where the program starts).
// On an error *next is the index of the option at fault (for a --kill-node
// without --at, of that --kill-node), so that a caller can say where it was.
Status ApplyOptions(const std::vector<std::string>& args, Options& o, bool* help, size_t* next) {
  std::vector<std::string> pending_kill;
  size_t pending_at = 0;
  bool pending_ranks = false, pending_poweroff = false;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    *next = i;
    std::string a = args[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "-h" || a == "--help") {
      *help = true;
      *next = args.size();
      return Status::OK();
    }
    // A flag option: --NAME, or -v for --verbose.
    const FlagOption* flag = a == "-v"                ? FindFlagOption("verbose")
                             : a.rfind("--", 0) == 0 ? FindFlagOption(std::string_view(a).substr(2))
                                                      : nullptr;
    if (flag != nullptr) {
      o.*(flag->field) = true;
      continue;
    }
    if (a.empty() || a[0] != '-') {
      // The program may follow without "--".
      break;
    }
    if (i + 1 >= args.size()) return Status::InvalidArgument(a + " needs a value");
    std::string v = args[++i];
    // Options whose value is a count in a range.
    struct IntOption {
      const char* name;
      int Options::*field;
      int64_t lo, hi;
    };
    static const IntOption kIntOptions[] = {
        {"--nodes", &Options::nodes, 1, 100000},
        {"--ranks-per-node", &Options::ranks_per_node, 1, 4096},
        {"--spares", &Options::spares, 0, 100000},
        {"--group-size", &Options::group_size, 1, 100000},
        {"--spares-per-group", &Options::spares_per_group, 1, 32},
        {"--max-failures", &Options::max_failures, 0, 1000000},
        {"--max-recoveries", &Options::max_recoveries, 0, 1000000},
    };
    auto int_option = std::find_if(std::begin(kIntOptions), std::end(kIntOptions),
                                   [&](const IntOption& io) { return a == io.name; });
    if (int_option != std::end(kIntOptions)) {
      DLCKPT_ASSIGN_OR_RETURN(int64_t n, ParseInt(v, a, int_option->lo, int_option->hi));
      o.*(int_option->field) = static_cast<int>(n);
    } else if (a == "--scheme") {
      if (v != "xor" && v != "rs") return Status::InvalidArgument("--scheme: want xor or rs, not '" + v + "'");
      o.scheme = v;
    } else if (a == "--parity") {
      if (v != "spares" && v != "spread" && v != "auto") {
        return Status::InvalidArgument("--parity: want spares, spread or auto, not '" + v + "'");
      }
      o.parity = v;
    } else if (a == "--on-spares-exhausted") {
      if (v != "continue" && v != "halt") {
        return Status::InvalidArgument("--on-spares-exhausted: want continue or halt, not '" + v + "'");
      }
      o.on_spares_exhausted = v;
    } else if (a == "--capacity") {
      auto size = ParseSize(v);
      if (!size.ok()) return size.status().Prefixed("--capacity");
      if (*size < kMinCapacity || *size > kMaxCapacity) {
        return Status::InvalidArgument("--capacity " + v + ": a store's capacity must be between 1M and 1T");
      }
      o.capacity = *size;
    } else if (a == "--max-files") {
      DLCKPT_ASSIGN_OR_RETURN(int64_t n, ParseInt(v, a, 1, kMaxMaxFiles));
      o.max_files = static_cast<uint32_t>(n);
    } else if (a == "--halt") {
      if (!ValidJobName(v)) return Status::InvalidArgument("--halt '" + v + "': want a job id, 1-63 of [A-Za-z0-9_-]");
      o.halt = v;
    } else if (a == "--encode") {
      if (v != "sync" && v != "async") return Status::InvalidArgument("--encode: want sync or async, not '" + v + "'");
      o.encode = v;
    } else if (a == "--codec-nice") {
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || n < 0 || n > 19) {
        return Status::InvalidArgument("--codec-nice: want 0 to 19, not '" + v + "'");
      }
      o.codec_nice = static_cast<int>(n);
    } else if (a == "--compress") {
      if (v != "none" && v != "lz4") return Status::InvalidArgument("--compress: want none or lz4, not '" + v + "'");
      o.compress = v;
    } else if (a == "--hosts") {
      o.hosts = Split(v, ',');
    } else if (a == "--launcher-exec") {
      o.launcher_exec = v;
    } else if (a == "--kill-command") {
      o.kill_command = v;
    } else if (a == "--mpiexec") {
      o.mpiexec = v;
    } else if (a == "--launcher") {
      if (v != "mpiexec" && v != "srun") {
        return Status::InvalidArgument("--launcher: want mpiexec or srun, not '" + v + "'");
      }
      o.launcher = v;
    } else if (a == "--srun") {
      o.srun = v;
    } else if (a == "--srun-args") {
      std::istringstream is(v);
      for (std::string w; is >> w;) o.srun_args.push_back(w);
    } else if (a == "--mpiexec-args") {
      std::istringstream is(v);
      for (std::string w; is >> w;) o.mpiexec_args.push_back(w);
    } else if (a == "--kill-node" || a == "--crash-rank" || a == "--poweroff-node") {
      pending_kill = Split(v, ',');
      pending_at = i - 1;
      pending_ranks = a == "--crash-rank";
      pending_poweroff = a == "--poweroff-node";
      if (pending_kill.empty()) return Status::InvalidArgument(a + " needs a list");
      if (pending_ranks) {
        for (const auto& r : pending_kill) {
          DLCKPT_RETURN_IF_ERROR(ParseInt(r, a, 0, 1 << 24).status());
        }
      }
    } else if (a == "--at") {
      if (pending_kill.empty()) {
        return Status::InvalidArgument("--at must follow --kill-node, --poweroff-node or --crash-rank");
      }
      DLCKPT_ASSIGN_OR_RETURN(KillTrigger t, ParseTrigger(v));
      o.kills.push_back(KillSpec{pending_kill, pending_ranks, pending_poweroff, t, v});
      pending_kill.clear();
    } else if (a == "--mtbf") {
      DLCKPT_ASSIGN_OR_RETURN(o.mtbf, ParseSeconds(v, a));
      if (o.mtbf <= 0) return Status::InvalidArgument("--mtbf must be positive");
    } else if (a == "--weibull-shape") {
      DLCKPT_ASSIGN_OR_RETURN(o.weibull_shape, ParseSeconds(v, a));
      if (o.weibull_shape <= 0) return Status::InvalidArgument("--weibull-shape must be positive");
    } else if (a == "--seed") {
      DLCKPT_ASSIGN_OR_RETURN(int64_t n, ParseInt(v, a, 0, INT64_MAX));
      o.seed = static_cast<uint64_t>(n);
    } else if (a == "--term-grace") {
      DLCKPT_ASSIGN_OR_RETURN(o.term_grace, ParseSeconds(v, a));
      if (o.term_grace > 3600) return Status::InvalidArgument("--term-grace: at most 3600 s");
    } else if (a == "--timeout") {
      DLCKPT_ASSIGN_OR_RETURN(o.timeout, ParseSeconds(v, a));
    } else if (a == "--heartbeat-timeout") {
      DLCKPT_ASSIGN_OR_RETURN(o.heartbeat_timeout, ParseSeconds(v, a));
      if (o.heartbeat_timeout < 0.1) return Status::InvalidArgument("--heartbeat-timeout must be at least 0.1 s");
    } else if (a == "--heartbeat-address") {
      o.heartbeat_address = v;
    } else if (a == "--job") {
      if (!ValidJobName(v)) return Status::InvalidArgument("--job '" + v + "': want 1-63 of [A-Za-z0-9_-]");
      o.job = v;
    } else if (a == "--config") {
      o.config = v;
    } else if (a == "--run-dir") {
      o.run_dir = v;
    } else if (a == "--codec") {
      o.codec = v;
    } else if (a == "--persist") {
      o.persist = v;
    } else if (a == "--persist-every") {
      DLCKPT_ASSIGN_OR_RETURN(int64_t n, ParseInt(v, a, 1, 1000000000));
      o.persist_every = static_cast<int>(n);
    } else if (a == "--persist-keep") {
      DLCKPT_ASSIGN_OR_RETURN(int64_t n, ParseInt(v, a, 1, 1000000));
      o.persist_keep = static_cast<int>(n);
    } else if (a == "--persist-bandwidth") {
      auto b = ParseSize(v);
      if (!b.ok()) return Status::InvalidArgument(a + ": '" + v + "' is not a byte rate (e.g. 200M, 0 = unlimited)");
      o.persist_bandwidth = *b;
    } else if (a == "--restart-from") {
      o.restart_from = v;
    } else if (a == "--halt-seconds") {
      DLCKPT_ASSIGN_OR_RETURN(o.halt_seconds, ParseSeconds(v, a));
    } else {
      return Status::InvalidArgument("unknown option " + a);
    }
  }
  if (!pending_kill.empty()) {
    *next = pending_at;
    return Status::InvalidArgument("--kill-node, --poweroff-node or --crash-rank without --at");
  }
  *next = i;
  return Status::OK();
}

}  // namespace

namespace {

// ConfigTokens, and in (*lines)[i] the line number of token i.
Result<std::vector<std::string>> ConfigTokensAt(const std::string& path, const std::string& text,
                                                std::vector<size_t>* lines) {
  std::vector<std::string> out;
  lines->clear();
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
    if (FindFlagOption(name) != nullptr) {
      if (value.empty() || value == "1" || value == "true" || value == "yes") {
        out.push_back("--" + name);
        lines->push_back(line_no);
      } else if (value != "0" && value != "false" && value != "no") {
        return Status::InvalidArgument(where + ": " + name + " is a flag: want true or false, not '" + value + "'");
      }
      continue;
    }
    if (value.empty()) return Status::InvalidArgument(where + ": " + name + " needs a value");
    out.push_back("--" + name);
    out.push_back(value);
    lines->insert(lines->end(), 2, line_no);
  }
  return out;
}

}  // namespace

Result<std::vector<std::string>> ConfigTokens(const std::string& path, const std::string& text) {
  std::vector<size_t> lines;
  return ConfigTokensAt(path, text, &lines);
}

Result<Options> ParseOptions(int argc, char** argv, bool* help) {
  return ParseOptions(std::vector<std::string>(argv + std::min(argc, 1), argv + argc), help,
                      [](const char* name) -> const char* { return std::getenv(name); });
}

Result<Options> ParseOptions(const std::vector<std::string>& argv, bool* help, const EnvFn& env) {
  Options o;
  *help = false;
  size_t next = 0;
  // 1. The configuration file: --config FILE, else $DLCKPT_CONFIG.
  const std::vector<std::string>& args = argv;
  std::string config;
  if (const char* c = env("DLCKPT_CONFIG")) config = c;
  {
    Options scratch;  // the command line alone, for its --config
    DLCKPT_RETURN_IF_ERROR(ApplyOptions(args, scratch, help, &next));
    if (*help) return scratch;
    if (!scratch.config.empty()) config = scratch.config;
  }
  if (!config.empty()) {
    auto text = Env::Default()->ReadFile(config, 1 << 20);
    if (!text.ok()) return text.status().Prefixed("configuration file");
    std::vector<size_t> lines;
    DLCKPT_ASSIGN_OR_RETURN(std::vector<std::string> tokens, ConfigTokensAt(config, *text, &lines));
    // Every error names FILE:LINE of the option at fault.
    auto where = [&](size_t token) {
      return "configuration file " + config + ":" + std::to_string(token < lines.size() ? lines[token] : 0);
    };
    Status s = ApplyOptions(tokens, o, help, &next);
    if (!s.ok()) return s.Prefixed(where(next));
    o.config = config;
    if (next != tokens.size()) {
      return Status::InvalidArgument(where(next) + ": '" + tokens[next] + "' is not an option");
    }
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
    Status s = ApplyOptions({"--" + std::string(option), value}, o, help, &next);
    if (!s.ok()) return s.Prefixed(std::string("environment ") + var);
  }
  // SCR_FLUSH=N (N > 0): every N-th checkpoint goes to SCR_PREFIX (default the
  // working directory), here the second level under SCR_PREFIX/.dlckpt.
  if (const char* flush = env("SCR_FLUSH"); flush != nullptr && *flush != '\0' && std::string(flush) != "0") {
    const char* prefix = env("SCR_PREFIX");
    std::string dir = std::string(prefix != nullptr && *prefix != '\0' ? prefix : ".") + "/.dlckpt";
    Status s = ApplyOptions({"--persist-every", flush, "--persist", dir}, o, help, &next);
    if (!s.ok()) return s.Prefixed("environment SCR_FLUSH");
  }
  // 2b. DLCKPT_<OPTION>.
  for (const auto& [var, option] : EnvOptions()) {
    const char* v = env(var.c_str());
    if (v == nullptr || *v == '\0') continue;
    std::vector<std::string> tokens;
    if (FindFlagOption(option) != nullptr) {
      std::string f = v;
      if (f == "1" || f == "true" || f == "yes") {
        tokens.push_back("--" + option);
      } else if (f != "0" && f != "false" && f != "no") {
        return Status::InvalidArgument(var + "=" + f + ": want 1 or 0 (a flag)");
      }
    } else {
      tokens = {"--" + option, v};
    }
    Status s = ApplyOptions(tokens, o, help, &next);
    if (!s.ok()) return s.Prefixed("environment " + var);
  }
  // 3. The command line.
  DLCKPT_RETURN_IF_ERROR(ApplyOptions(args, o, help, &next));
  if (*help) return o;
  for (; next < args.size(); ++next) o.program.push_back(args[next]);
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

MachineLimits ThisMachine() {
  MachineLimits m;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  m.online_cpus = cpus > 0 ? cpus : 1;
  struct rlimit rl;
  // RLIMIT_NPROC binds neither root nor a process with CAP_SYS_RESOURCE; root is the common case.
  if (geteuid() != 0 && getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    m.max_processes = static_cast<uint64_t>(rl.rlim_cur);
  }
  struct statvfs sv;
  if (statvfs("/dev/shm", &sv) == 0) {
    m.shm_bytes = static_cast<uint64_t>(sv.f_blocks) * static_cast<uint64_t>(sv.f_frsize);
  }
  return m;
}

Status CheckMachineLimits(const Options& o, const MachineLimits& m) {
  if (o.oversubscribe || !o.hosts.empty()) return Status::OK();
  const uint64_t ranks = static_cast<uint64_t>(o.nodes) * static_cast<uint64_t>(o.ranks_per_node);
  const uint64_t codecs = static_cast<uint64_t>(o.nodes) + static_cast<uint64_t>(o.spares);
  const uint64_t procs = ranks + codecs;
  const uint64_t cpus = static_cast<uint64_t>(std::max(1L, m.online_cpus));
  const std::string what = "--nodes " + std::to_string(o.nodes) + " x --ranks-per-node " +
                           std::to_string(o.ranks_per_node) + " application rank(s) + " + std::to_string(codecs) +
                           " codec process(es) = " + std::to_string(procs) + " processes on this machine";
  const std::string hint = "; give fewer --nodes, --ranks-per-node or --spares, use --hosts, or --oversubscribe";
  if (procs > kProcessesPerCpu * cpus) {
    return Status::InvalidArgument(what + ", more than it can run (" + std::to_string(kProcessesPerCpu) +
                                   " per online CPU x " + std::to_string(cpus) + " = " +
                                   std::to_string(kProcessesPerCpu * cpus) + ")" + hint);
  }
  if (m.max_processes > 0 && procs > m.max_processes) {
    return Status::InvalidArgument(what + ", more than RLIMIT_NPROC (" + std::to_string(m.max_processes) + ")" + hint);
  }
  const unsigned __int128 stores = static_cast<unsigned __int128>(ranks) * o.capacity;
  if (m.shm_bytes > 0 && stores > m.shm_bytes) {
    return Status::InvalidArgument(std::to_string(ranks) + " store(s) of --capacity " + FormatSize(o.capacity) +
                                   " need more than /dev/shm holds (" + FormatSize(m.shm_bytes) + ")" + hint);
  }
  return Status::OK();
}

}  // namespace dlckpt::run

// dlckpt-ctl: control dlckpt-fuse mounts from the shell: one mount
// (checkpoint, status), or every mount of a job (checkpoint-all, run: MPI
// programs, one process per mount).
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "dlckpt/base/cli.h"
#include "dlckpt/base/node.h"
#include "dlckpt/base/version.h"
#include "dlckpt/fuse/control.h"
#include "dlckpt/fuse/job.h"

namespace {

using namespace dlckpt::fusefs;  // NOLINT(google-build-using-namespace)

constexpr const char* kUsage = R"(usage: dlckpt-ctl COMMAND [ARGS]

Controls dlckpt-fuse mounts.

one mount:
  checkpoint MOUNTPOINT   push files still open to the store (syncfs), then
                          trigger a checkpoint and print its epoch. A local
                          mount commits and acknowledges its store alone; a
                          coordinated mount under `dlckpt-ctl run` asks for a
                          job-wide checkpoint, which is taken once the command
                          of every process asked. Refused once if syncfs
                          reports a write error since the last sync (e.g.
                          ENOSPC during writeback)
  status MOUNTPOINT       print the store's identity, epochs, space and last
                          checkpoint

every mount of a job (MPI programs: start one process per mount, e.g.
`mpiexec -n NODES -ppn 1 dlckpt-ctl checkpoint-all --mount /mnt/ckpt`; the
mounts must run with `dlckpt-fuse --checkpoint coordinated`):
  checkpoint-all [OPTIONS]
                          one job-wide checkpoint: every mount commits the same
                          new epoch, the codec encodes it (the layout rank ->
                          node -> store is read from the mounts), then every
                          mount acknowledges it; on any error every mount drops
                          it and keeps its previous epoch. An epoch left
                          pending by an interrupted checkpoint-all is completed
                          first. Prints the epoch (process 0)
  run [OPTIONS] -- COMMAND [ARGS...]
                          on every process: start dlckpt-fuse on the mount for
                          store /dlckpt.JOB.NODE.rRANK (RANK: the MPI rank;
                          an existing store, e.g. restored or rebuilt by a
                          recovery, is attached), run COMMAND with
                          DLCKPT_MOUNT, DLCKPT_RANK, DLCKPT_NODE and
                          DLCKPT_RESTARTED_EPOCH set, and take a job-wide
                          checkpoint (as checkpoint-all) whenever COMMAND on
                          every process has asked for one with `dlckpt-ctl
                          checkpoint $DLCKPT_MOUNT` (or `echo 1 >
                          $DLCKPT_MOUNT/.dlckpt/checkpoint`). Unmounts when
                          every COMMAND has ended; exits with COMMAND's status.
                          Under dlckpt-run (which sets DLCKPT_JOB,
                          DLCKPT_NODE and DLCKPT_RENDEZVOUS) the job survives
                          node losses: `dlckpt-run --nodes N --spares S --
                          dlckpt-ctl run --mount /mnt/{node} -- job.sh`

options of checkpoint-all and run:
  --mount PATTERN         this process's mount point; {node} is replaced by the
                          node ($DLCKPT_NODE, else the host name) and {rank} by
                          the MPI rank (default $DLCKPT_MOUNT)
  --rendezvous PATH       the codec service's rendezvous file (default
                          $DLCKPT_RENDEZVOUS, which dlckpt-run sets)
  --no-codec              no codec: job-wide epochs without parity
  --rendezvous-timeout S  wait up to S s for the rendezvous file (default
                          $DLCKPT_RENDEZVOUS_TIMEOUT, else 60)
  --encode-timeout S      wait up to S s for an encode (default
                          $DLCKPT_ENCODE_TIMEOUT, else 3600)
  --allow-mismatch        checkpoint even if the mounts hold different
                          acknowledged epochs (e.g. one store was replaced)
options of run:
  --job JOB               job id (default $DLCKPT_JOB)
  --capacity N, --block-size N, --max-files N
                          geometry of new stores (default capacity:
                          $DLCKPT_STORE_CAPACITY, which dlckpt-run sets)
  --fuse-option OPT       one more dlckpt-fuse argument (repeatable)
  --fuse PATH             the dlckpt-fuse executable (default: beside dlckpt-ctl)
  --mount-timeout S       wait up to S s for a mount (default 30)

Exit status: 0 on success, 1 if the command failed (the message names the
mount, rank or node and the cause), 2 on bad usage; run: COMMAND's status.
)";

int Checkpoint(const std::string& mount) {
  auto e = MountControl(mount).Trigger();
  if (!e.ok()) {
    std::string why = e.status().message();
    for (std::string prefix : {"mount " + mount + ": checkpoint: ", "mount " + mount + ": "}) {
      if (why.rfind(prefix, 0) == 0) {
        why = why.substr(prefix.size());
        break;
      }
    }
    std::fprintf(stderr, "dlckpt-ctl: checkpoint of %s failed: %s\n", mount.c_str(), why.c_str());
    return 1;
  }
  std::printf("%" PRIu64 "\n", *e);
  return 0;
}

int PrintStatus(const std::string& mount) {
  // The raw text: every key, including those this version does not parse.
  MountControl control(mount);
  auto st = control.State();
  if (!st.ok()) {
    std::fprintf(stderr, "dlckpt-ctl: %s\n", st.status().message().c_str());
    return 1;
  }
  std::string path = mount + "/.dlckpt/status";
  FILE* f = std::fopen(path.c_str(), "re");
  if (f == nullptr) {
    std::fprintf(stderr, "dlckpt-ctl: %s: %s\n", path.c_str(), std::strerror(errno));
    return 1;
  }
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) std::fwrite(buf, 1, n, stdout);
  std::fclose(f);
  return 0;
}

struct JobArgs {
  std::string mount;
  JobOptions job;
  RunOptions run;
};

bool Seconds(const std::string& text, int* ms) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v > 0) || v > 1e6) return false;
  *ms = static_cast<int>(v * 1000);
  return true;
}

std::string FusePath() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto p = self.parent_path() / "dlckpt-fuse";
    if (std::filesystem::exists(p, ec)) return p.string();
  }
  return "dlckpt-fuse";
}

// The options of checkpoint-all (run = false) or run, bound to `a`; each
// variable named in the help is the option's default when set and not empty.
struct JobCommand {
  CLI::App* app;
  JobArgs a;
  std::string rendezvous_timeout = "60";
  std::string encode_timeout = "3600";
  std::string mount_timeout;
  std::vector<std::string> stray;  // arguments before `--` that are no option
  bool run;

  JobCommand(CLI::App& parent, const char* name, bool is_run) : app(parent.add_subcommand(name)), run(is_run) {
    a.run.fuse_path = FusePath();
    app->add_option("--mount", a.mount)->envname("DLCKPT_MOUNT");
    app->add_option("--rendezvous", a.job.rendezvous)->envname("DLCKPT_RENDEZVOUS");
    app->add_flag("--no-codec", a.job.no_codec);
    app->add_flag("--allow-mismatch", a.job.allow_mismatch);
    app->add_option("--rendezvous-timeout", rendezvous_timeout)->envname("DLCKPT_RENDEZVOUS_TIMEOUT");
    app->add_option("--encode-timeout", encode_timeout)->envname("DLCKPT_ENCODE_TIMEOUT");
    app->add_option("ARGUMENT", stray);
    if (!run) return;
    app->add_option("--job", a.run.job)->envname("DLCKPT_JOB");
    // dlckpt-fuse's arguments, in the order given.
    for (const char* geometry : {"--capacity", "--block-size", "--max-files"}) {
      app->add_option_function<std::string>(geometry, [this, geometry](const std::string& v) {
           a.run.fuse_args.insert(a.run.fuse_args.end(), {geometry, v});
         })->trigger_on_parse();
    }
    app->add_option_function<std::string>("--fuse-option", [this](const std::string& v) {
         a.run.fuse_args.push_back(v);
       })->trigger_on_parse();
    app->add_option("--fuse", a.run.fuse_path);
    app->add_option("--mount-timeout", mount_timeout);
  }

  // The checks once parsed, with `command` (what followed `--`, for run);
  // "" when fine, else the usage error.
  std::string Check(std::vector<std::string> command) {
    if (!stray.empty()) return "unexpected argument '" + stray[0] + "'" + (run ? " (put COMMAND after --)" : "");
    if (!Seconds(rendezvous_timeout, &a.job.rendezvous_timeout_ms)) {
      return "bad --rendezvous-timeout (or DLCKPT_RENDEZVOUS_TIMEOUT) '" + rendezvous_timeout + "'";
    }
    if (!Seconds(encode_timeout, &a.job.encode_timeout_ms)) {
      return "bad --encode-timeout (or DLCKPT_ENCODE_TIMEOUT) '" + encode_timeout + "'";
    }
    if (!mount_timeout.empty() && !Seconds(mount_timeout, &a.run.mount_timeout_ms)) {
      return "bad --mount-timeout '" + mount_timeout + "'";
    }
    if (a.mount.empty()) return "no mount point: give --mount PATTERN (or set DLCKPT_MOUNT)";
    if (a.job.rendezvous.empty() && !a.job.no_codec) {
      return "no codec service: give --rendezvous PATH (or set DLCKPT_RENDEZVOUS; dlckpt-run does), "
             "or --no-codec for epochs without parity";
    }
    if (!a.job.rendezvous.empty() && a.job.no_codec) return "--no-codec and --rendezvous exclude each other";
    if (run) {
      a.run.command = std::move(command);
      if (a.run.command.empty()) return "no COMMAND given after --";
      a.run.mount_pattern = a.mount;
      a.run.checkpoint = a.job;
    }
    return "";
  }
};

int CheckpointAll(const JobArgs& a) {
  MPI_Init(nullptr, nullptr);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  JobOptions jo = a.job;
  jo.log = [](const std::string& m) { std::fprintf(stderr, "dlckpt-ctl checkpoint-all: %s\n", m.c_str()); };
  MountControl mount(ExpandMountPattern(a.mount, dlckpt::ThisNode(), rank));
  dlckpt::Result<uint64_t> e = dlckpt::Status::IOError("not run");
  {
    JobCheckpointer checkpointer(MPI_COMM_WORLD, jo);
    e = checkpointer.Checkpoint(mount);
  }
  if (rank == 0) {
    if (e.ok()) {
      std::printf("%" PRIu64 "\n", *e);
    } else {
      std::fprintf(stderr, "dlckpt-ctl checkpoint-all: %s\n", e.status().ToString().c_str());
    }
  }
  std::fflush(stdout);
  MPI_Finalize();
  return e.ok() ? 0 : 1;
}

int Run(const JobArgs& a) {
  MPI_Init(nullptr, nullptr);
  int rc = RunJob(a.run);
  std::fflush(stdout);
  MPI_Finalize();
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  if (dlckpt_version_requested(argc, argv)) return 0;
  // run's COMMAND: everything after the first `--`, never parsed here.
  std::vector<std::string> args(argv + 1, argv + argc);
  std::vector<std::string> command;
  if (!args.empty() && args[0] == "run") {
    if (auto dashes = std::find(args.begin(), args.end(), "--"); dashes != args.end()) {
      command.assign(dashes + 1, args.end());
      args.erase(dashes, args.end());
    }
  }
  CLI::App app{"", "dlckpt-ctl"};
  app.formatter_fn([](const CLI::App*, const std::string&, CLI::AppFormatMode) { return std::string(kUsage); });
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.require_subcommand(0, 1);  // a later word is an argument, even if it names a command
  std::vector<std::string> unknown_command;
  app.add_option("COMMAND", unknown_command);
  std::string mount;
  std::vector<std::string> extra;
  CLI::App* checkpoint = app.add_subcommand("checkpoint");
  CLI::App* status = app.add_subcommand("status");
  for (CLI::App* one : {checkpoint, status}) {
    one->add_option("MOUNTPOINT", mount);
    one->add_option("ARGUMENT", extra);
  }
  JobCommand all(app, "checkpoint-all", false);
  JobCommand run(app, "run", true);
  bool help = false;
  const dlckpt::Status parsed = dlckpt::cli::ParseArgs(app, args, &help);
  if (help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  auto usage = [](const std::string& why) {
    std::fprintf(stderr, "dlckpt-ctl: %s\n(try dlckpt-ctl --help)\n", why.c_str());
    return 2;
  };
  if (!unknown_command.empty()) return usage("unknown command '" + unknown_command[0] + "'");
  if (!parsed.ok()) return usage(parsed.message());
  for (JobCommand* job : {&all, &run}) {
    if (!job->app->parsed()) continue;
    const std::string bad = job->Check(command);
    if (!bad.empty()) return usage(job->app->get_name() + ": " + bad);
    return job->run ? Run(job->a) : CheckpointAll(job->a);
  }
  if (!checkpoint->parsed() && !status->parsed()) return usage("expected a COMMAND");
  const std::string cmd = checkpoint->parsed() ? "checkpoint" : "status";
  if (mount.empty() || !extra.empty()) return usage(cmd + ": expected MOUNTPOINT");
  return checkpoint->parsed() ? Checkpoint(mount) : PrintStatus(mount);
}

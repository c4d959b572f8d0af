// The supervisor's second level: the persistence environment of the ranks
// (which drain their own stores, coordinator/src/api_persist.h), the drain
// events, the restart from a drained epoch after a failure parity cannot
// cover or with --restart-from, and the halt. Thread safety: the
// supervisor's thread only.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "dlckpt/base/env.h"
#include "dlckpt/base/names.h"
#include "dlckpt/base/progress.h"
#include "dlckpt/persist/persist.h"
#include "procs.h"
#include "supervisor.h"
#include "text.h"

namespace dlckpt::run {

namespace fs = std::filesystem;

namespace {

std::string Absolute(const std::string& p) {
  std::error_code ec;
  fs::path a = fs::absolute(p, ec);
  return ec ? p : a.lexically_normal().string();
}

}  // namespace

void Supervisor::AddPersistEnv(JobSpec* job) const {
  if (!o_.persist.empty()) {
    job->env.emplace_back("DLCKPT_PERSIST", Absolute(o_.persist));
    job->env.emplace_back("DLCKPT_PERSIST_EVERY", std::to_string(o_.persist_every));
    job->env.emplace_back("DLCKPT_PERSIST_KEEP", std::to_string(o_.persist_keep));
    job->env.emplace_back("DLCKPT_PERSIST_BANDWIDTH", std::to_string(o_.persist_bandwidth));
  }
  if (!restore_dir_.empty()) job->env.emplace_back("DLCKPT_RESTORE_FROM", restore_dir_);
  // --at drain:E[+D]: the ranks hold that drain before publishing it, long
  // enough for the kill to land inside (see DLCKPT_DRAIN_HOLD in api_persist.h).
  for (size_t i = 0; i < o_.kills.size(); ++i) {
    if (o_.kills[i].at.kind != KillTrigger::kDrain || faults_.kill_done[i]) continue;
    job->env.emplace_back("DLCKPT_DRAIN_HOLD",
                          std::to_string(o_.kills[i].at.epoch) + ":" + Fixed(o_.kills[i].at.delay + 5.0, 3));
    break;
  }
}

void Supervisor::HandleDrainEvent(const events::Event& e) {
  if (e.kind == events::Kind::kDrainSkip && e.rank == 0) {
    ++stats_.drains_skipped;
  } else if (e.kind == events::Kind::kDrainEnd) {
    if (!e.ok()) {
      ++stats_.drains_failed;
    } else if (e.published && stats_.drained.insert(e.epoch).second) {
      Log("epoch " + std::to_string(e.epoch) + " drained to " +
          persist::EpochDir(persist::JobDir(Absolute(o_.persist), o_.job), e.epoch));
    }
  }
}

Result<std::string> Supervisor::ChooseDrainedEpoch(const std::string& job_dir) {
  DLCKPT_ASSIGN_OR_RETURN(std::vector<persist::DrainedEpoch> all, persist::ListEpochs(job_dir));
  const int ranks = o_.nodes * o_.ranks_per_node;
  std::string seen;
  for (const auto& e : all) {
    const std::string name = "drained epoch " + std::to_string(e.epoch);
    if (e.state != persist::EpochState::kComplete) {
      Log(name + " is " + persist::EpochStateName(e.state) + " (" + e.problem + "): not used");
      seen += (seen.empty() ? "" : ", ") + std::to_string(e.epoch) + " " + persist::EpochStateName(e.state);
      continue;
    }
    if (e.ranks != ranks) {
      return Status::InvalidArgument(name + " in " + job_dir + " was drained from " + std::to_string(e.ranks) +
                                     " ranks; this job has " + std::to_string(ranks) +
                                     " (--nodes x --ranks-per-node must match)");
    }
    Log("verifying " + name + " (" + std::to_string(e.files) + " files, " + std::to_string(e.bytes) +
        " bytes) in " + e.dir);
    Progress progress("dlckpt-run: verifying " + name, e.bytes);
    Status v = persist::VerifyEpoch(e.dir, [&](uint64_t done, uint64_t) { progress.Update(done); });
    progress.Done();
    if (v.ok()) return e.dir;
    Log(name + " fails verification, not used: " + v.message());
    seen += (seen.empty() ? "" : ", ") + std::to_string(e.epoch) + " corrupt";
  }
  return Status::NotFound("no complete drained epoch that verifies in " + job_dir +
                          (seen.empty() ? std::string(" (none drained)") : " (found: " + seen + ")"));
}

Status Supervisor::RestartFromDrained(RecoveryTimes* t) {
  const double t0 = Now();
  const std::string job_dir = persist::JobDir(Absolute(o_.persist), o_.job);
  auto chosen = ChooseDrainedEpoch(job_dir);
  std::string edir;
  if (chosen.ok()) {
    edir = *chosen;
  } else if (chosen.status().code() == ENOENT && stats_.last_epoch == 0) {
    // Nothing protected in this run yet: start where the run started, from
    // the epoch it was restored from (--restart-from), or from scratch.
    edir = restore_dir_;
  } else {
    return chosen.status();
  }
  if (o_.hosts.empty()) {
    // Fresh virtual nodes replace the lost ones, as a new allocation would.
    dead_.clear();
    placement_.clear();
    for (int r = 0; r < o_.nodes * o_.ranks_per_node; ++r) placement_[r] = nodes_[r / o_.ranks_per_node];
    auto names = Env::Default()->ListShm(JobPrefix(o_.job));
    if (names.ok()) {
      for (const auto& n : *names) (void)Env::Default()->UnlinkShm(n);
    }
  } else {
    // Hosts: every data rank needs a live host; lost ones are replaced by spares.
    std::vector<std::string> free_nodes = FreeNodes();
    std::set<std::string> lost;
    for (const auto& [r, n] : placement_) {
      if (dead_.count(n)) lost.insert(n);
    }
    if (lost.size() > free_nodes.size()) {
      return Status::Error(EHOSTDOWN, std::to_string(lost.size() - free_nodes.size()) +
                                          " host(s) missing to restart from " + edir + " (" +
                                          std::to_string(lost.size()) + " lost, " +
                                          std::to_string(free_nodes.size()) +
                                          " spare(s) left): run dlckpt-run --restart-from " + Absolute(o_.persist) +
                                          " in an allocation with enough hosts");
    }
    std::map<std::string, std::string> moved;
    size_t next = 0;
    for (auto& [r, n] : placement_) {
      if (!dead_.count(n)) continue;
      if (!moved.count(n)) moved[n] = free_nodes[next++];
      n = moved[n];
    }
  }
  restore_dir_ = edir;
  t->what = edir.empty() ? std::string("a fresh start on fresh nodes: no epoch was protected or drained yet")
                         : "restart from the persistent copy: drained epoch " +
                               fs::path(edir).filename().string().substr(6) + " (" + edir + ")";
  Log(t->what);
  t->survey = Now() - t0;
  double t1 = Now();
  DLCKPT_RETURN_IF_ERROR(LaunchCodec());
  t->rebuild = Now() - t1;
  return Status::OK();
}

Status Supervisor::PrepareRestartFrom() {
  if (!o_.persist.empty()) {
    // DIR/<job> is this user's alone (0700) or the run does not start: a
    // directory another user planted or can write is refused, saying why.
    // One that cannot be made now (a file system not mounted yet, full) is
    // the drains' problem: they warn, and the run goes on protected by parity.
    Status p = persist::PrepareJobDir(persist::JobDir(Absolute(o_.persist), o_.job));
    if (p.code() == EPERM) return p.Prefixed("--persist " + o_.persist);
    if (!p.ok()) Log("warning: --persist " + o_.persist + ": " + p.message() + "; the drains will try again");
  }
  if (o_.restart_from.empty()) return Status::OK();
  DLCKPT_ASSIGN_OR_RETURN(std::string job_dir, persist::FindJobDir(Absolute(o_.restart_from), o_.job));
  auto edir = ChooseDrainedEpoch(job_dir);
  if (!edir.ok()) return edir.status().Prefixed("--restart-from " + o_.restart_from);
  restore_dir_ = *edir;
  Log("restarting from " + restore_dir_);
  return Status::OK();
}

bool Supervisor::HaltDrain(const std::string& why) {
  // Tell the application (SCR_Should_exit); one that watches gets --term-grace
  // to reach its next checkpoint and end.
  if (int fd = open(HaltFile().c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600); fd >= 0) close(fd);
  if (app_pid_ > 0 && access((HaltFile() + ".watched").c_str(), F_OK) == 0) {
    const int allowed = TerminationSignals();
    for (const double t0 = Now(); Now() - t0 < o_.term_grace && TerminationSignals() <= allowed;) {
      if (Reap(app_pid_, nullptr)) {
        app_pid_ = -1;
        Log(why + ": the application ended on its own (SCR_Should_exit)");
        break;
      }
      struct timespec ts{0, 20 * 1000 * 1000};
      nanosleep(&ts, nullptr);
    }
  }
  if (o_.persist.empty()) {
    halt_note_ = "halted by " + why + " without --persist: nothing drained";
    return false;
  }
  const std::string job_dir = persist::JobDir(Absolute(o_.persist), o_.job);
  Log(why + ": draining the newest protected epoch before stopping");
  // The ranks go first, so the stores hold still (a drain of theirs dies with them).
  for (int round = 0; round < 100; ++round) {
    if (app_pgid_ > 1) kill(-app_pgid_, SIGKILL);
    auto pids = FindProcesses({"DLCKPT_JOB=" + o_.job, "DLCKPT_RENDEZVOUS=" + rendezvous_});
    if (app_pid_ > 0 && Reap(app_pid_, nullptr)) app_pid_ = -1;
    if (pids.empty() && app_pid_ < 0) break;
    Signal(pids, SIGKILL);
    struct timespec ts{0, 50 * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
  for (const auto& e : follower_->Poll()) HandleEvent(e);
  // Every node drains its own stores, at the epoch they hold acknowledged:
  // dlckpt-store drain, launched like the codec (on the virtual nodes, or on
  // the hosts, whose stores this process cannot read).
  std::set<std::string> nodes;
  JobSpec job;
  job.name = "drain";
  job.virtual_nodes = o_.hosts.empty();
  job.env = {{"DLCKPT_JOB", o_.job}};
  job.program = {ToolPath("dlckpt-store"), "drain", Absolute(o_.persist), "--job", o_.job, "--ranks",
                 std::to_string(o_.nodes * o_.ranks_per_node)};
  if (stats_.last_epoch > 0) {
    // The newest epoch rank 0 saw protected: every store holds it, acknowledged
    // or (a halt during the acknowledgement) still pending.
    job.program.push_back("--epoch");
    job.program.push_back(std::to_string(stats_.last_epoch));
  }
  if (o_.persist_bandwidth > 0) {
    // The option is per rank; a node drains its ranks one after another.
    job.program.push_back("--bandwidth");
    job.program.push_back(std::to_string(o_.persist_bandwidth));
  }
  for (const auto& [r, node] : placement_) {
    if (nodes.insert(node).second) job.segments.emplace_back(node, 1);
  }
  // Its output (progress, one line per node, errors) goes where dlckpt-run's does.
  Status s;
  auto pid = LaunchJob(job, "", {});
  int status = 0;
  if (!pid.ok()) {
    s = pid.status();
  } else {
    // A further signal stops the drain (the one that asked for this halt does not).
    const int allowed = TerminationSignals();
    while (!Reap(*pid, &status)) {
      if (TerminationSignals() > allowed) {
        kill(-*pid, SIGKILL);
        (void)Reap(*pid, &status);
        s = Status::Error(EINTR, "terminated during the drain");
        break;
      }
      struct timespec ts{0, 50 * 1000 * 1000};
      nanosleep(&ts, nullptr);
    }
    if (s.ok() && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      s = Status::IOError("dlckpt-store drain on the nodes: " + DescribeStatus(status) + " (see above)");
    }
  }
  uint64_t newest = 0;
  if (s.ok()) {
    // The epoch the nodes drained (or found drained already): stats_.last_epoch,
    // or without one, the newest complete epoch.
    auto all = persist::ListEpochs(job_dir);
    if (all.ok()) {
      for (const auto& e : *all) {
        if (e.state == persist::EpochState::kComplete && (stats_.last_epoch == 0 || e.epoch == stats_.last_epoch)) {
          newest = std::max(newest, e.epoch);
        }
      }
    }
    if (newest == 0) s = Status::Corruption("the drain left no complete epoch in " + job_dir);
  }
  if (s.ok()) {
    stats_.drained.insert(newest);
    (void)persist::Prune(job_dir, o_.persist_keep);
    halt_note_ = "halted by " + why + "; epoch " + std::to_string(newest) + " drained to " +
                 persist::EpochDir(job_dir, newest) + "; continue with --restart-from " + Absolute(o_.persist);
  } else {
    halt_note_ = "halted by " + why + "; the halt drain failed (" + s.message() + ")";
  }
  Log(halt_note_);
  auto left = persist::ListEpochs(job_dir);
  if (left.ok()) {
    for (const auto& e : *left) {
      if (e.state == persist::EpochState::kComplete) return true;
    }
  }
  return false;
}

int Supervisor::Halt(const std::string& why) {
  bool have = HaltDrain(why);
  StopCodec();
  TearDownJobs();
  if (Terminating()) return Terminate();
  return Finish(have ? kExitHalted : kExitUnrecoverable, halt_note_);
}

}  // namespace dlckpt::run

// The supervisor's failure injection (--kill-node/--poweroff-node/--crash-rank
// at a WHEN, --mtbf random kills) and the heartbeat check that fences a
// silent node; called from the monitor loop (supervisor.cc). Thread safety:
// the supervisor's thread only.
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "dlckpt/base/env.h"
#include "dlckpt/base/names.h"
#include "procs.h"
#include "supervisor.h"
#include "text.h"

namespace dlckpt::run {

void Supervisor::ScheduleKill(size_t spec, double at) {
  if (faults_.kill_done[spec] || faults_.kill_at[spec] >= 0) return;
  faults_.kill_at[spec] = at;
}

void Supervisor::AddCodecHolds(std::vector<std::string>* env) const {
  // DLCKPT_CODEC_HOLD_ENCODE / _REBUILD: codec_service.cc.
  bool hold_encode = false, hold_rebuild = false;
  for (size_t i = 0; i < o_.kills.size(); ++i) {
    const KillSpec& k = o_.kills[i];
    if (faults_.kill_done[i]) continue;
    if (k.at.kind == KillTrigger::kEncode && !hold_encode) {
      env->push_back("DLCKPT_CODEC_HOLD_ENCODE=" + std::to_string(k.at.epoch) + ":" + Fixed(k.at.delay + 1.0, 3));
      hold_encode = true;
    } else if (k.at.kind == KillTrigger::kRecover && !hold_rebuild && in_recovery_ &&
               recoveries_started_ == k.at.occurrence) {
      env->push_back("DLCKPT_CODEC_HOLD_REBUILD=" + Fixed(k.at.delay + 1.0, 3));
      hold_rebuild = true;
    }
  }
}

void Supervisor::AddWriteHold(JobSpec* app) const {
  // DLCKPT_WRITE_HOLD: api.cc.
  for (size_t i = 0; i < o_.kills.size(); ++i) {
    const KillTrigger& t = o_.kills[i].at;
    if (t.kind != KillTrigger::kWrite || faults_.kill_done[i]) continue;
    app->env.emplace_back("DLCKPT_WRITE_HOLD", std::to_string(t.epoch) + ":" + Fixed(t.delay + 1.0, 3));
    return;
  }
}

void Supervisor::HandleEvent(const events::Event& e) {
  using events::Kind;
  if (o_.verbose) Log("event: " + events::Format(e));
  HandleDrainEvent(e);
  switch (e.kind) {
    case Kind::kEncodeProgress:
    case Kind::kRebuildProgress: {
      // Progress of a long encode or rebuild (the codec reports it after 2 s).
      const bool rebuild = e.kind == Kind::kRebuildProgress;
      const std::string key = std::string(events::KindName(e.kind)) + " " + std::to_string(e.epoch) + " " + e.node;
      progress_seconds_ = e.seconds;
      auto& p = progress_[key].second;
      progress_[key].first = e.total;
      if (!p) {
        const std::string what = rebuild ? "dlckpt-run: rebuild of epoch " + std::to_string(e.epoch) + " on " + e.node
                                         : "dlckpt-run: encode of epoch " + std::to_string(e.epoch);
        // The codec's own clock, so that the rate is its rate.
        p = std::make_unique<Progress>(what, e.total, stderr,
                                       Progress::Options{0.0, 2.0, -1, [this] { return progress_seconds_; }});
      }
      p->Update(e.done);
      break;
    }
    case Kind::kEncodeEnd:
      FinishProgress(std::string(events::KindName(Kind::kEncodeProgress)) + " " + std::to_string(e.epoch) + " ",
                     e.ok());
      break;
    case Kind::kRecoverEnd:
      FinishProgress(std::string(events::KindName(Kind::kRebuildProgress)) + " ", e.ok());
      break;
    case Kind::kInit:
      restore_dir_.clear();  // later relaunches resume from the stores
      app_initialised_ = true;
      app_init_time_ = static_cast<double>(e.ns) / 1e9;
      break;
    case Kind::kProtection:
      Log("warning: codec protection " + e.text);
      break;
    case Kind::kCkptBegin:
      commit_.epoch = e.epoch;
      commit_.began = Now();
      commit_.reported = 0;
      break;
    case Kind::kCkptCommit:
      CommitProgress(Now(), &e);
      // A round whose commit failed (rank 0 reports each round once), and
      // why: a kCkptRefused from each rank whose store refused.
      if (e.ok()) {
        ++stats_.committed;
      } else {
        stats_.refused.push_back(e.epoch);
      }
      break;
    case Kind::kCkptRefused:
      if (stats_.refused_why.empty()) stats_.refused_why = "rank " + std::to_string(e.rank) + ": " + e.text;
      break;
    case Kind::kCkptWait:
      stats_.backpressure_s += e.seconds;
      break;
    case Kind::kCkptEnd:
      if (e.ok()) {
        ++stats_.checkpoints;
        stats_.last_epoch = e.epoch;
      }
      break;
    default:
      break;
  }
  for (size_t i = 0; i < o_.kills.size(); ++i) {
    const KillTrigger& t = o_.kills[i].at;
    bool fire = false;
    switch (t.kind) {
      case KillTrigger::kCheckpoint:
        fire = e.kind == Kind::kCkptEnd && e.epoch == t.epoch;
        break;
      case KillTrigger::kDrain:
        fire = e.kind == Kind::kDrainBegin && e.epoch == t.epoch;
        break;
      case KillTrigger::kCommit:
        fire = e.kind == Kind::kCkptCommit && e.epoch == t.epoch;
        break;
      case KillTrigger::kEncode:
        fire = e.kind == Kind::kEncodeBegin && (t.epoch == 0 || e.epoch == t.epoch);
        break;
      case KillTrigger::kWrite:
        fire = e.kind == Kind::kWriteBegin && (t.epoch == 0 || e.epoch == t.epoch);
        break;
      case KillTrigger::kRecover:
        fire = e.kind == Kind::kRebuildBegin && in_recovery_ && recoveries_started_ == t.occurrence;
        break;
      case KillTrigger::kTime:
        break;
    }
    if (fire) ScheduleKill(i, Now() + t.delay);
  }
}

// The end of an encode or a rebuild: the reporters whose key starts with
// `prefix` end, with a last line with the total when it succeeded.
void Supervisor::FinishProgress(const std::string& prefix, bool ok) {
  for (auto it = progress_.begin(); it != progress_.end();) {
    if (it->first.rfind(prefix, 0) != 0) {
      ++it;
      continue;
    }
    if (ok) it->second.second->Done(it->second.first);
    it = progress_.erase(it);
  }
}

void Supervisor::CommitProgress(double now, const events::Event* end) {
  if (commit_.began <= 0 || (end != nullptr && end->epoch != commit_.epoch)) return;
  static const double after = [] {
    const char* a = std::getenv("DLCKPT_PROGRESS_AFTER");
    return a != nullptr && *a != '\0' ? std::strtod(a, nullptr) : 2.0;
  }();
  const double running = now - commit_.began;
  const std::string what = "commit of epoch " + std::to_string(commit_.epoch) + ": ";
  if (end != nullptr) {
    // The end, when the commit was long enough to be reported.
    if (running >= after || commit_.reported > 0) {
      Log(what + (end->ok() ? "done" : "failed") + " in " + Fixed(running, 1) + " s");
    }
    commit_.began = 0;
    return;
  }
  if (running < after || (commit_.reported > 0 && now - commit_.reported < 2.0)) return;
  commit_.reported = now;
  Log(what + "running for " + Fixed(running, 1) + " s (every rank stores and checksums what it wrote)");
}

void Supervisor::Tick() {
  for (const auto& e : follower_->Poll()) HandleEvent(e);
  double now = Now();
  CommitProgress(now, nullptr);
  // A codec job that ended takes every node's heartbeats with it: that is
  // not a loss of every node, so stop watching until the next launch.
  if (codec_pid_ > 0 && Reap(codec_pid_, &codec_status_)) {
    codec_pid_ = -1;
    codec_exited_ = true;
    if (heartbeat_) heartbeat_->Expect(generation_, {}, Env::Default()->NowNanos());
  }
  // Nodes whose codec process went silent: lost even if no launcher noticed
  // (a power-off). They are fenced (killed) so they can never come back.
  if (heartbeat_) {
    for (const auto& node : heartbeat_->Suspects(Env::Default()->NowNanos())) {
      if (heartbeat_failure_ && dead_.count(node)) continue;
      heartbeat_failure_ = true;
      double silent = o_.heartbeat_timeout;
      if (auto st = heartbeat_->Node(node); st && st->heard) {
        silent = static_cast<double>(Env::Default()->NowNanos() - st->last_heard_ns) / 1e9;
      }
      Log("node " + node + " missed its heartbeats for " + Fixed(silent, 1) + " s: declaring it lost");
      if (faults_.last_kill >= 0) {
        std::printf("METRIC heartbeat_detection_seconds %.3f s target < 3\n", now - faults_.last_kill);
        std::fflush(stdout);
      }
      double keep = faults_.last_kill;
      if (!dead_.count(node)) KillNodes({node}, "no heartbeat", /*poweroff=*/true);  // fencing
      if (keep >= 0) faults_.last_kill = keep;
      // A virtual node powered off by us: its stopped processes die now.
      Signal(faults_.frozen, SIGKILL);
      faults_.frozen.clear();
    }
  }
  for (size_t i = 0; i < o_.kills.size(); ++i) {
    const KillSpec& k = o_.kills[i];
    if (faults_.kill_done[i]) continue;
    if (k.at.kind == KillTrigger::kTime && start_ > 0 && faults_.kill_at[i] < 0) {
      faults_.kill_at[i] = start_ + k.at.seconds + k.at.delay;
    }
    if (faults_.kill_at[i] >= 0 && now >= faults_.kill_at[i]) {
      faults_.kill_done[i] = true;
      if (k.ranks) {
        CrashRanks(k.nodes, "--at " + k.text);
      } else {
        KillNodes(k.nodes, "--at " + k.text, k.poweroff);
      }
    }
  }
  if (o_.mtbf > 0 && start_ > 0 && faults_.random_kills < o_.max_failures) {
    if (faults_.next_random_kill < 0) {
      std::uniform_real_distribution<double> u(0.0, 1.0);
      double x = -std::log(1.0 - u(faults_.rng));  // Exp(1)
      double gap = o_.mtbf * std::pow(x, 1.0 / o_.weibull_shape) /
                   std::tgamma(1.0 + 1.0 / o_.weibull_shape);  // mean = mtbf
      faults_.next_random_kill = now + gap;
    } else if (now >= faults_.next_random_kill && !in_recovery_) {
      std::vector<std::string> live = LiveNodes();
      if (!live.empty()) {
        std::uniform_int_distribution<size_t> pick(0, live.size() - 1);
        ++faults_.random_kills;
        KillNodes({live[pick(faults_.rng)]}, "--mtbf " + Fixed(o_.mtbf, 1));
      }
      faults_.next_random_kill = -1;
    }
  }
}

void Supervisor::KillNodes(const std::vector<std::string>& nodes, const std::string& why, bool poweroff) {
  double start = Now();
  const std::string how = poweroff ? "poweroff" : "crash";
  for (const auto& node : nodes) {
    if (dead_.count(node)) continue;
    dead_.insert(node);
    faults_.log.push_back(node + " (" + (poweroff ? "power-off, " : "") + why + ")");
    Log((poweroff ? "powering off node " : "killing node ") + node + " (" + why + ")");
    if (!o_.kill_command.empty()) {
      std::string cmd = o_.kill_command;
      for (size_t p; (p = cmd.find("{node}")) != std::string::npos;) cmd.replace(p, 6, node);
      for (size_t p; (p = cmd.find("{how}")) != std::string::npos;) cmd.replace(p, 5, how);
      int rc = std::system(cmd.c_str());
      if (rc != 0) Log("kill command '" + cmd + "' failed (" + DescribeStatus(rc) + ")");
    } else {
      // A virtual node: its processes and its shared memory. A power-off stops the
      // processes (silent, like a dead machine: no launcher notices) and kills them
      // once the heartbeats' silence is detected (Tick) or the jobs are torn down.
      for (int round = 0; round < 3; ++round) {
        auto pids = FindProcesses({"DLCKPT_JOB=" + o_.job, "DLCKPT_NODE=" + node});
        std::erase_if(pids, [&](pid_t p) { return std::count(faults_.frozen.begin(), faults_.frozen.end(), p) > 0; });
        if (pids.empty()) break;
        Signal(pids, poweroff ? SIGSTOP : SIGKILL);
        if (poweroff) faults_.frozen.insert(faults_.frozen.end(), pids.begin(), pids.end());
      }
      auto names = Env::Default()->ListShm(NodePrefix(o_.job, node));
      if (names.ok()) {
        for (const auto& n : *names) (void)Env::Default()->UnlinkShm(n);
      }
      // Its dlckpt-fuse mounts (dlckpt-ctl run) vanish with it, not left dead.
      for (const auto& point : DetachFuseMounts(NodePrefix(o_.job, node))) {
        Log("unmounted " + point + ", the dlckpt-fuse mount of node " + node);
      }
    }
  }
  faults_.last_kill = start;  // detection times count from the start of the kill
}

void Supervisor::CrashRanks(const std::vector<std::string>& ranks, const std::string& why) {
  for (const auto& r : ranks) {
    // The rank's number: PMI_RANK under Hydra and Slurm's pmi2, OMPI_COMM_WORLD_RANK
    // under Open MPI's mpirun (PMIX_RANK under a PMIx launcher).
    std::vector<pid_t> pids;
    for (const char* var : {"PMI_RANK=", "OMPI_COMM_WORLD_RANK=", "PMIX_RANK="}) {
      pids = FindProcesses({"DLCKPT_JOB=" + o_.job, var + r});
      if (!pids.empty()) break;
    }
    faults_.log.push_back("rank " + r + " crashed (" + why + ")");
    Log("crashing application rank " + r + " (" + why + ")" + (pids.empty() ? ": no such process" : ""));
    Signal(pids, SIGKILL);
  }
  faults_.last_kill = Now();
}

}  // namespace dlckpt::run

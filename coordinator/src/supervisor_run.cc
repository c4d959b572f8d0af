// The course of a dlckpt-run job (Supervisor::Run): start the codec and the
// application, then rounds of watching them until the application ends, a
// timeout or halt, or a failure, which is recovered from (survey, rebuild,
// relaunch) before the next round. Each step returns the run's exit code
// when the run ends there, or nothing to go on; a signal during a step ends
// the run through Terminate(), checked by RunJob after every step. Thread
// safety: the supervisor's thread only.
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "procs.h"
#include "supervisor.h"
#include "text.h"

namespace dlckpt::run {

namespace fs = std::filesystem;

int Supervisor::RunJob() {
  run_start_ = Now();
  Step end = StartJob();
  int failures_without_progress = 0;
  while (!end && !Terminating()) end = RunRound(&failures_without_progress);
  return end ? *end : Terminate();
}

int Supervisor::EndUnlessSignalled(int exit_code, const std::string& note) {
  return Terminating() ? Terminate() : Finish(exit_code, note);
}

Supervisor::Step Supervisor::StartJob() {
  // The job's lock first: a job id in use by another run is refused before
  // anything of that job (its stores, run directory, processes) is touched.
  Status s = LockRunDir();
  if (!s.ok()) {
    Log(s.message());
    if (made_run_dir_ && lock_fd_ < 0) rmdir(run_dir_.c_str());
    return s.code() == EBUSY ? kExitJobBusy : kExitSetup;
  }
  s = CheckProgram();
  if (s.ok()) s = Setup();
  if (!s.ok()) {
    Log(s.ToString());
    // Nothing was launched: the run directory holds the lock and, if any, the events.
    if (made_run_dir_) {
      std::error_code ec;
      fs::remove_all(run_dir_, ec);
    } else {
      unlink((run_dir_ + "/lock").c_str());
    }
    return kExitSetup;
  }
  if (Terminating()) return std::nullopt;
  s = PrepareRestartFrom();
  if (!s.ok()) {
    Log(s.message());
    std::error_code ec;
    if (made_run_dir_) fs::remove_all(run_dir_, ec);
    return kExitSetup;
  }
  s = LaunchCodec();
  if (s.ok() && !Terminating()) s = LaunchApp();
  // Timed and random failures count from the application's launch.
  start_ = Now();
  if (Terminating()) return std::nullopt;
  if (!s.ok()) {
    Log(s.ToString());
    TearDownJobs();
    return EndUnlessSignalled(kExitSetup);
  }
  Log("job " + o_.job + ": " + std::to_string(o_.nodes) + " data node(s) x " +
      std::to_string(o_.ranks_per_node) + " rank(s), " + std::to_string(o_.spares) + " spare(s), " +
      o_.scheme + " with " + std::to_string(o_.spares_per_group) + " parity per group of " +
      std::to_string(o_.group_size) + " (parity " + o_.parity + "); run directory " + run_dir_);
  return std::nullopt;
}

Supervisor::Step Supervisor::RunRound(int* failures_without_progress) {
  int app_status = 0;
  const int checkpoints_before = stats_.checkpoints;
  const size_t kills_before = faults_.log.size();
  switch (Monitor(&app_status)) {
    case Outcome::kTerminated: return std::nullopt;
    case Outcome::kDone: return AppEnded(app_status);
    case Outcome::kHalt: return Halt("--halt-seconds " + Fixed(o_.halt_seconds, 0));
    case Outcome::kTimeout:
      Log("--timeout " + Fixed(o_.timeout, 0) + " s reached; stopping the job");
      TearDownJobs();
      return EndUnlessSignalled(124);
    case Outcome::kFailure: break;
  }
  // A failure.
  RecoveryTimes t;
  t.detection = faults_.last_kill >= 0 ? Now() - faults_.last_kill : 0;
  const bool injected = faults_.log.size() > kills_before || faults_.last_kill >= 0;
  if (injected && o_.launcher == "mpiexec") {
    Log(o_.mpi_flavor == "openmpi"
            ? "(a \"mpirun noticed that process rank ... exited on signal\" report above is about the ranks of "
              "the node killed on purpose)"
            : "(a \"BAD TERMINATION\" report of mpiexec above is about the ranks of the node killed on purpose)");
  }
  // The application's own failure status, else 1 (it may have ended well
  // while the codec job failed, or not have ended at all).
  const bool app_failed = WIFEXITED(app_status) && WEXITSTATUS(app_status) != 0;
  const int app_code = app_failed ? WEXITSTATUS(app_status) : 1;
  if (!injected && !heartbeat_failure_ && dead_.empty() && !app_initialised_ && stats_.checkpoints == 0 &&
      !codec_exited_) {
    // The application failed on its own before it ever reached dlckpt: no
    // node was lost and there is nothing to recover.
    Log("the application failed before dlckpt_init (" + DescribeStatus(app_status) +
        "), with no node lost: not a node failure, nothing to recover (if it writes its checkpoints "
        "under /dlckpt, link it with dlckpt or run it with --preload)");
    StopCodec();
    TearDownJobs();
    return EndUnlessSignalled(app_code);
  }
  const double t_teardown = Now();
  TearDownJobs();
  if (Terminating()) return std::nullopt;
  t.teardown = Now() - t_teardown;
  if (stats_.checkpoints == checkpoints_before && !injected) {
    if (++*failures_without_progress >= 2) {
      Log("the application failed twice without a node loss and without progress; giving up");
      return Finish(app_code);
    }
  } else {
    *failures_without_progress = 0;
  }
  faults_.last_kill = -1;
  return RecoverAndRelaunch(t);
}

Supervisor::Step Supervisor::AppEnded(int app_status) {
  StopCodec();
  TearDownJobs();
  const int code = WIFEXITED(app_status) ? WEXITSTATUS(app_status) : 1;
  if (!app_initialised_ && stats_.checkpoints == 0 && !Terminating()) {
    if (o_.preload) {
      // The preload routes /dlckpt to the stores, but only the API takes checkpoints.
      Log("warning: the application never called dlckpt_init, so nothing was checkpointed: under --preload "
          "what it wrote under /dlckpt went to this run's stores, but a program that never calls the API "
          "(IOR, mdtest, any unmodified tool) takes no checkpoint; call dlckpt_checkpoint() (dlckpt/dlckpt.h) "
          "or SCR's API, or run it on a dlckpt-fuse mount and checkpoint with `dlckpt-ctl checkpoint`");
    } else {
      Log("warning: the application never called dlckpt_init, so nothing was checkpointed: link it with "
          "dlckpt (CMake: dlckpt::api and dlckpt_intercept(); see README.md) or run it with --preload");
    }
    return Finish(code, "the application never called dlckpt_init");
  }
  return EndUnlessSignalled(code);
}

Supervisor::Step Supervisor::RecoverAndRelaunch(RecoveryTimes t) {
  for (;;) {
    ++recoveries_started_;
    if (recoveries_started_ > o_.max_recoveries) {
      Log("recovery limit reached (--max-recoveries " + std::to_string(o_.max_recoveries) + ")");
      return Finish(kExitTooManyRecoveries);
    }
    in_recovery_ = true;
    int code = 0;
    Status s = Recover(&t, &code);
    in_recovery_ = false;
    if (Terminating()) return std::nullopt;
    if (s.ok()) break;
    if (code == kExitUnrecoverable) {
      Log(s.message());
      StopCodec();  // the survivors' codec processes remove their stores (unless --keep)
      TearDownJobs();
      if (Terminating()) return std::nullopt;
      if (o_.persist.empty()) {
        Log("no --persist DIR: no drained epoch to restart from");
        return Finish(kExitUnrecoverable);
      }
      Status r = RestartFromDrained(&t);
      if (Terminating()) return std::nullopt;
      if (!r.ok()) {
        Log(r.message());
        TearDownJobs();
        return Finish(kExitUnrecoverable);
      }
      break;
    }
    Log("recovery failed: " + s.ToString());
    const bool another_failure = faults_.last_kill >= 0;
    TearDownJobs();
    if (!another_failure) return EndUnlessSignalled(kExitSetup);
    if (Terminating()) return std::nullopt;
    Log("a node failed during the recovery; starting over");
    t.detection += Now() - faults_.last_kill;
    faults_.last_kill = -1;
  }
  if (t.oversubscribed && o_.on_spares_exhausted == "halt") {
    // The lost ranks were rebuilt on a survivor: drain that epoch and stop,
    // for a --restart-from in a larger allocation (SCR's answer).
    Log("no spare node left to host the lost ranks, and --on-spares-exhausted halt");
    if (t.epoch > 0) stats_.last_epoch = t.epoch;
    return Halt("--on-spares-exhausted halt");
  }
  const double t_launch = Now();
  Status s = LaunchApp();
  if (s.ok()) s = WaitForAppInit(300);
  if (Terminating()) return std::nullopt;
  if (!s.ok()) {
    Log("relaunch failed: " + s.ToString());
    if (faults_.last_kill < 0) {
      TearDownJobs();
      return EndUnlessSignalled(kExitSetup);
    }
    return std::nullopt;  // a failure injected right at relaunch: handled by the next round
  }
  t.relaunch = Now() - t_launch;
  stats_.recoveries.push_back(t);
  return std::nullopt;
}

}  // namespace dlckpt::run

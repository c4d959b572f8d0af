// The dlckpt-run supervisor: launches the codec service and the application,
// watches both, injects failures, and recovers from node losses by rebuilding
// and relaunching. One Supervisor runs one job; not thread-safe.
#ifndef DLCKPT_COORDINATOR_SUPERVISOR_H_
#define DLCKPT_COORDINATOR_SUPERVISOR_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "dlckpt/base/events.h"
#include "dlckpt/base/progress.h"
#include "dlckpt/control/client.h"
#include "dlckpt/control/heartbeat.h"
#include "dlckpt/control/protocol.h"
#include "dlckpt/control/recovery.h"
#include "launch.h"
#include "run_options.h"

namespace dlckpt::run {

// Exit codes of dlckpt-run besides the application's own (and 2 for bad
// options, 124 at --timeout, 128 + N after signal N).
enum ExitCode : int {
  kExitUnrecoverable = 3,
  kExitTooManyRecoveries = 4,
  kExitSetup = 5,
  kExitJobBusy = 6,  // another running dlckpt-run holds the job's lock
  kExitHalted = 7,   // halted (--halt-seconds, or a signal with --persist) after a drain
};

// Makes SIGTERM, SIGINT, SIGHUP and SIGUSR1 stop the Supervisor of this
// process. The handler only records the first signal's number; from the
// second signal on it also sends SIGKILL to the process groups of every job
// this process launched (procs.h: TrackedGroups). Every wait of the
// Supervisor checks the record and then stops the job (Supervisor::Run).
// A repeat of the first signal sent by the same process within 2 s (a
// wrapper such as timeout(1) signals its child and then its process group) is
// one request, not a second signal.
// Whatever call holds the Supervisor (a drain reading a FIFO, a tool that
// never returns), the process ends at the latest --term-grace after the
// second signal, at once after a third: a watchdog thread then kills every
// process of the job (its tracked groups, every descendant of this process,
// every process carrying the job's DLCKPT_JOB), removes the job's stores and
// run directory unless --keep, prints the summary and exits 128 + N. Call
// once, from the main thread, before Run and before any other thread starts;
// not for use with several Supervisors.
void InstallSignalHandlers();

class Supervisor {
 public:
  explicit Supervisor(Options options);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Runs the job to the end; returns dlckpt-run's exit code.
  int Run();

 private:
  struct RecoveryTimes {
    double detection = 0, teardown = 0, survey = 0, rebuild = 0, relaunch = 0;
    std::string what;
    bool oversubscribed = false;  // lost ranks now run on a survivor (no spare left)
    uint64_t epoch = 0;           // the epoch restored
  };
  enum class Outcome { kDone, kFailure, kTimeout, kTerminated, kHalt };

  // The course of the run (supervisor_run.cc). A Step returns the run's
  // exit code where the run ends, else nothing: the next step follows, or
  // Terminate() after a signal.
  using Step = std::optional<int>;
  int RunJob();
  Step StartJob();
  // Monitors one round; recovers and relaunches after a failure.
  Step RunRound(int* failures_without_progress);
  Step AppEnded(int app_status);
  Step RecoverAndRelaunch(RecoveryTimes t);
  // Terminate() after a signal, else Finish(exit_code, note).
  int EndUnlessSignalled(int exit_code, const std::string& note = "");
  // Creates (or checks) the run directory and takes the job's lock in it,
  // held until the process exits. EBUSY when another process holds it.
  Status LockRunDir();
  // Tells the watchdog (InstallSignalHandlers) the job and run directory it
  // cleans up should it have to end the process.
  void ArmWatchdog() const;
  // Claims the end of the run for this thread, with `exit_code`; returns only
  // if the watchdog has not claimed it first (which then ends the process).
  static void ClaimEnd(int exit_code);
  // The program exists and is executable (on this host), before anything is launched.
  Status CheckProgram() const;
  Status Setup();
  Status LaunchCodec();
  Status LaunchApp();
  Outcome Monitor(int* app_status);
  // Follows events, injection timers and heartbeats (a silent node is
  // fenced); called from every wait.
  void Tick();
  void HandleEvent(const events::Event& e);
  void ScheduleKill(size_t spec, double at);
  // Failure injection's holds (supervisor_faults.cc): for the first pending
  // kill --at phase:encode or phase:recover (of the recovery under way), the
  // codec job's "NAME=value" holding that encode or rebuild 1 s + D; for the
  // first pending --at phase:write, the application's DLCKPT_WRITE_HOLD. A
  // held phase lasts long enough for the kill its event schedules to land in it.
  void AddCodecHolds(std::vector<std::string>* env) const;
  void AddWriteHold(JobSpec* app) const;
  // Kills nodes now: a crash, or (poweroff) silence first, then death. With
  // --kill-command it runs the command per node ({node}, {how} replaced).
  void KillNodes(const std::vector<std::string>& nodes, const std::string& why, bool poweroff = false);
  void CrashRanks(const std::vector<std::string>& ranks, const std::string& why);
  // Asks the codec service to shut down (its processes remove their nodes' stores
  // and parity unless --keep) and waits up to 30 s for the codec job to end.
  void StopCodec();
  void TearDownJobs();
  // Relaunches the codec, surveys, decides (recovery::Decide) and has the
  // codec execute the plan; fills t's survey and rebuild times. On an error
  // that no retry mends (no epoch is recoverable) sets *exit_code to
  // kExitUnrecoverable.
  Status Recover(RecoveryTimes* t, int* exit_code);
  Status WaitForAppInit(double timeout);
  // Run while a request to the codec waits: follows events, injections and
  // heartbeats (a node powered off during it is noticed); an error (a
  // signal, a silent node, the codec job's end) ends the wait.
  Status WhileWaiting();
  void Cleanup(int exit_code);
  void PrintSummary(int exit_code, const std::string& note = "");
  // Prints the summary, cleans up and returns exit_code: every end of a run
  // that launched anything goes through it, so the summary names the status
  // the process exits with.
  int Finish(int exit_code, const std::string& note = "");
  // A signal came (InstallSignalHandlers): true from then on.
  static bool Terminating();
  // Signals of the termination handler (SIGTERM, SIGINT, SIGHUP, SIGUSR1) so far.
  static int TerminationSignals();
  // Stops both jobs after a signal (SIGTERM to their process groups and to
  // orphans of the job, SIGKILL after --term-grace or at a second signal),
  // reaps them, then Finish(128 + signal).
  int Terminate();
  // ---- the second level (supervisor_persist.cc) ----
  // The persistence environment of the application's ranks.
  void AddPersistEnv(JobSpec* job) const;
  void HandleDrainEvent(const events::Event& e);
  void FinishProgress(const std::string& prefix, bool ok);
  // The newest complete drained epoch of `job_dir` whose every file verifies
  // and that has the job's rank count; logs each one skipped and why.
  Result<std::string> ChooseDrainedEpoch(const std::string& job_dir);
  // After a failure parity cannot cover (the jobs are down): picks the
  // drained epoch, replaces lost virtual nodes (hosts: needs enough live
  // ones), relaunches the codec; the next LaunchApp restores from it.
  Status RestartFromDrained(RecoveryTimes* t);
  // --persist's job directory (created, or refused if unsafe) and
  // --restart-from at the first launch.
  Status PrepareRestartFrom();
  // Halt: stops the application, drains the newest epoch every store
  // holds (virtual nodes), and says where it went. True if a complete
  // drained epoch exists afterwards.
  bool HaltDrain(const std::string& why);
  // $DLCKPT_HALT_FILE of the application: created when a halt is asked. If
  // the application created HaltFile() + ".watched" (the SCR layer's
  // SCR_Init does), HaltDrain first waits up to --term-grace for it to end on
  // its own (SCR_Should_exit said 1), then stops it as before.
  std::string HaltFile() const { return run_dir_ + "/halt"; }
  int Halt(const std::string& why);
  void Log(const std::string& msg) const;
  double Now() const;
  std::vector<std::string> LiveNodes() const;
  std::vector<std::string> FreeNodes() const;
  std::string CodecPath() const;
  // A dlckpt executable beside this one (dlckpt-codec, dlckpt-store), else `name` (found in PATH).
  static std::string ToolPath(const std::string& name);
  std::vector<std::string> JobEnv() const;
  // Open MPI on virtual nodes: the directory of its shared-memory segments
  // (btl_vader_backing_directory), one per dlckpt job, so that segments a
  // SIGKILLed mpirun could not remove go with the job (Cleanup). "" otherwise.
  std::string OmpiShmDir() const;
  // Starts `job` with the launcher of --launcher (see launch.h), standard output and
  // error to `log` ("" = inherited), `extra_env` added to the launcher's environment.
  Result<pid_t> LaunchJob(const JobSpec& job, const std::string& log,
                          const std::vector<std::string>& extra_env);

  Options o_;
  int lock_fd_ = -1;              // RUN_DIR/lock, flock'ed; closed (released) at exit
  bool made_run_dir_ = false;     // this run created the run directory
  pid_t codec_pgid_ = -1, app_pgid_ = -1;  // process groups of the latest launches
  std::string run_dir_, rendezvous_, events_path_, codec_log_;
  std::vector<std::string> nodes_;  // data nodes then spares
  std::set<std::string> dead_;
  std::map<int32_t, std::string> placement_;
  uint64_t generation_ = 0;
  pid_t codec_pid_ = -1, app_pid_ = -1;
  std::unique_ptr<control::CodecClient> codec_;
  std::unique_ptr<events::Follower> follower_;
  std::unique_ptr<control::heartbeat::Monitor> heartbeat_;
  std::string heartbeat_key_, heartbeat_address_;
  bool heartbeat_failure_ = false;  // a node went silent: the jobs will not end by themselves
  bool codec_exited_ = false;       // the codec job ended (reaped by Tick)
  int codec_status_ = 0;

  double run_start_ = 0;     // dlckpt-run started the jobs
  double start_ = 0;         // first application launch
  bool in_recovery_ = false;
  int recoveries_started_ = 0;
  bool app_initialised_ = false;
  double app_init_time_ = 0;


  std::string restore_dir_;          // the next application launch restores from this epoch
  std::string halt_note_;            // what HaltDrain achieved, for the summary

  // What the summary reports (supervisor_end.cc), counted from the events.
  struct Stats {
    int checkpoints = 0;             // protected (events::CkptEnd with code 0)
    int committed = 0;               // committed (events::CkptCommit with code 0)
    std::vector<uint64_t> refused;   // epochs whose commit failed, one per round
    std::string refused_why;         // the first refusal: "rank R: <the store's message>"
    double backpressure_s = 0;       // waits of checkpoints for the previous encode (events::CkptWait)
    uint64_t last_epoch = 0;         // the newest protected epoch
    std::vector<RecoveryTimes> recoveries;
    std::set<uint64_t> drained;      // epochs published as complete drains
    int drains_skipped = 0, drains_failed = 0;
  } stats_;
  // Failure injection (supervisor_faults.cc): --kill-node/--crash-rank
  // triggers, --mtbf random kills, and what was done.
  struct Faults {
    double last_kill = -1;            // time of the last injected kill, until a recovery starts
    std::vector<double> kill_at;      // per KillSpec: scheduled time, or -1
    std::vector<bool> kill_done;
    double next_random_kill = -1;
    int random_kills = 0;
    std::mt19937_64 rng;
    std::vector<std::string> log;     // every kill, for the summary
    std::vector<pid_t> frozen;        // stopped processes of powered-off virtual nodes
  } faults_;
  // Long encodes and rebuilds the codec reports (kEncodeProgress,
  // kRebuildProgress), keyed "<kind name> EPOCH NODE" (no node for an
  // encode). Per key: the total, and the reporter (its clock: progress_seconds_, the
  // codec's elapsed time in the newest such event).
  std::map<std::string, std::pair<uint64_t, std::unique_ptr<Progress>>> progress_;
  double progress_seconds_ = 0;
  // A commit in progress (kCkptBegin seen, kCkptCommit not yet): its epoch,
  // when it began (0: none) and when it was last reported; one line every
  // 2 s once it has run $DLCKPT_PROGRESS_AFTER seconds (default 2), and one
  // when it ends if any was printed (CommitProgress).
  struct {
    uint64_t epoch = 0;
    double began = 0, reported = 0;
  } commit_;
  void CommitProgress(double now, const events::Event* end);
};

}  // namespace dlckpt::run

#endif  // DLCKPT_COORDINATOR_SUPERVISOR_H_

#include "supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <system_error>
#include <thread>

#include "dlckpt/base/env.h"
#include "dlckpt/base/names.h"
#include "dlckpt/base/node.h"
#include "dlckpt/base/units.h"
#include "app_mpi.h"
#include "launch.h"
#include "procs.h"
#include "run_dir.h"
#include "text.h"

namespace dlckpt::run {

namespace fs = std::filesystem;

namespace {

// ---- signals ---------------------------------------------------------------------
// State shared with the signal handler: lock-free atomics only.
std::atomic<int> g_signal{0};        // number of the first SIGTERM/SIGINT/SIGHUP/SIGUSR1, 0 before
std::atomic<int> g_signals{0};       // how many came
std::atomic<int> g_wake_fd{-1};      // write end of the watchdog's pipe; -1 without a watchdog
std::atomic<int> g_first_sender{0};  // pid that sent the first signal with kill(2), 0 if none did
std::atomic<long long> g_first_ns{0};  // CLOCK_MONOTONIC of the first signal, in ns
static_assert(std::atomic<int>::is_always_lock_free);
static_assert(std::atomic<long long>::is_always_lock_free);

long long MonotonicNs() {  // async-signal-safe
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

// One stop request can arrive twice: coreutils' timeout (and other wrappers)
// send the signal to their child and then to their whole process group, which
// holds dlckpt-run too. A repeat of the first signal's number sent with
// kill(2) by the same process within two seconds of it is that echo, not the
// user's second request; it is ignored. A signal from the terminal (SI_KERNEL)
// or from another process always counts.
bool EchoOfFirst(int sig, const siginfo_t* info) {
  if (info == nullptr || info->si_code != SI_USER || info->si_pid <= 0) return false;
  if (g_signals.load() != 1 || g_signal.load() != sig || g_first_sender.load() != info->si_pid) return false;
  return MonotonicNs() - g_first_ns.load() < 2000000000LL;
}

void OnTerminationSignal(int sig, siginfo_t* info, void*) {
  const int saved_errno = errno;
  if (EchoOfFirst(sig, info)) {
    errno = saved_errno;
    return;
  }
  int expected = 0;
  if (g_signal.compare_exchange_strong(expected, sig)) {
    g_first_sender.store(info != nullptr && info->si_code == SI_USER ? info->si_pid : 0);
    g_first_ns.store(MonotonicNs());
  }
  const int n = g_signals.fetch_add(1) + 1;
  if (n >= 2) {
    static const char kMsg[] = "dlckpt-run: second signal: killing the jobs now\n";
    ssize_t w = write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
    SignalTrackedGroups(SIGKILL);
    const int fd = g_wake_fd.load();
    if (fd >= 0) {
      const char c = 0;
      w = write(fd, &c, 1);  // non-blocking; a full pipe has woken the watchdog already
    } else if (n >= 3) {
      _exit(128 + g_signal.load());
    }
    (void)w;
  }
  errno = saved_errno;
}

bool Hurry() { return g_signals.load() >= 2; }

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

double MonotonicNow() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

void Sleep(double seconds) {
  struct timespec ts{static_cast<time_t>(seconds), static_cast<long>((seconds - std::floor(seconds)) * 1e9)};
  nanosleep(&ts, nullptr);  // a signal ends it early: the caller checks Terminating()
}

// ---- the watchdog -----------------------------------------------------------------
// A thread that ends the process when the supervisor's thread does not within
// --term-grace of a second signal, whatever call holds that thread (an open of
// a FIFO, a tool that never returns). Who ends the run is claimed once: the
// supervisor's thread (Finish, or the return of Run) or the watchdog; the
// other one then only waits for the process to end.
enum EndOwner : int { kNobodyEnds = 0, kSupervisorEnds = 1, kWatchdogEnds = 2 };
std::atomic<int> g_end_owner{kNobodyEnds};
std::atomic<int> g_exit_code{-1};  // the status the supervisor's end named, -1 before

// What the watchdog needs to end the job: set once the job's id and run
// directory are known, then never changed or freed (the watchdog may read it
// while the process exits).
struct EndPlan {
  Options options;
  std::string run_dir;
};
std::mutex g_plan_mu;
const EndPlan* g_plan = nullptr;  // guarded by g_plan_mu

// The supervisor's thread claims the end, with exit status `code`; false if
// the watchdog has claimed it (and ends the process).
bool ClaimEndFor(int code) {
  int owner = kNobodyEnds;
  if (!g_end_owner.compare_exchange_strong(owner, kSupervisorEnds) && owner != kSupervisorEnds) return false;
  g_exit_code.store(code);
  return true;
}

// The supervisor's thread once the watchdog claimed the end: it waits to be ended.
[[noreturn]] void AwaitWatchdog() {
  for (;;) pause();
}

void WriteStderr(const std::string& s) {
  ssize_t w = write(STDERR_FILENO, s.data(), s.size());
  (void)w;
}

void OnEndAlarm(int) { _exit(g_exit_code.load() >= 0 ? g_exit_code.load() : 128 + g_signal.load()); }

// Ends the process from the watchdog: kills every process of the job (the
// tracked groups, every descendant, every process carrying the job's
// DLCKPT_JOB), removes its stores and run directory unless --keep, prints the
// summary unless the supervisor's thread ends the run, and exits with the
// status the summary names. Bounded: should a step block, SIGALRM ends the
// process 5 s on.
[[noreturn]] void EndNow(const std::string& why) {
  const int sig = g_signal.load();
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = OnEndAlarm;
  sigaction(SIGALRM, &sa, nullptr);
  alarm(5);
  int owner = kNobodyEnds;
  const bool mine = g_end_owner.compare_exchange_strong(owner, kWatchdogEnds);
  // The supervisor's thread is ending the run: a moment to finish by itself.
  for (int i = 0; !mine && i < 100; ++i) Sleep(0.01);
  const EndPlan* plan;
  {
    std::lock_guard<std::mutex> lock(g_plan_mu);
    plan = g_plan;
  }
  if (mine) WriteStderr("dlckpt-run: " + why + ": killing every process of the job and ending now\n");
  SignalTrackedGroups(SIGKILL);
  if (plan && plan->options.launcher == "srun") KillSlurmSteps(plan->options);
  for (int round = 0; round < 40; ++round) {
    std::vector<pid_t> pids = Descendants(getpid());
    if (plan) {
      std::vector<pid_t> of_job = FindProcesses({"DLCKPT_JOB=" + plan->options.job});
      pids.insert(pids.end(), of_job.begin(), of_job.end());
    }
    if (pids.empty()) break;
    Signal(pids, SIGKILL);
    SignalTrackedGroups(SIGKILL);
    Sleep(0.05);
  }
  if (plan && !plan->options.keep) {
    if (plan->options.hosts.empty()) {
      auto names = Env::Default()->ListShm(JobPrefix(plan->options.job));
      if (names.ok()) {
        for (const auto& n : *names) (void)Env::Default()->UnlinkShm(n);
      }
    }
    std::error_code ec;
    fs::remove_all(plan->run_dir, ec);
  }
  const int code = mine ? 128 + sig : g_exit_code.load();
  if (mine && plan) {
    g_exit_code.store(code);
    WriteStderr("dlckpt-run: summary of job " + plan->options.job + ": exit " +
                std::to_string(code) + " (terminated by " + SignalName(sig) +
                "); the supervisor was held by a call that did not return; every process of the job killed" +
                (plan->options.keep ? "" : ", its stores and run directory removed") + "\n");
  }
  _exit(code);
}

// Sleeps in poll(2) on the handler's pipe; from the second signal on, ends
// the process --term-grace later, from the third at once.
void WatchdogLoop(int fd) {
  double deadline = -1, grace = 0;
  for (;;) {
    int timeout_ms = -1;
    if (deadline >= 0) timeout_ms = static_cast<int>(std::max(0.0, std::ceil((deadline - MonotonicNow()) * 1000)));
    struct pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) > 0) {
      char buf[64];
      while (read(fd, buf, sizeof buf) > 0) {
      }
    }
    const int n = g_signals.load();
    if (n >= 2 && deadline < 0) {
      std::lock_guard<std::mutex> lock(g_plan_mu);
      grace = g_plan ? g_plan->options.term_grace : 1.0;
      deadline = MonotonicNow() + grace;
    }
    if (n >= 3) EndNow("a third signal");
    if (deadline >= 0 && MonotonicNow() >= deadline) {
      EndNow("still running " + Fixed(grace, 1) + " s (--term-grace) after the second signal");
    }
  }
}

// Starts the watchdog; without one (no pipe or thread), a third signal ends
// the process at once.
void StartWatchdog() {
  int p[2];
  if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) return;
  // The thread takes no signal: they interrupt the supervisor's waits.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  try {
    std::thread(WatchdogLoop, p[0]).detach();
    g_wake_fd.store(p[1]);
  } catch (const std::system_error&) {
    close(p[0]);
    close(p[1]);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace

void InstallSignalHandlers() {
  StartWatchdog();
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = OnTerminationSignal;
  sigfillset(&sa.sa_mask);  // one handler at a time: the count and the first number stay consistent
  sa.sa_flags = SA_RESTART | SA_SIGINFO;
  // SIGUSR1: Slurm's warning before the time limit (srun --signal=USR1@T): a halt.
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1}) sigaction(sig, &sa, nullptr);
}

bool Supervisor::Terminating() { return g_signal.load() != 0; }
int Supervisor::TerminationSignals() { return g_signals.load(); }

Supervisor::Supervisor(Options options) : o_(std::move(options)) { faults_.rng.seed(o_.seed); }

Supervisor::~Supervisor() {
  if (lock_fd_ >= 0) close(lock_fd_);
}

double Supervisor::Now() const { return MonotonicNow(); }

void Supervisor::Log(const std::string& msg) const {
  std::fprintf(stderr, "dlckpt-run: %s\n", msg.c_str());
  std::fflush(stderr);
}

std::string Supervisor::CodecPath() const { return o_.codec.empty() ? ToolPath("dlckpt-codec") : o_.codec; }

std::string Supervisor::ToolPath(const std::string& name) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = '\0';
    fs::path p = fs::path(self).parent_path() / name;
    if (fs::exists(p)) return p.string();
  }
  return name;
}

std::vector<std::string> Supervisor::LiveNodes() const {
  std::vector<std::string> out;
  for (const auto& n : nodes_) {
    if (!dead_.count(n)) out.push_back(n);
  }
  return out;
}

std::vector<std::string> Supervisor::FreeNodes() const {
  std::set<std::string> used;
  for (const auto& [r, n] : placement_) used.insert(n);
  std::vector<std::string> out;
  for (const auto& n : LiveNodes()) {
    if (!used.count(n)) out.push_back(n);
  }
  return out;
}

void Supervisor::ArmWatchdog() const {
  std::lock_guard<std::mutex> lock(g_plan_mu);
  if (g_plan == nullptr) g_plan = new EndPlan{o_, run_dir_};
}

Status Supervisor::LockRunDir() {
  if (o_.job.empty()) o_.job = DefaultJobId();
  if (!ValidJobName(o_.job)) return Status::InvalidArgument("job id '" + o_.job + "' is not a valid name");
  run_dir_ = o_.run_dir.empty() ? "/tmp/dlckpt-run." + o_.job : o_.run_dir;
  const std::string lock_path = run_dir_ + "/lock";
  // A run that ends removes its run directory (and the lock file in it) while
  // it still holds the lock: a lock taken on a file no longer at lock_path
  // guards nothing, so try again with the directory as it is now.
  for (int attempt = 0;; ++attempt) {
    bool made = false;
    DLCKPT_ASSIGN_OR_RETURN(int dir_fd, OpenRunDir(run_dir_, &made));
    made_run_dir_ = made_run_dir_ || made;
    int fd = openat(dir_fd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    int err = errno;
    close(dir_fd);
    if (fd < 0) return Status::FromErrno(err, "open " + lock_path);
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      err = errno;
      char buf[32] = {0};
      ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
      close(fd);
      if (err != EWOULDBLOCK) return Status::FromErrno(err, "lock " + lock_path);
      long holder = n > 0 ? std::strtol(buf, nullptr, 10) : 0;
      return Status::Error(EBUSY, "job " + o_.job + " is already running (lock " + lock_path + " held by " +
                                      (holder > 0 ? "pid " + std::to_string(holder) : "another process") +
                                      "); choose another --job");
    }
    struct stat held, now;
    if (fstat(fd, &held) == 0 && stat(lock_path.c_str(), &now) == 0 && held.st_dev == now.st_dev &&
        held.st_ino == now.st_ino) {
      // The lock file's contents (read by dlckpt-run --halt, HaltJob): the pid,
      // then "persist DIR" when a halt drains to --persist DIR.
      std::string pid = std::to_string(getpid()) + "\n";
      if (!o_.persist.empty()) pid += "persist " + o_.persist + "\n";
      if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
        Log("warning: cannot write the pid into " + lock_path + ": " + std::strerror(errno));
      }
      lock_fd_ = fd;
      ArmWatchdog();
      return Status::OK();
    }
    close(fd);
    if (attempt >= 10) return Status::Error(EBUSY, lock_path + " keeps disappearing; is job " + o_.job + " ending?");
  }
}

Status Supervisor::Setup() {
  rendezvous_ = run_dir_ + "/rendezvous";
  events_path_ = run_dir_ + "/events";
  codec_log_ = run_dir_ + "/codec.log";
  unlink(events_path_.c_str());
  unlink(HaltFile().c_str());
  unlink((HaltFile() + ".watched").c_str());
  follower_ = std::make_unique<events::Follower>(events_path_);
  if (o_.hosts == std::vector<std::string>{"slurm"}) {
    DLCKPT_ASSIGN_OR_RETURN(o_.hosts, SlurmAllocationHosts());
    const size_t want = static_cast<size_t>(o_.nodes + o_.spares);
    if (o_.hosts.size() < want) {
      return Status::InvalidArgument("--hosts slurm: the allocation has " + std::to_string(o_.hosts.size()) +
                                     " host(s) (" + Join(o_.hosts, ",") + ") but --nodes + --spares is " +
                                     std::to_string(want));
    }
    o_.hosts.resize(want);
    Log("hosts of the Slurm allocation: " + Join(o_.hosts, ","));
  }
  if (o_.hosts.empty()) {
    for (int i = 0; i < o_.nodes + o_.spares; ++i) nodes_.push_back(o_.node_prefix + std::to_string(i));
  } else {
    nodes_ = o_.hosts;
  }
  for (const auto& n : nodes_) {
    auto name = StoreName(o_.job, n, 0);
    if (!name.ok()) return name.status().Prefixed("node " + n);
  }
  if (o_.hosts.empty()) {
    // Shared memory of the job that this uid could not have created (another
    // user's, not a regular file, not mode 0600) would be refused to the ranks
    // and the codec: a set-up failure, said before anything starts. It stays
    // as it was. (Stores on hosts are checked where they are, by the ranks.)
    auto names = Env::Default()->ListShm(JobPrefix(o_.job));
    for (const auto& n : names.ok() ? *names : std::vector<std::string>{}) {
      auto shm = Env::Default()->OpenShm(n, /*writable=*/false);
      if (!shm.ok() && (shm.status().code() == EPERM || shm.status().code() == EACCES)) return shm.status();
    }
  }
  for (int r = 0; r < o_.nodes * o_.ranks_per_node; ++r) placement_[r] = nodes_[r / o_.ranks_per_node];
  faults_.kill_at.assign(o_.kills.size(), -1);
  faults_.kill_done.assign(o_.kills.size(), false);
  for (const auto& k : o_.kills) {
    if (k.ranks) continue;
    for (const auto& n : k.nodes) {
      if (std::find(nodes_.begin(), nodes_.end(), n) == nodes_.end()) {
        return Status::InvalidArgument("--kill-node " + n + ": no such node (nodes are " +
                                       Join(nodes_, ", ") + ")");
      }
    }
  }
  // The heartbeat monitor: every codec process beats every 0.2 s.
  DLCKPT_ASSIGN_OR_RETURN(heartbeat_key_, control::protocol::NewToken());
  control::heartbeat::MonitorOptions mo;
  mo.key_hex = heartbeat_key_;
  mo.job = o_.job;
  mo.timeout_ms = static_cast<int>(o_.heartbeat_timeout * 1000);
  if (mo.startup_timeout_ms < mo.timeout_ms) mo.startup_timeout_ms = mo.timeout_ms;
  DLCKPT_ASSIGN_OR_RETURN(heartbeat_, control::heartbeat::Monitor::Create(mo));
  heartbeat_address_ = o_.heartbeat_address;
  if (heartbeat_address_.empty()) {
    if (o_.hosts.empty()) {
      heartbeat_address_ = "127.0.0.1";
    } else {
      auto a = control::heartbeat::LocalAddressToward(o_.hosts[0]);
      if (!a.ok()) return a.status().Prefixed("heartbeat address (give --heartbeat-address)");
      heartbeat_address_ = *a;
    }
  }
  if (!fs::exists(CodecPath()) && CodecPath().find('/') != std::string::npos) {
    return Status::NotFound("codec executable " + CodecPath() + " not found (use --codec)");
  }
  return Status::OK();
}

// ---- launching ----------------------------------------------------------------

// Environment every launched job gets. Virtual nodes all live on this host:
// UCX needs only shared memory there (and scanning network devices at start
// is slow and fails while virtual hosts add and remove theirs).
//
// Open MPI's mpirun, when a rank dies, sends the others SIGTERM and then
// sleeps odls_base_sigkill_timeout (1 s) before its SIGKILL and its own exit:
// 1.3 s from a rank's SIGKILL to mpirun's exit against 0.2-0.35 s with 0
// (docs/design.md, "MPICH and Open MPI"). dlckpt's ranks have no SIGTERM
// handler to give that second to, and a slower mpirun outlives dlckpt-run's
// --term-grace and is SIGKILLed before it removes its /dev/shm segments: 0,
// unless the environment sets it.
std::vector<std::string> Supervisor::JobEnv() const {
  std::vector<std::string> env;
  if (o_.hosts.empty() && std::getenv("UCX_TLS") == nullptr) env.push_back("UCX_TLS=self,sm");
  if (o_.mpi_flavor == "openmpi" && o_.launcher == "mpiexec" &&
      std::getenv("OMPI_MCA_odls_base_sigkill_timeout") == nullptr) {
    env.push_back("OMPI_MCA_odls_base_sigkill_timeout=0");
  }
  if (!OmpiShmDir().empty()) env.push_back("OMPI_MCA_btl_vader_backing_directory=" + OmpiShmDir());
  return env;
}

// A SIGKILLed mpirun leaves a 4 MiB /dev/shm/vader_segment.* per local rank
// (docs/design.md, "MPICH and Open MPI"); under a directory of the job's they
// can be removed without knowing Open MPI's job ids.
std::string Supervisor::OmpiShmDir() const {
  if (o_.mpi_flavor != "openmpi" || o_.launcher != "mpiexec" || !o_.hosts.empty() ||
      std::getenv("OMPI_MCA_btl_vader_backing_directory") != nullptr) {
    return "";
  }
  return "/dev/shm/dlckpt-ompi." + o_.job;
}

Result<pid_t> Supervisor::LaunchJob(const JobSpec& spec, const std::string& log,
                                    const std::vector<std::string>& extra_env) {
  // The launcher carries the job's id too (and so do the processes it starts,
  // Hydra's proxies among them): every process of the job can be found by it.
  std::vector<std::string> env = JobEnv();
  env.push_back("DLCKPT_JOB=" + o_.job);
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  JobSpec job = spec;
  for (const auto& kv : env) job.forward.push_back(kv.substr(0, kv.find('=')));
  if (const std::string dir = OmpiShmDir(); !dir.empty() && mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::FromErrno(errno, "create " + dir + " (Open MPI's shared-memory segments)");
  }
  Launch l;
  if (o_.launcher == "srun") {
    std::string h = HostName();
    if (h.find('.') != std::string::npos) h.resize(h.find('.'));  // Slurm's node names are short
    DLCKPT_ASSIGN_OR_RETURN(l, SrunLaunch(o_, job, run_dir_, h));
  } else {
    l = MpiLaunch(o_, job, geteuid() == 0);
  }
  for (const auto& [path, content] : l.files) {
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) return Status::FromErrno(errno, "write " + path);
    bool ok = std::fwrite(content.data(), 1, content.size(), f) == content.size();
    ok = std::fclose(f) == 0 && ok;
    if (!ok) return Status::FromErrno(errno ? errno : EIO, "write " + path);
  }
  env.insert(env.end(), l.env.begin(), l.env.end());
  if (o_.verbose) Log(job.name + ": " + Join(l.argv, " "));
  return Spawn(l.argv, env, log);
}

Status Supervisor::CheckProgram() const {
  const std::string& prog = o_.program[0];
  std::string found;
  if (prog.find('/') != std::string::npos) {
    found = prog;
  } else {
    const char* path = std::getenv("PATH");
    for (const auto& dir : Split(path ? path : "/usr/bin:/bin", ':')) {
      std::string candidate = (dir.empty() ? "." : dir) + "/" + prog;
      if (access(candidate.c_str(), X_OK) == 0) {
        found = candidate;
        break;
      }
    }
    if (found.empty()) {
      return Status::Error(ENOENT, "program '" + prog + "' is not in PATH; nothing was launched");
    }
  }
  struct stat st;
  if (stat(found.c_str(), &st) != 0) {
    return Status::FromErrno(errno, "program " + found + " (nothing was launched" +
                                        std::string(o_.hosts.empty() ? "" : "; with --hosts it must exist "
                                                                            "at the same path on this host too") +
                                        ")");
  }
  if (!S_ISREG(st.st_mode) || access(found.c_str(), X_OK) != 0) {
    return Status::Error(EACCES, "program " + found + " is not an executable file; nothing was launched");
  }
  // A program of the other MPI would run as one job per rank (app_mpi.h).
  if (o_.launcher == "mpiexec") {
    if (auto m = ProgramMpiLibraries(found)) DLCKPT_RETURN_IF_ERROR(CheckProgramMpi(prog, *m, o_.mpi_flavor, o_.mpiexec));
  }
  return Status::OK();
}

Status Supervisor::LaunchCodec() {
  ++generation_;
  unlink(rendezvous_.c_str());
  JobSpec job;
  job.name = "codec";
  job.virtual_nodes = o_.hosts.empty();
  job.env = {{"DLCKPT_JOB", o_.job}, {"DLCKPT_EVENTS", events_path_}};
  job.program = {CodecPath(), "--job", o_.job, "--rendezvous", rendezvous_,
                 "--group-size", std::to_string(o_.group_size), "--spares-per-group",
                 std::to_string(o_.spares_per_group), "--scheme", o_.scheme, "--parity", o_.parity,
                 "--generation", std::to_string(generation_)};
  if (!o_.keep) job.program.push_back("--cleanup-on-shutdown");
  // Virtual nodes share this machine: the service publishes, and so listens on, loopback only.
  if (o_.hosts.empty()) job.program.insert(job.program.end(), {"--host", "127.0.0.1"});
  const int nice_level = o_.codec_nice >= 0 ? o_.codec_nice : (o_.encode == "async" ? kAsyncCodecNice : 0);
  if (nice_level > 0) {
    job.program.push_back("--nice");
    job.program.push_back(std::to_string(nice_level));
  }
  // One codec process per live node (the node is DLCKPT_NODE, or the host name).
  for (const auto& node : LiveNodes()) job.segments.emplace_back(node, 1);
  heartbeat_->Expect(generation_, LiveNodes(), Env::Default()->NowNanos());
  // The key travels in the environment, never on a command line.
  std::vector<std::string> env{
      "DLCKPT_HEARTBEAT=" + heartbeat_address_ + ":" + std::to_string(heartbeat_->port()),
      "DLCKPT_HEARTBEAT_KEY=" + heartbeat_key_};
  AddCodecHolds(&env);
  codec_exited_ = false;
  DLCKPT_ASSIGN_OR_RETURN(codec_pid_, LaunchJob(job, codec_log_, env));
  codec_pgid_ = codec_pid_;  // Spawn made it a session (and group) leader
  // Wait for the rendezvous, unless the codec job dies first.
  double deadline = Now() + 120;
  control::ClientOptions co;
  co.rendezvous = rendezvous_;
  co.rendezvous_wait_ms = 100;
  co.connect_timeout_ms = 10000;
  co.hello_timeout_ms = 30000;
  co.role = control::protocol::Role::kSupervisor;
  co.job = o_.job;
  codec_ = std::make_unique<control::CodecClient>(std::move(co));
  for (;;) {
    Status r = codec_->Connect();
    if (r.ok()) return Status::OK();
    if (Terminating()) return Status::Error(EINTR, "terminated while the codec service started");
    if (r.code() != ETIMEDOUT && r.code() != ENOENT) return r;
    Tick();
    if (codec_exited_) {
      std::string tail = Tail(codec_log_, 3);
      return Status::Error(ECHILD, "the codec job ended (" + DescribeStatus(codec_status_) +
                                       ") before it was ready" + (tail.empty() ? "" : ": " + tail) +
                                       " (log: " + codec_log_ + ")");
    }
    if (Now() > deadline) {
      return Status::Timeout("the codec service did not publish " + rendezvous_ + " within 120 s; see " +
                             codec_log_);
    }
    if (heartbeat_failure_) return Status::Error(EHOSTDOWN, "a node stopped answering heartbeats during the codec launch");
  }
}

Status Supervisor::LaunchApp() {
  std::string lib;
  if (o_.preload) {
    // The interposers, then the API they serve (for dlckpt_checkpoint()).
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    std::string libdir;
    if (n > 0) {
      self[n] = '\0';
      libdir = (fs::path(self).parent_path().parent_path() / "lib").string() + "/";
    }
    lib = libdir + "libdlckpt_preload.so:" + libdir + "libdlckpt_api.so";
  }
  JobSpec job;
  job.name = "app";
  job.virtual_nodes = o_.hosts.empty();
  job.preload = lib;
  job.env = {{"DLCKPT_JOB", o_.job},
             {"DLCKPT_RENDEZVOUS", rendezvous_},
             {"DLCKPT_EVENTS", events_path_},
             {"DLCKPT_STORE_CAPACITY", std::to_string(o_.capacity)}};
  // Created on a halt, for SCR_Should_exit (scr/README.md; HaltDrain).
  job.env.emplace_back("DLCKPT_HALT_FILE", HaltFile());
  if (o_.max_files > 0) job.env.emplace_back("DLCKPT_MAX_FILES", std::to_string(o_.max_files));
  if (!o_.compress.empty()) job.env.emplace_back("DLCKPT_COMPRESS", o_.compress);
  job.env.emplace_back("DLCKPT_ENCODE", o_.encode);
  // The VeloC file dlckpt-run read (--veloc-config): VELOC_Init then leaves
  // mode to DLCKPT_ENCODE and the ignored keys to dlckpt-run (veloc/README.md).
  if (!o_.veloc_config.empty()) {
    std::error_code ec;
    const std::filesystem::path abs = std::filesystem::absolute(o_.veloc_config, ec);
    job.env.emplace_back("DLCKPT_VELOC_CONFIG", ec ? o_.veloc_config : abs.string());
  }
  // Stores holding a checkpoint are resumed by a relaunch after a recovery
  // (which restored one epoch everywhere), or with --resume; see dlckpt_init.
  job.env.emplace_back("DLCKPT_RESUME", recoveries_started_ > 0 || o_.resume || !restore_dir_.empty() ? "1" : "0");
  AddPersistEnv(&job);
  AddWriteHold(&job);
  job.program = o_.program;
  // Ranks stay in order: one segment per run of consecutive ranks on one node.
  for (const auto& [r, node] : placement_) {
    if (job.segments.empty() || job.segments.back().first != node) {
      job.segments.emplace_back(node, 0);
    }
    ++job.segments.back().second;
  }
  app_initialised_ = false;
  DLCKPT_ASSIGN_OR_RETURN(app_pid_, LaunchJob(job, "", {}));
  app_pgid_ = app_pid_;
  return Status::OK();
}

// ---- watching ------------------------------------------------------------------
// (failure injection and the heartbeat check: supervisor_faults.cc)

Supervisor::Outcome Supervisor::Monitor(int* app_status) {
  bool app_done = false;
  if (app_pid_ <= 0) {
    *app_status = 0;
    return Outcome::kFailure;
  }
  for (;;) {
    Tick();
    if (Terminating()) return Outcome::kTerminated;
    if (!app_done && Reap(app_pid_, app_status)) {
      app_done = true;
      app_pid_ = -1;
    }
    if (app_done) {
      if (WIFEXITED(*app_status) && WEXITSTATUS(*app_status) == 0 && dead_.size() == 0) return Outcome::kDone;
      if (WIFEXITED(*app_status) && WEXITSTATUS(*app_status) == 0) {
        // Finished although a node died after the application's last use of it.
        return Outcome::kDone;
      }
      Log("application job ended: " + DescribeStatus(*app_status));
      return Outcome::kFailure;
    }
    if (codec_exited_) {
      Log("codec job ended: " + DescribeStatus(codec_status_) + " (log: " + codec_log_ + ")");
      return Outcome::kFailure;
    }
    if (heartbeat_failure_) return Outcome::kFailure;  // the launchers may never notice
    if (o_.timeout > 0 && start_ > 0 && Now() - start_ > o_.timeout) return Outcome::kTimeout;
    if (o_.halt_seconds > 0 && start_ > 0 && Now() - start_ > o_.halt_seconds) return Outcome::kHalt;
    struct timespec ts{0, 10 * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
}

void Supervisor::TearDownJobs() {
  Signal(faults_.frozen, SIGKILL);
  faults_.frozen.clear();
  codec_.reset();
  if (heartbeat_) heartbeat_->Expect(generation_, {}, Env::Default()->NowNanos());
  heartbeat_failure_ = false;
  codec_exited_ = false;
  // srun: the steps' tasks are killed through Slurm on every node at once; srun itself
  // then only waits for a dead node's step daemon (KillWait), so it is killed after 1.5 s.
  double kill_after = 6;
  if (o_.launcher == "srun" && (app_pid_ > 0 || codec_pid_ > 0)) {
    double t0 = Now();
    int n = KillSlurmSteps(o_);
    if (n > 0) kill_after = 1.5;
    if (o_.verbose) Log("killed " + std::to_string(n) + " Slurm step(s) of the job in " + Fixed(Now() - t0) + " s");
  }
  // On SIGTERM Hydra ends its ranks, then waits for its launchers. A launcher into
  // a powered-off host (ssh to a dead machine) never returns: after 1 s a second
  // SIGTERM makes mpiexec stop waiting for it; SIGKILL after 6 s.
  for (pid_t* pid : {&app_pid_, &codec_pid_}) {
    if (*pid > 0) kill(*pid, SIGTERM);
  }
  double start = Now();
  bool again = false;
  for (;;) {
    bool alive = false;
    for (pid_t* pid : {&app_pid_, &codec_pid_}) {
      if (*pid > 0 && Reap(*pid, nullptr)) *pid = -1;
      alive = alive || *pid > 0;
    }
    if (!alive || Terminating()) break;  // after a signal, Terminate() ends what is left
    double waited = Now() - start;
    if (waited > 1 && !again) {
      again = true;
      for (pid_t* pid : {&app_pid_, &codec_pid_}) {
        if (*pid > 0) kill(*pid, SIGTERM);
      }
    }
    if (waited > kill_after) {
      for (pid_t* pid : {&app_pid_, &codec_pid_}) {
        if (*pid > 0) kill(*pid, SIGKILL);
        if (*pid > 0) WaitExit(*pid, 5, nullptr);
        *pid = -1;
      }
      break;
    }
    struct timespec ts{0, 10 * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
  // Whatever is left of the job (ranks orphaned by a killed launcher).
  for (int round = 0; round < 50 && !Terminating(); ++round) {
    auto pids = FindProcesses({"DLCKPT_JOB=" + o_.job});
    if (pids.empty()) break;
    Signal(pids, round < 10 ? SIGTERM : SIGKILL);
    struct timespec ts{0, 100 * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
}

// ---- recovery --------------------------------------------------------------------

Status Supervisor::Recover(RecoveryTimes* t, int* exit_code) {
  double t0 = Now();
  DLCKPT_RETURN_IF_ERROR(LaunchCodec());
  DLCKPT_ASSIGN_OR_RETURN(auto survey, codec_->Survey(600000, [this] { return WhileWaiting(); }));
  control::recovery::Input in;
  in.survey = std::move(survey);
  in.dead_nodes = dead_;
  in.placement = placement_;
  in.free_nodes = FreeNodes();
  auto plan = control::recovery::Decide(in);
  if (!plan.ok()) {
    *exit_code = kExitUnrecoverable;
    return plan.status();
  }
  t->survey = Now() - t0;
  t->what = plan->summary;
  Log("recovery " + std::to_string(recoveries_started_) + ": " + plan->summary);
  double t1 = Now();
  DLCKPT_RETURN_IF_ERROR(
      codec_->Recover(control::recovery::ToRecoverMessage(*plan), -1, [this] { return WhileWaiting(); }).status());
  t->rebuild = Now() - t1;
  placement_ = plan->placement;
  t->oversubscribed = !plan->oversubscribed.empty();
  t->epoch = plan->epoch;
  return Status::OK();
}

Status Supervisor::WhileWaiting() {
  if (Terminating()) return Status::Error(EINTR, "terminated by " + SignalName(g_signal.load()));
  Tick();
  if (heartbeat_failure_) return Status::Error(EHOSTDOWN, "a node stopped answering heartbeats");
  if (codec_exited_) return Status::Error(ECHILD, "the codec job ended");
  return Status::OK();
}

Status Supervisor::WaitForAppInit(double timeout) {
  double deadline = Now() + timeout;
  while (!app_initialised_) {
    if (Terminating()) return Status::Error(EINTR, "terminated by " + SignalName(g_signal.load()));
    Tick();
    int st;
    if (app_pid_ > 0 && Reap(app_pid_, &st)) {
      app_pid_ = -1;
      return Status::Error(ECHILD, "the relaunched application ended (" + DescribeStatus(st) +
                                       ") before dlckpt_init");
    }
    if (Now() > deadline) return Status::Timeout("the relaunched application did not start");
    if (heartbeat_failure_) return Status::Error(EHOSTDOWN, "a node stopped answering heartbeats during the relaunch");
    if (codec_exited_) return Status::Error(ECHILD, "the codec job ended during the relaunch");
    struct timespec ts{0, 5 * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
  return Status::OK();
}

int Supervisor::Terminate() {
  const int sig = g_signal.load();
  const std::string name = SignalName(sig);
  // SCR's halt: with --persist, SIGTERM and Slurm's warning signal drain the
  // newest protected epoch first (a second signal skips it).
  const bool halt = (sig == SIGUSR1 || (sig == SIGTERM && !o_.persist.empty())) && !Hurry() && app_pid_ > 0;
  // Then as for any signal; the summary says where the state went, and the
  // status whether a drained epoch exists to restart from (7) or not (3).
  const bool drained = halt && HaltDrain(name);
  Log("terminated by " + name + ": stopping the application and the codec service");
  codec_.reset();
  if (heartbeat_) heartbeat_->Expect(generation_, {}, Env::Default()->NowNanos());
  // Virtual nodes powered off by us: their stopped processes die at once.
  Signal(faults_.frozen, SIGKILL);
  faults_.frozen.clear();
  // Everything of the job: the process groups of every job launched (the
  // application, the codec, a halt's drain), and every process with the job's
  // environment. (Hydra's proxies and ranks each sit in a session of their
  // own; all carry DLCKPT_JOB.) Slurm steps are cancelled through Slurm.
  if (o_.launcher == "srun") KillSlurmSteps(o_);
  std::vector<pid_t> groups = TrackedGroups();
  groups.push_back(app_pgid_);
  groups.push_back(codec_pgid_);
  auto signal_all = [&](int s) {
    for (pid_t g : groups) {
      if (g > 1) kill(-g, s);
    }
    Signal(FindProcesses({"DLCKPT_JOB=" + o_.job}), s);
  };
  auto all_gone = [&] {
    for (pid_t* pid : {&app_pid_, &codec_pid_}) {
      if (*pid > 0 && Reap(*pid, nullptr)) *pid = -1;
    }
    bool launchers_gone = app_pid_ <= 0 && codec_pid_ <= 0;
    for (pid_t g : TrackedGroups()) launchers_gone = Reap(g, nullptr) && launchers_gone;
    if (!launchers_gone) return false;
    for (pid_t g : groups) {
      if (g > 1 && (kill(-g, 0) == 0 || errno != ESRCH)) return false;
    }
    return FindProcesses({"DLCKPT_JOB=" + o_.job}).empty();
  };
  const double t0 = Now();
  bool gone = all_gone();
  if (!gone && !Hurry()) {
    signal_all(SIGTERM);
    while (!(gone = all_gone()) && !Hurry() && Now() - t0 < o_.term_grace) Sleep(0.02);
  }
  // SIGKILL for what is left, again until it is gone (a process forked meanwhile).
  for (double t1 = Now(); !gone && Now() - t1 < 10;) {
    signal_all(SIGKILL);
    Sleep(0.02);
    gone = all_gone();
  }
  if (!gone) Log("warning: processes of job " + o_.job + " survived SIGKILL");
  if (o_.verbose) Log("jobs stopped in " + Fixed(Now() - t0) + " s");
  if (halt) return Finish(drained ? kExitHalted : kExitUnrecoverable, halt_note_);
  return Finish(128 + sig, "terminated by " + name);
}

int Supervisor::Run() {
  const int code = RunJob();
  ClaimEnd(code);
  return code;
}

void Supervisor::ClaimEnd(int exit_code) {
  if (!ClaimEndFor(exit_code)) AwaitWatchdog();
}

}  // namespace dlckpt::run

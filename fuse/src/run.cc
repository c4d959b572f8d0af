// `dlckpt-ctl run`: a mount and a command per process, job-wide checkpoints on
// request. See RunJob in dlckpt/fuse/job.h.
#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "dlckpt/base/mpi.h"
#include "dlckpt/base/names.h"
#include "dlckpt/base/node.h"
#include "dlckpt/base/spawn.h"
#include "dlckpt/base/events.h"
#include "dlckpt/fuse/job.h"
#include "dlckpt/fuse/mount.h"
#include "dlckpt/memfs/memfs.h"

extern char** environ;

namespace dlckpt::fusefs {
namespace {

namespace fs = std::filesystem;

void Sleep(long ms) {
  struct timespec ts{ms / 1000, (ms % 1000) * 1000000};
  nanosleep(&ts, nullptr);
}

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("signal ") + strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

int ExitCode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// A child process (SpawnProcess: the exec error is the call's). The child
// gets SIGTERM when this process dies and inherits none of its descriptors
// beyond 0-2 (the launcher's and MPI's sockets stay here); `own_group` makes
// it the leader of a new process group (to stop a command with its children).
Result<pid_t> Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                    bool own_group) {
  SpawnOptions options;
  options.parent_death_signal = SIGTERM;
  options.in_child = [own_group] {
    if (own_group) setpgid(0, 0);
    close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);  // the error pipe stays open until exec
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
  };
  DLCKPT_ASSIGN_OR_RETURN(pid_t pid, SpawnProcess(argv, env, options));
  if (own_group) setpgid(pid, pid);  // either side may win the race; both set it
  return pid;
}

int PidFd(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

// The environment of this process with `overrides` ("KEY=VALUE") replacing
// or adding entries, without the launcher's connection to this process
// (an MPI program run as a command then starts as a singleton).
std::vector<std::string> Environment(const std::vector<std::string>& overrides) {
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) {
    std::string entry = *e;
    std::string key = entry.substr(0, entry.find('='));
    if (key == "PMI_FD" || key == "PMI_PORT" || key == "PMI_ID" || key == "HYDI_CONTROL_FD") continue;
    bool replaced = false;
    for (const auto& o : overrides) replaced |= o.compare(0, key.size() + 1, key + "=") == 0;
    if (!replaced) out.push_back(entry);
  }
  out.insert(out.end(), overrides.begin(), overrides.end());
  return out;
}

// Unmounts a dlckpt-fuse mount at `path` whose daemon died (lazily, as
// `fusermount3 -u -z` does), so that a new daemon can mount there. Other
// mounts are left alone (the mount attempt then reports them).
void ClearDeadMount(const std::string& path) {
  std::error_code ec;
  fs::path real = fs::weakly_canonical(path, ec);
  if (ec) return;
  if (MountedType(real.string()) != "fuse.dlckpt") return;
  struct statfs sfs {};
  if (statfs(real.c_str(), &sfs) == 0 || errno != ENOTCONN) return;  // alive
  std::fprintf(stderr, "dlckpt-ctl run: unmounting %s, a dlckpt-fuse mount whose daemon died\n", path.c_str());
  if (umount2(real.c_str(), MNT_DETACH) != 0) {
    auto pid = Spawn({"fusermount3", "-u", "-z", real.string()}, Environment({}), false);
    if (pid.ok()) waitpid(*pid, nullptr, 0);
  }
}

// What SIGTERM/SIGINT/SIGHUP must stop (async-signal-safe handler).
volatile sig_atomic_t g_command_group = -1;
volatile sig_atomic_t g_daemon = -1;
char g_socket_path[256];
char g_socket_dir[256];

void OnSignal(int sig) {
  if (g_command_group > 0) kill(-g_command_group, SIGTERM);
  if (g_daemon > 0) kill(g_daemon, SIGTERM);
  if (g_socket_path[0]) unlink(g_socket_path);
  if (g_socket_dir[0]) rmdir(g_socket_dir);
  _exit(128 + sig);
}

// One process's mount, daemon and command.
class Node {
 public:
  Node(const RunOptions& o, int rank, std::string node)
      : o_(o), rank_(rank), node_(std::move(node)), mount_(ExpandMountPattern(o.mount_pattern, node_, rank)) {}
  ~Node() { Stop(); }

  const std::string& mount() const { return mount_; }

  Status Start();
  Status StartCommand(uint64_t restarted_epoch);

  // Waits for the next local event: a trigger's request, the command's end,
  // or the daemon's death. Never spins (poll).
  void WaitEvent();
  bool has_request() const { return request_ >= 0; }
  bool exited() const { return command_pid_ < 0 && command_started_; }
  bool broken() const { return !broken_.empty(); }
  const std::string& broken_why() const { return broken_; }
  int exit_code() const { return exit_code_; }

  void Answer(const Result<uint64_t>& r) {
    if (request_ < 0) return;
    CoordinatorSocket::Answer(request_, r);
    request_ = -1;
  }
  // Stops the command: waits up to grace_ms for it to end by itself, then
  // SIGTERM to its group, then SIGKILL.
  void KillCommand(int grace_ms = 0);
  // Unmounts (SIGTERM to the daemon); a problem is reported on stderr.
  void Stop();

 private:
  void Reap(pid_t* pid, int* pidfd, int* status) {
    while (waitpid(*pid, status, 0) < 0 && errno == EINTR) {
    }
    close(*pidfd);
    *pidfd = -1;
    *pid = -1;
  }

  const RunOptions& o_;
  int rank_;
  std::string node_, mount_;
  std::string socket_dir_;
  std::unique_ptr<CoordinatorSocket> socket_;
  pid_t daemon_pid_ = -1, command_pid_ = -1;
  int daemon_fd_ = -1, command_fd_ = -1;
  bool command_started_ = false;
  int exit_code_ = 0;
  int request_ = -1;
  std::string broken_;
};

Status Node::Start() {
  std::error_code ec;
  fs::create_directories(mount_, ec);
  if (ec) return Status::Error(ec.value(), "mount point " + mount_ + ": " + ec.message());
  ClearDeadMount(mount_);
  DLCKPT_RETURN_IF_ERROR(CheckMountPoint(mount_));

  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/dlckpt-ctl.XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) return Status::FromErrno(errno, "mkdtemp " + dir);
  socket_dir_ = dir;
  DLCKPT_ASSIGN_OR_RETURN(socket_, CoordinatorSocket::Listen(socket_dir_ + "/coordinator"));
  std::snprintf(g_socket_path, sizeof g_socket_path, "%s", socket_->path().c_str());
  std::snprintf(g_socket_dir, sizeof g_socket_dir, "%s", socket_dir_.c_str());

  std::vector<std::string> argv{o_.fuse_path, mount_, "--job", o_.job, "--node", node_, "--rank",
                                std::to_string(rank_), "-f", "--checkpoint", "coordinated",
                                "--coordinator", socket_->path()};
  bool capacity_given = false;
  for (const auto& a : o_.fuse_args) capacity_given |= a.rfind("--capacity", 0) == 0;
  const char* cap = std::getenv("DLCKPT_STORE_CAPACITY");  // dlckpt-run's --capacity
  if (!capacity_given && cap && *cap) argv.insert(argv.end(), {"--capacity", cap});
  bool max_files_given = false;
  for (const auto& a : o_.fuse_args) max_files_given |= a.rfind("--max-files", 0) == 0;
  const char* max_files = std::getenv("DLCKPT_MAX_FILES");  // dlckpt-run's --max-files
  if (!max_files_given && max_files && *max_files) argv.insert(argv.end(), {"--max-files", max_files});
  argv.insert(argv.end(), o_.fuse_args.begin(), o_.fuse_args.end());
  DLCKPT_ASSIGN_OR_RETURN(daemon_pid_, Spawn(argv, Environment({"DLCKPT_RANK=" + std::to_string(rank_)}), false));
  g_daemon = daemon_pid_;
  daemon_fd_ = PidFd(daemon_pid_);
  if (daemon_fd_ < 0) return Status::FromErrno(errno, "pidfd_open of dlckpt-fuse");

  // Up when its status names it.
  MountControl control(mount_);
  for (int waited = 0;; waited += 20) {
    int status = 0;
    if (waitpid(daemon_pid_, &status, WNOHANG) == daemon_pid_) {
      close(daemon_fd_);
      daemon_fd_ = -1;
      daemon_pid_ = -1;
      g_daemon = -1;
      return Status::Error(EIO, "dlckpt-fuse for " + mount_ + " ended (" + DescribeExit(status) +
                                    ") before it mounted; see its message above");
    }
    auto st = control.State();
    if (st.ok() && st->pid == daemon_pid_) return Status::OK();
    if (waited >= o_.mount_timeout_ms) {
      return Status::Timeout("dlckpt-fuse for " + mount_ + " did not mount within " +
                             std::to_string(o_.mount_timeout_ms / 1000) + " s");
    }
    Sleep(20);
  }
}

Status Node::StartCommand(uint64_t restarted_epoch) {
  std::vector<std::string> env = Environment(
      {"DLCKPT_MOUNT=" + mount_, "DLCKPT_RANK=" + std::to_string(rank_), "DLCKPT_NODE=" + node_,
       "DLCKPT_RESTARTED_EPOCH=" + std::to_string(restarted_epoch)});
  DLCKPT_ASSIGN_OR_RETURN(command_pid_, Spawn(o_.command, env, true));
  g_command_group = command_pid_;
  command_started_ = true;
  command_fd_ = PidFd(command_pid_);
  if (command_fd_ < 0) return Status::FromErrno(errno, "pidfd_open of the command");
  return Status::OK();
}

void Node::WaitEvent() {
  while (request_ < 0 && !exited() && broken_.empty()) {
    struct pollfd fds[3] = {{socket_->fd(), POLLIN, 0}, {command_fd_, POLLIN, 0}, {daemon_fd_, POLLIN, 0}};
    int rc = poll(fds, 3, 1000);
    if (rc < 0 && errno != EINTR) {
      broken_ = std::string("poll: ") + std::strerror(errno);
      return;
    }
    if (rc <= 0) continue;
    if (fds[0].revents & POLLIN) {
      std::string store;
      auto conn = socket_->Accept(5000, &store);
      if (!conn.ok()) {
        std::fprintf(stderr, "dlckpt-ctl run: %s\n", conn.status().ToString().c_str());
      } else {
        request_ = *conn;
      }
    }
    if (command_fd_ >= 0 && (fds[1].revents & POLLIN)) {
      int status = 0;
      Reap(&command_pid_, &command_fd_, &status);
      g_command_group = -1;
      exit_code_ = ExitCode(status);
    }
    if (daemon_fd_ >= 0 && (fds[2].revents & POLLIN)) {
      int status = 0;
      Reap(&daemon_pid_, &daemon_fd_, &status);
      g_daemon = -1;
      broken_ = "the dlckpt-fuse daemon of " + mount_ + " ended (" + DescribeExit(status) + ")";
      ClearDeadMount(mount_);
      KillCommand();  // it would only meet ENOTCONN
    }
  }
}

void Node::KillCommand(int grace_ms) {
  if (command_pid_ < 0) return;
  struct pollfd p{command_fd_, POLLIN, 0};
  if (grace_ms <= 0 || poll(&p, 1, grace_ms) <= 0) {
    kill(-command_pid_, SIGTERM);
    if (poll(&p, 1, 5000) <= 0) kill(-command_pid_, SIGKILL);
  }
  int status = 0;
  Reap(&command_pid_, &command_fd_, &status);
  g_command_group = -1;
  exit_code_ = ExitCode(status);
  command_started_ = true;
}

void Node::Stop() {
  if (request_ >= 0) Answer(Status::Error(ECANCELED, "the job is ending"));
  KillCommand();
  if (daemon_pid_ > 0) {
    kill(daemon_pid_, SIGTERM);
    struct pollfd p{daemon_fd_, POLLIN, 0};
    if (poll(&p, 1, 10000) <= 0) {
      std::fprintf(stderr, "dlckpt-ctl run: dlckpt-fuse of %s did not stop in 10 s; killing it\n",
                   mount_.c_str());
      kill(daemon_pid_, SIGKILL);
    }
    int status = 0;
    Reap(&daemon_pid_, &daemon_fd_, &status);
    g_daemon = -1;
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      std::fprintf(stderr, "dlckpt-ctl run: dlckpt-fuse of %s ended with %s\n", mount_.c_str(),
                   DescribeExit(status).c_str());
      ClearDeadMount(mount_);
    }
  }
  socket_.reset();
  if (!socket_dir_.empty()) {
    rmdir(socket_dir_.c_str());
    socket_dir_.clear();
  }
  g_socket_path[0] = g_socket_dir[0] = '\0';
}

// Local events, combined over all processes (the maximum wins).
enum Event : uint64_t { kRequest = 1, kExited = 2, kBroken = 3 };

}  // namespace

int RunJob(const RunOptions& o) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::string node = ThisNode();
  const std::string who = "rank " + std::to_string(rank) + " on node " + node;
  mpi::Collective c(MPI_COMM_WORLD, who);
  // Waiting for the other commands may last as long as they compute: sleep
  // up to 20 ms between tests there.
  mpi::Collective idle(MPI_COMM_WORLD, who, {20000, 20000000});
  auto report = [&](const Status& s) {
    if (rank == 0) std::fprintf(stderr, "dlckpt-ctl run: %s\n", s.ToString().c_str());
  };
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &sa, nullptr);

  Node n(o, rank, node);
  Status s = o.job.empty() ? Status::InvalidArgument("no job id: give --job or set DLCKPT_JOB")
                           : StoreName(o.job, node, rank).status();
  if (s.ok()) s = n.Start();
  s = c.Agree(s, "starting the mounts");
  if (!s.ok()) {
    report(s);
    return 1;
  }

  // One checkpoint everywhere: the epoch the commands restart from.
  MountControl control(n.mount());
  Result<MountState> state = control.State();
  s = c.Agree(state.status(), "reading the mounts");
  Result<uint64_t> one = s.ok() ? control::AgreeOneAcknowledgedEpoch(
                                      &c, state->acked, "mount " + n.mount() + " (rank " + std::to_string(rank) +
                                                            ", node " + node + ")",
                                      "run under dlckpt-run, which restores one epoch everywhere")
                                : Result<uint64_t>(s);
  if (!one.ok()) {
    report(one.status());
    return 1;
  }
  const uint64_t restarted = *one;
  if (rank == 0) events::Emit(events::Init(restarted));
  s = c.Agree(n.StartCommand(restarted), "starting the command");
  if (!s.ok()) {
    report(s);
    return 1;
  }

  JobOptions jo = o.checkpoint;
  if (!jo.log) jo.log = [](const std::string& m) { std::fprintf(stderr, "dlckpt-ctl run: %s\n", m.c_str()); };
  JobCheckpointer checkpointer(MPI_COMM_WORLD, jo);
  for (;;) {
    n.WaitEvent();
    uint64_t mine = n.broken() ? kBroken : n.has_request() ? kRequest : kExited;
    auto high = idle.Max(mine);
    auto low = high.ok() ? c.Min(mine) : high;
    if (!low.ok()) {
      std::fprintf(stderr, "dlckpt-ctl run: %s\n", low.status().ToString().c_str());
      return 1;
    }
    if (*high == kBroken) {
      s = c.Agree(n.broken() ? Status::Error(EIO, n.broken_why()) : Status::OK(), "mount lost");
      report(s);
      n.Answer(s);
      n.KillCommand(2000);  // time to report the failed checkpoint
      return 1;
    }
    if (*high == kExited && *low == kExited) break;
    if (*high == kRequest && *low == kRequest) {
      Result<uint64_t> e = checkpointer.Checkpoint(control);
      if (!e.ok()) report(e.status());
      n.Answer(e);
      continue;
    }
    // Some commands asked for a checkpoint, others have ended.
    n.Answer(Status::Error(ECANCELED, "checkpoint not taken: the command of another process ended "
                                      "without asking for it (every process's command must ask)"));
  }
  n.Stop();
  return n.exit_code();
}

}  // namespace dlckpt::fusefs

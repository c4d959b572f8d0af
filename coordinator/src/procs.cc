#include "procs.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "dlckpt/base/spawn.h"

extern char** environ;

namespace dlckpt::run {

namespace {

// Process groups of spawned children not yet reaped; 0 marks a free slot.
// Lock-free, so that a signal handler may read them.
constexpr size_t kMaxTrackedGroups = 32;
std::atomic<pid_t> g_tracked[kMaxTrackedGroups];
static_assert(std::atomic<pid_t>::is_always_lock_free);

void Track(pid_t pgid) {
  for (auto& slot : g_tracked) {
    pid_t expected = 0;
    if (slot.compare_exchange_strong(expected, pgid)) return;
  }
}

void Untrack(pid_t pgid) {
  for (auto& slot : g_tracked) {
    pid_t expected = pgid;
    slot.compare_exchange_strong(expected, 0);
  }
}

// The whole content of a small /proc file ("" if it cannot be read).
std::string ReadProcFile(const std::string& path) {
  std::string data;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return data;
  char buf[8192];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) data.append(buf, static_cast<size_t>(n));
  close(fd);
  return data;
}

// Calls f(pid, name) for every process directory of /proc but this process's.
template <typename F>
void ForEachProcess(F f) {
  DIR* d = opendir("/proc");
  if (!d) return;
  const pid_t self = getpid();
  while (struct dirent* e = readdir(d)) {
    char* end = nullptr;
    long pid = strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == self) continue;
    f(static_cast<pid_t>(pid), std::string(e->d_name));
  }
  closedir(d);
}

}  // namespace

Result<pid_t> Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
                    const std::string& log_path) {
  if (argv.empty()) return Status::InvalidArgument("spawn: empty command");
  int log_fd = -1;
  if (!log_path.empty()) {
    log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (log_fd < 0) return Status::FromErrno(errno, "open log " + log_path);
  }
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  for (const auto& kv : extra_env) {
    std::string name = kv.substr(0, kv.find('=') + 1);
    std::erase_if(env, [&](const std::string& cur) { return cur.compare(0, name.size(), name) == 0; });
    env.push_back(kv);
  }
  SpawnOptions options;
  options.parent_death_signal = SIGKILL;
  options.in_child = [log_fd] {
    setsid();
    if (log_fd >= 0) {
      dup2(log_fd, STDOUT_FILENO);
      dup2(log_fd, STDERR_FILENO);
    }
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    signal(SIGPIPE, SIG_DFL);
  };
  Result<pid_t> pid = SpawnProcess(argv, env, options);
  if (log_fd >= 0) close(log_fd);
  if (!pid.ok()) return pid;
  Track(*pid);
  return pid;
}

std::vector<pid_t> FindProcesses(const std::vector<std::string>& env) {
  std::vector<pid_t> out;
  ForEachProcess([&](pid_t pid, const std::string& name) {
    const std::string data = ReadProcFile("/proc/" + name + "/environ");
    size_t matched = 0;
    for (const auto& want : env) {
      size_t pos = 0;
      bool found = false;
      while (pos < data.size()) {
        size_t z = data.find('\0', pos);
        if (z == std::string::npos) z = data.size();
        if (data.compare(pos, z - pos, want) == 0) {
          found = true;
          break;
        }
        pos = z + 1;
      }
      if (found) ++matched;
    }
    if (matched == env.size()) out.push_back(pid);
  });
  return out;
}

std::vector<pid_t> Descendants(pid_t root) {
  std::multimap<pid_t, pid_t> children;  // parent -> child
  ForEachProcess([&](pid_t pid, const std::string& name) {
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
    const std::string stat = ReadProcFile("/proc/" + name + "/stat");
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 4 >= stat.size()) return;
    if (stat[paren + 2] == 'Z' || stat[paren + 2] == 'X') return;  // dead, not yet reaped
    const long ppid = std::strtol(stat.c_str() + paren + 4, nullptr, 10);
    if (ppid > 0) children.emplace(static_cast<pid_t>(ppid), pid);
  });
  std::vector<pid_t> out;
  std::vector<pid_t> todo{root};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    auto [lo, hi] = children.equal_range(p);
    for (auto it = lo; it != hi; ++it) {
      out.push_back(it->second);
      todo.push_back(it->second);
    }
  }
  return out;
}

void Signal(const std::vector<pid_t>& pids, int sig) {
  for (pid_t p : pids) kill(p, sig);
}

bool Reap(pid_t pid, int* status) {
  if (pid <= 0) return false;
  int st = 0;
  pid_t r = waitpid(pid, &st, WNOHANG);
  if (r == pid) {
    if (status) *status = st;
    Untrack(pid);
    return true;
  }
  if (r < 0 && errno == ECHILD) {  // already reaped: gone
    if (status) *status = 0;
    Untrack(pid);
    return true;
  }
  return false;
}

std::vector<pid_t> TrackedGroups() {
  std::vector<pid_t> out;
  for (const auto& slot : g_tracked) {
    if (pid_t g = slot.load(); g > 1) out.push_back(g);
  }
  return out;
}

void SignalTrackedGroups(int sig) {
  for (const auto& slot : g_tracked) {
    if (pid_t g = slot.load(); g > 1) kill(-g, sig);
  }
}

bool WaitExit(pid_t pid, double seconds, int* status) {
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    if (Reap(pid, status)) return true;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double elapsed = static_cast<double>(now.tv_sec - start.tv_sec) +
                     static_cast<double>(now.tv_nsec - start.tv_nsec) / 1e9;
    if (elapsed >= seconds) return false;
    struct timespec ts{0, 10 * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
}

std::string DescribeStatus(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const char* name = sigabbrev_np(WTERMSIG(status));
    return std::string("killed by SIG") + (name ? name : std::to_string(WTERMSIG(status)).c_str());
  }
  return "status " + std::to_string(status);
}

std::string Tail(const std::string& path, size_t lines) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return "";
  std::vector<std::string> last;
  char buf[512];
  while (std::fgets(buf, sizeof buf, f)) {
    std::string l(buf);
    while (!l.empty() && (l.back() == '\n' || l.back() == '\r')) l.pop_back();
    if (l.empty()) continue;
    last.push_back(l);
    if (last.size() > lines) last.erase(last.begin());
  }
  std::fclose(f);
  std::string out;
  for (const auto& l : last) out += (out.empty() ? "" : " | ") + l;
  return out;
}

std::vector<std::string> DetachFuseMounts(const std::string& store_prefix) {
  // mountinfo: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [TAGS...] - FSTYPE SOURCE SUPEROPTS",
  // with space, tab, newline and backslash in MOUNTPOINT escaped as \ooo.
  auto unescape = [](const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\\' && i + 3 < s.size()) {
        out += static_cast<char>(std::stoi(s.substr(i + 1, 3), nullptr, 8));
        i += 3;
      } else {
        out += s[i];
      }
    }
    return out;
  };
  // dlckpt-fuse names a mount "dlckpt:" and its store's name without the '/'.
  const std::string name = !store_prefix.empty() && store_prefix[0] == '/' ? store_prefix.substr(1) : store_prefix;
  std::vector<std::string> points;
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    const size_t sep = line.find(" - ");
    if (sep == std::string::npos) continue;
    std::istringstream head(line.substr(0, sep)), tail(line.substr(sep + 3));
    std::string id, parent, dev, root, point, fstype, source;
    if (!(head >> id >> parent >> dev >> root >> point) || !(tail >> fstype >> source)) continue;
    if (fstype != "fuse.dlckpt" || source.rfind("dlckpt:" + name, 0) != 0) continue;
    points.push_back(unescape(point));
  }
  std::vector<std::string> detached;
  for (const std::string& p : points) {
    if (umount2(p.c_str(), MNT_DETACH) == 0) detached.push_back(p);
  }
  return detached;
}

}  // namespace dlckpt::run

#include "run_dir.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string_view>

namespace dlckpt::run {

namespace fs = std::filesystem;

std::string DefaultJobId() {
  unsigned char r[3] = {0, 0, 0};
  size_t got = 0;
  while (got < sizeof r) {
    ssize_t n = getrandom(r + got, sizeof r - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      // No entropy source: the clock's nanoseconds still beat a bare pid.
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      for (size_t i = got; i < sizeof r; ++i) r[i] = static_cast<unsigned char>(ts.tv_nsec >> (8 * i));
      break;
    }
  }
  char hex[8];
  std::snprintf(hex, sizeof hex, "%02x%02x%02x", r[0], r[1], r[2]);
  return "dlckpt" + std::to_string(getpid()) + hex;
}

Result<int> OpenRunDir(const std::string& dir, bool* made) {
  *made = false;
  fs::path parent = fs::path(dir).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);  // an explicit --run-dir's parents (a failure shows below)
  }
  if (mkdir(dir.c_str(), 0700) == 0) {
    *made = true;
  } else if (errno != EEXIST) {
    return Status::FromErrno(errno, "create run directory " + dir);
  }
  auto unsafe = [&](const struct stat& st, const std::string& why) {
    char mode[16];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Status::Error(EEXIST, "run directory " + dir + " is unsafe: " + why + " (owner uid " +
                                     std::to_string(st.st_uid) + ", mode " + mode +
                                     "); remove it, or choose another --job or --run-dir");
  };
  struct stat st;
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (lstat(dir.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) return unsafe(st, "it is a symbolic link");
    if (lstat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) return unsafe(st, "it is not a directory");
    return Status::FromErrno(err, "open run directory " + dir);
  }
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return Status::FromErrno(err, "stat run directory " + dir);
  }
  std::string why;
  if (*made) {
    if ((st.st_mode & 07777) != 0700) fchmod(fd, 0700);  // a umask took owner bits
  } else if (st.st_uid != geteuid()) {
    why = "it is not owned by uid " + std::to_string(geteuid());
  } else if ((st.st_mode & 077) != 0) {
    why = "group or others have access to it (want mode 0700)";
  }
  if (!why.empty()) {
    close(fd);
    return unsafe(st, why);
  }
  return fd;
}

Result<std::string> HaltJob(const std::string& job, const std::string& run_dir) {
  const std::string dir = run_dir.empty() ? "/tmp/dlckpt-run." + job : run_dir;
  const std::string lock_path = dir + "/lock";
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) {
    return Status::FromErrno(errno, "job " + job + " is not running here: run directory " + dir);
  }
  if (!S_ISDIR(st.st_mode)) return Status::Error(ENOTDIR, "job " + job + ": " + dir + " is not a directory");
  if (st.st_uid != geteuid()) {
    return Status::Error(EPERM, "job " + job + " is not yours: its run directory " + dir + " belongs to uid " +
                                    std::to_string(st.st_uid) + ", not to uid " + std::to_string(geteuid()));
  }
  int fd = open(lock_path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "job " + job + " is not running: open " + lock_path);
  // A shared lock we can take means no dlckpt-run holds its exclusive one.
  // (Held for an instant: a dlckpt-run of this job starting just then would
  // find the job busy.)
  if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
    close(fd);
    return Status::Error(ESRCH, "job " + job + " is not running: no dlckpt-run holds " + lock_path +
                                    " (its run directory is left over from an earlier run)");
  }
  if (errno != EWOULDBLOCK) {
    int err = errno;
    close(fd);
    return Status::FromErrno(err, "lock " + lock_path);
  }
  char buf[4096];
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  close(fd);
  if (n < 0) return Status::FromErrno(errno, "read " + lock_path);
  std::string text(buf, static_cast<size_t>(n));
  const long pid = std::strtol(text.c_str(), nullptr, 10);
  if (pid <= 0) {
    return Status::Error(ESRCH, "job " + job + ": " + lock_path + " names no pid (is dlckpt-run still starting?)");
  }
  std::string persist;
  size_t at = text.find("\npersist ");
  if (at != std::string::npos) {
    at += std::string_view("\npersist ").size();
    persist = text.substr(at, text.find('\n', at) - at);
  }
  if (kill(static_cast<pid_t>(pid), SIGUSR1) != 0) {
    return Status::FromErrno(errno, "job " + job + ": send SIGUSR1 to dlckpt-run (pid " + std::to_string(pid) + ")");
  }
  std::string what = "halt requested for job " + job + " (SIGUSR1 to dlckpt-run, pid " + std::to_string(pid) + "): ";
  if (persist.empty()) {
    what += "it stops the job without draining (no --persist) and exits 3";
  } else {
    what += "it drains the newest protected epoch to " + persist +
            ", stops the job and exits 7 (3 if no epoch could be drained)";
  }
  return what;
}

}  // namespace dlckpt::run

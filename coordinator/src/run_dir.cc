#include "run_dir.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>

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

}  // namespace dlckpt::run

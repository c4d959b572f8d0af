#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "dlckpt/base/env.h"
#include "dlckpt/base/names.h"
#include "env_internal.h"

namespace dlckpt {

MappedShm::~MappedShm() {
  if (addr_ != nullptr && size_ > 0) munmap(addr_, size_);
  if (fd_ >= 0) close(fd_);
}

Status MappedShm::TryLockExclusive() {
  while (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK) {
      return Status::Busy("store " + name_ + " is owned by a live process");
    }
    return Status::FromErrno(errno, "flock " + name_);
  }
  return Status::OK();
}

Status MappedShm::Shrink(size_t new_size) {
  if (new_size == 0 || new_size > size_) {
    return Status::InvalidArgument("shrink " + name_ + " from " + std::to_string(size_) + " to " +
                                   std::to_string(new_size) + " bytes");
  }
  if (new_size == size_) return Status::OK();
  // Unmap the tail first: no access can reach a page beyond the new end.
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t keep = (new_size + page - 1) / page * page;
  if (keep < size_ && munmap(static_cast<uint8_t*>(addr_) + keep, size_ - keep) != 0) {
    return Status::FromErrno(errno, "munmap tail of " + name_);
  }
  size_ = new_size;
  if (ftruncate(fd_, static_cast<off_t>(new_size)) != 0) return Status::FromErrno(errno, "ftruncate " + name_);
  return Status::OK();
}

namespace {

class PosixEnv final : public Env {};

Status CheckShmName(const std::string& name) {
  if (name.size() < 2 || name[0] != '/' || name.find('/', 1) != std::string::npos ||
      name.size() > 250) {
    return Status::InvalidArgument("invalid shared memory name '" + name +
                                   "' (want /NAME, no other '/', at most 250 characters)");
  }
  return Status::OK();
}

// Where glibc's shm_open puts `name` (the form ListShm reads too).
std::string ShmPath(const std::string& name) { return "/dev/shm" + name; }

}  // namespace

const char* FileType(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "of unknown type";
}

std::string OctalMode(mode_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

namespace {

// Refuses an object that this process's uid did not create through
// CreateShm: another uid's (it could change the bytes under us, or have
// planted them), not a regular file, or a mode other than 0600.
Status CheckShmOwnership(const std::string& name, const struct stat& st) {
  bool ours = name.compare(0, kNameRoot.size(), kNameRoot) == 0;
  std::string what = ParseStoreName(name).ok()                          ? "store "
                     : ours && name.find(".parity") != std::string::npos ? "parity object "
                                                                         : "shared memory object ";
  what += ShmPath(name);
  std::string refuse = ours ? "; refusing to attach: remove it or choose another --job"
                            : "; refusing to attach: remove it";
  uid_t me = geteuid();
  if (st.st_uid != me) {
    return Status::Error(EPERM, what + " is owned by uid " + std::to_string(st.st_uid) +
                                    ", not by uid " + std::to_string(me) + " (this process)" + refuse);
  }
  if (!S_ISREG(st.st_mode)) {
    return Status::Error(EPERM, what + " is " + FileType(st.st_mode) + ", not a regular file" + refuse);
  }
  if ((st.st_mode & 07777) != 0600) {
    return Status::Error(EACCES, what + " has mode " + OctalMode(st.st_mode) + ", expected 0600" + refuse);
  }
  return Status::OK();
}

}  // namespace

Env* Env::Default() {
  static PosixEnv* const env = new PosixEnv();
  return env;
}

Result<std::unique_ptr<MappedShm>> Env::CreateShm(const std::string& name, size_t size,
                                                  bool prefault) {
  DLCKPT_RETURN_IF_ERROR(CheckShmName(name));
  if (size == 0) return Status::InvalidArgument("shared memory " + name + ": size 0");
  int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno(errno, "shm_open(O_CREAT|O_EXCL) " + name);
  auto fail = [&](int err, const std::string& what) {
    close(fd);
    shm_unlink(name.c_str());
    return Status::FromErrno(err, what + " " + name + " (" + std::to_string(size) + " bytes)");
  };
  if (fchmod(fd, 0600) != 0) return fail(errno, "fchmod");
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) return fail(errno, "ftruncate");
  if (prefault) {
    int rc;
    do {
      rc = posix_fallocate(fd, 0, static_cast<off_t>(size));
    } while (rc == EINTR);
    if (rc != 0) return fail(rc, "fallocate");
  }
  int mflags = MAP_SHARED | (prefault ? MAP_POPULATE : 0);
  void* addr = mmap(nullptr, size, PROT_READ | PROT_WRITE, mflags, fd, 0);
  if (addr == MAP_FAILED) return fail(errno, "mmap");
  return std::make_unique<MappedShm>(name, fd, addr, size, true);
}

Result<std::unique_ptr<MappedShm>> Env::OpenShm(const std::string& name, bool writable,
                                                bool populate) {
  DLCKPT_RETURN_IF_ERROR(CheckShmName(name));
  // O_NONBLOCK: a FIFO planted under the name must not block the open
  // (glibc's shm_open adds O_NOFOLLOW: a planted symlink fails with ELOOP).
  int fd = shm_open(name.c_str(), (writable ? O_RDWR : O_RDONLY) | O_NONBLOCK | O_CLOEXEC, 0);
  if (fd < 0) {
    int err = errno;
    struct stat st;
    if (err != ENOENT && lstat(ShmPath(name).c_str(), &st) == 0) {
      // Say why, if the object is not ours (EACCES: another uid's 0600 store).
      DLCKPT_RETURN_IF_ERROR(CheckShmOwnership(name, st));
    }
    return Status::FromErrno(err, "shm_open " + name);
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return Status::FromErrno(err, "fstat " + name);
  }
  if (Status mine = CheckShmOwnership(name, st); !mine.ok()) {
    close(fd);
    return mine;
  }
  size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    close(fd);
    return Status::Corruption("shared memory " + name + " is empty");
  }
  int prot = PROT_READ | (writable ? PROT_WRITE : 0);
  void* addr = mmap(nullptr, size, prot, MAP_SHARED | (populate ? MAP_POPULATE : 0), fd, 0);
  if (addr == MAP_FAILED) {
    int err = errno;
    close(fd);
    return Status::FromErrno(err, "mmap " + name);
  }
  return std::make_unique<MappedShm>(name, fd, addr, size, writable);
}

Status Env::UnlinkShm(const std::string& name) {
  DLCKPT_RETURN_IF_ERROR(CheckShmName(name));
  if (shm_unlink(name.c_str()) != 0) return Status::FromErrno(errno, "shm_unlink " + name);
  return Status::OK();
}

Result<std::vector<std::string>> Env::ListShm(std::string_view prefix) {
  std::string want(prefix.substr(prefix.empty() || prefix[0] != '/' ? 0 : 1));
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return Status::FromErrno(errno, "opendir /dev/shm");
  std::vector<std::string> out;
  while (struct dirent* e = readdir(dir)) {
    std::string_view n(e->d_name);
    if (n == "." || n == "..") continue;
    if (n.substr(0, want.size()) == want) out.push_back("/" + std::string(n));
  }
  closedir(dir);
  std::sort(out.begin(), out.end());
  return out;
}

Result<std::string> Env::ReadFile(const std::string& path, size_t max_bytes) {
  auto refuse = [&](const struct stat& st) -> Status {
    if (S_ISDIR(st.st_mode)) return Status::FromErrno(EISDIR, "read " + path);
    if (!S_ISREG(st.st_mode)) {
      return Status::Error(EINVAL, path + " is " + FileType(st.st_mode) +
                                       ", not a regular file; refusing to read it");
    }
    if (static_cast<uint64_t>(st.st_size) > max_bytes) {
      return Status::Error(EFBIG, path + " is " + std::to_string(st.st_size) +
                                      " bytes, more than the " + std::to_string(max_bytes) +
                                      " bytes expected; refusing to read it");
    }
    return Status::OK();
  };
  // Look before opening: opening a FIFO waits for a writer, a device may act.
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return Status::FromErrno(errno, "open " + path);
  DLCKPT_RETURN_IF_ERROR(refuse(st));
  // O_NONBLOCK: the name may have been replaced by a FIFO since.
  int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "open " + path);
  auto fail = [&](Status s) {
    close(fd);
    return s;
  };
  if (fstat(fd, &st) != 0) return fail(Status::FromErrno(errno, "fstat " + path));
  if (Status s = refuse(st); !s.ok()) return fail(std::move(s));
  std::string out;
  char buf[65536];
  for (;;) {
    // Read at most one byte past the limit: a file that grew is refused too.
    size_t left = max_bytes - out.size();
    size_t want = left >= sizeof buf ? sizeof buf : left + 1;
    ssize_t n = read(fd, buf, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(Status::FromErrno(errno, "read " + path));
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) {
      return fail(Status::Error(EFBIG, path + " holds more than the " + std::to_string(max_bytes) +
                                           " bytes expected; refusing to read it"));
    }
  }
  close(fd);
  return out;
}

int64_t Env::NowNanos() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

int64_t Env::WallNanos() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

void Env::SleepForMicros(int64_t micros) {
  struct timespec ts{static_cast<time_t>(micros / 1000000), static_cast<long>((micros % 1000000) * 1000)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

}  // namespace dlckpt

// env_files.cc — Env's files and directories: descriptor-relative, never
// through a symbolic link, never blocking on a FIFO (see dlckpt/base/env.h).
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <random>

#include "dlckpt/base/env.h"
#include "env_internal.h"

namespace dlckpt {

File::~File() {
  if (fd_ >= 0) ::close(fd_);
}

File& File::operator=(File&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    path_ = std::move(o.path_);
    o.fd_ = -1;
  }
  return *this;
}

std::string File::Child(const std::string& name) const {
  return path_.empty() || path_.back() == '/' ? path_ + name : path_ + "/" + name;
}

int File::Release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

namespace {

// One component: no '/', not "." or "..", not empty.
Status CheckName(const File& dir, const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos) {
    return Status::InvalidArgument("invalid entry name '" + name + "' in " + dir.path());
  }
  return Status::OK();
}

}  // namespace

Result<File> Env::OpenDir(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Status::FromErrno(errno, "open directory " + path);
  return File(fd, path);
}

Result<File> Env::OpenDirAt(const File& dir, const std::string& name, bool create, mode_t mode) {
  DLCKPT_RETURN_IF_ERROR(CheckName(dir, name));
  const std::string path = dir.Child(name);
  if (create && ::mkdirat(dir.fd(), name.c_str(), mode) != 0 && errno != EEXIST) {
    return Status::FromErrno(errno, "mkdir " + path);
  }
  int fd = ::openat(dir.fd(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    if (err == ELOOP || err == ENOTDIR) {
      struct stat st;
      if (::fstatat(dir.fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        return Status::Error(err, path + " is " + FileType(st.st_mode) + ", not a directory; refusing to use it");
      }
    }
    return Status::FromErrno(err, "open directory " + path);
  }
  return File(fd, path);
}

Result<File> Env::OpenAt(const File& dir, const std::string& name, int flags, mode_t mode) {
  DLCKPT_RETURN_IF_ERROR(CheckName(dir, name));
  const std::string path = dir.Child(name);
  int fd = ::openat(dir.fd(), name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, mode);
  if (fd < 0) {
    int err = errno;
    if (err == ELOOP) return Status::Error(ELOOP, path + " is a symbolic link; refusing to follow it");
    return Status::FromErrno(err, ((flags & O_CREAT) != 0 ? "create " : "open ") + path);
  }
  // Writes should block as usual (O_NONBLOCK only guarded the open).
  int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) (void)::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  return File(fd, path);
}

Result<size_t> Env::Write(const File& f, const void* data, size_t len) {
  for (;;) {
    ssize_t n = ::write(f.fd(), data, len);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno != EINTR) return Status::FromErrno(errno, "write " + f.path());
  }
}

Result<size_t> Env::Read(const File& f, void* buf, size_t len) {
  for (;;) {
    ssize_t n = ::read(f.fd(), buf, len);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno != EINTR) return Status::FromErrno(errno, "read " + f.path());
  }
}

Status Env::Sync(const File& f) {
  // EINVAL: a file system that cannot sync this kind of file (a directory on some).
  if (::fsync(f.fd()) != 0 && errno != EINVAL) return Status::FromErrno(errno, "fsync " + f.path());
  return Status::OK();
}

Status Env::Close(File& f) {
  const std::string path = f.path();
  int fd = f.Release();
  if (fd >= 0 && ::close(fd) != 0) return Status::FromErrno(errno, "close " + path);
  return Status::OK();
}

Status Env::Chmod(const File& f, mode_t mode) {
  if (::fchmod(f.fd(), mode) != 0) return Status::FromErrno(errno, "chmod " + f.path());
  return Status::OK();
}

Status Env::RenameAt(const File& dir, const std::string& from, const std::string& to) {
  DLCKPT_RETURN_IF_ERROR(CheckName(dir, from));
  DLCKPT_RETURN_IF_ERROR(CheckName(dir, to));
  if (::renameat(dir.fd(), from.c_str(), dir.fd(), to.c_str()) != 0) {
    return Status::FromErrno(errno, "rename " + dir.Child(from) + " to " + to);
  }
  return Status::OK();
}

Status Env::UnlinkAt(const File& dir, const std::string& name, bool directory) {
  DLCKPT_RETURN_IF_ERROR(CheckName(dir, name));
  if (::unlinkat(dir.fd(), name.c_str(), directory ? AT_REMOVEDIR : 0) != 0) {
    return Status::FromErrno(errno, "remove " + dir.Child(name));
  }
  return Status::OK();
}

Result<struct stat> Env::Stat(const File& f) {
  struct stat st;
  if (::fstat(f.fd(), &st) != 0) return Status::FromErrno(errno, "stat " + f.path());
  return st;
}

Result<struct stat> Env::StatAt(const File& dir, const std::string& name) {
  DLCKPT_RETURN_IF_ERROR(CheckName(dir, name));
  struct stat st;
  if (::fstatat(dir.fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return Status::FromErrno(errno, "stat " + dir.Child(name));
  }
  return st;
}

Result<std::vector<std::string>> Env::ListDir(const File& dir) {
  // fdopendir takes the descriptor: list through a duplicate, from the start.
  int fd = ::openat(dir.fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "open directory " + dir.path());
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    int err = errno;
    ::close(fd);
    return Status::FromErrno(err, "open directory " + dir.path());
  }
  std::vector<std::string> out;
  errno = 0;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(std::move(n));
    errno = 0;
  }
  int err = errno;
  ::closedir(d);
  if (err != 0) return Status::FromErrno(err, "read directory " + dir.path());
  std::sort(out.begin(), out.end());
  return out;
}

Status Env::WriteAll(const File& f, const void* data, size_t len) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (len > 0) {
    DLCKPT_ASSIGN_OR_RETURN(size_t n, Write(f, p, len));
    if (n == 0) return Status::IOError("write " + f.path() + ": no progress");
    p += n;
    len -= n;
  }
  return Status::OK();
}

Status Env::PublishAt(const File& dir, const std::string& name, std::string_view contents, mode_t mode) {
  static std::atomic<unsigned> counter{0};
  char host[256] = "host";
  (void)::gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = '\0';
  std::random_device rd;
  std::string tmp;
  Result<File> f = Status::IOError("no attempt");
  for (int attempt = 0; attempt < 8; ++attempt) {
    char word[17];
    std::snprintf(word, sizeof word, "%08x%08x", rd(), rd());
    tmp = name + ".tmp." + host + "." + std::to_string(::getpid()) + "." + std::to_string(counter++) + "." + word;
    f = OpenAt(dir, tmp, O_WRONLY | O_CREAT | O_EXCL, mode);
    if (f.ok() || f.status().code() != EEXIST) break;
  }
  if (!f.ok()) return f.status();
  Status s = Chmod(*f, mode);
  if (s.ok()) s = WriteAll(*f, contents.data(), contents.size());
  if (s.ok()) s = Sync(*f);
  if (s.ok()) {
    s = Close(*f);
  } else {
    (void)Close(*f);
  }
  if (s.ok()) s = RenameAt(dir, tmp, name);
  if (!s.ok()) {
    (void)UnlinkAt(dir, tmp, false);
    return s;
  }
  return Sync(dir);
}

Result<std::string> Env::ReadFileAt(const File& dir, const std::string& name, size_t max_bytes, bool owned) {
  DLCKPT_ASSIGN_OR_RETURN(File f, OpenAt(dir, name, O_RDONLY, 0));
  DLCKPT_ASSIGN_OR_RETURN(struct stat st, Stat(f));
  if (owned) DLCKPT_RETURN_IF_ERROR(CheckOwned(st, f.path(), FileKind::kRegular));
  if (!S_ISREG(st.st_mode)) {
    return Status::Error(EINVAL, f.path() + " is " + FileType(st.st_mode) + ", not a regular file; refusing to read it");
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return Status::Error(EFBIG, f.path() + " is " + std::to_string(st.st_size) + " bytes, more than the " +
                                    std::to_string(max_bytes) + " bytes expected; refusing to read it");
  }
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < out.size()) {
    DLCKPT_ASSIGN_OR_RETURN(size_t n, Read(f, out.data() + done, out.size() - done));
    if (n == 0) break;  // shrank meanwhile: what is there
    done += n;
  }
  out.resize(done);
  // Grown meanwhile: refused rather than read without a bound.
  char extra;
  DLCKPT_ASSIGN_OR_RETURN(size_t more, Read(f, &extra, 1));
  if (more != 0 && done >= max_bytes) {
    return Status::Error(EFBIG, f.path() + " holds more than the " + std::to_string(max_bytes) +
                                    " bytes expected; refusing to read it");
  }
  if (more != 0) return Status::Error(EAGAIN, f.path() + " grew while it was read");
  return out;
}

Status Env::CheckOwned(const struct stat& st, const std::string& path, FileKind kind) {
  const bool dir = kind == FileKind::kDirectory;
  if (dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
    return Status::Error(EPERM, path + " is " + FileType(st.st_mode) + ", not " +
                                    (dir ? "a directory" : "a regular file") + "; refusing to use it");
  }
  const uid_t me = ::geteuid();
  if (st.st_uid != me) {
    return Status::Error(EPERM, path + " is owned by uid " + std::to_string(st.st_uid) + ", not by uid " +
                                    std::to_string(me) + " (this process); refusing to use it (unsafe: another user "
                                                         "could change it)");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return Status::Error(EPERM, path + " has mode " + OctalMode(st.st_mode) +
                                     ", writable by group or others; refusing to use it (unsafe: another user could "
                                     "change it; chmod go-w it or remove it)");
  }
  return Status::OK();
}

Status Env::WriteFileAtomic(const std::string& path, std::string_view contents, mode_t mode) {
  const size_t slash = path.rfind('/');
  const std::string parent = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  DLCKPT_ASSIGN_OR_RETURN(File dir, OpenDir(parent));
  return PublishAt(dir, name, contents, mode);
}

}  // namespace dlckpt

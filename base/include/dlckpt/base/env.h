// dlckpt/base/env.h — the one interface through which dlckpt touches the OS where
// tests need to fake it: POSIX shared memory objects, files and directories
// (the second level's persistent copies, rendezvous and configuration
// files), the clock.
//
// Env::Default() is the real POSIX implementation; it is thread-safe and lives
// for the whole process. Tests derive from Env (usually forwarding to Default)
// to inject faults such as ENOSPC at store creation. Every error carries the
// object's name and the errno.
#ifndef DLCKPT_BASE_ENV_H_
#define DLCKPT_BASE_ENV_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dlckpt/base/status.h"

namespace dlckpt {

// A mapped POSIX shared memory object. Owns the descriptor and the mapping and
// releases both on destruction (it never unlinks the name). Not copyable.
class MappedShm final {
 public:
  MappedShm(std::string name, int fd, void* addr, size_t size, bool writable) noexcept
      : name_(std::move(name)), fd_(fd), addr_(addr), size_(size), writable_(writable) {}
  ~MappedShm();
  MappedShm(const MappedShm&) = delete;
  MappedShm& operator=(const MappedShm&) = delete;

  const std::string& name() const { return name_; }
  uint8_t* data() const { return static_cast<uint8_t*>(addr_); }
  size_t size() const { return size_; }
  bool writable() const { return writable_; }
  int fd() const { return fd_; }

  // Takes an exclusive advisory lock (flock) on the object without blocking.
  // The kernel releases it when the process dies, so it marks a live owner.
  // EWOULDBLOCK (as EBUSY) when another open description holds it.
  Status TryLockExclusive();

  // Truncates the object to `new_size` bytes (at most size()) and unmaps the
  // pages beyond it; the object's memory past the new end is freed. The
  // bytes before it, and data(), stay. For a writable object this process
  // alone writes (a reused parity slot). On a failed ftruncate the mapping
  // is already shorter: size() is the new size either way.
  Status Shrink(size_t new_size);

 private:
  std::string name_;
  int fd_;
  void* addr_;
  size_t size_;
  bool writable_;
};

// An open file or directory descriptor and the path it was opened by (for
// messages). Owns the descriptor and closes it on destruction, ignoring the
// result; Env::Close reports close(2)'s error (NFS and GlusterFS report
// write errors there). Movable, not copyable. Not thread-safe.
class File final {
 public:
  File() = default;
  File(int fd, std::string path) noexcept : fd_(fd), path_(std::move(path)) {}
  ~File();
  File(File&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) { o.fd_ = -1; }
  File& operator=(File&& o) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  int fd() const { return fd_; }
  bool is_open() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }
  // "PATH/NAME": what an entry of this directory is called in messages.
  std::string Child(const std::string& name) const;
  // Gives up ownership: the caller closes the returned descriptor.
  int Release();

 private:
  int fd_ = -1;
  std::string path_;
};

// What Env::CheckOwned accepts: an entry this uid owns that no other user
// can change (not writable by group or others), of the expected type.
enum class FileKind { kRegular, kDirectory };

class Env {
 public:
  Env() = default;
  virtual ~Env() = default;
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;

  // The real POSIX environment (never destroyed).
  static Env* Default();

  // Creates shared memory object `name` ("/..." as for shm_open) of `size`
  // bytes, mode 0600, failing with EEXIST if it exists. With `prefault`, every
  // page is allocated (fallocate) and mapped (MAP_POPULATE) before returning,
  // so a full /dev/shm is ENOSPC here and not SIGBUS later. On failure nothing
  // is left behind.
  virtual Result<std::unique_ptr<MappedShm>> CreateShm(const std::string& name, size_t size,
                                                       bool prefault);
  // Opens and maps an existing object; read-only unless `writable`. With
  // `populate`, every page is mapped now (MAP_POPULATE) instead of faulted in
  // one at a time on first touch. Only an object this process could have
  // created is adopted: one owned by another uid fails with EPERM, one that
  // is not a regular file with EPERM, one whose mode is not exactly 0600
  // with EACCES; the message names /dev/shm/NAME, the uid or mode found and
  // the one expected. Never blocks on a planted FIFO.
  virtual Result<std::unique_ptr<MappedShm>> OpenShm(const std::string& name, bool writable,
                                                     bool populate = false);
  virtual Status UnlinkShm(const std::string& name);
  // Names ("/..." form) of existing shared memory objects starting with `prefix`
  // (also in "/..." form), sorted.
  virtual Result<std::vector<std::string>> ListShm(std::string_view prefix);

  // --- Files and directories. Every `name` is one path component looked up
  // in an open directory, never through a symbolic link (O_NOFOLLOW; a link
  // fails with ELOOP), so nothing planted below a directory this process
  // checked can redirect it. Errors name the path and the errno. These are
  // the steps a fault-injection Env counts and fails (tests/ of persist).

  // Opens the directory `path` as the user named it (symbolic links in it are
  // the user's choice and are followed).
  virtual Result<File> OpenDir(const std::string& path);
  // Opens directory entry `name` of `dir`, creating it with `mode` first when
  // `create` (an existing one is opened as it is).
  virtual Result<File> OpenDirAt(const File& dir, const std::string& name, bool create, mode_t mode);
  // openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, mode):
  // never blocks on a FIFO. For a regular file O_NONBLOCK changes nothing.
  virtual Result<File> OpenAt(const File& dir, const std::string& name, int flags, mode_t mode);
  // Writes up to `len` bytes; may write fewer (a short write), never 0 for
  // len > 0 without an error. EINTR is retried.
  virtual Result<size_t> Write(const File& f, const void* data, size_t len);
  // Reads up to `len` bytes; 0 at the end of the file. EINTR is retried.
  virtual Result<size_t> Read(const File& f, void* buf, size_t len);
  // fsync(2) of a file or a directory.
  virtual Status Sync(const File& f);
  // Closes `f` (also when it fails) and reports close(2)'s error.
  virtual Status Close(File& f);
  // fchmod(2).
  virtual Status Chmod(const File& f, mode_t mode);
  virtual Status RenameAt(const File& dir, const std::string& from, const std::string& to);
  // Removes entry `name` of `dir` itself (a link, never what it points to);
  // `directory`: an empty directory (rmdir).
  virtual Status UnlinkAt(const File& dir, const std::string& name, bool directory);
  virtual Result<struct stat> Stat(const File& f);
  // lstat of an entry: a symbolic link is reported as one.
  virtual Result<struct stat> StatAt(const File& dir, const std::string& name);
  // The entries of `dir` except "." and "..", sorted.
  virtual Result<std::vector<std::string>> ListDir(const File& dir);

  // Built on the steps above (not virtual: a fault Env fails the steps).
  // Writes all of `len` bytes, retrying short writes.
  Status WriteAll(const File& f, const void* data, size_t len);
  // The one atomic publication: `contents` under a temporary name unique
  // across hosts and processes (host, pid, a counter, a random word; created
  // O_EXCL, mode `mode`), fsync, rename to `name`, fsync of `dir`. Several
  // processes publishing one name at once each publish whole contents. A
  // failure leaves `name` as it was and no temporary file.
  Status PublishAt(const File& dir, const std::string& name, std::string_view contents, mode_t mode);
  // Reads the whole regular file `name` of `dir` (see OpenAt: no link, no
  // blocking), at most `max_bytes` (EFBIG naming the path, its size and the
  // limit). With `owned`, the open file must also pass CheckOwned (kRegular).
  Result<std::string> ReadFileAt(const File& dir, const std::string& name, size_t max_bytes, bool owned = false);
  // OK if `st` (of `path`) is of `kind`, owned by this process's uid and not
  // writable by group or others; else EPERM saying why and naming `path`.
  static Status CheckOwned(const struct stat& st, const std::string& path, FileKind kind);

  // Writes `contents` to `path` atomically and durably, mode `mode`
  // (PublishAt in the parent directory).
  Status WriteFileAtomic(const std::string& path, std::string_view contents, mode_t mode);
  // Reads the whole regular file `path` (a symlink to one is followed).
  // Never blocks on a FIFO or device: a directory fails with EISDIR, anything
  // else but a regular file with EINVAL naming the path and its type; a file
  // larger than `max_bytes` fails with EFBIG naming the path, its size and
  // the limit.
  static constexpr size_t kNoReadLimit = static_cast<size_t>(-1);
  virtual Result<std::string> ReadFile(const std::string& path, size_t max_bytes = kNoReadLimit);

  // Monotonic clock in nanoseconds.
  virtual int64_t NowNanos();
  // Wall clock in nanoseconds since the epoch.
  virtual int64_t WallNanos();
  virtual void SleepForMicros(int64_t micros);
};

}  // namespace dlckpt

#endif  // DLCKPT_BASE_ENV_H_

// dlckpt/base/env.h — the one interface through which dlckpt touches the OS where
// tests need to fake it: POSIX shared memory objects, small files, the clock.
//
// Env::Default() is the real POSIX implementation; it is thread-safe and lives
// for the whole process. Tests derive from Env (usually forwarding to Default)
// to inject faults such as ENOSPC at store creation. Every error carries the
// object's name and the errno.
#ifndef DLCKPT_BASE_ENV_H_
#define DLCKPT_BASE_ENV_H_

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

  // Writes `contents` to `path` through a temporary file and rename, mode `mode`.
  virtual Status WriteFileAtomic(const std::string& path, std::string_view contents, mode_t mode);
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

// fd_table.h — the table of descriptors that libintercept serves from memfs.
//
// Indexed by the real descriptor number that stands for a memfs file (a
// reserved placeholder descriptor, so numbers never collide with the OS's).
// Each slot holds a shared_ptr to the open-file object; dup'ed descriptors
// share one object. Contains() is lock-free (two atomic loads), so calls on
// ordinary descriptors pay almost nothing; Get/Set/Take take one mutex.
// Thread-safe. Descriptors at or above kMaxFd are never memfs descriptors.
// Chunks are allocated on first use and never freed, so the table can be
// used from any thread until the process ends (it is never destroyed).
#ifndef DLCKPT_LIBINTERCEPT_FD_TABLE_H_
#define DLCKPT_LIBINTERCEPT_FD_TABLE_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

namespace dlckpt::intercept {

template <class T>
class FdTable final {
 public:
  static constexpr int kChunkBits = 10;
  static constexpr int kChunkSize = 1 << kChunkBits;
  static constexpr int kChunks = 1024;
  static constexpr int kMaxFd = kChunks * kChunkSize;  // 1 Mi descriptors

  // `mirror`, if given, always holds the number of entries too (for callers
  // that can only read a plain global).
  explicit FdTable(std::atomic<long>* mirror = nullptr) : mirror_(mirror) {
    for (auto& c : chunks_) c.store(nullptr, std::memory_order_relaxed);
  }
  FdTable(const FdTable&) = delete;
  FdTable& operator=(const FdTable&) = delete;
  ~FdTable() {
    for (auto& c : chunks_) delete c.load(std::memory_order_relaxed);
  }

  // Lock-free: true if `fd` currently names a memfs descriptor.
  bool Contains(int fd) const noexcept {
    if (fd < 0 || fd >= kMaxFd) return false;
    Chunk* c = chunks_[fd >> kChunkBits].load(std::memory_order_acquire);
    return c != nullptr && c->used[fd & (kChunkSize - 1)].load(std::memory_order_acquire);
  }

  // True if any descriptor is in the table (lock-free).
  bool Empty() const noexcept { return count_.load(std::memory_order_acquire) == 0; }

  std::shared_ptr<T> Get(int fd) const {
    if (!Contains(fd)) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    Chunk* c = chunks_[fd >> kChunkBits].load(std::memory_order_relaxed);
    return c ? c->files[fd & (kChunkSize - 1)] : nullptr;
  }

  // Installs `file` at `fd`, returning what was there. False (and nothing
  // changed) if fd is out of range or memory runs out.
  bool Set(int fd, std::shared_ptr<T> file, std::shared_ptr<T>* old = nullptr) {
    if (fd < 0 || fd >= kMaxFd || !file) return false;
    std::lock_guard<std::mutex> lock(mu_);
    Chunk* c = chunks_[fd >> kChunkBits].load(std::memory_order_relaxed);
    if (c == nullptr) {
      c = new (std::nothrow) Chunk();
      if (c == nullptr) return false;
      chunks_[fd >> kChunkBits].store(c, std::memory_order_release);
    }
    int i = fd & (kChunkSize - 1);
    std::shared_ptr<T> prev = std::move(c->files[i]);
    c->files[i] = std::move(file);
    if (!prev) Count(1);
    c->used[i].store(true, std::memory_order_release);
    if (old) *old = std::move(prev);
    return true;
  }

  // Removes and returns the entry at `fd` (nullptr if none).
  std::shared_ptr<T> Take(int fd) {
    if (!Contains(fd)) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    return TakeLocked(fd);
  }

  // Removes every entry with lo <= fd <= hi; returns them.
  std::vector<std::shared_ptr<T>> TakeRange(int lo, int hi) {
    std::vector<std::shared_ptr<T>> out;
    if (hi >= kMaxFd) hi = kMaxFd - 1;
    if (lo < 0) lo = 0;
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd = lo; fd <= hi;) {
      Chunk* c = chunks_[fd >> kChunkBits].load(std::memory_order_relaxed);
      if (c == nullptr) {
        fd = ((fd >> kChunkBits) + 1) << kChunkBits;
        continue;
      }
      if (c->used[fd & (kChunkSize - 1)].load(std::memory_order_relaxed)) {
        out.push_back(TakeLocked(fd));
      }
      ++fd;
    }
    return out;
  }

  // Calls f(fd, const shared_ptr<T>&) for every entry, under the table lock
  // (f must not call back into the table).
  template <class F>
  void ForEach(F&& f) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (int ci = 0; ci < kChunks; ++ci) {
      Chunk* c = chunks_[ci].load(std::memory_order_relaxed);
      if (c == nullptr) continue;
      for (int i = 0; i < kChunkSize; ++i) {
        if (c->files[i]) f((ci << kChunkBits) | i, c->files[i]);
      }
    }
  }

  // The lock, for fork handlers: held across fork() so the child never sees
  // a half-updated table.
  std::mutex& mutex() { return mu_; }

 private:
  struct Chunk {
    std::atomic<bool> used[kChunkSize] = {};
    std::shared_ptr<T> files[kChunkSize];
  };

  std::shared_ptr<T> TakeLocked(int fd) {
    Chunk* c = chunks_[fd >> kChunkBits].load(std::memory_order_relaxed);
    if (c == nullptr) return nullptr;
    int i = fd & (kChunkSize - 1);
    c->used[i].store(false, std::memory_order_release);
    std::shared_ptr<T> prev = std::move(c->files[i]);
    if (prev) Count(-1);
    return prev;
  }

  void Count(long delta) {
    count_.fetch_add(delta, std::memory_order_acq_rel);
    if (mirror_) mirror_->fetch_add(delta, std::memory_order_acq_rel);
  }

  mutable std::mutex mu_;
  std::atomic<Chunk*> chunks_[kChunks];
  std::atomic<long> count_{0};
  std::atomic<long>* const mirror_;
};

}  // namespace dlckpt::intercept

#endif  // DLCKPT_LIBINTERCEPT_FD_TABLE_H_

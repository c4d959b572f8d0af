// core.h — libintercept's internal C++ interface, shared by the descriptor,
// path, stdio and directory code. Not installed; the public interface is
// dlckpt/intercept/intercept.h, the entry points see core_c.h.
//
// Locking. One process-wide reader/writer lock guards the store pointer:
// every memfs operation holds it shared (StoreRef) for its whole duration;
// attaching, detaching, resets and fork take it exclusively. The descriptor
// table has its own mutex, taken inside (store lock -> table lock -> the
// Store's own mutex). shared_ptr<OpenFile> copies are only ever dropped while
// a StoreRef is held, because ~OpenFile closes the memfs handle.
//
// Re-entrancy. Code running inside dlckpt (memfs touching /dev/shm, our own
// bookkeeping) runs inside an InternalScope; the C entry points pass such
// calls straight to the OS.
#ifndef DLCKPT_LIBINTERCEPT_CORE_H_
#define DLCKPT_LIBINTERCEPT_CORE_H_

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>

#include "dlckpt/intercept/intercept.h"
#include "dlckpt/memfs/memfs.h"
#include "dlckpt/base/status.h"
#include "fd_table.h"
#include "paths.h"

namespace dlckpt::intercept::internal {

// ---- re-entrancy --------------------------------------------------------------

bool InInternal() noexcept;
class InternalScope final {
 public:
  InternalScope() noexcept;
  ~InternalScope();
  InternalScope(const InternalScope&) = delete;
  InternalScope& operator=(const InternalScope&) = delete;
};

// ---- open files -----------------------------------------------------------------

struct OpenFile final : std::enable_shared_from_this<OpenFile> {
  enum class Kind { kFile, kDir, kPath };
  OpenFile(Kind k, int memfs, uint64_t gen, std::string p, int flags)
      : kind(k), memfs_fd(memfs), generation(gen), path(std::move(p)), status_flags(flags) {}
  ~OpenFile();  // closes the memfs handle if it is still live (store lock held)
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;

  const Kind kind;
  const int memfs_fd;          // memfs handle (kFile), else -1
  const uint64_t generation;   // store generation at open; stale when it differs
  const std::string path;      // normalised memfs path at open
  std::atomic<int> status_flags;  // what F_GETFL reports
  bool native_append = false;  // memfs handle opened with O_APPEND
  std::mutex append_mu;        // serialises emulated O_APPEND (seek + write)

  // The shared-file (N-to-1) check (NoteWrite, SharedFileRefusal in
  // fd_ops.cc). kOff: not checked. kEmpty: opened for writing, empty, by a
  // rank > 0; nothing written yet. kHole: written, never at offset 0
  // (first_write holds where the first write started). kStart: byte 0 was
  // written, so the file is taken as the rank's own.
  enum class Start : uint8_t { kOff, kEmpty, kHole, kStart };
  std::atomic<Start> start{Start::kOff};
  std::atomic<uint64_t> first_write{0};
};

// ---- the process -------------------------------------------------------------------

struct Process;
Process& P();

// A held shared lock on the process store (and the store, if attached).
class StoreRef final {
 public:
  StoreRef() = default;
  // Locks shared; with `attach`, attaches the store (creating it if `create`)
  // when none is attached. Returns 0 or an errno value (ENOENT: no store
  // exists and create is false; the lock is then still held).
  int Acquire(bool attach, bool create);
  memfs::Store* store() const { return store_; }
  uint64_t generation() const { return generation_; }
  bool Live(const OpenFile& f) const { return store_ != nullptr && f.generation == generation_; }

 private:
  std::shared_lock<std::shared_mutex> lock_;
  memfs::Store* store_ = nullptr;
  uint64_t generation_ = 0;
};

FdTable<OpenFile>& Fds();
const PrefixSet& Prefixes();
bool Disabled() noexcept;

// Routing. kOs: leave the call to the OS untouched. kMemfs: `out` holds the
// normalised memfs path. kError: routed to memfs but invalid; `err` holds
// the errno (e.g. EBADF for a stale directory descriptor).
enum class Route { kOs, kMemfs, kError };
Route Resolve(int dirfd, const char* path, std::string* out, int* err);
// Resolve() for a path the application passed to an entry point: kOs (not
// ours) while dlckpt is disabled or the caller is dlckpt itself; else resolved
// inside an InternalScope.
inline Route ResolveAppPath(int dirfd, const char* path, std::string* out, int* err) {
  if (Disabled() || InInternal()) return Route::kOs;
  InternalScope in;
  return Resolve(dirfd, path, out, err);
}

// What a memfs path is.
struct Entry {
  enum class Type { kNone, kFile, kDir } type = Type::kNone;
  memfs::FileInfo info;  // for kFile, and kDir (synthesised when implied)
};
// Looks `path` up (store may be null: only prefixes and ancestors exist).
// Returns 0 or errno (never ENOENT: that is Type::kNone).
int Lookup(memfs::Store* store, const std::string& path, Entry* out);

// Detaches the store before this process starts another one (fork, and
// posix_spawn, system, popen and vfork, which start theirs without fork
// handlers)
// if it was attached only for metadata (Process::pinned unset), so the child
// may take it. Call without holding a StoreRef. Leaves errno as it was.
void ReleaseBeforeChild();

// Opens memfs `path`; returns the descriptor or -1 with errno.
int OpenPath(const std::string& path, int flags, mode_t mode);

// Descriptor operations used by stdio and directories (memfs descriptors
// only: anything else is EBADF). -1 with errno on error.
ssize_t FdRead(int fd, void* buf, size_t len);
ssize_t FdWrite(int fd, const void* buf, size_t len);
off_t FdSeek(int fd, off_t offset, int whence);
int FdClose(int fd);
// The open file behind a live memfs descriptor, or nullptr (errno EBADF).
// Only for reading immutable fields; the caller holds `ref`.
std::shared_ptr<OpenFile> FdFile(int fd, StoreRef* ref);
// Adds O_APPEND (emulated) to a descriptor, as fdopen("a") does.
int FdSetAppend(int fd);

void FillStat(const memfs::FileInfo& info, struct stat* st);
// The inode number reported for a directory that memfs only implies.
uint64_t SynthIno(std::string_view path);

// Sets errno from a Status and returns -1.
// The hook armed by ArmWriteHook (nullptr when none).
std::atomic<void (*)()>& WriteHook();

int Fail(const Status& s);
int FailErrno(int err);
// For a create (open O_CREAT, mkdir) that failed: if `s` is ENOSPC, prints
// memfs's message (which names the limit met: the file table and
// DLCKPT_MAX_FILES, or the data area) on stderr, once per process, since the
// application only sees the errno.
void WarnCreateFailure(const Status& s);


// ---- the process (core.cc) ------------------------------------------------------

// All of libintercept's state; made on first use and never destroyed (it is
// used until the very end of exit).
struct Process {
  Process();

  PrefixSet prefixes;
  std::shared_mutex store_mu;
  memfs::Store* store = nullptr;   // owned; guarded by store_mu
  bool shutdown = false;           // guarded by store_mu
  std::atomic<uint64_t> generation{1};
  std::mutex config_mu;
  StoreConfig config;              // guarded by config_mu
  FdTable<OpenFile> fds;
  mode_t umask_bits = 022;
  uid_t uid = 0;
  gid_t gid = 0;
  int64_t start_ns = 0;
  std::atomic<uint32_t> block_size{64u << 10};
  std::atomic<int> rank{0};        // the attached store's rank (ResolveConfig)
  std::atomic<bool> warned_store{false};
  // Ownership policy: once attached, the store stays attached for the life of
  // the process (until exit, exec or DetachStore()), so metadata calls cost
  // no attach. A process that has not opened a memfs file (or asked for
  // ProcessStore()) is not *pinned*: it lets the store go before starting a
  // child (ReleaseBeforeChild), so a shell that globbed or stat'ed /dlckpt
  // never blocks the commands it runs; it re-attaches on its next call.
  std::atomic<bool> pinned{false};
  pid_t owner_pid = 0;             // the process that attached the store; guarded by store_mu
  std::mutex cwd_mu;
  std::string vcwd;                // virtual working directory in memfs; guarded by cwd_mu
  std::atomic<bool> has_vcwd{false};
};


// ---- helpers shared by the core's files ----------------------------------------------

inline constexpr int kStatusBits =
    O_APPEND | O_NONBLOCK | O_DIRECT | O_NOATIME | O_SYNC | O_DSYNC | O_ASYNC;
inline constexpr int kSettableBits = O_APPEND | O_NONBLOCK | O_DIRECT | O_NOATIME | O_ASYNC;

// A raw system call: never intercepted, whatever the link mode.
long Sys(long n, long a = 0, long b = 0, long c = 0, long d = 0);
// One line "dlckpt: <msg>" on stderr, written with a raw system call.
void Warn(const std::string& msg);
int64_t WallNanos();
// dlckpt_enabled is set.
bool Enabled();
// True if `f` is still valid under `ref` (same store generation; a file
// needs an attached store).
bool Live(const StoreRef& ref, const OpenFile& f);
memfs::FileInfo SynthDir(const std::string& path);
void FillStatx(const memfs::FileInfo& info, struct statx* stx);
// ENOTDIR if an ancestor of `path` is a regular memfs file, else 0.
int CheckParents(memfs::Store* s, const std::string& path);

struct Resolved {
  std::string name;
  memfs::StoreOptions options;
};
// The store name and creation options under Configure() and the environment.
Result<Resolved> ResolveConfig();
// Attach (or create) / destroy the process store; store_mu held exclusively.
// A failure is reported once on stderr unless `quiet`.
int AttachLocked(bool create, bool quiet = false);
void DestroyStoreLocked();

// Streams (stdio.cc).
int StreamFlushAll();

}  // namespace dlckpt::intercept::internal

#endif  // DLCKPT_LIBINTERCEPT_CORE_H_

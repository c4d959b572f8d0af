// core.cc — libintercept's core: the process store, routing, the descriptor
// table and every descriptor- and path-based operation on memfs files. See
// core.h for the locking rules and core_c.h for the entry-point protocol.
#include "core.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "core_c.h"
#include "dlckpt/intercept.h"
#include "dlckpt/units.h"

extern "C" {
int dlckpt_enabled = 0;
// Number of memfs descriptors; zero lets the entry points skip the core.
std::atomic<long> dlckpt_ic_fd_count{0};
}

namespace dlckpt::intercept::internal {

std::mutex& StreamRegistryMutex();  // stdio.cc
std::mutex& DirRegistryMutex();     // dir.cc

namespace {

// ---- re-entrancy ------------------------------------------------------------------

__attribute__((tls_model("initial-exec"))) thread_local int t_depth = 0;

std::atomic<bool> g_disabled{false};
std::atomic<bool> g_process_made{false};

constexpr uint64_t kMemfsDevMajor = 0xd1c;  // st_dev of every memfs file
constexpr int kStatusBits = O_APPEND | O_NONBLOCK | O_DIRECT | O_NOATIME | O_SYNC | O_DSYNC |
                            O_ASYNC;
constexpr int kSettableBits = O_APPEND | O_NONBLOCK | O_DIRECT | O_NOATIME | O_ASYNC;

bool Enabled() { return __atomic_load_n(&dlckpt_enabled, __ATOMIC_RELAXED) != 0; }

long Sys(long n, long a = 0, long b = 0, long c = 0, long d = 0) {
  return syscall(n, a, b, c, d);
}

void Warn(const std::string& msg) {
  std::string line = "dlckpt: " + msg + "\n";
  size_t off = 0;
  while (off < line.size()) {
    long n = Sys(SYS_write, STDERR_FILENO, reinterpret_cast<long>(line.data() + off),
                 static_cast<long>(line.size() - off));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
}

int64_t WallNanos() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

}  // namespace

bool InInternal() noexcept { return t_depth > 0; }
InternalScope::InternalScope() noexcept { ++t_depth; }
InternalScope::~InternalScope() { --t_depth; }

bool Disabled() noexcept { return g_disabled.load(std::memory_order_relaxed); }

int Fail(const Status& s) {
  errno = s.ok() ? EIO : s.code();
  return -1;
}
int FailErrno(int err) {
  errno = err;
  return -1;
}

// ---- the process --------------------------------------------------------------------

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
  std::atomic<bool> warned_store{false};
  // Ownership policy: a process keeps the store attached once it has opened
  // a memfs file (or asked for ProcessStore()); until then, every operation
  // that only looks at or renames paths detaches again when it is done, so
  // a shell that globs or stats /dlckpt never blocks the commands it runs.
  std::atomic<bool> sticky{false};
  pid_t owner_pid = 0;             // the process that attached the store; guarded by store_mu
  std::mutex cwd_mu;
  std::string vcwd;                // virtual working directory in memfs; guarded by cwd_mu
  std::atomic<bool> has_vcwd{false};
};

namespace {

void AtForkPrepare() {
  Process& p = P();
  p.store_mu.lock();
  p.fds.mutex().lock();
  StreamRegistryMutex().lock();
  DirRegistryMutex().lock();
}

void AtForkParent() {
  Process& p = P();
  DirRegistryMutex().unlock();
  StreamRegistryMutex().unlock();
  p.fds.mutex().unlock();
  p.store_mu.unlock();
}

// The child must never write into the parent's store: the Store object is
// abandoned (never used, never destroyed) and every descriptor goes stale.
// The locks taken in AtForkPrepare belong to the parent's thread id, so the
// child makes fresh ones instead of unlocking them.
void AtForkChild() {
  Process& p = P();
  new (&DirRegistryMutex()) std::mutex();
  new (&StreamRegistryMutex()) std::mutex();
  new (&p.fds.mutex()) std::mutex();
  new (&p.store_mu) std::shared_mutex();
  p.store = nullptr;
  p.generation.fetch_add(1);
}

}  // namespace

Process::Process() : fds(&dlckpt_ic_fd_count) {
  const char* spec = getenv("DLCKPT_PREFIX");
  if (spec != nullptr && *spec != '\0') {
    std::vector<std::string> rejected;
    prefixes = PrefixSet::Parse(spec, &rejected);
    for (const auto& r : rejected) {
      Warn("ignoring DLCKPT_PREFIX entry '" + r + "' (must be an absolute path other than /)");
    }
  }
  mode_t m = static_cast<mode_t>(Sys(SYS_umask, 022));
  Sys(SYS_umask, m);
  umask_bits = m;
  uid = geteuid();
  gid = getegid();
  start_ns = WallNanos();
  // A real directory at a prefix would receive whatever escapes interception.
  for (const auto& pre : prefixes.prefixes()) {
    struct stat st;
    if (Sys(SYS_newfstatat, AT_FDCWD, reinterpret_cast<long>(pre.c_str()),
            reinterpret_cast<long>(&st), 0) == 0) {
      Warn("warning: " + pre + " exists on disk; dlckpt keeps files under it in memory, and a "
           "call dlckpt cannot intercept (see libintercept/README.md) would reach that "
           "directory instead");
    }
  }
  pthread_atfork(AtForkPrepare, AtForkParent, AtForkChild);
}

Process& P() {
  static Process* const p = [] {
    InternalScope in;
    auto* made = new Process();
    g_process_made.store(true);
    return made;
  }();
  return *p;
}

FdTable<OpenFile>& Fds() { return P().fds; }
const PrefixSet& Prefixes() { return P().prefixes; }

namespace {

// ---- store configuration -------------------------------------------------------------

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  std::string out;
  for (const char* c = buf; *c != '\0' && out.size() < 63; ++c) {
    bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '.' || *c == '_' || *c == '-';
    out += ok ? *c : '-';
  }
  return out;
}

Result<int> RankFromEnv() {
  for (const char* name : {"DLCKPT_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"}) {
    const char* v = getenv(name);
    if (v == nullptr || *v == '\0') continue;
    char* end = nullptr;
    errno = 0;
    long r = strtol(v, &end, 10);
    if (errno != 0 || *end != '\0' || r < 0 || r > INT_MAX) {
      return Status::InvalidArgument(std::string(name) + "='" + v + "' is not a rank");
    }
    return static_cast<int>(r);
  }
  return 0;
}

struct Resolved {
  std::string name;
  memfs::StoreOptions options;
};

Result<Resolved> ResolveConfig() {
  Process& p = P();
  StoreConfig c;
  {
    std::lock_guard<std::mutex> lock(p.config_mu);
    c = p.config;
  }
  Resolved r;
  r.options.job = c.job.empty() ? EnvOr("DLCKPT_JOB", "local") : c.job;
  r.options.node = c.node.empty() ? EnvOr("DLCKPT_NODE", "") : c.node;
  if (r.options.node.empty()) r.options.node = HostName();
  if (c.rank >= 0) {
    r.options.rank = c.rank;
  } else {
    DLCKPT_ASSIGN_OR_RETURN(r.options.rank, RankFromEnv());
  }
  uint64_t capacity = c.capacity;
  if (capacity == 0) {
    std::string v = EnvOr("DLCKPT_STORE_CAPACITY", "256M");
    auto parsed = ParseSize(v);
    if (!parsed.ok()) return parsed.status().Prefixed("DLCKPT_STORE_CAPACITY");
    capacity = *parsed;
  }
  uint64_t block = c.block_size;
  if (block == 0) {
    std::string v = EnvOr("DLCKPT_BLOCK_SIZE", "64K");
    auto parsed = ParseSize(v);
    if (!parsed.ok()) return parsed.status().Prefixed("DLCKPT_BLOCK_SIZE");
    block = *parsed;
  }
  if (block > UINT32_MAX) return Status::InvalidArgument("block size too large");
  r.options.capacity = capacity;
  r.options.block_size = static_cast<uint32_t>(block);
  std::string explicit_name = c.store_name.empty() ? EnvOr("DLCKPT_STORE", "") : c.store_name;
  if (!explicit_name.empty()) {
    r.name = explicit_name[0] == '/' ? explicit_name : "/" + explicit_name;
  } else {
    DLCKPT_ASSIGN_OR_RETURN(r.name,
                            memfs::StoreName(r.options.job, r.options.node, r.options.rank));
  }
  return r;
}

void WarnStoreOnce(const Status& s) {
  if (P().warned_store.exchange(true)) return;
  Warn("memfs store unavailable, calls under the prefix fail: " + s.ToString());
}

// Attaches (or creates) the process store. Caller holds store_mu exclusively.
int AttachLocked(bool create) {
  Process& p = P();
  if (p.shutdown) return EIO;
  InternalScope in;
  auto cfg = ResolveConfig();
  if (!cfg.ok()) {
    WarnStoreOnce(cfg.status());
    return cfg.status().code();
  }
  auto store = memfs::Store::Attach(cfg->name, memfs::AttachMode::kOwner);
  if (!store.ok() && store.status().code() == ENOENT) {
    if (!create) return ENOENT;
    store = memfs::Store::Create(cfg->name, cfg->options);
    if (!store.ok() && store.status().code() == EEXIST) {
      store = memfs::Store::Attach(cfg->name, memfs::AttachMode::kOwner);
    }
  }
  if (!store.ok()) {
    WarnStoreOnce(store.status());
    return store.status().code();
  }
  p.store = std::move(store).value().release();
  p.owner_pid = static_cast<pid_t>(Sys(SYS_getpid));
  p.block_size.store(static_cast<uint32_t>(p.store->stats().block_size));
  return 0;
}

void DestroyStoreLocked() {
  Process& p = P();
  p.generation.fetch_add(1);
  if (p.store != nullptr) {
    InternalScope in;
    delete p.store;
    p.store = nullptr;
  }
}

}  // namespace

void ReleaseIfIdle() {
  Process& p = P();
  if (p.sticky.load() || Disabled()) return;
  InternalScope in;
  std::unique_lock<std::shared_mutex> ex(p.store_mu);
  if (p.sticky.load() || p.store == nullptr) return;
  delete p.store;  // saves the working files; descriptors of directories stay valid
  p.store = nullptr;
}

int StoreRef::Acquire(bool attach, bool create) {
  Process& p = P();
  for (;;) {
    lock_ = std::shared_lock<std::shared_mutex>(p.store_mu);
    store_ = p.store;
    generation_ = p.generation.load();
    if (store_ != nullptr || !attach) return 0;
    if (p.shutdown) {
      lock_.unlock();
      return EIO;
    }
    lock_.unlock();
    int err;
    {
      std::unique_lock<std::shared_mutex> ex(p.store_mu);
      err = p.store != nullptr ? 0 : AttachLocked(create);
    }
    if (err == ENOENT) {
      lock_ = std::shared_lock<std::shared_mutex>(p.store_mu);
      store_ = p.store;
      generation_ = p.generation.load();
      return store_ != nullptr ? 0 : ENOENT;
    }
    if (err != 0) return err;
  }
}

// ---- open files -------------------------------------------------------------------------

OpenFile::~OpenFile() {
  if (kind != Kind::kFile || memfs_fd < 0) return;
  Process& p = P();
  // The caller holds store_mu (see core.h), so store and generation are stable.
  if (p.store != nullptr && generation == p.generation.load()) {
    InternalScope in;
    (void)p.store->Close(memfs_fd);
  }
}

namespace {

bool Live(const StoreRef& ref, const OpenFile& f) {
  if (f.generation != ref.generation()) return false;
  return f.kind != OpenFile::Kind::kFile || ref.store() != nullptr;
}

// A placeholder: an O_PATH descriptor on a sealed, empty memfd. Every I/O
// call that reaches the kernel with it fails (EBADF); reopening it through
// /proc gives an empty file that refuses writes.
int ReservePlaceholder(bool cloexec) {
  int flags = O_PATH | (cloexec ? O_CLOEXEC : 0);
  long fd = -1;
  long m = Sys(SYS_memfd_create, reinterpret_cast<long>("dlckpt-memfs-placeholder"),
               MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (m >= 0) {
    Sys(SYS_fcntl, m, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE);
    char link[64];
    std::snprintf(link, sizeof link, "/proc/self/fd/%ld", m);
    fd = Sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>(link), flags);
    Sys(SYS_close, m);
  }
  if (fd < 0) fd = Sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/dev/null"), flags);
  if (fd < 0) return -1;
  if (fd >= FdTable<OpenFile>::kMaxFd) {
    Sys(SYS_close, fd);
    errno = EMFILE;
    return -1;
  }
  return static_cast<int>(fd);
}

uint64_t PathHash(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h | (1ull << 62);
}

memfs::FileInfo SynthDir(const std::string& path) {
  memfs::FileInfo fi;
  fi.path = path;
  fi.mode = S_IFDIR | 0755;
  fi.mtime_ns = P().start_ns;
  fi.ino = PathHash(path);
  return fi;
}

}  // namespace

uint64_t SynthIno(std::string_view path) { return PathHash(path); }

namespace {

// ENOTDIR if an ancestor of `path` is a regular memfs file.
int CheckParents(memfs::Store* s, const std::string& path) {
  if (s == nullptr) return 0;
  for (size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    auto st = s->Stat(std::string_view(path).substr(0, slash));
    if (st.ok() && !S_ISDIR(st->mode)) return ENOTDIR;
  }
  return 0;
}

// The directory a relative path is resolved against: the working directory,
// or the directory of a real descriptor. False if it cannot be named.
bool BaseDir(int dirfd, std::string* out) {
  char buf[PATH_MAX + 1];
  if (dirfd == AT_FDCWD && P().has_vcwd.load()) {
    std::lock_guard<std::mutex> lock(P().cwd_mu);
    if (!P().vcwd.empty()) {
      *out = P().vcwd;
      return true;
    }
  }
  if (dirfd == AT_FDCWD) {
    long n = Sys(SYS_getcwd, reinterpret_cast<long>(buf), sizeof buf);
    if (n <= 0 || buf[0] != '/') return false;
    *out = buf;
    return true;
  }
  char link[64];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
  long n = Sys(SYS_readlinkat, AT_FDCWD, reinterpret_cast<long>(link), reinterpret_cast<long>(buf),
               PATH_MAX);
  if (n <= 0 || buf[0] != '/') return false;
  buf[n] = '\0';
  *out = buf;
  return true;
}

bool RoutedPath(const std::string& norm) {
  return P().prefixes.Contains(norm) || (Enabled() && !IsPseudoFs(norm));
}

}  // namespace

Route Resolve(int dirfd, const char* path, std::string* out, int* err) {
  if (path == nullptr || path[0] == '\0') return Route::kOs;
  Process& p = P();
  std::string_view sv(path);
  std::string norm;
  if (sv[0] == '/') {
    if (!Enabled() && !p.prefixes.MaybeContains(sv)) return Route::kOs;
    norm = IsNormalizedAbsolute(sv) ? std::string(sv) : NormalizeAbsolute(sv);
  } else if (dirfd != AT_FDCWD && p.fds.Contains(dirfd)) {
    std::string base;
    {
      StoreRef ref;
      ref.Acquire(false, false);
      std::shared_ptr<OpenFile> f = p.fds.Get(dirfd);
      if (f == nullptr) return Route::kOs;  // closed meanwhile
      if (!Live(ref, *f)) {
        *err = EBADF;
        return Route::kError;
      }
      if (f->kind != OpenFile::Kind::kDir) {
        *err = ENOTDIR;
        return Route::kError;
      }
      base = f->path;
    }
    norm = JoinAndNormalize(base, sv);
    if (!RoutedPath(norm)) {
      *err = EXDEV;  // ".." out of memfs through a memfs directory descriptor
      return Route::kError;
    }
    *out = std::move(norm);
    return Route::kMemfs;
  } else {
    bool in_vcwd = dirfd == AT_FDCWD && p.has_vcwd.load();
    if (!Enabled() && !in_vcwd && !HasDotDot(sv)) return Route::kOs;
    std::string base;
    if (!BaseDir(dirfd, &base)) return Route::kOs;
    norm = JoinAndNormalize(base, sv);
  }
  if (!RoutedPath(norm)) return Route::kOs;
  *out = std::move(norm);
  return Route::kMemfs;
}

int Lookup(memfs::Store* s, const std::string& path, Entry* out) {
  *out = Entry{};
  if (s != nullptr) {
    auto st = s->Stat(path);
    if (st.ok()) {
      out->type = S_ISDIR(st->mode) ? Entry::Type::kDir : Entry::Type::kFile;
      out->info = std::move(st).value();
      return 0;
    }
    if (st.status().code() != ENOENT) return st.status().code();
  }
  const PrefixSet& pre = P().prefixes;
  bool implied = pre.IsRoot(path) || pre.IsAncestor(path);
  if (!implied && s != nullptr) {
    auto below = s->List(path == "/" ? std::string("/") : path + "/");
    implied = below.ok() && !below->empty();
  }
  if (implied) {
    out->type = Entry::Type::kDir;
    out->info = SynthDir(path);
  }
  return 0;
}

void FillStat(const memfs::FileInfo& fi, struct stat* st) {
  Process& p = P();
  std::memset(st, 0, sizeof *st);
  st->st_dev = makedev(kMemfsDevMajor, 0);
  st->st_ino = fi.ino;
  st->st_mode = fi.mode;
  st->st_nlink = S_ISDIR(fi.mode) ? 2 : 1;
  st->st_uid = p.uid;
  st->st_gid = p.gid;
  st->st_size = static_cast<off_t>(fi.size);
  st->st_blksize = p.block_size.load();
  st->st_blocks = static_cast<blkcnt_t>((fi.size + 511) / 512);
  struct timespec ts{static_cast<time_t>(fi.mtime_ns / 1000000000),
                     static_cast<long>(fi.mtime_ns % 1000000000)};
  st->st_atim = st->st_mtim = st->st_ctim = ts;
}

namespace {

void FillStatx(const memfs::FileInfo& fi, struct statx* stx) {
  struct stat st;
  FillStat(fi, &st);
  std::memset(stx, 0, sizeof *stx);
  stx->stx_mask = STATX_BASIC_STATS;
  stx->stx_blksize = static_cast<uint32_t>(st.st_blksize);
  stx->stx_nlink = static_cast<uint32_t>(st.st_nlink);
  stx->stx_uid = st.st_uid;
  stx->stx_gid = st.st_gid;
  stx->stx_mode = static_cast<uint16_t>(st.st_mode);
  stx->stx_ino = st.st_ino;
  stx->stx_size = static_cast<uint64_t>(st.st_size);
  stx->stx_blocks = static_cast<uint64_t>(st.st_blocks);
  struct statx_timestamp t{st.st_mtim.tv_sec, static_cast<uint32_t>(st.st_mtim.tv_nsec), 0};
  stx->stx_atime = stx->stx_ctime = stx->stx_mtime = t;
  stx->stx_dev_major = static_cast<uint32_t>(kMemfsDevMajor);
  stx->stx_dev_minor = 0;
}

}  // namespace

int OpenPath(const std::string& path, int flags, mode_t mode) {
  InternalScope in;
  Process& p = P();
  if ((flags & O_TMPFILE) == O_TMPFILE) return FailErrno(EOPNOTSUPP);
  int acc = flags & O_ACCMODE;
  if (acc == O_ACCMODE) return FailErrno(EINVAL);
  const bool creat = (flags & O_CREAT) != 0;
  const bool opath = (flags & O_PATH) != 0;
  StoreRef ref;
  int e = ref.Acquire(true, creat && !opath);
  if (e != 0 && e != ENOENT) return FailErrno(e);
  memfs::Store* s = ref.store();
  Entry ent;
  if ((e = Lookup(s, path, &ent)) != 0) return FailErrno(e);
  OpenFile::Kind kind;
  switch (ent.type) {
    case Entry::Type::kDir:
      if (!opath && (acc != O_RDONLY || creat)) return FailErrno(EISDIR);
      kind = OpenFile::Kind::kDir;
      break;
    case Entry::Type::kFile:
      if (flags & O_DIRECTORY) return FailErrno(ENOTDIR);
      if (creat && (flags & O_EXCL)) return FailErrno(EEXIST);
      kind = opath ? OpenFile::Kind::kPath : OpenFile::Kind::kFile;
      break;
    default:
      if (!creat || opath || s == nullptr) return FailErrno(ENOENT);
      if (flags & O_DIRECTORY) return FailErrno(EINVAL);
      if ((e = CheckParents(s, path)) != 0) return FailErrno(e);
      kind = OpenFile::Kind::kFile;
  }
  int fd = ReservePlaceholder((flags & O_CLOEXEC) != 0);
  if (fd < 0) return -1;
  int memfs_fd = -1;
  if (kind == OpenFile::Kind::kFile) {
    int mflags = flags & (O_ACCMODE | O_CREAT | O_EXCL | O_TRUNC | O_APPEND);
    auto r = s->Open(path, mflags, mode & ~p.umask_bits & 07777);
    if (!r.ok()) {
      Sys(SYS_close, fd);
      return Fail(r.status());
    }
    memfs_fd = *r;
    p.sticky.store(true);
  }
  int status = opath ? O_PATH : (acc | (flags & kStatusBits) | O_LARGEFILE);
  if (kind == OpenFile::Kind::kDir && (flags & O_DIRECTORY)) status |= O_DIRECTORY;
  auto of = std::make_shared<OpenFile>(kind, memfs_fd, ref.generation(), path, status);
  of->native_append = kind == OpenFile::Kind::kFile && (flags & O_APPEND) != 0;
  std::shared_ptr<OpenFile> old;
  if (!p.fds.Set(fd, std::move(of), &old)) {
    Sys(SYS_close, fd);
    return FailErrno(EMFILE);
  }
  return fd;
}

std::shared_ptr<OpenFile> FdFile(int fd, StoreRef* ref) {
  ref->Acquire(false, false);
  std::shared_ptr<OpenFile> f = Fds().Get(fd);
  if (f == nullptr || !Live(*ref, *f)) {
    errno = EBADF;
    return nullptr;
  }
  return f;
}

namespace {

// ---- descriptor operations -------------------------------------------------------------

// The common shape of an operation on a descriptor: not ours -> 0; stale ->
// EBADF; else `op(ref, file, err)` returning the result (err set on -1).
template <class R, class Op>
int OnFd(int fd, R* out, Op&& op) {
  if (Disabled() || InInternal() || !Fds().Contains(fd)) return 0;
  int err = 0;
  R r;
  try {
    InternalScope in;
    StoreRef ref;
    ref.Acquire(false, false);
    std::shared_ptr<OpenFile> f = Fds().Get(fd);
    if (f == nullptr) return 0;
    if (!Live(ref, *f)) {
      r = static_cast<R>(-1);
      err = EBADF;
    } else {
      r = op(ref, *f, err);
    }
  } catch (...) {
    r = static_cast<R>(-1);
    err = ENOMEM;
  }
  *out = r;
  if (err != 0) errno = err;
  return 1;
}

using Kind = OpenFile::Kind;

// EBADF / EISDIR for what cannot be read or written as a file.
int FileOnly(const OpenFile& f) {
  if (f.kind == Kind::kPath) return EBADF;
  if (f.kind == Kind::kDir) return EISDIR;
  return 0;
}

ssize_t ReadOp(StoreRef& ref, OpenFile& f, void* buf, size_t len, off_t off, int& err) {
  if ((err = FileOnly(f)) != 0) return -1;
  auto r = off < 0 ? ref.store()->Read(f.memfs_fd, buf, len)
                   : ref.store()->Pread(f.memfs_fd, buf, len, static_cast<uint64_t>(off));
  if (!r.ok()) {
    err = r.status().code();
    return -1;
  }
  return static_cast<ssize_t>(*r);
}

// O_APPEND added after open (fcntl F_SETFL, fdopen "a") is emulated here.
bool EmulatedAppend(const OpenFile& f) {
  return !f.native_append && (f.status_flags.load() & O_APPEND) != 0;
}

ssize_t WriteOp(StoreRef& ref, OpenFile& f, const void* buf, size_t len, off_t off, int& err) {
  if (f.kind == Kind::kPath) {
    err = EBADF;
    return -1;
  }
  if (f.kind == Kind::kDir) {
    err = EBADF;  // a directory is never open for writing
    return -1;
  }
  memfs::Store* s = ref.store();
  Result<size_t> r = size_t{0};
  if (EmulatedAppend(f)) {
    std::lock_guard<std::mutex> lock(f.append_mu);
    auto end = s->Fstat(f.memfs_fd);
    if (!end.ok()) {
      err = end.status().code();
      return -1;
    }
    if (off < 0) {
      auto sk = s->Seek(f.memfs_fd, 0, SEEK_END);
      if (!sk.ok()) {
        err = sk.status().code();
        return -1;
      }
      r = s->Write(f.memfs_fd, buf, len);
    } else {
      r = s->Pwrite(f.memfs_fd, buf, len, end->size);
    }
  } else {
    r = off < 0 ? s->Write(f.memfs_fd, buf, len)
                : s->Pwrite(f.memfs_fd, buf, len, static_cast<uint64_t>(off));
  }
  if (!r.ok()) {
    err = r.status().code();
    return -1;
  }
  return static_cast<ssize_t>(*r);
}

template <bool kWrite>
ssize_t VectorOp(StoreRef& ref, OpenFile& f, const struct iovec* iov, int cnt, off_t off,
                 int& err) {
  if (cnt < 0 || cnt > IOV_MAX) {
    err = EINVAL;
    return -1;
  }
  ssize_t total = 0;
  for (int i = 0; i < cnt; ++i) {
    if (iov[i].iov_len == 0) continue;
    off_t at = off < 0 ? -1 : off + total;
    ssize_t n = kWrite ? WriteOp(ref, f, iov[i].iov_base, iov[i].iov_len, at, err)
                       : ReadOp(ref, f, iov[i].iov_base, iov[i].iov_len, at, err);
    if (n < 0) {
      if (total > 0) {
        err = 0;
        return total;
      }
      return -1;
    }
    total += n;
    if (static_cast<size_t>(n) < iov[i].iov_len) break;
  }
  return total;
}

int FstatOp(StoreRef& ref, OpenFile& f, struct stat* st, int& err) {
  if (f.kind == Kind::kFile) {
    auto fi = ref.store()->Fstat(f.memfs_fd);
    if (!fi.ok()) {
      err = fi.status().code();
      return -1;
    }
    FillStat(*fi, st);
    return 0;
  }
  Entry ent;
  if ((err = Lookup(ref.store(), f.path, &ent)) != 0) return -1;
  if (ent.type == Entry::Type::kNone) ent.info = SynthDir(f.path);  // removed while open
  FillStat(ent.info, st);
  return 0;
}

// Reads up to len bytes from fd (memfs or OS) for the copy emulation.
ssize_t CopyRead(StoreRef& ref, int fd, void* buf, size_t len, off_t* off, int& err) {
  std::shared_ptr<OpenFile> f = Fds().Get(fd);
  ssize_t n;
  if (f != nullptr) {
    if (!Live(ref, *f)) {
      err = EBADF;
      return -1;
    }
    n = ReadOp(ref, *f, buf, len, off ? *off : -1, err);
  } else {
    n = off ? Sys(SYS_pread64, fd, reinterpret_cast<long>(buf), static_cast<long>(len), *off)
            : Sys(SYS_read, fd, reinterpret_cast<long>(buf), static_cast<long>(len));
    if (n < 0) err = errno;
  }
  if (n > 0 && off) *off += n;
  return n;
}

ssize_t CopyWrite(StoreRef& ref, int fd, const char* buf, size_t len, off_t* off, int& err) {
  std::shared_ptr<OpenFile> f = Fds().Get(fd);
  if (f != nullptr && !Live(ref, *f)) {
    err = EBADF;
    return -1;
  }
  size_t done = 0;
  while (done < len) {
    ssize_t n;
    off_t at = off ? *off + static_cast<off_t>(done) : -1;
    if (f != nullptr) {
      n = WriteOp(ref, *f, buf + done, len - done, at, err);
    } else {
      n = off ? Sys(SYS_pwrite64, fd, reinterpret_cast<long>(buf + done),
                    static_cast<long>(len - done), at)
              : Sys(SYS_write, fd, reinterpret_cast<long>(buf + done),
                    static_cast<long>(len - done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) err = errno;
    }
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  if (off) *off += static_cast<off_t>(done);
  if (done > 0) err = 0;
  return done > 0 || len == 0 ? static_cast<ssize_t>(done) : -1;
}

// ---- path operations ---------------------------------------------------------------------

// The common shape of a path operation: routed to the OS -> 0; else
// `op(path, err)` with the normalised memfs path.
template <class Op>
int OnPath(int dirfd, const char* path, int* out, Op&& op) {
  if (Disabled() || InInternal()) return 0;
  int err = 0;
  int r;
  try {
    InternalScope in;
    std::string p;
    Route route = Resolve(dirfd, path, &p, &err);
    if (route == Route::kOs) return 0;
    r = route == Route::kError ? -1 : op(p, err);
  } catch (...) {
    r = -1;
    err = ENOMEM;
  }
  ReleaseIfIdle();
  *out = r;
  if (r < 0) errno = err != 0 ? err : EIO;
  return 1;
}

// Attaches the store for a path operation; ENOENT (no store) leaves `ref`
// locked with a null store, which Lookup treats as an empty memfs.
int AcquireForPath(StoreRef* ref, bool create) {
  int e = ref->Acquire(true, create);
  return e == ENOENT ? 0 : e;
}

bool IsRootOrAncestor(const std::string& p) {
  return P().prefixes.IsRoot(p) || P().prefixes.IsAncestor(p);
}

int RemoveOp(const std::string& p, bool dir, bool either, int& err) {
  StoreRef ref;
  if ((err = AcquireForPath(&ref, false)) != 0) return -1;
  memfs::Store* s = ref.store();
  Entry ent;
  if ((err = Lookup(s, p, &ent)) != 0) return -1;
  if (ent.type == Entry::Type::kNone) {
    err = ENOENT;
    return -1;
  }
  bool is_dir = ent.type == Entry::Type::kDir;
  if (either) dir = is_dir;
  if (!dir) {
    if (is_dir) {
      err = EISDIR;
      return -1;
    }
    Status st = s->Unlink(p);
    err = st.code();
    return st.ok() ? 0 : -1;
  }
  if (!is_dir) {
    err = ENOTDIR;
    return -1;
  }
  if (IsRootOrAncestor(p)) {
    err = EBUSY;
    return -1;
  }
  auto node = s->Stat(p);
  if (!node.ok()) {
    err = ENOTEMPTY;  // implied by the files below it
    return -1;
  }
  Status st = s->Rmdir(p);
  err = st.code();
  return st.ok() ? 0 : -1;
}

}  // namespace

// ---- descriptor helpers for stdio.cc and dir.cc ---------------------------------------------

ssize_t FdRead(int fd, void* buf, size_t len) {
  ssize_t r;
  if (Disabled() || !Fds().Contains(fd)) return FailErrno(EBADF);
  InternalScope in;
  StoreRef ref;
  std::shared_ptr<OpenFile> f = FdFile(fd, &ref);
  if (f == nullptr) return -1;
  int err = 0;
  r = ReadOp(ref, *f, buf, len, -1, err);
  if (r < 0) errno = err;
  return r;
}

ssize_t FdWrite(int fd, const void* buf, size_t len) {
  ssize_t r;
  if (Disabled() || !Fds().Contains(fd)) return FailErrno(EBADF);
  InternalScope in;
  StoreRef ref;
  std::shared_ptr<OpenFile> f = FdFile(fd, &ref);
  if (f == nullptr) return -1;
  int err = 0;
  r = WriteOp(ref, *f, buf, len, -1, err);
  if (r < 0) errno = err;
  return r;
}

off_t FdSeek(int fd, off_t offset, int whence) {
  off_t r = -1;
  if (dlckpt_ic_lseek(fd, offset, whence, &r)) return r;
  return FailErrno(EBADF);
}

int FdClose(int fd) {
  if (!Disabled() && Fds().Contains(fd)) {
    InternalScope in;
    StoreRef ref;
    ref.Acquire(false, false);
    std::shared_ptr<OpenFile> f = Fds().Take(fd);
    if (f != nullptr) {
      Sys(SYS_close, fd);
      return 0;
    }
  }
  return FailErrno(EBADF);
}

int FdSetAppend(int fd) {
  StoreRef ref;
  std::shared_ptr<OpenFile> f = FdFile(fd, &ref);
  if (f == nullptr) return -1;
  f->status_flags.fetch_or(O_APPEND);
  return 0;
}

}  // namespace dlckpt::intercept::internal

// ---- the C boundary -------------------------------------------------------------------------

using namespace dlckpt::intercept::internal;  // NOLINT(google-build-using-namespace)
using dlckpt::intercept::internal::Kind;
using dlckpt::intercept::IsNormalizedAbsolute;
using dlckpt::intercept::JoinAndNormalize;
using dlckpt::intercept::NormalizeAbsolute;
namespace memfs = dlckpt::memfs;

extern "C" {

int dlckpt_ic_close(int fd, int* out) {
  if (Disabled() || InInternal() || !Fds().Contains(fd)) return 0;
  InternalScope in;
  StoreRef ref;
  ref.Acquire(false, false);
  std::shared_ptr<OpenFile> f = Fds().Take(fd);
  if (f == nullptr) return 0;
  Sys(SYS_close, fd);  // the placeholder; the memfs handle closes with the last reference
  *out = 0;
  return 1;
}

void dlckpt_ic_forget_range(unsigned lo, unsigned hi) {
  if (Disabled() || Fds().Empty()) return;
  InternalScope in;
  StoreRef ref;
  ref.Acquire(false, false);
  int l = lo > static_cast<unsigned>(INT_MAX) ? INT_MAX : static_cast<int>(lo);
  int h = hi > static_cast<unsigned>(INT_MAX) ? INT_MAX : static_cast<int>(hi);
  auto dropped = Fds().TakeRange(l, h);
  dropped.clear();  // under the store lock
}

int dlckpt_ic_read(int fd, void* buf, size_t len, ssize_t* out) {
  return OnFd(fd, out, [&](StoreRef& ref, OpenFile& f, int& err) {
    return ReadOp(ref, f, buf, len, -1, err);
  });
}

int dlckpt_ic_write(int fd, const void* buf, size_t len, ssize_t* out) {
  return OnFd(fd, out, [&](StoreRef& ref, OpenFile& f, int& err) {
    return WriteOp(ref, f, buf, len, -1, err);
  });
}

int dlckpt_ic_pread(int fd, void* buf, size_t len, off_t off, ssize_t* out) {
  return OnFd(fd, out, [&](StoreRef& ref, OpenFile& f, int& err) -> ssize_t {
    if (off < 0) {
      err = EINVAL;
      return -1;
    }
    return ReadOp(ref, f, buf, len, off, err);
  });
}

int dlckpt_ic_pwrite(int fd, const void* buf, size_t len, off_t off, ssize_t* out) {
  return OnFd(fd, out, [&](StoreRef& ref, OpenFile& f, int& err) -> ssize_t {
    if (off < 0) {
      err = EINVAL;
      return -1;
    }
    return WriteOp(ref, f, buf, len, off, err);
  });
}

int dlckpt_ic_readv(int fd, const struct iovec* iov, int cnt, off_t off, ssize_t* out) {
  return OnFd(fd, out, [&](StoreRef& ref, OpenFile& f, int& err) {
    return VectorOp<false>(ref, f, iov, cnt, off, err);
  });
}

int dlckpt_ic_writev(int fd, const struct iovec* iov, int cnt, off_t off, ssize_t* out) {
  return OnFd(fd, out, [&](StoreRef& ref, OpenFile& f, int& err) {
    return VectorOp<true>(ref, f, iov, cnt, off, err);
  });
}

int dlckpt_ic_lseek(int fd, off_t off, int whence, off_t* out) {
  return OnFd(fd, out, [&](StoreRef& ref, OpenFile& f, int& err) -> off_t {
    if (f.kind == Kind::kPath) {
      err = EBADF;
      return -1;
    }
    if (f.kind == Kind::kDir) return 0;
    auto r = ref.store()->Seek(f.memfs_fd, off, whence);
    if (!r.ok()) {
      err = r.status().code();
      return -1;
    }
    return static_cast<off_t>(*r);
  });
}

int dlckpt_ic_fstat(int fd, struct stat* st, int* out) {
  return OnFd(fd, out, [&](StoreRef& ref, OpenFile& f, int& err) {
    return FstatOp(ref, f, st, err);
  });
}

int dlckpt_ic_ftruncate(int fd, off_t len, int* out) {
  return OnFd(fd, out, [&](StoreRef& ref, OpenFile& f, int& err) -> int {
    if (f.kind == Kind::kPath) {
      err = EBADF;
      return -1;
    }
    if (f.kind == Kind::kDir || len < 0) {
      err = EINVAL;
      return -1;
    }
    dlckpt::Status s = ref.store()->Ftruncate(f.memfs_fd, static_cast<uint64_t>(len));
    err = s.code();
    return s.ok() ? 0 : -1;
  });
}

int dlckpt_ic_fsync(int fd, int* out) {
  return OnFd(fd, out, [&](StoreRef&, OpenFile& f, int& err) -> int {
    if (f.kind == Kind::kPath) {
      err = EBADF;
      return -1;
    }
    return 0;  // the data is already in the store
  });
}

int dlckpt_ic_dup(int fd, int* out) {
  return OnFd(fd, out, [&](StoreRef&, OpenFile& f, int& err) -> int {
    long n = Sys(SYS_fcntl, fd, F_DUPFD, 0);
    if (n < 0) {
      err = errno;
      return -1;
    }
    std::shared_ptr<OpenFile> old;
    if (!Fds().Set(static_cast<int>(n), Fds().Get(fd), &old)) {
      Sys(SYS_close, n);
      err = EMFILE;
      return -1;
    }
    (void)f;
    return static_cast<int>(n);
  });
}

int dlckpt_ic_dup3(int oldfd, int newfd, int flags, int is_dup2, int* out) {
  if (Disabled() || InInternal()) return 0;
  bool old_memfs = Fds().Contains(oldfd);
  if (!old_memfs && !Fds().Contains(newfd)) return 0;
  int err = 0;
  int r = -1;
  {
    InternalScope in;
    StoreRef ref;
    ref.Acquire(false, false);
    std::shared_ptr<OpenFile> f = old_memfs ? Fds().Get(oldfd) : nullptr;
    if (f != nullptr) {
      if (!Live(ref, *f)) {
        err = EBADF;
      } else if (oldfd == newfd) {
        if (is_dup2) {
          r = newfd;
        } else {
          err = EINVAL;
        }
      } else {
        long n = is_dup2 ? Sys(SYS_dup2, oldfd, newfd) : Sys(SYS_dup3, oldfd, newfd, flags);
        if (n < 0) {
          err = errno;
        } else {
          std::shared_ptr<OpenFile> replaced;
          if (Fds().Set(newfd, f, &replaced)) {
            r = newfd;
          } else {
            Sys(SYS_close, newfd);
            err = EMFILE;
          }
        }
      }
    } else {
      // A real descriptor onto a memfs descriptor's number.
      long n = is_dup2 ? Sys(SYS_dup2, oldfd, newfd) : Sys(SYS_dup3, oldfd, newfd, flags);
      if (n < 0) {
        err = errno;
      } else {
        if (oldfd != newfd) Fds().Take(newfd);
        r = static_cast<int>(n);
      }
    }
  }
  *out = r;
  if (r < 0) errno = err;
  return 1;
}

int dlckpt_ic_fcntl(int fd, int cmd, void* arg, int* out) {
  switch (cmd) {
    case F_GETFD:
    case F_SETFD:
      return 0;  // close-on-exec lives on the placeholder descriptor
    default:
      break;
  }
  return OnFd(fd, out, [&](StoreRef&, OpenFile& f, int& err) -> int {
    switch (cmd) {
      case F_DUPFD:
      case F_DUPFD_CLOEXEC: {
        long n = Sys(SYS_fcntl, fd, cmd, reinterpret_cast<long>(arg));
        if (n < 0) {
          err = errno;
          return -1;
        }
        std::shared_ptr<OpenFile> old;
        if (!Fds().Set(static_cast<int>(n), Fds().Get(fd), &old)) {
          Sys(SYS_close, n);
          err = EMFILE;
          return -1;
        }
        return static_cast<int>(n);
      }
      case F_GETFL:
        return f.status_flags.load();
      case F_SETFL: {
        if (f.kind == Kind::kPath) {
          err = EBADF;
          return -1;
        }
        int want = static_cast<int>(reinterpret_cast<long>(arg));
        int cur = f.status_flags.load();
        int next = (cur & ~kSettableBits) | (want & kSettableBits);
        if (f.native_append && !(next & O_APPEND)) {
          err = EINVAL;  // memfs cannot drop O_APPEND from an open handle
          return -1;
        }
        f.status_flags.store(next);
        return 0;
      }
      case F_GETLK:
      case F_OFD_GETLK: {
        auto* fl = static_cast<struct flock*>(arg);
        if (fl == nullptr) {
          err = EFAULT;
          return -1;
        }
        fl->l_type = F_UNLCK;  // nobody else can open this process's store
        return 0;
      }
      case F_SETLK:
      case F_SETLKW:
      case F_OFD_SETLK:
      case F_OFD_SETLKW:
        if (f.kind == Kind::kPath) {
          err = EBADF;
          return -1;
        }
        return 0;
      default:
        err = EINVAL;
        return -1;
    }
  });
}

int dlckpt_ic_ioctl(int fd, unsigned long request, void* arg, int* out) {
  return OnFd(fd, out, [&](StoreRef& ref, OpenFile& f, int& err) -> int {
    if (f.kind == Kind::kPath) {
      err = EBADF;
      return -1;
    }
    switch (request) {
      case FIOCLEX:
      case FIONCLEX: {
        long r = Sys(SYS_fcntl, fd, F_SETFD, request == FIOCLEX ? FD_CLOEXEC : 0);
        if (r < 0) err = errno;
        return r < 0 ? -1 : 0;
      }
      case FIONBIO: {
        if (arg == nullptr) {
          err = EFAULT;
          return -1;
        }
        if (*static_cast<int*>(arg)) {
          f.status_flags.fetch_or(O_NONBLOCK);
        } else {
          f.status_flags.fetch_and(~O_NONBLOCK);
        }
        return 0;
      }
      case FIONREAD: {
        if (arg == nullptr) {
          err = EFAULT;
          return -1;
        }
        if (f.kind != Kind::kFile) {
          err = EISDIR;
          return -1;
        }
        auto fi = ref.store()->Fstat(f.memfs_fd);
        auto pos = ref.store()->Seek(f.memfs_fd, 0, SEEK_CUR);
        if (!fi.ok() || !pos.ok()) {
          err = EBADF;
          return -1;
        }
        uint64_t left = fi->size > *pos ? fi->size - *pos : 0;
        *static_cast<int*>(arg) = static_cast<int>(std::min<uint64_t>(left, INT_MAX));
        return 0;
      }
      default:
        err = ENOTTY;
        return -1;
    }
  });
}

int dlckpt_ic_flock(int fd, int op, int* out) {
  return OnFd(fd, out, [&](StoreRef&, OpenFile& f, int& err) -> int {
    (void)op;
    if (f.kind == Kind::kPath) {
      err = EBADF;
      return -1;
    }
    return 0;  // the store belongs to this process alone
  });
}

int dlckpt_ic_isatty(int fd, int* out) {
  int handled = OnFd(fd, out, [&](StoreRef&, OpenFile& f, int& err) -> int {
    err = f.kind == Kind::kPath ? EBADF : ENOTTY;
    return -1;
  });
  if (handled) *out = 0;  // errno already ENOTTY / EBADF
  return handled;
}

int dlckpt_ic_fchmod(int fd, mode_t mode, int* out) {
  return OnFd(fd, out, [&](StoreRef&, OpenFile& f, int& err) -> int {
    (void)mode;
    if (f.kind == Kind::kPath) {
      err = EBADF;
      return -1;
    }
    return 0;  // memfs keeps the creation mode; changes are accepted and not recorded
  });
}

int dlckpt_ic_fallocate(int fd, int mode, off_t off, off_t len, int* out) {
  return OnFd(fd, out, [&](StoreRef& ref, OpenFile& f, int& err) -> int {
    if ((err = FileOnly(f)) != 0) return -1;
    if (off < 0 || len <= 0) {
      err = EINVAL;
      return -1;
    }
    if (mode == FALLOC_FL_KEEP_SIZE) return 0;
    if (mode != 0) {
      err = EOPNOTSUPP;
      return -1;
    }
    if (!(f.status_flags.load() & O_ACCMODE)) {
      err = EBADF;
      return -1;
    }
    auto fi = ref.store()->Fstat(f.memfs_fd);
    if (!fi.ok()) {
      err = fi.status().code();
      return -1;
    }
    uint64_t end = static_cast<uint64_t>(off) + static_cast<uint64_t>(len);
    if (end <= fi->size) return 0;
    dlckpt::Status s = ref.store()->Ftruncate(f.memfs_fd, end);
    err = s.code();
    return s.ok() ? 0 : -1;
  });
}

int dlckpt_ic_fadvise(int fd, int* out) {
  int r = 0;
  int handled = OnFd(fd, &r, [&](StoreRef&, OpenFile& f, int& err) -> int {
    (void)err;
    return f.kind == Kind::kPath ? EBADF : 0;
  });
  if (handled) *out = r < 0 ? EBADF : r;
  return handled;
}

int dlckpt_ic_mmap_refused(int fd) {
  return !Disabled() && !InInternal() && Fds().Contains(fd);
}

int dlckpt_ic_copy(int in_fd, off_t* in_off, int out_fd, off_t* out_off, size_t len,
                   ssize_t* out) {
  if (Disabled() || InInternal()) return 0;
  if (!Fds().Contains(in_fd) && !Fds().Contains(out_fd)) return 0;
  constexpr size_t kChunk = 1 << 20;
  int err = 0;
  ssize_t r = -1;
  try {
    InternalScope in;
    StoreRef ref;
    ref.Acquire(false, false);
    size_t want = std::min(len, kChunk);
    std::vector<char> buf(want);
    off_t in_pos = in_off ? *in_off : 0;
    ssize_t n = CopyRead(ref, in_fd, buf.data(), want, in_off ? &in_pos : nullptr, err);
    if (n > 0) {
      off_t out_pos = out_off ? *out_off : 0;
      ssize_t w = CopyWrite(ref, out_fd, buf.data(), static_cast<size_t>(n),
                            out_off ? &out_pos : nullptr, err);
      if (w >= 0) {
        if (w < n && !in_off) {
          // Give back what was read but not written.
          std::shared_ptr<OpenFile> f = Fds().Get(in_fd);
          if (f != nullptr && f->kind == Kind::kFile) {
            (void)ref.store()->Seek(f->memfs_fd, -(n - w), SEEK_CUR);
          } else {
            Sys(SYS_lseek, in_fd, -(n - w), SEEK_CUR);
          }
        }
        if (in_off) *in_off += w;
        if (out_off) *out_off = out_pos;
        r = w;
      }
    } else {
      r = n;
    }
  } catch (...) {
    r = -1;
    err = ENOMEM;
  }
  *out = r;
  if (r < 0) errno = err;
  return 1;
}

// ---- paths ----

int dlckpt_ic_open(int dirfd, const char* path, int flags, mode_t mode, int* out) {
  return OnPath(dirfd, path, out, [&](const std::string& p, int& err) {
    int fd = OpenPath(p, flags, mode);
    if (fd < 0) err = errno;
    return fd;
  });
}

int dlckpt_ic_stat(int dirfd, const char* path, struct stat* st, int flags, int* out) {
  if (path != nullptr && path[0] == '\0' && (flags & AT_EMPTY_PATH)) {
    return dlckpt_ic_fstat(dirfd, st, out);
  }
  return OnPath(dirfd, path, out, [&](const std::string& p, int& err) {
    StoreRef ref;
    if ((err = AcquireForPath(&ref, false)) != 0) return -1;
    Entry ent;
    if ((err = Lookup(ref.store(), p, &ent)) != 0) return -1;
    if (ent.type == Entry::Type::kNone) {
      err = ENOENT;
      return -1;
    }
    FillStat(ent.info, st);
    return 0;
  });
}

int dlckpt_ic_statx(int dirfd, const char* path, int flags, unsigned mask, struct statx* stx,
                    int* out) {
  (void)mask;
  if (path != nullptr && path[0] == '\0' && (flags & AT_EMPTY_PATH)) {
    struct stat st;
    int handled = OnFd(dirfd, out, [&](StoreRef& ref, OpenFile& f, int& err) {
      return FstatOp(ref, f, &st, err);
    });
    if (handled && *out == 0) {
      dlckpt::memfs::FileInfo fi;
      fi.ino = st.st_ino;
      fi.mode = st.st_mode;
      fi.size = static_cast<uint64_t>(st.st_size);
      fi.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
      FillStatx(fi, stx);
    }
    return handled;
  }
  return OnPath(dirfd, path, out, [&](const std::string& p, int& err) {
    StoreRef ref;
    if ((err = AcquireForPath(&ref, false)) != 0) return -1;
    Entry ent;
    if ((err = Lookup(ref.store(), p, &ent)) != 0) return -1;
    if (ent.type == Entry::Type::kNone) {
      err = ENOENT;
      return -1;
    }
    FillStatx(ent.info, stx);
    return 0;
  });
}

int dlckpt_ic_access(int dirfd, const char* path, int mode, int flags, int* out) {
  (void)flags;
  return OnPath(dirfd, path, out, [&](const std::string& p, int& err) {
    StoreRef ref;
    if ((err = AcquireForPath(&ref, false)) != 0) return -1;
    Entry ent;
    if ((err = Lookup(ref.store(), p, &ent)) != 0) return -1;
    if (ent.type == Entry::Type::kNone) {
      err = ENOENT;
      return -1;
    }
    if ((mode & X_OK) && !(ent.info.mode & 0111)) {
      err = EACCES;
      return -1;
    }
    return 0;
  });
}

int dlckpt_ic_unlink(int dirfd, const char* path, int flags, int* out) {
  return OnPath(dirfd, path, out, [&](const std::string& p, int& err) {
    return RemoveOp(p, (flags & AT_REMOVEDIR) != 0, false, err);
  });
}

int dlckpt_ic_remove(const char* path, int* out) {
  return OnPath(AT_FDCWD, path, out, [&](const std::string& p, int& err) {
    return RemoveOp(p, false, true, err);
  });
}

int dlckpt_ic_rename(int olddirfd, const char* oldpath, int newdirfd, const char* newpath,
                     unsigned flags, int* out) {
  if (Disabled() || InInternal()) return 0;
  int err = 0;
  int r = -1;
  try {
    InternalScope in;
    std::string from, to;
    Route rf = Resolve(olddirfd, oldpath, &from, &err);
    int err2 = 0;
    Route rt = Resolve(newdirfd, newpath, &to, &err2);
    if (rf == Route::kOs && rt == Route::kOs) return 0;
    if (rf == Route::kError || rt == Route::kError) {
      if (err == 0) err = err2;
    } else if (rf != rt) {
      err = EXDEV;  // between memfs and a disk file system
    } else if (flags & ~static_cast<unsigned>(RENAME_NOREPLACE)) {
      err = EINVAL;
    } else {
      StoreRef ref;
      if ((err = AcquireForPath(&ref, false)) == 0) {
        memfs::Store* s = ref.store();
        Entry src, dst;
        if ((err = Lookup(s, from, &src)) == 0 && (err = Lookup(s, to, &dst)) == 0) {
          if (src.type == Entry::Type::kNone) {
            err = ENOENT;
          } else if (IsRootOrAncestor(from) || IsRootOrAncestor(to)) {
            err = EBUSY;
          } else if (from == to) {
            r = 0;
          } else if ((flags & RENAME_NOREPLACE) && dst.type != Entry::Type::kNone) {
            err = EEXIST;
          } else if (src.type == Entry::Type::kFile && dst.type == Entry::Type::kDir) {
            err = EISDIR;
          } else if (src.type == Entry::Type::kDir && dst.type == Entry::Type::kFile) {
            err = ENOTDIR;
          } else if (dst.type == Entry::Type::kDir && !s->Stat(to).ok()) {
            err = ENOTEMPTY;  // an implied directory has files below it
          } else if ((err = CheckParents(s, to)) == 0) {
            if (src.type == Entry::Type::kDir && !s->Stat(from).ok()) {
              dlckpt::Status mk = s->Mkdir(from, 0755);  // make the implied directory real
              if (!mk.ok()) err = mk.code();
            }
            if (err == 0) {
              dlckpt::Status st = s->Rename(from, to);
              err = st.code();
              if (st.ok()) r = 0;
            }
          }
        }
      }
    }
  } catch (...) {
    r = -1;
    err = ENOMEM;
  }
  ReleaseIfIdle();
  *out = r;
  if (r < 0) errno = err != 0 ? err : EIO;
  return 1;
}

int dlckpt_ic_mkdir(int dirfd, const char* path, mode_t mode, int* out) {
  return OnPath(dirfd, path, out, [&](const std::string& p, int& err) {
    StoreRef ref;
    if ((err = ref.Acquire(true, true)) != 0) return -1;
    memfs::Store* s = ref.store();
    Entry ent;
    if ((err = Lookup(s, p, &ent)) != 0) return -1;
    if (ent.type != Entry::Type::kNone) {
      err = EEXIST;
      return -1;
    }
    if ((err = CheckParents(s, p)) != 0) return -1;
    dlckpt::Status st = s->Mkdir(p, mode & ~P().umask_bits & 07777);
    err = st.code();
    return st.ok() ? 0 : -1;
  });
}

int dlckpt_ic_truncate(const char* path, off_t len, int* out) {
  return OnPath(AT_FDCWD, path, out, [&](const std::string& p, int& err) {
    if (len < 0) {
      err = EINVAL;
      return -1;
    }
    StoreRef ref;
    if ((err = AcquireForPath(&ref, false)) != 0) return -1;
    Entry ent;
    if ((err = Lookup(ref.store(), p, &ent)) != 0) return -1;
    if (ent.type == Entry::Type::kNone) {
      err = ENOENT;
      return -1;
    }
    if (ent.type == Entry::Type::kDir) {
      err = EISDIR;
      return -1;
    }
    dlckpt::Status st = ref.store()->Truncate(p, static_cast<uint64_t>(len));
    err = st.code();
    return st.ok() ? 0 : -1;
  });
}

int dlckpt_ic_chmod(int dirfd, const char* path, mode_t mode, int flags, int* out) {
  (void)mode;
  (void)flags;
  return OnPath(dirfd, path, out, [&](const std::string& p, int& err) {
    StoreRef ref;
    if ((err = AcquireForPath(&ref, false)) != 0) return -1;
    Entry ent;
    if ((err = Lookup(ref.store(), p, &ent)) != 0) return -1;
    if (ent.type == Entry::Type::kNone) {
      err = ENOENT;
      return -1;
    }
    return 0;  // accepted, not recorded (see README)
  });
}

int dlckpt_ic_mkstemp(char* tmpl, int suffixlen, int flags, int* out) {
  if (Disabled() || InInternal() || tmpl == nullptr) return 0;
  {
    std::string p;
    int err = 0;
    InternalScope in;
    if (Resolve(AT_FDCWD, tmpl, &p, &err) == Route::kOs) return 0;
  }
  size_t n = strlen(tmpl);
  if (suffixlen < 0 || n < 6 + static_cast<size_t>(suffixlen)) {
    *out = FailErrno(EINVAL);
    return 1;
  }
  char* x = tmpl + n - 6 - suffixlen;
  for (int i = 0; i < 6; ++i) {
    if (x[i] != 'X') {
      *out = FailErrno(EINVAL);
      return 1;
    }
  }
  static const char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  for (int attempt = 0; attempt < 1000; ++attempt) {
    unsigned char rnd[6];
    if (getrandom(rnd, sizeof rnd, GRND_NONBLOCK) != sizeof rnd) {
      uint64_t t = static_cast<uint64_t>(WallNanos()) * 6364136223846793005ull + attempt;
      std::memcpy(rnd, &t, sizeof rnd);
    }
    for (int i = 0; i < 6; ++i) x[i] = kChars[rnd[i] % (sizeof kChars - 1)];
    int fd;
    int handled = dlckpt_ic_open(AT_FDCWD, tmpl, O_RDWR | O_CREAT | O_EXCL | (flags & ~O_ACCMODE),
                                 0600, &fd);
    if (!handled) break;
    if (fd >= 0 || errno != EEXIST) {
      *out = fd;
      return 1;
    }
  }
  *out = FailErrno(EEXIST);
  return 1;
}

// ---- path rewriting, working directory, attributes ----

const char* dlckpt_ic_os_path(int dirfd, const char* path) {
  if (path == nullptr || Disabled() || InInternal()) return path;
  __attribute__((tls_model("initial-exec"))) static thread_local char bufs[2][PATH_MAX + 1];
  __attribute__((tls_model("initial-exec"))) static thread_local int next = 0;
  try {
    InternalScope in;
    Process& p = P();
    std::string norm;
    if (path[0] == '/') {
      std::string_view sv(path);
      if (IsNormalizedAbsolute(sv) || !p.prefixes.WalksThrough(sv)) return path;
      norm = NormalizeAbsolute(sv);
    } else if (dirfd == AT_FDCWD && p.has_vcwd.load()) {
      std::lock_guard<std::mutex> lock(p.cwd_mu);
      if (p.vcwd.empty()) return path;
      norm = JoinAndNormalize(p.vcwd, path);
    } else {
      return path;
    }
    if (norm.size() > PATH_MAX) return path;
    char* buf = bufs[next];
    next ^= 1;
    std::memcpy(buf, norm.c_str(), norm.size() + 1);
    return buf;
  } catch (...) {
    return path;
  }
}

extern "C++" {
namespace {

void SetVirtualCwd(const std::string& dir) {
  Process& p = P();
  std::lock_guard<std::mutex> lock(p.cwd_mu);
  p.vcwd = dir;
  p.has_vcwd.store(!dir.empty());
}

int ChdirTo(const std::string& dir, int& err) {
  StoreRef ref;
  if ((err = AcquireForPath(&ref, false)) != 0) return -1;
  Entry ent;
  if ((err = Lookup(ref.store(), dir, &ent)) != 0) return -1;
  if (ent.type == Entry::Type::kNone) {
    err = ENOENT;
    return -1;
  }
  if (ent.type != Entry::Type::kDir) {
    err = ENOTDIR;
    return -1;
  }
  SetVirtualCwd(dir);
  return 0;
}

}  // namespace
}  // extern "C++"

int dlckpt_ic_chdir(const char* path, int* out) {
  return OnPath(AT_FDCWD, path, out, [&](const std::string& p, int& err) { return ChdirTo(p, err); });
}

int dlckpt_ic_fchdir(int fd, int* out) {
  return OnFd(fd, out, [&](StoreRef&, OpenFile& f, int& err) -> int {
    if (f.kind != Kind::kDir) {
      err = ENOTDIR;
      return -1;
    }
    SetVirtualCwd(f.path);
    return 0;
  });
}

void dlckpt_ic_cwd_changed(void) {
  if (Disabled() || !P().has_vcwd.load()) return;
  InternalScope in;
  SetVirtualCwd("");
}

int dlckpt_ic_getcwd(char* buf, size_t size, char** out) {
  if (Disabled() || InInternal() || !P().has_vcwd.load()) return 0;
  std::string cwd;
  try {
    InternalScope in;
    std::lock_guard<std::mutex> lock(P().cwd_mu);
    cwd = P().vcwd;
  } catch (...) {
    errno = ENOMEM;
    *out = nullptr;
    return 1;
  }
  if (cwd.empty()) return 0;
  if (buf == nullptr) {
    // glibc extension: allocate (at least `size` bytes when size != 0).
    size_t n = std::max(size, cwd.size() + 1);
    if (size != 0 && size < cwd.size() + 1) {
      errno = ERANGE;
      *out = nullptr;
      return 1;
    }
    buf = static_cast<char*>(malloc(n));
    if (buf == nullptr) {
      errno = ENOMEM;
      *out = nullptr;
      return 1;
    }
  } else if (size == 0) {
    errno = EINVAL;
    *out = nullptr;
    return 1;
  } else if (size < cwd.size() + 1) {
    errno = ERANGE;
    *out = nullptr;
    return 1;
  }
  std::memcpy(buf, cwd.c_str(), cwd.size() + 1);
  *out = buf;
  return 1;
}

int dlckpt_ic_get_current_dir_name(char** out) {
  char* cwd = nullptr;
  if (!dlckpt_ic_getcwd(nullptr, 0, &cwd)) return 0;
  *out = cwd;
  return 1;
}

extern "C++" {
namespace {

// For operations that only need the file to exist: 0, or -1 with ENOENT.
template <class Op>
int OnExisting(int dirfd, const char* path, int* out, Op&& op) {
  return OnPath(dirfd, path, out, [&](const std::string& p, int& err) -> int {
    StoreRef ref;
    if ((err = AcquireForPath(&ref, false)) != 0) return -1;
    Entry ent;
    if ((err = Lookup(ref.store(), p, &ent)) != 0) return -1;
    if (ent.type == Entry::Type::kNone) {
      err = ENOENT;
      return -1;
    }
    return op(ent, err);
  });
}

ssize_t XattrResult(int op, int& err) {
  switch (op) {
    case DLCKPT_XATTR_LIST: return 0;  // no attributes
    case DLCKPT_XATTR_GET: err = ENODATA; return -1;
    default: err = ENOTSUP; return -1;
  }
}

}  // namespace
}  // extern "C++"

int dlckpt_ic_xattr(int dirfd, const char* path, int op, ssize_t* out) {
  if (path == nullptr) {
    return OnFd(dirfd, out, [&](StoreRef&, OpenFile& f, int& err) -> ssize_t {
      if (f.kind == Kind::kPath) {
        err = EBADF;
        return -1;
      }
      return XattrResult(op, err);
    });
  }
  int r = 0;
  ssize_t result = 0;
  int handled = OnExisting(dirfd, path, &r, [&](const Entry&, int& err) -> int {
    result = XattrResult(op, err);
    return static_cast<int>(result);
  });
  if (handled) *out = r < 0 ? -1 : result;
  return handled;
}

int dlckpt_ic_readlink(int dirfd, const char* path, ssize_t* out) {
  int r = 0;
  int handled = OnExisting(dirfd, path, &r, [&](const Entry&, int& err) -> int {
    err = EINVAL;  // memfs has no symbolic links
    return -1;
  });
  if (handled) *out = r;
  return handled;
}

int dlckpt_ic_utime(int dirfd, const char* path, int* out) {
  if (path == nullptr) {
    return OnFd(dirfd, out, [&](StoreRef&, OpenFile&, int&) -> int { return 0; });
  }
  // Times are accepted and not recorded (memfs keeps the last write time).
  return OnExisting(dirfd, path, out, [&](const Entry&, int&) -> int { return 0; });
}

// ---- lifecycle ----

void dlckpt_ic_shutdown(void) {
  if (!g_process_made.load()) return;
  Process& p = P();
  {
    std::shared_lock<std::shared_mutex> lock(p.store_mu);
    if (p.shutdown) return;
  }
  StreamFlushAll();
  std::unique_lock<std::shared_mutex> ex(p.store_mu);
  p.shutdown = true;
  DestroyStoreLocked();
}

void dlckpt_ic_before_exec(int final) {
  if (!g_process_made.load() || Disabled()) return;
  Process& p = P();
  std::unique_lock<std::shared_mutex> ex(p.store_mu);
  if (p.store == nullptr || p.owner_pid != static_cast<pid_t>(Sys(SYS_getpid))) return;
  if (final) p.shutdown = true;
  DestroyStoreLocked();
}

void dlckpt_ic_disable(const char* why) {
  if (!g_disabled.exchange(true) && why != nullptr) Warn(why);
}

}  // extern "C"

// ---- public C++ API ------------------------------------------------------------------------------

namespace dlckpt::intercept {

using internal::P;
using internal::Process;

Status Configure(const StoreConfig& config) {
  Process& p = P();
  internal::InternalScope in;
  StoreConfig previous;
  {
    std::lock_guard<std::mutex> lock(p.config_mu);
    previous = p.config;
    p.config = config;
  }
  auto name = internal::ResolveConfig();
  std::shared_lock<std::shared_mutex> lock(p.store_mu);
  Status result;
  if (!name.ok()) {
    result = name.status();
  } else if (p.store != nullptr && p.store->name() != name->name) {
    result = Status::Busy("store " + p.store->name() + " is attached; cannot switch to " +
                          name->name + " before DetachStore()");
  }
  if (!result.ok()) {
    std::lock_guard<std::mutex> cl(p.config_mu);
    p.config = previous;
  }
  return result;
}

Result<std::string> ProcessStoreName() {
  internal::InternalScope in;
  DLCKPT_ASSIGN_OR_RETURN(auto r, internal::ResolveConfig());
  return r.name;
}

Result<memfs::Store*> ProcessStore() {
  internal::InternalScope in;
  P().sticky.store(true);
  internal::StoreRef ref;
  int e = ref.Acquire(true, true);
  if (e != 0) {
    auto name = ProcessStoreName();
    return Status::FromErrno(e, "process store " + (name.ok() ? *name : std::string("?")));
  }
  return ref.store();
}

namespace {

template <class Op>
Status ResetStore(Op&& op) {
  Process& p = P();
  internal::InternalScope in;
  std::unique_lock<std::shared_mutex> ex(p.store_mu);
  if (p.store == nullptr) {
    int e = internal::AttachLocked(false);
    if (e != 0) return Status::FromErrno(e, "process store");
  }
  Status s = op(p.store);
  p.generation.fetch_add(1);  // memfs closed every handle, whatever the outcome
  return s;
}

}  // namespace

Status RollbackStore() {
  return ResetStore([](memfs::Store* s) { return s->Rollback(); });
}

Status RestoreStore(uint64_t epoch) {
  return ResetStore([epoch](memfs::Store* s) { return s->Restore(epoch); });
}

void InvalidateDescriptors() {
  Process& p = P();
  std::unique_lock<std::shared_mutex> ex(p.store_mu);
  p.generation.fetch_add(1);
}

Status FlushStreams() {
  if (internal::StreamFlushAll() != 0) return Status::FromErrno(errno, "flushing memfs streams");
  return Status::OK();
}

Status DetachStore() {
  Status flushed = FlushStreams();
  Process& p = P();
  std::unique_lock<std::shared_mutex> ex(p.store_mu);
  internal::DestroyStoreLocked();
  return flushed;
}

bool RoutesToMemfs(std::string_view path) {
  internal::InternalScope in;
  std::string p(path), out;
  int err = 0;
  return internal::Resolve(AT_FDCWD, p.c_str(), &out, &err) == internal::Route::kMemfs;
}

std::vector<std::string> Prefixes() { return P().prefixes.prefixes(); }

}  // namespace dlckpt::intercept

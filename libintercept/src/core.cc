// core.cc — libintercept's core: the process state and its store (name,
// attach, detach, fork, exit), routing, lookups, opening memfs files with
// placeholder descriptors. Descriptor operations are in fd_ops.cc, path
// operations in path_ops.cc, the public API in api.cc. See core.h for the
// locking rules and core_c.h for the entry-point protocol.
#include "core.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
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
#include "dlckpt/base/names.h"
#include "dlckpt/base/node.h"
#include "dlckpt/intercept/intercept.h"
#include "dlckpt/base/units.h"

extern "C" {
int dlckpt_enabled = 0;
// Number of memfs descriptors; zero lets the entry points skip the core.
std::atomic<long> dlckpt_ic_fd_count{0};
}

namespace dlckpt::intercept::internal {

std::atomic<void (*)()>& WriteHook() {
  static std::atomic<void (*)()> hook{nullptr};
  return hook;
}

std::mutex& StreamRegistryMutex();  // stdio.cc
std::mutex& DirRegistryMutex();     // dir.cc

namespace {

// ---- re-entrancy ------------------------------------------------------------------

__attribute__((tls_model("initial-exec"))) thread_local int t_depth = 0;

std::atomic<bool> g_disabled{false};
std::atomic<bool> g_process_made{false};

constexpr uint64_t kMemfsDevMajor = 0xd1c;  // st_dev of every memfs file

}  // namespace

bool Enabled() { return __atomic_load_n(&dlckpt_enabled, __ATOMIC_RELAXED) != 0; }

long Sys(long n, long a, long b, long c, long d) { return syscall(n, a, b, c, d); }

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

bool InInternal() noexcept { return t_depth > 0; }
InternalScope::InternalScope() noexcept { ++t_depth; }
InternalScope::~InternalScope() { --t_depth; }

bool Disabled() noexcept { return g_disabled.load(std::memory_order_relaxed); }

int Fail(const Status& s) {
  errno = s.ok() ? EIO : s.code();
  return -1;
}
void WarnCreateFailure(const Status& s) {
  static std::atomic<bool> warned{false};
  if (s.code() != ENOSPC || warned.exchange(true)) return;
  int saved_errno = errno;
  Warn(s.ToString());
  errno = saved_errno;
}

int FailErrno(int err) {
  errno = err;
  return -1;
}

// ---- the process --------------------------------------------------------------------

namespace {

void AtForkPrepare() {
  ReleaseBeforeChild();
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

// A size from Configure() if set (non-zero), else from environment variable
// `var` (ParseSize syntax), else `fallback`.
Result<uint64_t> SizeSetting(uint64_t configured, const char* var, const char* fallback) {
  if (configured != 0) return configured;
  auto parsed = ParseSize(EnvOr(var, fallback));
  if (!parsed.ok()) return parsed.status().Prefixed(var);
  return *parsed;
}

}  // namespace

Result<Resolved> ResolveConfig() {
  Process& p = P();
  StoreConfig c;
  {
    std::lock_guard<std::mutex> lock(p.config_mu);
    c = p.config;
  }
  Resolved r;
  r.options.job = c.job.empty() ? EnvOr("DLCKPT_JOB", "local") : c.job;
  r.options.node = c.node.empty() ? ThisNode() : c.node;
  if (c.rank >= 0) {
    r.options.rank = c.rank;
  } else {
    DLCKPT_ASSIGN_OR_RETURN(r.options.rank, RankFromEnv());
  }
  DLCKPT_ASSIGN_OR_RETURN(uint64_t capacity,
                          SizeSetting(c.capacity, "DLCKPT_STORE_CAPACITY", "256M"));
  DLCKPT_ASSIGN_OR_RETURN(uint64_t block, SizeSetting(c.block_size, "DLCKPT_BLOCK_SIZE", "64K"));
  if (block > UINT32_MAX) return Status::InvalidArgument("block size too large");
  r.options.capacity = capacity;
  r.options.block_size = static_cast<uint32_t>(block);
  // The file table: Configure(), else $DLCKPT_MAX_FILES, else memfs's default
  // for the capacity (DefaultMaxFiles).
  r.options.max_files = c.max_files;
  std::string max_files = EnvOr("DLCKPT_MAX_FILES", "");
  if (c.max_files == 0 && !max_files.empty()) {
    auto parsed = ParseSize(max_files);
    if (!parsed.ok()) return parsed.status().Prefixed("DLCKPT_MAX_FILES");
    if (*parsed == 0 || *parsed > (1u << 20)) {
      return Status::InvalidArgument("DLCKPT_MAX_FILES: '" + max_files + "' is not in [1, 1M]");
    }
    r.options.max_files = static_cast<uint32_t>(*parsed);
  }
  if (r.options.max_files == 0) r.options.max_files = memfs::DefaultMaxFiles(capacity);
  // Compression of the store's data (memfs.h, "Compression").
  auto compression = memfs::ParseCompression(c.compress.empty() ? EnvOr("DLCKPT_COMPRESS", "none") : c.compress);
  if (!compression.ok()) {
    return compression.status().Prefixed(c.compress.empty() ? "DLCKPT_COMPRESS" : "StoreConfig::compress");
  }
  r.options.compression = *compression;
  std::string threshold = EnvOr("DLCKPT_COMPRESS_THRESHOLD", "");
  if (c.compress_threshold >= 0) {
    r.options.compress_threshold = c.compress_threshold;
  } else if (!threshold.empty()) {
    char* end = nullptr;
    r.options.compress_threshold = std::strtod(threshold.c_str(), &end);
    if (*end != '\0') {
      return Status::InvalidArgument("DLCKPT_COMPRESS_THRESHOLD: '" + threshold + "' is not a number");
    }
  }
  std::string chunk = EnvOr("DLCKPT_COMPRESS_CHUNK", "");
  if (c.compress_chunk_size != 0) {
    r.options.chunk_size = c.compress_chunk_size;
  } else if (!chunk.empty()) {
    auto parsed = ParseSize(chunk);
    if (!parsed.ok()) return parsed.status().Prefixed("DLCKPT_COMPRESS_CHUNK");
    if (*parsed > UINT32_MAX) return Status::InvalidArgument("DLCKPT_COMPRESS_CHUNK: too large");
    r.options.chunk_size = static_cast<uint32_t>(*parsed);
  }
  std::string explicit_name = c.store_name.empty() ? EnvOr("DLCKPT_STORE", "") : c.store_name;
  if (!explicit_name.empty()) {
    r.name = explicit_name[0] == '/' ? explicit_name : "/" + explicit_name;
  } else {
    DLCKPT_ASSIGN_OR_RETURN(r.name,
                            StoreName(r.options.job, r.options.node, r.options.rank));
  }
  return r;
}

namespace {

void WarnStoreOnce(const Status& s) {
  if (P().warned_store.exchange(true)) return;
  Warn("memfs store unavailable, calls under the prefix fail: " + s.ToString());
}

}  // namespace

int AttachLocked(bool create, bool quiet) {
  Process& p = P();
  if (p.shutdown) return EIO;
  InternalScope in;
  auto cfg = ResolveConfig();
  if (!cfg.ok()) {
    if (!quiet) WarnStoreOnce(cfg.status());
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
    if (!quiet) WarnStoreOnce(store.status());
    return store.status().code();
  }
  p.store = std::move(store).value().release();
  p.owner_pid = static_cast<pid_t>(Sys(SYS_getpid));
  p.block_size.store(static_cast<uint32_t>(p.store->stats().block_size));
  p.rank.store(cfg->options.rank);
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

void ReleaseBeforeChild() {
  if (!g_process_made.load() || Disabled() || InInternal()) return;
  Process& p = P();
  if (p.pinned.load()) return;
  int saved_errno = errno;
  InternalScope in;
  std::unique_lock<std::shared_mutex> ex(p.store_mu);
  if (!p.pinned.load() && p.store != nullptr &&
      p.owner_pid == static_cast<pid_t>(Sys(SYS_getpid))) {
    delete p.store;  // saves the working files; descriptors of directories stay valid
    p.store = nullptr;
  }
  errno = saved_errno;
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

bool Live(const StoreRef& ref, const OpenFile& f) {
  if (f.generation != ref.generation()) return false;
  return f.kind != OpenFile::Kind::kFile || ref.store() != nullptr;
}

namespace {

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

}  // namespace

memfs::FileInfo SynthDir(const std::string& path) {
  memfs::FileInfo fi;
  fi.path = path;
  fi.mode = S_IFDIR | 0755;
  fi.mtime_ns = P().start_ns;
  fi.ino = PathHash(path);
  return fi;
}

uint64_t SynthIno(std::string_view path) { return PathHash(path); }

int CheckParents(memfs::Store* s, const std::string& path) {
  if (s == nullptr) return 0;
  for (size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    auto st = s->Stat(std::string_view(path).substr(0, slash));
    if (st.ok() && !S_ISDIR(st->mode)) return ENOTDIR;
  }
  return 0;
}

namespace {

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
      if (creat) WarnCreateFailure(r.status());
      return Fail(r.status());
    }
    memfs_fd = *r;
    p.pinned.store(true);
  }
  int status = opath ? O_PATH : (acc | (flags & kStatusBits) | O_LARGEFILE);
  if (kind == OpenFile::Kind::kDir && (flags & O_DIRECTORY)) status |= O_DIRECTORY;
  auto of = std::make_shared<OpenFile>(kind, memfs_fd, ref.generation(), path, status);
  of->native_append = kind == OpenFile::Kind::kFile && (flags & O_APPEND) != 0;
  // A rank > 0 opening an empty file for writing: IOR's shared file looks
  // like this on every rank but 0 (fd_ops.cc, SharedFileRefusal).
  if (kind == OpenFile::Kind::kFile && acc != O_RDONLY && p.rank.load() > 0 &&
      (ent.type != Entry::Type::kFile || (flags & O_TRUNC) || ent.info.size == 0) &&
      EnvSwitchOn("DLCKPT_SHARED_FILE_CHECK")) {
    of->start.store(OpenFile::Start::kEmpty);
  }
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

}  // namespace dlckpt::intercept::internal

// ---- the C boundary -------------------------------------------------------------------------

using namespace dlckpt::intercept::internal;  // NOLINT(google-build-using-namespace)

extern "C" {

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

void dlckpt_ic_before_spawn(void) { ReleaseBeforeChild(); }

void dlckpt_ic_store_early(void) {
  if (Disabled() || InInternal() || !dlckpt::EnvSwitchOn("DLCKPT_STORE_EARLY")) return;
  int saved_errno = errno;
  {
    InternalScope in;
    Process& p = P();
    std::unique_lock<std::shared_mutex> ex(p.store_mu);
    if (p.store == nullptr && !p.shutdown) (void)AttachLocked(true, /*quiet=*/true);
  }
  errno = saved_errno;
}

void dlckpt_ic_disable(const char* why) {
  if (!g_disabled.exchange(true) && why != nullptr) Warn(why);
}

}  // extern "C"

// path_ops.cc — operations on memfs paths: open, stat, access, unlink,
// rename, mkdir, truncate, mkstemp; the virtual working directory; path
// rewriting for the OS; attributes, links and times.
#include <sys/random.h>
#include <sys/sysmacros.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core.h"
#include "core_c.h"
#include "ops.h"

namespace dlckpt::intercept::internal {
namespace {

// ---- path operations ---------------------------------------------------------------------

// Attaches the store for a path operation; ENOENT (no store) leaves `ref`
// locked with a null store, which Lookup treats as an empty memfs.
int AcquireForPath(StoreRef* ref, bool create) {
  int e = ref->Acquire(true, create);
  return e == ENOENT ? 0 : e;
}

// Lookup for operations on an existing entry: 0 with `out` a file or a
// directory, ENOENT when nothing is there, or another errno.
int LookupExisting(memfs::Store* store, const std::string& p, Entry* out) {
  int e = Lookup(store, p, out);
  if (e == 0 && out->type == Entry::Type::kNone) e = ENOENT;
  return e;
}

// AcquireForPath (never creating the store), then LookupExisting of `p`.
int AcquireExisting(StoreRef* ref, const std::string& p, Entry* out) {
  int e = AcquireForPath(ref, false);
  return e != 0 ? e : LookupExisting(ref->store(), p, out);
}

// A path operation on an existing file or directory (ENOENT when there is
// none; never creates a store): `op(entry, err)` gives the result.
template <class Op>
int OnExisting(int dirfd, const char* path, int* out, Op&& op) {
  return OnPath(dirfd, path, out, [&](const std::string& p, int& err) -> int {
    StoreRef ref;
    Entry ent;
    if ((err = AcquireExisting(&ref, p, &ent)) != 0) return -1;
    return op(ent, err);
  });
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
}  // namespace dlckpt::intercept::internal

// ---- the C boundary -------------------------------------------------------------------------

using namespace dlckpt::intercept::internal;  // NOLINT(google-build-using-namespace)
using dlckpt::intercept::IsNormalizedAbsolute;
using dlckpt::intercept::JoinAndNormalize;
using dlckpt::intercept::NormalizeAbsolute;
namespace memfs = dlckpt::memfs;

extern "C" {

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
  return OnExisting(dirfd, path, out, [&](const Entry& ent, int&) {
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
  return OnExisting(dirfd, path, out, [&](const Entry& ent, int&) {
    FillStatx(ent.info, stx);
    return 0;
  });
}

int dlckpt_ic_access(int dirfd, const char* path, int mode, int flags, int* out) {
  (void)flags;
  return OnExisting(dirfd, path, out, [&](const Entry& ent, int& err) {
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
  return FinishPath(r, err, out);
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
    WarnCreateFailure(st);
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
    Entry ent;
    if ((err = AcquireExisting(&ref, p, &ent)) != 0) return -1;
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
  // Accepted, not recorded (see README).
  return OnExisting(dirfd, path, out, [](const Entry&, int&) { return 0; });
}

int dlckpt_ic_mkstemp(char* tmpl, int suffixlen, int flags, int* out) {
  if (tmpl == nullptr) return 0;
  {
    std::string p;
    int err = 0;
    if (ResolveAppPath(AT_FDCWD, tmpl, &p, &err) == Route::kOs) return 0;
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
  Entry ent;
  if ((err = AcquireExisting(&ref, dir, &ent)) != 0) return -1;
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

}  // extern "C"

// fd_ops.cc — operations on memfs descriptors: data, offsets, metadata,
// dup/fcntl/ioctl, copies. See core.h for the locking rules.
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

// EBADF / EISDIR for what cannot be read or written as a file.
int FileOnly(const OpenFile& f) {
  if (f.kind == Kind::kPath) return EBADF;
  if (f.kind == Kind::kDir) return EISDIR;
  return 0;
}

// For calls that only need an open handle (fsync, locks, fchmod): EBADF on an
// O_PATH descriptor, else success with nothing to do.
int AcceptUnlessPath(const OpenFile& f, int& err) {
  if (f.kind != Kind::kPath) return 0;
  err = EBADF;
  return -1;
}

// `n`, a new OS descriptor duplicated from f's placeholder (or -1 with errno),
// becomes another number for f's memfs handle.
int ShareDup(long n, OpenFile& f, int& err) {
  if (n < 0) {
    err = errno;
    return -1;
  }
  std::shared_ptr<OpenFile> old;
  if (!Fds().Set(static_cast<int>(n), f.shared_from_this(), &old)) {
    Sys(SYS_close, n);
    err = EMFILE;
    return -1;
  }
  return static_cast<int>(n);
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

// ---- the shared-file (N-to-1) check ----
//
// Every rank has its own store, so several ranks writing one path (IOR
// without -F) each write a private file holding only their own regions, and
// nothing shows it until the data is read back. Rank r > 0 of such a run
// opens the file empty and writes only from r x block size on, never its
// start. A private file of the same name on every rank (correct under
// dlckpt) is written from its start, and a program that writes its header
// last has written it by close. So a description opened empty by a rank
// > 0 whose writes never covered offset 0 is refused at its last close:
// close fails with ENOTSUP and one line says why. The bytes stay in the
// store. DLCKPT_SHARED_FILE_CHECK=0 turns the check off (OpenPath).

constexpr uint64_t kAtPosition = UINT64_MAX;  // a write at the descriptor's offset

// Records that `n` bytes were written at `at` (kAtPosition: they ended at the
// descriptor's offset now).
void NoteWrite(memfs::Store* s, OpenFile& f, uint64_t at, size_t n) {
  OpenFile::Start st = f.start.load(std::memory_order_relaxed);
  if (st != OpenFile::Start::kEmpty && st != OpenFile::Start::kHole) return;
  if (at == kAtPosition) {
    auto pos = s->Seek(f.memfs_fd, 0, SEEK_CUR);
    if (!pos.ok()) return;
    at = *pos - n;
  }
  if (at == 0) {
    f.start.store(OpenFile::Start::kStart);
  } else if (st == OpenFile::Start::kEmpty) {
    f.first_write.store(at);
    f.start.store(OpenFile::Start::kHole);
  }
}

// 0, or ENOTSUP (said on stderr) when `f`, being closed for the last time,
// is a rank's part of a shared file.
int SharedFileRefusal(const std::shared_ptr<OpenFile>& f) {
  if (f->start.load() != OpenFile::Start::kHole || f.use_count() > 1) return 0;
  Warn("rank " + std::to_string(P().rank.load()) + ": " + f->path + ": close fails with ENOTSUP: this rank opened " +
       "the file empty and wrote it from offset " + std::to_string(f->first_write.load()) +
       " on, never its start, as a rank of a file shared by several ranks (N-to-1) does. dlckpt has no shared " +
       "namespace: each rank's /dlckpt is its own store, holding its own file of that name with only its own " +
       "regions (kept). Write one file per rank (IOR: -F), or set DLCKPT_SHARED_FILE_CHECK=0 if the file is " +
       "private to the rank.");
  return ENOTSUP;
}

ssize_t WriteOp(StoreRef& ref, OpenFile& f, const void* buf, size_t len, off_t off, int& err) {
  if (auto* hook = WriteHook().load(std::memory_order_relaxed)) {
    if (WriteHook().compare_exchange_strong(hook, nullptr)) hook();
  }
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
  uint64_t at = off < 0 ? kAtPosition : static_cast<uint64_t>(off);
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
    at = end->size;
  } else {
    r = off < 0 ? s->Write(f.memfs_fd, buf, len)
                : s->Pwrite(f.memfs_fd, buf, len, static_cast<uint64_t>(off));
  }
  if (!r.ok()) {
    err = r.status().code();
    return -1;
  }
  if (*r > 0) NoteWrite(s, f, at, *r);
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

}  // namespace

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

namespace {

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

}  // namespace

// ---- descriptor helpers for stdio.cc and dir.cc ---------------------------------------------

namespace {

// `op(ref, file, err)` on memfs descriptor fd at its offset; -1 with errno.
template <class Op>
ssize_t FdIo(int fd, Op&& op) {
  if (Disabled() || !Fds().Contains(fd)) return FailErrno(EBADF);
  InternalScope in;
  StoreRef ref;
  std::shared_ptr<OpenFile> f = FdFile(fd, &ref);
  if (f == nullptr) return -1;
  int err = 0;
  ssize_t r = op(ref, *f, err);
  if (r < 0) errno = err;
  return r;
}

}  // namespace

ssize_t FdRead(int fd, void* buf, size_t len) {
  return FdIo(fd, [&](StoreRef& ref, OpenFile& f, int& err) {
    return ReadOp(ref, f, buf, len, -1, err);
  });
}

ssize_t FdWrite(int fd, const void* buf, size_t len) {
  return FdIo(fd, [&](StoreRef& ref, OpenFile& f, int& err) {
    return WriteOp(ref, f, buf, len, -1, err);
  });
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
      int refused = SharedFileRefusal(f);
      f.reset();  // closes the memfs handle, which may touch errno
      return refused == 0 ? 0 : FailErrno(refused);
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
  int refused = SharedFileRefusal(f);
  f.reset();  // closes the memfs handle, which may touch errno
  *out = refused == 0 ? 0 : FailErrno(refused);
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
  return OnFd(fd, out, [&](StoreRef&, OpenFile& f, int& err) {
    return AcceptUnlessPath(f, err);  // the data is already in the store
  });
}

int dlckpt_ic_dup(int fd, int* out) {
  return OnFd(fd, out, [&](StoreRef&, OpenFile& f, int& err) {
    return ShareDup(Sys(SYS_fcntl, fd, F_DUPFD, 0), f, err);
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
    if (f != nullptr && !Live(ref, *f)) {
      err = EBADF;
    } else if (f != nullptr && oldfd == newfd) {
      if (is_dup2) {
        r = newfd;
      } else {
        err = EINVAL;
      }
    } else {
      long n = is_dup2 ? Sys(SYS_dup2, oldfd, newfd) : Sys(SYS_dup3, oldfd, newfd, flags);
      std::shared_ptr<OpenFile> replaced;
      if (n < 0) {
        err = errno;
      } else if (f == nullptr) {
        // A real descriptor onto a memfs descriptor's number.
        if (oldfd != newfd) Fds().Take(newfd);
        r = static_cast<int>(n);
      } else if (Fds().Set(newfd, f, &replaced)) {
        r = newfd;
      } else {
        Sys(SYS_close, newfd);
        err = EMFILE;
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
      case F_DUPFD_CLOEXEC:
        return ShareDup(Sys(SYS_fcntl, fd, cmd, reinterpret_cast<long>(arg)), f, err);
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
        return AcceptUnlessPath(f, err);  // nobody else can hold a lock
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
  (void)op;
  return OnFd(fd, out, [&](StoreRef&, OpenFile& f, int& err) {
    return AcceptUnlessPath(f, err);  // the store belongs to this process alone
  });
}

// lockf as glibc's (F_SETLK/F_GETLK of a write lock) on a memfs handle:
// F_LOCK/F_TLOCK need a descriptor open for writing (EBADF), F_ULOCK and
// F_TEST succeed (nobody else can hold a lock: the store has one owner
// process), another cmd is EINVAL.
int dlckpt_ic_lockf(int fd, int cmd, int* out) {
  return OnFd(fd, out, [&](StoreRef&, OpenFile& f, int& err) {
    if (AcceptUnlessPath(f, err) != 0) return -1;
    switch (cmd) {
      case F_LOCK:
      case F_TLOCK:
        if ((f.status_flags.load() & O_ACCMODE) == O_RDONLY) {
          err = EBADF;
          return -1;
        }
        return 0;
      case F_ULOCK:
      case F_TEST:
        return 0;
      default:
        err = EINVAL;
        return -1;
    }
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
  (void)mode;  // memfs keeps the creation mode; changes are accepted and not recorded
  return OnFd(fd, out, [&](StoreRef&, OpenFile& f, int& err) {
    return AcceptUnlessPath(f, err);
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

}  // extern "C"

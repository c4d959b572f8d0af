// stdio.cc — FILE streams on memfs files.
//
// A memfs stream is an fopencookie() stream whose callbacks read, write,
// seek and close the memfs descriptor, and whose _fileno is that descriptor,
// so fileno() users (libstdc++'s filebuf writes with write()/writev() on it)
// reach the same open file. Everything else — fprintf, fwrite, fgets,
// fscanf, fseek/ftell, setvbuf, fflush, feof/ferror — is glibc's own code
// working on the cookie stream. fclose closes the descriptor exactly once
// (through the close callback). Wide-oriented I/O is not supported on
// cookie streams.
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <unordered_set>
#include <vector>

#include "core.h"
#include "core_c.h"

namespace dlckpt::intercept::internal {

std::mutex& StreamRegistryMutex() {
  static std::mutex* const mu = new std::mutex();
  return *mu;
}

namespace {

std::unordered_set<FILE*>& Streams() {
  static auto* const set = new std::unordered_set<FILE*>();
  return *set;
}

struct Cookie {
  int fd;
  FILE* fp;
};

ssize_t CookieRead(void* c, char* buf, size_t len) {
  return FdRead(static_cast<Cookie*>(c)->fd, buf, len);
}

// Returns the count written; a short count (0 on total failure, errno set)
// makes glibc set the stream's error flag.
ssize_t CookieWrite(void* c, const char* buf, size_t len) {
  int fd = static_cast<Cookie*>(c)->fd;
  size_t done = 0;
  while (done < len) {
    ssize_t n = FdWrite(fd, buf + done, len - done);
    if (n < 0) break;
    if (n == 0) {
      errno = ENOSPC;
      break;
    }
    done += static_cast<size_t>(n);
  }
  return static_cast<ssize_t>(done);
}

int CookieSeek(void* c, off64_t* pos, int whence) {
  off_t r = FdSeek(static_cast<Cookie*>(c)->fd, *pos, whence);
  if (r < 0) return -1;
  *pos = r;
  return 0;
}

int CookieClose(void* c) {
  auto* cookie = static_cast<Cookie*>(c);
  int r = FdClose(cookie->fd);
  int err = errno;
  {
    std::lock_guard<std::mutex> lock(StreamRegistryMutex());
    Streams().erase(cookie->fp);
  }
  delete cookie;
  errno = err;
  return r;
}

// fopen mode -> open flags. False on a malformed mode.
bool ParseMode(const char* mode, int* flags) {
  if (mode == nullptr) return false;
  int f;
  switch (mode[0]) {
    case 'r': f = O_RDONLY; break;
    case 'w': f = O_WRONLY | O_CREAT | O_TRUNC; break;
    case 'a': f = O_WRONLY | O_CREAT | O_APPEND; break;
    default: return false;
  }
  for (const char* c = mode + 1; *c != '\0' && *c != ','; ++c) {
    switch (*c) {
      case '+': f = (f & ~O_ACCMODE) | O_RDWR; break;
      case 'x': f |= O_EXCL; break;
      case 'e': f |= O_CLOEXEC; break;
      default: break;  // 'b', 't', 'm', 'c'
    }
  }
  *flags = f;
  return true;
}

// Wraps memfs descriptor `fd` in a stream; nullptr (fd untouched) on failure.
FILE* MakeStream(int fd, int flags) {
  auto* cookie = new (std::nothrow) Cookie{fd, nullptr};
  if (cookie == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  // fopencookie understands only "r", "w", "a" and a '+'.
  const char* mode = "r";
  switch (flags & O_ACCMODE) {
    case O_WRONLY: mode = (flags & O_APPEND) ? "a" : "w"; break;
    case O_RDWR: mode = (flags & O_APPEND) ? "a+" : "r+"; break;
    default: break;
  }
  cookie_io_functions_t io{CookieRead, CookieWrite, CookieSeek, CookieClose};
  FILE* fp = fopencookie(cookie, mode, io);
  if (fp == nullptr) {
    delete cookie;
    return nullptr;
  }
  fp->_fileno = fd;
  cookie->fp = fp;
  std::lock_guard<std::mutex> lock(StreamRegistryMutex());
  Streams().insert(fp);
  return fp;
}

bool IsOurStream(FILE* fp) {
  std::lock_guard<std::mutex> lock(StreamRegistryMutex());
  return Streams().count(fp) != 0;
}

// Opens memfs `path` as a stream for fopen mode flags; with `at_fd` >= 0 the
// stream's descriptor gets that number (as freopen keeps its number).
FILE* OpenStream(const std::string& path, int flags, int at_fd) {
  int fd = OpenPath(path, flags, 0666);
  if (fd < 0) return nullptr;
  if (at_fd >= 0 && at_fd != fd) {
    int moved;
    if (dlckpt_ic_dup3(fd, at_fd, flags & O_CLOEXEC, 0, &moved) != 1 || moved < 0) {
      int err = errno;
      FdClose(fd);
      errno = err;
      return nullptr;
    }
    FdClose(fd);
    fd = at_fd;
  }
  // "a" starts at the end (as glibc's fopen does); "a+" reads from the start.
  if ((flags & O_APPEND) && (flags & O_ACCMODE) == O_WRONLY) FdSeek(fd, 0, SEEK_END);
  FILE* fp = MakeStream(fd, flags);
  if (fp == nullptr) {
    int err = errno;
    FdClose(fd);
    errno = err;
  }
  return fp;
}

}  // namespace

int StreamFlushAll() {
  std::vector<FILE*> list;
  {
    std::lock_guard<std::mutex> lock(StreamRegistryMutex());
    list.assign(Streams().begin(), Streams().end());
  }
  int rc = 0;
  for (FILE* fp : list) {
    if (IsOurStream(fp) && fflush(fp) != 0) rc = -1;
  }
  return rc;
}

}  // namespace dlckpt::intercept::internal

using namespace dlckpt::intercept::internal;  // NOLINT(google-build-using-namespace)

extern "C" {

int dlckpt_ic_fopen(const char* path, const char* mode, FILE** out) {
  try {
    std::string p;
    int err = 0;
    Route r = ResolveAppPath(AT_FDCWD, path, &p, &err);
    if (r == Route::kOs) return 0;
    int flags = 0;
    if (r == Route::kError) {
      errno = err;
      *out = nullptr;
    } else if (!ParseMode(mode, &flags)) {
      errno = EINVAL;
      *out = nullptr;
    } else {
      *out = OpenStream(p, flags, -1);
    }
  } catch (...) {
    errno = ENOMEM;
    *out = nullptr;
  }
  return 1;
}

int dlckpt_ic_fdopen(int fd, const char* mode, FILE** out) {
  if (Disabled() || InInternal() || !Fds().Contains(fd)) return 0;
  int flags = 0;
  if (!ParseMode(mode, &flags)) {
    errno = EINVAL;
    *out = nullptr;
    return 1;
  }
  int fd_flags;
  {
    InternalScope in;
    StoreRef ref;
    std::shared_ptr<OpenFile> f = FdFile(fd, &ref);
    if (f == nullptr) {
      if (!Fds().Contains(fd)) return 0;  // closed meanwhile: not ours
      *out = nullptr;
      return 1;
    }
    fd_flags = f->status_flags.load();
  }
  int want = flags & O_ACCMODE;
  int have = fd_flags & O_ACCMODE;
  if ((fd_flags & O_PATH) || (want != O_WRONLY && have == O_WRONLY) ||
      (want != O_RDONLY && have == O_RDONLY)) {
    errno = (fd_flags & O_PATH) ? EBADF : EINVAL;
    *out = nullptr;
    return 1;
  }
  if ((flags & O_APPEND) && !(fd_flags & O_APPEND) && FdSetAppend(fd) != 0) {
    *out = nullptr;
    return 1;
  }
  *out = MakeStream(fd, flags);
  return 1;
}

int dlckpt_ic_freopen(const char* path, const char* mode, FILE* stream, FILE** out) {
  if (Disabled() || InInternal() || stream == nullptr) return 0;
  try {
    bool ours = IsOurStream(stream);
    std::string p;
    int err = 0;
    Route r = Route::kOs;
    if (path != nullptr) {
      InternalScope in;
      r = Resolve(AT_FDCWD, path, &p, &err);
    } else if (ours) {
      InternalScope in;
      StoreRef ref;
      std::shared_ptr<OpenFile> f = FdFile(fileno(stream), &ref);
      if (f != nullptr) {
        p = f->path;
        r = Route::kMemfs;
      } else {
        r = Route::kError;
        err = EBADF;
      }
    }
    if (r == Route::kOs && !ours) return 0;  // glibc's freopen, untouched
    int flags = 0;
    if (r != Route::kError && !ParseMode(mode, &flags)) {
      r = Route::kError;
      err = EINVAL;
    }
    // As freopen: the old stream is closed whatever happens next; a real
    // stream's descriptor number is kept for the new file.
    int old_fd = ours ? -1 : fileno(stream);
    FILE** global = stream == stdin ? &stdin
                    : stream == stdout ? &stdout
                    : stream == stderr ? &stderr
                                       : nullptr;
    fclose(stream);
    FILE* nf = nullptr;
    if (r == Route::kError) {
      errno = err;
    } else if (r == Route::kMemfs) {
      nf = OpenStream(p, flags, old_fd);
    } else {
      nf = fopen(path, mode);  // a disk file, through the usual entry point
    }
    if (nf != nullptr && global != nullptr) *global = nf;
    *out = nf;
  } catch (...) {
    errno = ENOMEM;
    *out = nullptr;
  }
  return 1;
}

}  // extern "C"

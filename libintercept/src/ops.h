// ops.h — the common shape of libintercept's entry operations (internal).
// OnFd: a call on a descriptor; OnPath: a call on a path. Both implement the
// core_c.h protocol (0: not ours; 1: handled, result in *out, errno set).
#ifndef DLCKPT_LIBINTERCEPT_OPS_H_
#define DLCKPT_LIBINTERCEPT_OPS_H_

#include <cerrno>
#include <memory>
#include <string>

#include "core.h"

namespace dlckpt::intercept::internal {

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

// The end of a path operation, once its store reference is dropped: stores
// the result, sets errno (`err`, EIO if unknown) on failure. Returns 1
// (handled).
inline int FinishPath(int r, int err, int* out) {
  *out = r;
  if (r < 0) errno = err != 0 ? err : EIO;
  return 1;
}

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
  return FinishPath(r, err, out);
}

using Kind = OpenFile::Kind;

// fstat of an open memfs file (fd_ops.cc).
int FstatOp(StoreRef& ref, OpenFile& f, struct stat* st, int& err);

}  // namespace dlckpt::intercept::internal

#endif  // DLCKPT_LIBINTERCEPT_OPS_H_

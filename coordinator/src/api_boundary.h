// The C boundary of the application API (dlckpt/dlckpt.h): a function
// returning Status becomes 0, or -1 with errno and dlckpt_last_error() set.
// Nothing thrown crosses it: std::bad_alloc becomes ENOMEM, anything else EIO.
#ifndef DLCKPT_COORDINATOR_API_BOUNDARY_H_
#define DLCKPT_COORDINATOR_API_BOUNDARY_H_

#include <cerrno>
#include <new>

#include "dlckpt/base/status.h"

namespace dlckpt::api {

inline int Boundary(const Status& s) noexcept { return s.ok() ? 0 : SetErrno(s); }

// Runs `fn` (returning Status) and converts its outcome as above.
template <class Fn>
int Guarded(Fn&& fn) noexcept {
  try {
    return Boundary(fn());
  } catch (const std::bad_alloc&) {
    return SetErrno(Status::Error(ENOMEM, "out of memory"));
  } catch (...) {
    return SetErrno(Status::Error(EIO, "unexpected exception"));
  }
}

}  // namespace dlckpt::api

#endif  // DLCKPT_COORDINATOR_API_BOUNDARY_H_

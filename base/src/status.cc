#include "dlckpt/base/status.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace dlckpt {

namespace {
const std::string& EmptyString() {
  static const std::string* const kEmpty = new std::string();
  return *kEmpty;
}
thread_local std::string tls_last_error;
}  // namespace

Status Status::Error(int code, std::string message) {
  Status s;
  s.state_ = std::make_unique<State>(State{code > 0 ? code : EIO, std::move(message)});
  return s;
}

Status Status::FromErrno(int code, std::string_view context) {
  std::string msg(context);
  msg += ": ";
  msg += std::strerror(code > 0 ? code : EIO);
  return Error(code, std::move(msg));
}

const std::string& Status::message() const noexcept {
  return state_ ? state_->msg : EmptyString();
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  const char* name = strerrorname_np(state_->code);
  std::string out = state_->msg;
  out += " [";
  out += name ? name : std::to_string(state_->code);
  out += "]";
  return out;
}

Status Status::Prefixed(std::string_view prefix) const {
  if (ok()) return Status();
  std::string msg(prefix);
  msg += ": ";
  msg += state_->msg;
  return Error(state_->code, std::move(msg));
}

void ResultAccessAbort(const Status& status) {
  std::fprintf(stderr, "dlckpt: value of an error Result accessed: %s\n",
               status.ToString().c_str());
  std::abort();
}

int SetErrno(const Status& s) noexcept {
  try {
    tls_last_error = s.ToString();
  } catch (...) {
    tls_last_error.clear();
  }
  errno = s.ok() ? 0 : s.code();
  return -1;
}

const char* LastErrorMessage() noexcept { return tls_last_error.c_str(); }

}  // namespace dlckpt

// The C side of LastErrorMessage, declared by the C APIs (dlckpt/dlckpt.h,
// dlckpt/memfs/store.h). Defined beside SetErrno so that every library that
// converts errors at a C boundary carries it.
extern "C" const char* dlckpt_last_error(void) { return dlckpt::LastErrorMessage(); }

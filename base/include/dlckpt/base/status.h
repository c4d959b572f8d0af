// dlckpt/base/status.h — the one error type of dlckpt's C++ code.
//
// A Status is OK or an error made of an errno value and a human message that
// names what failed (path, store, rank). Result<T> is a T or an error Status.
// Errors become errno and -1 exactly once, at the C/POSIX boundary
// (dlckpt::ToErrno / SetErrno). Both types are cheap to move; an OK Status
// holds no allocation. Not thread-safe per object (values, not shared state).
#ifndef DLCKPT_BASE_STATUS_H_
#define DLCKPT_BASE_STATUS_H_

#include <cerrno>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace dlckpt {

class [[nodiscard]] Status final {
 public:
  Status() noexcept = default;  // OK
  Status(const Status& other) : state_(other.state_ ? new State(*other.state_) : nullptr) {}
  Status& operator=(const Status& other) {
    if (this != &other) state_.reset(other.state_ ? new State(*other.state_) : nullptr);
    return *this;
  }
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status OK() { return Status(); }
  // An error with errno value `code` (must be > 0) and a message.
  static Status Error(int code, std::string message);
  // `context` names the object (path, store); the message adds strerror(code).
  static Status FromErrno(int code, std::string_view context);

  static Status NotFound(std::string msg) { return Error(ENOENT, std::move(msg)); }
  static Status InvalidArgument(std::string msg) { return Error(EINVAL, std::move(msg)); }
  static Status NoSpace(std::string msg) { return Error(ENOSPC, std::move(msg)); }
  static Status Corruption(std::string msg) { return Error(EBADMSG, std::move(msg)); }
  static Status Busy(std::string msg) { return Error(EBUSY, std::move(msg)); }
  static Status Unsupported(std::string msg) { return Error(ENOTSUP, std::move(msg)); }
  static Status IOError(std::string msg) { return Error(EIO, std::move(msg)); }
  static Status Timeout(std::string msg) { return Error(ETIMEDOUT, std::move(msg)); }

  bool ok() const noexcept { return state_ == nullptr; }
  // errno value; 0 when OK.
  int code() const noexcept { return state_ ? state_->code : 0; }
  // The message without the errno name; empty when OK.
  const std::string& message() const noexcept;
  // "OK" or "<message> [<errno name>]" for humans.
  std::string ToString() const;

  // Returns a copy whose message is "<prefix>: <message>"; OK stays OK.
  Status Prefixed(std::string_view prefix) const;

 private:
  struct State {
    int code;
    std::string msg;
  };
  std::unique_ptr<State> state_;
};

// A value of type T or an error. Accessing the value of an error aborts (a
// programming error, never a runtime one).
template <class T>
class [[nodiscard]] Result final {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (status_.ok()) status_ = Status::Error(EINVAL, "Result constructed from OK status");
  }

  bool ok() const noexcept { return value_.has_value(); }
  const Status& status() const noexcept { return status_; }
  Status take_status() { return std::move(status_); }

  T& value() & { Check(); return *value_; }
  const T& value() const& { Check(); return *value_; }
  T&& value() && { Check(); return std::move(*value_); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void Check() const;
  std::optional<T> value_;
  Status status_;
};

[[noreturn]] void ResultAccessAbort(const Status& status);

template <class T>
void Result<T>::Check() const {
  if (!value_) ResultAccessAbort(status_);
}

// errno value of a status (0 for OK).
inline int ToErrno(const Status& s) noexcept { return s.code(); }

// The boundary conversion: stores the message as this thread's last error
// message (see LastErrorMessage) and sets errno. Returns -1.
int SetErrno(const Status& s) noexcept;
// The message of the last error converted by SetErrno on this thread.
const char* LastErrorMessage() noexcept;

}  // namespace dlckpt

// Propagates an error Status from an expression yielding Status.
#define DLCKPT_RETURN_IF_ERROR(expr)               \
  do {                                             \
    ::dlckpt::Status dlckpt_status_ = (expr);      \
    if (!dlckpt_status_.ok()) return dlckpt_status_; \
  } while (0)

#define DLCKPT_CONCAT_INNER_(a, b) a##b
#define DLCKPT_CONCAT_(a, b) DLCKPT_CONCAT_INNER_(a, b)
// DLCKPT_ASSIGN_OR_RETURN(auto x, ResultExpr()): binds the value or returns the error.
#define DLCKPT_ASSIGN_OR_RETURN(lhs, expr) \
  DLCKPT_ASSIGN_OR_RETURN_IMPL_(DLCKPT_CONCAT_(dlckpt_result_, __LINE__), lhs, expr)
#define DLCKPT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.take_status();            \
  lhs = std::move(tmp).value()

#endif  // DLCKPT_BASE_STATUS_H_

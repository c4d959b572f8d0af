// dlckpt/base/events.h — the job's event log, for the supervisor and for tests.
//
// Processes of a job (codec service, application ranks) append one line per
// event to the file named by $DLCKPT_EVENTS: "<monotonic ns> <source> <event>
// [args]". Each line is written with a single O_APPEND write, so lines from
// concurrent writers never interleave. dlckpt-run follows the file to report
// phases and to inject failures at precise points (e.g. "during encode").
// Emitting is best effort: with $DLCKPT_EVENTS unset or unwritable it does
// nothing, and it never fails the caller. Thread-safe.
#ifndef DLCKPT_BASE_EVENTS_H_
#define DLCKPT_BASE_EVENTS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dlckpt::events {

// Appends "<now> <source> <what>" to $DLCKPT_EVENTS.
void Emit(std::string_view source, std::string_view what) noexcept;

struct Event {
  int64_t ns = 0;  // CLOCK_MONOTONIC
  std::string source;
  std::string name;
  std::vector<std::string> args;
};

// Reads events appended since the last call (whole lines only).
class Follower {
 public:
  explicit Follower(std::string path) : path_(std::move(path)) {}
  std::vector<Event> Poll();

 private:
  std::string path_;
  uint64_t offset_ = 0;
  std::string partial_;
};

}  // namespace dlckpt::events

#endif  // DLCKPT_BASE_EVENTS_H_

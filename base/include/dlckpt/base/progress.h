// dlckpt/base/progress.h — progress of long work (an encode, a rebuild, a
// drain, a verification): bytes done, rate and time left.
//
// Nothing is printed for the first `after` seconds, so short work stays
// silent. Then, on a terminal, one line rewritten in place ("\r") at most
// every 0.25 s; otherwise (a log file, a pipe, mpiexec's forwarding) one
// whole line per `every` seconds. Done() ends with a last line when anything
// was printed. Example:
//   dlckpt: draining epoch 6: 120.0 of 512.0 MiB, 85.3 MiB/s, 4.6 s left
//
// Thread safety: one Progress is used by one thread at a time. It never
// fails: a write error to `out` is ignored.
#ifndef DLCKPT_BASE_PROGRESS_H_
#define DLCKPT_BASE_PROGRESS_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace dlckpt {

class Progress {
 public:
  struct Options {
    double after = 2.0;   // seconds of silence first
    double every = 2.0;   // seconds between lines when `out` is not a terminal
    int tty = -1;         // 1 / 0: force terminal / line mode; -1: isatty(out)
    // Seconds; default: the monotonic clock. A reporter relaying another
    // process's progress returns that process's elapsed time instead.
    std::function<double()> now;
  };
  // `what` starts every line ("dlckpt: draining epoch 6"); `total` bytes, 0 if unknown.
  Progress(std::string what, uint64_t total, std::FILE* out = stderr);
  Progress(std::string what, uint64_t total, std::FILE* out, Options options);
  ~Progress();  // Done()
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void Update(uint64_t done);
  void Done();
  // Done, with the final count (e.g. the total once the work succeeded).
  void Done(uint64_t done);
  // The line that Update would print now, for tests and custom sinks.
  std::string Line(uint64_t done, double elapsed) const;
  bool printed() const { return printed_; }

 private:
  std::string what_;
  uint64_t total_;
  std::FILE* out_;
  Options o_;
  bool tty_ = false;
  double start_ = 0, last_ = -1;
  uint64_t done_ = 0;
  bool printed_ = false, finished_ = false;
};

}  // namespace dlckpt

#endif  // DLCKPT_BASE_PROGRESS_H_

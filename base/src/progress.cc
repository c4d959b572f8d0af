// progress.cc — see dlckpt/base/progress.h.
#include "dlckpt/base/progress.h"

#include <unistd.h>

#include <chrono>
#include <cmath>

namespace dlckpt {
namespace {

double MonotonicSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string Mib(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f MiB", bytes / (1024.0 * 1024.0));
  return b;
}

}  // namespace

Progress::Progress(std::string what, uint64_t total, std::FILE* out)
    : Progress(std::move(what), total, out, Options{}) {}

Progress::Progress(std::string what, uint64_t total, std::FILE* out, Options options)
    : what_(std::move(what)), total_(total), out_(out), o_(std::move(options)) {
  if (!o_.now) o_.now = MonotonicSeconds;
  tty_ = o_.tty >= 0 ? o_.tty == 1 : (out_ != nullptr && isatty(fileno(out_)) != 0);
  start_ = o_.now();
}

Progress::~Progress() { Done(); }

std::string Progress::Line(uint64_t done, double elapsed) const {
  std::string line = what_ + ": " + Mib(static_cast<double>(done));
  if (total_ > 0) line += " of " + Mib(static_cast<double>(total_));
  if (elapsed > 0) {
    double rate = static_cast<double>(done) / elapsed;
    line += ", " + Mib(rate) + "/s";
    if (total_ > 0 && rate > 0 && done < total_) {
      char b[48];
      std::snprintf(b, sizeof b, ", %.1f s left", static_cast<double>(total_ - done) / rate);
      line += b;
    }
  }
  return line;
}

void Progress::Update(uint64_t done) {
  done_ = done;
  if (out_ == nullptr || finished_) return;
  double now = o_.now();
  double elapsed = now - start_;
  if (elapsed < o_.after) return;
  double gap = tty_ ? 0.25 : o_.every;
  if (last_ >= 0 && now - last_ < gap) return;
  last_ = now;
  std::string line = Line(done, elapsed);
  if (tty_) {
    std::fprintf(out_, "\r%s\033[K", line.c_str());
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
  printed_ = true;
}

void Progress::Done(uint64_t done) {
  done_ = done;
  Done();
}

void Progress::Done() {
  if (finished_) return;
  finished_ = true;
  if (!printed_ || out_ == nullptr) return;
  double elapsed = o_.now() - start_;
  std::string line = Line(done_, elapsed) + ", done in " + std::to_string(static_cast<int>(std::lround(elapsed))) + " s";
  std::fprintf(out_, tty_ ? "\r%s\033[K\n" : "%s\n", line.c_str());
  std::fflush(out_);
}

}  // namespace dlckpt

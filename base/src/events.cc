#include "dlckpt/base/events.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>

namespace dlckpt::events {

void Emit(std::string_view source, std::string_view what) noexcept {
  const char* path = std::getenv("DLCKPT_EVENTS");
  if (path == nullptr || *path == '\0') return;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  char line[512];
  int n = snprintf(line, sizeof line, "%lld %.*s %.*s\n",
                   static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec,
                   static_cast<int>(source.size()), source.data(), static_cast<int>(what.size()),
                   what.data());
  if (n <= 0) return;
  if (n >= static_cast<int>(sizeof line)) {
    n = sizeof line - 1;
    line[n - 1] = '\n';
  }
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return;
  ssize_t w = write(fd, line, static_cast<size_t>(n));
  (void)w;
  close(fd);
}

std::vector<Event> Follower::Poll() {
  std::vector<Event> out;
  int fd = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[65536];
  for (;;) {
    ssize_t n = pread(fd, buf, sizeof buf, static_cast<off_t>(offset_));
    if (n <= 0) break;
    offset_ += static_cast<uint64_t>(n);
    partial_.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  size_t start = 0;
  for (;;) {
    size_t nl = partial_.find('\n', start);
    if (nl == std::string::npos) break;
    std::istringstream is(partial_.substr(start, nl - start));
    Event e;
    if (is >> e.ns >> e.source >> e.name) {
      std::string a;
      while (is >> a) e.args.push_back(a);
      out.push_back(std::move(e));
    }
    start = nl + 1;
  }
  partial_.erase(0, start);
  return out;
}

}  // namespace dlckpt::events

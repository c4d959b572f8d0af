// Checkpoint writes through libintercept against the same writes into a file
// on /dev/shm (tmpfs), in one run. Each iteration writes one 64 MiB file in
// 1 MiB records (open/truncate, write, close), as an application writing its
// checkpoint would, with fwrite, std::ofstream and write(); fwrite is also
// timed with 4 KiB records. The best of --reps repetitions is reported. Ends
// with METRIC lines: fwrite of 1 MiB records into memfs as a multiple of the
// same into /dev/shm, and the cost the wrappers add to a call that is not for
// memfs.
//
//   build/bin/dlckpt-bench-intercept [--reps N]          (static wrappers)
//   LD_PRELOAD=build/lib/libdlckpt_preload.so build/bin/dlckpt-bench-intercept-plain
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "dlckpt/base/cli.h"
#include "dlckpt/base/names.h"
#include "dlckpt/base/version.h"

namespace {

constexpr size_t kFileBytes = 64 << 20;

double Now() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

// Best throughput in GB/s of `reps` runs of `write_file(path)`.
double Best(int reps, const std::string& path, const std::function<bool(const std::string&)>& write_file) {
  double best = 0;
  for (int i = 0; i < reps; ++i) {
    double t0 = Now();
    if (!write_file(path)) {
      std::fprintf(stderr, "dlckpt-bench-intercept: writing %s failed\n", path.c_str());
      std::exit(1);
    }
    double dt = Now() - t0;
    best = std::max(best, kFileBytes / dt / 1e9);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (dlckpt_version_requested(argc, argv)) return 0;
  int reps = 5;
  CLI::App app("Checkpoint writes through libintercept's wrappers against /dev/shm; ends with METRIC lines.",
               "dlckpt-bench-intercept");
  dlckpt::cli::SetUsage(app, "usage: dlckpt-bench-intercept [--reps N]");
  app.add_option("--reps", reps, "repetitions; the best is reported (5)")->option_text("N")->check(CLI::PositiveNumber);
  if (auto rc = dlckpt::cli::ParseMain(app, argc, argv)) return *rc;
  // A store of our own (removed at the end), unless the caller chose one.
  std::string store = *dlckpt::StoreName("bench" + std::to_string(getpid()), "n0", 0);
  setenv("DLCKPT_STORE", store.c_str(), 0);
  setenv("DLCKPT_STORE_CAPACITY", "256M", 0);
  unsetenv("DLCKPT_PREFIX");
  std::string memfs = "/dlckpt/bench/ckpt";
  std::string shm = "/dev/shm/dlckpt-bench-intercept." + std::to_string(getpid());

  std::vector<char> rec(1 << 20);
  for (size_t i = 0; i < rec.size(); ++i) rec[i] = static_cast<char>(i * 131 + 7);
  auto fwrite_rec = [&](size_t rsz) {
    return [&, rsz](const std::string& path) {
      FILE* f = std::fopen(path.c_str(), "w");
      if (f == nullptr) return false;
      for (size_t off = 0; off < kFileBytes; off += rsz) {
        if (std::fwrite(rec.data(), 1, rsz, f) != rsz) return false;
      }
      return std::fclose(f) == 0;
    };
  };
  auto ofstream_1m = [&](const std::string& path) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    for (size_t off = 0; off < kFileBytes; off += rec.size()) {
      out.write(rec.data(), static_cast<std::streamsize>(rec.size()));
    }
    out.close();
    return !out.fail();
  };
  auto write_1m = [&](const std::string& path) {
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return false;
    for (size_t off = 0; off < kFileBytes; off += rec.size()) {
      if (write(fd, rec.data(), rec.size()) != static_cast<ssize_t>(rec.size())) return false;
    }
    return close(fd) == 0;
  };

  struct Row {
    const char* what;
    double memfs, shm;
  } rows[] = {
      {"fwrite 1 MiB", Best(reps, memfs, fwrite_rec(1 << 20)), Best(reps, shm, fwrite_rec(1 << 20))},
      {"ofstream 1 MiB", Best(reps, memfs, ofstream_1m), Best(reps, shm, ofstream_1m)},
      {"write() 1 MiB", Best(reps, memfs, write_1m), Best(reps, shm, write_1m)},
      {"fwrite 4 KiB", Best(reps, memfs, fwrite_rec(4096)), Best(reps, shm, fwrite_rec(4096))},
  };
  unlink(memfs.c_str());
  unlink(shm.c_str());

  // What the wrappers add to a call that is not for memfs: lseek on /dev/null
  // through the (wrapped or interposed) libc call vs the raw system call.
  int null_fd = open("/dev/null", O_RDONLY);
  constexpr int kCalls = 200000;
  double wrapped = 1e9, raw = 1e9;
  for (int r = 0; r < reps; ++r) {
    double t0 = Now();
    for (int i = 0; i < kCalls; ++i) (void)lseek(null_fd, 0, SEEK_SET);
    double t1 = Now();
    for (int i = 0; i < kCalls; ++i) (void)syscall(SYS_lseek, null_fd, 0, SEEK_SET);
    double t2 = Now();
    wrapped = std::min(wrapped, (t1 - t0) / kCalls * 1e9);
    raw = std::min(raw, (t2 - t1) / kCalls * 1e9);
  }
  close(null_fd);

  std::printf("%-16s %12s %12s %8s\n", "64 MiB file", "memfs GB/s", "/dev/shm GB/s", "ratio");
  for (const auto& r : rows) {
    std::printf("%-16s %12.2f %12.2f %8.2f\n", r.what, r.memfs, r.shm, r.memfs / r.shm);
  }
  std::printf("lseek on /dev/null: %.1f ns through libc+dlckpt, %.1f ns raw system call\n", wrapped, raw);
  shm_unlink(store.c_str());  // the store detaches into the unlinked object at exit
  std::printf("METRIC intercept_fwrite_1mib_vs_devshm %.2f x target >= 2\n", rows[0].memfs / rows[0].shm);
  std::printf("METRIC intercept_passthrough_overhead_ns %.1f ns target <= 50\n", std::max(0.0, wrapped - raw));
  return 0;
}

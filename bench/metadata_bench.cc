// dlckpt-bench-metadata DIR [--items N] — mdtest-like metadata rates of one
// process in directory DIR (created if missing, emptied of what it made):
// N directories created, stat'ed and removed, then N empty files created
// (open O_CREAT + close), stat'ed and removed. Plain libc calls, nothing of
// dlckpt linked in: run it under LD_PRELOAD=libdlckpt_preload.so with DIR
// under /dlckpt, and as it is on tmpfs or a dlckpt-fuse mount, to compare
// (bench/metadata_bench.sh does all three). Prints one line per phase and
//   RESULT total_ops_per_s <ops/s>
// over all 6N operations. Exit 1 (naming the call, path and errno) if any
// call fails.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dlckpt/base/cli.h"
#include "dlckpt/base/version.h"

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

[[noreturn]] void Die(const char* call, const std::string& path) {
  std::fprintf(stderr, "dlckpt-bench-metadata: %s %s: %s\n", call, path.c_str(),
               std::strerror(errno));
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  if (dlckpt_version_requested(argc, argv)) return 0;
  std::string dir;
  long items = 1000;
  CLI::App app("mdtest-like creates, stats and removes of N directories and N empty files in DIR by one "
               "process; prints ops/s per phase and 'RESULT total_ops_per_s X'.", "dlckpt-bench-metadata");
  app.add_option("DIR", dir, "the directory to work in (created if missing)")->required();
  app.add_option("--items", items, "directories and files each (1000)")->option_text("N")->check(CLI::PositiveNumber);
  dlckpt::cli::SetUsage(app, "usage: dlckpt-bench-metadata DIR [--items N]");
  if (auto rc = dlckpt::cli::ParseMain(app, argc, argv)) return *rc;
  // Not timed: the directory (and, under the preload, the store) first.
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) Die("mkdir", dir);
  std::vector<std::string> dirs, files;
  for (long i = 0; i < items; ++i) {
    dirs.push_back(dir + "/dir." + std::to_string(i));
    files.push_back(dir + "/file." + std::to_string(i));
  }
  struct Phase {
    const char* name;
    double seconds;
  };
  std::vector<Phase> phases;
  // Times one phase: `op` on each of `paths` in turn.
  auto run = [&](const char* name, const std::vector<std::string>& paths, auto&& op) {
    double t0 = Now();
    for (const auto& p : paths) op(p);
    phases.push_back({name, Now() - t0});
  };
  struct stat st;
  run("dir_create", dirs, [&](const std::string& p) {
    if (mkdir(p.c_str(), 0755) != 0) Die("mkdir", p);
  });
  run("dir_stat", dirs, [&](const std::string& p) {
    if (stat(p.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) Die("stat", p);
  });
  run("dir_remove", dirs, [&](const std::string& p) {
    if (rmdir(p.c_str()) != 0) Die("rmdir", p);
  });
  run("file_create", files, [&](const std::string& p) {
    int fd = open(p.c_str(), O_CREAT | O_WRONLY | O_EXCL, 0644);
    if (fd < 0) Die("open", p);
    if (close(fd) != 0) Die("close", p);
  });
  run("file_stat", files, [&](const std::string& p) {
    if (stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) Die("stat", p);
  });
  run("file_remove", files, [&](const std::string& p) {
    if (unlink(p.c_str()) != 0) Die("unlink", p);
  });
  double total = 0;
  for (const auto& ph : phases) {
    total += ph.seconds;
    std::printf("%-12s %10.0f ops/s\n", ph.name, static_cast<double>(items) / ph.seconds);
  }
  std::printf("RESULT total_ops_per_s %.0f\n", 6.0 * static_cast<double>(items) / total);
  return 0;
}

// dlckpt-run: the supervisor. Parses options and runs the Supervisor.
#include <signal.h>

#include <cstdio>

#include "run_options.h"
#include "supervisor.h"

int main(int argc, char** argv) {
  bool help = false;
  auto opts = dlckpt::run::ParseOptions(argc, argv, &help);
  if (help) {
    std::fputs(dlckpt::run::kUsage, stdout);
    return 0;
  }
  if (!opts.ok()) {
    std::fprintf(stderr, "dlckpt-run: %s\n(try dlckpt-run --help)\n", opts.status().message().c_str());
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  dlckpt::run::Supervisor sup(std::move(*opts));
  return sup.Run();
}

// dlckpt-run: the supervisor. Parses and checks options, then runs the
// Supervisor; its exit status is the one the Supervisor's summary names.
#include <signal.h>

#include <cstdio>

#include "run_dir.h"
#include "run_options.h"
#include "supervisor.h"
#include "dlckpt/base/version.h"

int main(int argc, char** argv) {
  if (dlckpt_version_requested(argc, argv)) return 0;
  bool help = false;
  auto opts = dlckpt::run::ParseOptions(argc, argv, &help);
  if (help) {
    std::fputs(dlckpt::run::Usage().c_str(), stdout);
    return 0;
  }
  if (!opts.ok()) {
    std::fprintf(stderr, "dlckpt-run: %s\n(try dlckpt-run --help)\n", opts.status().message().c_str());
    return 2;
  }
  // dlckpt-run --halt JOB: 0 once delivered, 1 when it could not be.
  if (!opts->halt.empty()) {
    auto said = dlckpt::run::HaltJob(opts->halt, opts->run_dir);
    if (!said.ok()) {
      std::fprintf(stderr, "dlckpt-run: --halt: %s\n", said.status().ToString().c_str());
      return 1;
    }
    std::printf("dlckpt-run: %s\n", said->c_str());
    return 0;
  }
  // Settings read and ignored (a VeloC configuration file's keys), once.
  for (const std::string& note : opts->notes) std::fprintf(stderr, "dlckpt-run: %s\n", note.c_str());
  // Refused before anything is created or started.
  if (auto st = dlckpt::run::CheckMachineLimits(*opts, dlckpt::run::ThisMachine()); !st.ok()) {
    std::fprintf(stderr, "dlckpt-run: %s\n", st.message().c_str());
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  dlckpt::run::InstallSignalHandlers();
  dlckpt::run::Supervisor sup(std::move(*opts));
  return sup.Run();
}

// dlckpt-fuse: serve a node's memfs store through FUSE. See MountUsage().
#include <cstdio>
#include <memory>

#include "dlckpt/fuse/mount.h"

int main(int argc, char** argv) {
  using namespace dlckpt::fusefs;  // NOLINT(google-build-using-namespace)
  auto options = ParseMountArgs(argc, argv);
  if (!options.ok()) {
    std::fprintf(stderr, "dlckpt-fuse: %s\n(try dlckpt-fuse --help)\n",
                 options.status().message().c_str());
    return 2;
  }
  if (options->help) {
    PrintMountHelp();
    return 0;
  }
  if (options->version) {
    std::printf("%s\n", VersionString().c_str());
    return 0;
  }
  dlckpt::Status s = RunMount(*options, MakeCheckpointer(*options));
  if (!s.ok()) {
    std::fprintf(stderr, "dlckpt-fuse: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

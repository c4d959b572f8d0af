// dlckpt-plan: chooses spares per group and the checkpoint interval. All the
// work is in dlckpt/plan/plan.h; see UsageText() or `dlckpt-plan --help`.
#include <iostream>
#include <string>
#include <vector>

#include "dlckpt/base/version.h"
#include "dlckpt/plan/plan.h"

int main(int argc, char** argv) {
  if (dlckpt_version_requested(argc, argv)) return 0;
  std::vector<std::string> args(argv + 1, argv + argc);
  return dlckpt::plan::RunPlanTool(args, std::cout, std::cerr);
}

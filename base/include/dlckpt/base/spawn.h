// dlckpt/base/spawn.h — starting a child process: fork, then exec with the
// exec error reported back through a close-on-exec pipe, so that a command
// that cannot be run is an error of the call, not an exit status of 127.
// Thread safety: callable from any thread; the child is forked from the
// calling thread (parent_death_signal follows that thread, see prctl(2)).
#ifndef DLCKPT_BASE_SPAWN_H_
#define DLCKPT_BASE_SPAWN_H_

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "dlckpt/base/status.h"

namespace dlckpt {

struct SpawnOptions {
  // When nonzero, the child gets this signal when the calling thread ends
  // (PR_SET_PDEATHSIG); a child whose parent died before that was set exits
  // with 127 at once.
  int parent_death_signal = 0;
  // Runs in the child after the above and before exec: async-signal-safe
  // calls only (no allocation, no locks), on data prepared before the call.
  // Descriptors it leaves open are inherited by the command.
  std::function<void()> in_child;
};

// Runs argv[0] (searched in PATH, execvpe) with arguments argv and exactly
// the environment `env` ("KEY=VALUE" entries). Returns the child's pid once
// the exec has succeeded; the caller owns the child and must reap it.
// Errors: EINVAL for an empty argv; the errno of pipe, fork ("fork for
// <argv[0]>") or exec ("exec <argv[0]>", the failed child already reaped).
Result<pid_t> SpawnProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                           const SpawnOptions& options = {});

}  // namespace dlckpt

#endif  // DLCKPT_BASE_SPAWN_H_

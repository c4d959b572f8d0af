// Process helpers of dlckpt-run: spawning launchers, finding the processes of
// a job or of a virtual node, and killing them. Linux-specific (/proc).
#ifndef DLCKPT_COORDINATOR_PROCS_H_
#define DLCKPT_COORDINATOR_PROCS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "dlckpt/base/status.h"

namespace dlckpt::run {

// Starts argv[0] (searched in PATH) with the current environment plus
// `extra_env` ("NAME=value"), in a new session. Standard output and error go
// to `log_path` (appended) unless it is empty, in which case they are
// inherited.
Result<pid_t> Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
                    const std::string& log_path);

// Processes whose environment holds every one of `env` ("NAME=value").
std::vector<pid_t> FindProcesses(const std::vector<std::string>& env);

// Sends `sig` to each pid (ignoring ones already gone).
void Signal(const std::vector<pid_t>& pids, int sig);

// Reaps `pid` if it exited; returns true and its wait status then.
bool Reap(pid_t pid, int* status);

// Waits up to `seconds` for `pid` to exit (sleeping, never spinning).
bool WaitExit(pid_t pid, double seconds, int* status);

// Human text for a wait status: "exit 0", "killed by SIGKILL".
std::string DescribeStatus(int status);

// The last `lines` non-empty lines of a log file, joined with " | " (for
// messages that outlive the run directory); "" if it cannot be read.
std::string Tail(const std::string& path, size_t lines);

}  // namespace dlckpt::run

#endif  // DLCKPT_COORDINATOR_PROCS_H_

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
// `extra_env` ("NAME=value"), in a new session (its pid is its process
// group), which TrackedGroups records until Reap reaps it. The child gets
// SIGKILL when this process dies (PR_SET_PDEATHSIG): a dlckpt-run killed
// outright takes its launchers with it. Standard output and error go to
// `log_path` (appended) unless it is empty, in which case they are inherited.
// Call from the main thread only (the death signal follows the forking thread).
Result<pid_t> Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
                    const std::string& log_path);

// Processes whose environment holds every one of `env` ("NAME=value").
std::vector<pid_t> FindProcesses(const std::vector<std::string>& env);

// Detaches (umount2 MNT_DETACH) every dlckpt-fuse mount of this mount
// namespace whose store name starts with `store_prefix` ("/dlckpt.J.N.";
// found by the fsname "dlckpt:<store without '/'>" in /proc/self/mountinfo),
// as a dead node's mounts vanish with it. Returns the mount points detached;
// ones that fail are skipped.
std::vector<std::string> DetachFuseMounts(const std::string& store_prefix);

// Sends `sig` to each pid (ignoring ones already gone).
void Signal(const std::vector<pid_t>& pids, int sig);

// Reaps `pid` if it exited; returns true and its wait status then. A reaped
// child's group is no longer tracked.
bool Reap(pid_t pid, int* status);

// The process groups of the children Spawn started and Reap has not reaped
// yet (at most 32; a further one is not tracked).
std::vector<pid_t> TrackedGroups();

// Sends `sig` to every tracked process group. Async-signal-safe: for a
// signal handler.
void SignalTrackedGroups(int sig);

// The live descendants of `root` (its children, theirs, ...), from /proc.
std::vector<pid_t> Descendants(pid_t root);

// Waits up to `seconds` for `pid` to exit (sleeping, never spinning).
bool WaitExit(pid_t pid, double seconds, int* status);

// Human text for a wait status: "exit 0", "killed by SIGKILL".
std::string DescribeStatus(int status);

// The last `lines` non-empty lines of a log file, joined with " | " (for
// messages that outlive the run directory); "" if it cannot be read.
std::string Tail(const std::string& path, size_t lines);

}  // namespace dlckpt::run

#endif  // DLCKPT_COORDINATOR_PROCS_H_

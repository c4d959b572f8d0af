// run_dir.h — dlckpt-run's job id and run directory, safe against other local users.
#ifndef DLCKPT_COORDINATOR_RUN_DIR_H_
#define DLCKPT_COORDINATOR_RUN_DIR_H_

#include <string>

#include "dlckpt/base/status.h"

namespace dlckpt::run {

// A job id nobody can guess ahead: "dlckpt", the pid, 6 random hex digits
// (getrandom; the clock's nanoseconds if it has no entropy).
std::string DefaultJobId();

// Opens the run directory `dir`, creating it (mode 0700) if missing, and sets
// *made. An existing one must be a directory (not a symbolic link) owned by
// this user with no access for group or others: anyone else could read the
// rendezvous (and the token in it) or plant files there. Returns an
// O_DIRECTORY fd the caller closes; EEXIST naming the path, its owner and
// mode for an unsafe one.
Result<int> OpenRunDir(const std::string& dir, bool* made);

// dlckpt-run --halt: asks the running dlckpt-run of job `job` to halt, as
// SCR's scr_halt does, by sending it SIGUSR1. `run_dir` is its run directory
// ("" = /tmp/dlckpt-run.<job>), whose "lock" file the running dlckpt-run
// holds (flock) and which names its pid and its --persist directory
// (Supervisor::LockRunDir). Refuses, naming the path and the errno: no such
// run directory or lock file (ENOENT), a run directory of another user
// (EPERM, whatever the caller's privileges), a lock nobody holds (ESRCH: the
// job is not running; its run directory is left over), a pid it cannot
// signal. Returns what will happen, for the user.
Result<std::string> HaltJob(const std::string& job, const std::string& run_dir);

}  // namespace dlckpt::run

#endif  // DLCKPT_COORDINATOR_RUN_DIR_H_

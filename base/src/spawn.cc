#include "dlckpt/base/spawn.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

namespace dlckpt {

Result<pid_t> SpawnProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                           const SpawnOptions& options) {
  if (argv.empty()) return Status::InvalidArgument("spawn: empty command");
  // Everything the child needs is built before fork: it makes async-signal-safe calls only.
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe");
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close(err_pipe[0]);
    close(err_pipe[1]);
    return Status::FromErrno(err, "fork for " + argv[0]);
  }
  if (pid == 0) {
    close(err_pipe[0]);
    if (options.parent_death_signal != 0) {
      prctl(PR_SET_PDEATHSIG, options.parent_death_signal);
      if (getppid() != parent) _exit(127);  // the parent died before the prctl
    }
    if (options.in_child) options.in_child();
    execvpe(args[0], args.data(), envp.data());
    int err = errno;
    ssize_t w = write(err_pipe[1], &err, sizeof err);
    (void)w;
    _exit(127);
  }
  close(err_pipe[1]);
  int child_err = 0;
  ssize_t n;
  do {
    n = read(err_pipe[0], &child_err, sizeof child_err);
  } while (n < 0 && errno == EINTR);
  close(err_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof child_err)) {
    waitpid(pid, nullptr, 0);
    return Status::FromErrno(child_err, "exec " + argv[0]);
  }
  return pid;
}

}  // namespace dlckpt

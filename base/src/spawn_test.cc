// Tests of SpawnProcess: a command that runs, one that cannot be run, the
// environment given, and the code run in the child before exec.
#include "dlckpt/base/spawn.h"

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>

#include <gtest/gtest.h>

namespace dlckpt {
namespace {

int ExitStatus(pid_t pid) {
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(SpawnProcess, RunsTheCommand) {
  auto pid = SpawnProcess({"true"}, {"PATH=/usr/bin:/bin"});
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  EXPECT_EQ(ExitStatus(*pid), 0);
}

TEST(SpawnProcess, GivesExactlyTheEnvironment) {
  setenv("DLCKPT_SPAWN_TEST_INHERITED", "1", 1);
  SpawnOptions o;
  o.parent_death_signal = SIGKILL;
  auto pid = SpawnProcess(
      {"sh", "-c", "test \"$WANTED\" = yes && test -z \"$DLCKPT_SPAWN_TEST_INHERITED\""},
      {"PATH=/usr/bin:/bin", "WANTED=yes"}, o);
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  EXPECT_EQ(ExitStatus(*pid), 0);
}

TEST(SpawnProcess, ExecFailureIsTheError) {
  auto pid = SpawnProcess({"/nonexistent/dlckpt-no-such-command"}, {});
  ASSERT_FALSE(pid.ok());
  EXPECT_EQ(pid.status().code(), ENOENT);
  EXPECT_NE(pid.status().message().find("exec /nonexistent/dlckpt-no-such-command"), std::string::npos);
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);  // the failed child was reaped
  EXPECT_EQ(errno, ECHILD);

  EXPECT_EQ(SpawnProcess({}, {}).status().code(), EINVAL);
}

TEST(SpawnProcess, RunsInChildBeforeExec) {
  // The child's stdout goes to a pipe the test reads.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  SpawnOptions o;
  o.in_child = [&] { dup2(fds[1], STDOUT_FILENO); };
  auto pid = SpawnProcess({"echo", "hello"}, {"PATH=/usr/bin:/bin"}, o);
  close(fds[1]);
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  char buf[16] = {};
  EXPECT_EQ(read(fds[0], buf, sizeof buf - 1), 6);
  EXPECT_STREQ(buf, "hello\n");
  close(fds[0]);
  EXPECT_EQ(ExitStatus(*pid), 0);
}

}  // namespace
}  // namespace dlckpt

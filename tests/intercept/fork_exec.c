/* fork_exec: memfs descriptors across fork and exec.
 *   fork_exec PREFIX          the parent: opens A (O_CLOEXEC) and B (no
 *                             O_CLOEXEC), starts a child that does not
 *                             exec (fork) and two that exec this program
 *                             (fork, vfork), then checks its own file is
 *                             intact.
 *   fork_exec --exec A B P    the exec'd child: A must be closed, B an
 *                             inherited placeholder that refuses I/O (EBADF),
 *                             and P (a prefix path) unavailable (EBUSY) while
 *                             the parent owns the store.
 * Exits 0 when every check passed. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(cond)                                                                  \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      fprintf(stderr, "fork_exec[%d]: %s:%d: check failed: %s (errno %d %s)\n",      \
              (int)getpid(), __FILE__, __LINE__, #cond, errno, strerror(errno));     \
      _exit(1);                                                                      \
    }                                                                                \
  } while (0)

static int exec_child(int a, int b, const char* path) {
  CHECK(fcntl(a, F_GETFD) == -1 && errno == EBADF); /* O_CLOEXEC honoured */
  CHECK(fcntl(b, F_GETFD) == 0);                    /* inherited ... */
  CHECK(write(b, "x", 1) == -1 && errno == EBADF);  /* ... but dead */
  char c;
  CHECK(read(b, &c, 1) == -1 && errno == EBADF);
  CHECK(open(path, O_CREAT | O_WRONLY, 0644) == -1 && errno == EBUSY);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 5 && strcmp(argv[1], "--exec") == 0) {
    return exec_child(atoi(argv[2]), atoi(argv[3]), argv[4]);
  }
  if (argc != 2) {
    fprintf(stderr, "usage: fork_exec PREFIX\n");
    return 2;
  }
  char pa[4096], pb[4096], pc[4096];
  snprintf(pa, sizeof pa, "%s/a", argv[1]);
  snprintf(pb, sizeof pb, "%s/b", argv[1]);
  snprintf(pc, sizeof pc, "%s/child", argv[1]);
  int a = open(pa, O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0644);
  int b = open(pb, O_CREAT | O_RDWR | O_TRUNC, 0644);
  CHECK(a >= 0 && b >= 0);
  CHECK(fcntl(a, F_GETFD) == FD_CLOEXEC && fcntl(b, F_GETFD) == 0);
  CHECK(write(a, "parent-a", 8) == 8 && write(b, "parent-b", 8) == 8);

  /* fork without exec: the child is cut off from the store. */
  FILE* stream = fopen(pc, "w");
  CHECK(stream != NULL);
  fputs("buffered in the parent\n", stream);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    CHECK(write(a, "child", 5) == -1 && errno == EBADF);
    CHECK(lseek(b, 0, SEEK_SET) == -1 && errno == EBADF);
    CHECK(open(pc, O_RDONLY) == -1 && errno == EBUSY);
    CHECK(close(b) == 0);
    exit(0); /* flushes the inherited copy of `stream`: must not reach the store */
  }
  int status;
  CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);

  /* fork + exec. */
  pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    char sa[16], sb[16];
    snprintf(sa, sizeof sa, "%d", a);
    snprintf(sb, sizeof sb, "%d", b);
    execl("/proc/self/exe", argv[0], "--exec", sa, sb, pc, (char*)NULL);
    _exit(3);
  }
  CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);

  /* vfork + exec (through dlckpt's vfork entry point): the same as fork +
   * exec, and the parent, which owns the store, resumes intact. */
  char sa[16], sb[16];
  snprintf(sa, sizeof sa, "%d", a);
  snprintf(sb, sizeof sb, "%d", b);
  pid = vfork();
  CHECK(pid >= 0);
  if (pid == 0) {
    execl("/proc/self/exe", argv[0], "--exec", sa, sb, pc, (char*)NULL);
    _exit(3);
  }
  CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);

  /* The parent's files are intact and still writable. */
  CHECK(write(a, "+more", 5) == 5);
  char buf[64];
  CHECK(pread(a, buf, sizeof buf, 0) == 13 && memcmp(buf, "parent-a+more", 13) == 0);
  CHECK(pread(b, buf, sizeof buf, 0) == 8 && memcmp(buf, "parent-b", 8) == 0);
  CHECK(close(a) == 0 && close(b) == 0);
  CHECK(fclose(stream) == 0);
  /* The child's exit flushed its copy of the buffer into nothing. */
  FILE* back = fopen(pc, "r");
  CHECK(back != NULL);
  size_t got = fread(buf, 1, sizeof buf, back);
  CHECK(got == 23 && memcmp(buf, "buffered in the parent\n", 23) == 0);
  fclose(back);
  printf("fork_exec: ok\n");
  return 0;
}

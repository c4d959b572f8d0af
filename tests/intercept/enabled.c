/* enabled: the original design's dlckpt_enabled switch (thesis §4.5.2). With
 * the flag set, files opened by the program go to memfs whatever their path
 * (relative ones against the working directory); with it clear, to disk.
 * Runs in a scratch working directory given as the argument; checks that
 * "file1" never reaches the disk and "file2" does. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef DLCKPT_TEST_STATIC
extern int dlckpt_enabled;
static int* flag(void) { return &dlckpt_enabled; }
#else
/* Preload mode: the variable lives in libdlckpt_preload.so. */
static int* flag(void) { return (int*)dlsym(RTLD_DEFAULT, "dlckpt_enabled"); }
#endif

#define CHECK(cond)                                                                          \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      fprintf(stderr, "enabled: %s:%d: check failed: %s (errno %d %s)\n", __FILE__, __LINE__, \
              #cond, errno, strerror(errno));                                                \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

int main(int argc, char** argv) {
  CHECK(argc == 2 && chdir(argv[1]) == 0);
  int* enabled = flag();
  CHECK(enabled != NULL && *enabled == 0);
  FILE *f1, *f2;
  *enabled = 1;
  f1 = fopen("file1", "w");
  *enabled = 0;
  f2 = fopen("file2", "w");
  CHECK(f1 != NULL && f2 != NULL);
  fprintf(f1, "Hello World");
  fprintf(f2, "Hello World");
  CHECK(fclose(f1) == 0 && fclose(f2) == 0);
  struct stat st;
  CHECK(stat("file1", &st) == -1 && errno == ENOENT); /* not on disk */
  CHECK(stat("file2", &st) == 0 && st.st_size == 11);
  *enabled = 1;
  CHECK(stat("file1", &st) == 0 && st.st_size == 11); /* in memfs */
  f1 = fopen("file1", "r");
  char buf[32] = {0};
  CHECK(f1 != NULL && fgets(buf, sizeof buf, f1) != NULL && strcmp(buf, "Hello World") == 0);
  fclose(f1);
  CHECK(stat("/proc/self/status", &st) == 0); /* pseudo file systems stay on the OS */
  *enabled = 0;
  printf("enabled: ok\n");
  return 0;
}

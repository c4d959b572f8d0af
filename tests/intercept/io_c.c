/* io_c: writes a checkpoint under BASE with every POSIX and stdio call the
 * interception covers, reads it back and checks it. Exits 0 when every check
 * passed. Run once with BASE under a dlckpt prefix (memfs) and once with BASE
 * on disk; the test then compares the two trees byte for byte. The same
 * source is built plain, with -D_FILE_OFFSET_BITS=64 and with
 * -O2 -D_FORTIFY_SOURCE=2, so the 64-bit and fortified entry points are
 * exercised too. Leaves one stdio stream unclosed on purpose: its buffered
 * bytes must reach the store at exit. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

static const char* base;
static int checks;

#define CHECK(cond)                                                                     \
  do {                                                                                  \
    ++checks;                                                                           \
    if (!(cond)) {                                                                      \
      fprintf(stderr, "io_c: %s:%d: check failed: %s (errno %d %s)\n", __FILE__, __LINE__, \
              #cond, errno, strerror(errno));                                           \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

static const char* P(const char* name) {
  static char buf[4][4096];
  static int next;
  char* b = buf[next++ & 3];
  snprintf(b, sizeof buf[0], "%s/%s", base, name);
  return b;
}

static void posix_family(int argc) {
  unsigned char expect[8192];
  for (size_t i = 0; i < sizeof expect; ++i) expect[i] = (unsigned char)(i * 7 + 3);
  int fd = open(P("posix.bin"), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  CHECK(fd >= 0);
  CHECK(write(fd, expect, 1000) == 1000);
  struct iovec iov[3] = {{expect + 1000, 500}, {expect + 1500, 0}, {expect + 1500, 2596}};
  CHECK(writev(fd, iov, 3) == 3096);
  CHECK(pwrite(fd, "PWRITE", 6, 10) == 6);
  memcpy(expect + 10, "PWRITE", 6);
  CHECK(lseek(fd, 0, SEEK_END) == 4096);
  CHECK(write(fd, expect + 4096, 4096) == 4096);
  CHECK(fsync(fd) == 0);
  CHECK(fdatasync(fd) == 0);
  CHECK((fcntl(fd, F_GETFL) & O_ACCMODE) == O_WRONLY);
  CHECK(ftruncate(fd, 8192 + 100) == 0);
  CHECK(close(fd) == 0);

  /* Values the compiler cannot see: the fortified build calls __open_2,
   * __read_chk and __pread_chk here. */
  volatile int vflags = O_RDWR;
  volatile size_t vlen = 1000;
  int flags = argc > 99 ? O_WRONLY : vflags;
  fd = open(P("posix.bin"), flags);
  CHECK(fd >= 0);
  struct stat st;
  CHECK(fstat(fd, &st) == 0);
  CHECK(S_ISREG(st.st_mode) && st.st_size == 8292);
  unsigned char got[8192 + 100];
  CHECK(read(fd, got, vlen) == 1000);
  struct iovec riov[2] = {{got + 1000, 96}, {got + 1096, 3000}};
  CHECK(readv(fd, riov, 2) == 3096);
  CHECK(pread(fd, got + 4096, vlen * 4 + 196, 4096) == 4196);
  CHECK(memcmp(got, expect, 8192) == 0);
  for (int i = 0; i < 100; ++i) CHECK(got[8192 + i] == 0);

  /* dup family: one open file, one offset. */
  int d1 = dup(fd);
  int d2 = fcntl(fd, F_DUPFD_CLOEXEC, 50);
  int d3 = 77;
  CHECK(d1 >= 0 && d2 >= 50 && dup2(fd, d3) == d3);
  CHECK(fcntl(d2, F_GETFD) == FD_CLOEXEC);
  CHECK(lseek(d1, 100, SEEK_SET) == 100);
  CHECK(lseek(d2, 0, SEEK_CUR) == 100);
  CHECK(lseek(d3, 0, SEEK_CUR) == 100);
  CHECK(close(fd) == 0 && close(d1) == 0 && close(d2) == 0);
  CHECK(read(d3, got, 10) == 10 && memcmp(got, expect + 100, 10) == 0);
  CHECK(close(d3) == 0);
  CHECK(close(d3) == -1 && errno == EBADF);

  CHECK(stat(P("posix.bin"), &st) == 0 && st.st_size == 8292);
  CHECK(lstat(P("posix.bin"), &st) == 0 && S_ISREG(st.st_mode));
  CHECK(access(P("posix.bin"), F_OK | R_OK | W_OK) == 0);
  CHECK(rename(P("posix.bin"), P("posix2.bin")) == 0);
  CHECK(access(P("posix.bin"), F_OK) == -1 && errno == ENOENT);
  CHECK(stat(P("posix2.bin"), &st) == 0);

  fd = creat(P("gone.tmp"), 0600);
  CHECK(fd >= 0 && write(fd, "x", 1) == 1 && close(fd) == 0);
  CHECK(unlink(P("gone.tmp")) == 0);
  CHECK(stat(P("gone.tmp"), &st) == -1 && errno == ENOENT);

  /* *at calls relative to a directory descriptor. */
  CHECK(mkdir(P("sub"), 0755) == 0);
  CHECK(mkdir(P("sub"), 0755) == -1 && errno == EEXIST);
  int dir = open(P("sub"), O_RDONLY | O_DIRECTORY);
  CHECK(dir >= 0);
  fd = openat(dir, "at.txt", O_CREAT | O_WRONLY | O_TRUNC, 0644);
  CHECK(fd >= 0 && write(fd, "openat\n", 7) == 7 && close(fd) == 0);
  CHECK(fstatat(dir, "at.txt", &st, 0) == 0 && st.st_size == 7);
  CHECK(mkdirat(dir, "empty", 0755) == 0);
  CHECK(unlinkat(dir, "empty", AT_REMOVEDIR) == 0);
  CHECK(close(dir) == 0);
  CHECK(rmdir(P("sub")) == -1 && errno == ENOTEMPTY);
  CHECK(truncate(P("sub/at.txt"), 6) == 0);
}

static void stdio_family(void) {
  FILE* f = fopen(P("stdio.txt"), "w");
  CHECK(f != NULL);
  for (int i = 0; i < 200; ++i) CHECK(fprintf(f, "line %d %.3f %s\n", i, i / 7.0, "text") > 0);
  CHECK(fputs("fputs line\n", f) >= 0);
  CHECK(fputc('Z', f) == 'Z');
  CHECK(fputc('\n', f) == '\n');
  double values[64];
  for (int i = 0; i < 64; ++i) values[i] = i * 1.5;
  CHECK(fwrite(values, sizeof values[0], 64, f) == 64);
  CHECK(fflush(f) == 0);
  long end = ftell(f);
  CHECK(end > 0);
  CHECK(fseek(f, 5, SEEK_SET) == 0);
  CHECK(fputs("0", f) >= 0); /* "line 0" -> "line 0" unchanged digit */
  CHECK(fseeko(f, 0, SEEK_END) == 0 && ftello(f) == end);
  CHECK(!ferror(f));
  CHECK(fclose(f) == 0);

  f = fopen(P("stdio.txt"), "r");
  CHECK(f != NULL);
  char line[128];
  CHECK(fgets(line, sizeof line, f) != NULL && strcmp(line, "line 0 0.000 text\n") == 0);
  int n;
  double d;
  char word[16];
  CHECK(fscanf(f, "line %d %lf %15s\n", &n, &d, word) == 3 && n == 1 && strcmp(word, "text") == 0);
  for (int i = 2; i < 200; ++i) CHECK(fgets(line, sizeof line, f) != NULL);
  CHECK(fgets(line, sizeof line, f) != NULL && strcmp(line, "fputs line\n") == 0);
  CHECK(fgetc(f) == 'Z' && fgetc(f) == '\n');
  double back[64];
  CHECK(fread(back, sizeof back[0], 64, f) == 64 && memcmp(back, values, sizeof back) == 0);
  CHECK(fgetc(f) == EOF && feof(f) && !ferror(f));
  rewind(f);
  CHECK(!feof(f) && ftell(f) == 0);
  CHECK(fclose(f) == 0);

  /* Read after write on one stream. */
  f = fopen(P("rw.txt"), "w+");
  CHECK(f != NULL);
  CHECK(fputs("0123456789", f) >= 0);
  CHECK(fseek(f, 2, SEEK_SET) == 0);
  CHECK(fgetc(f) == '2');
  CHECK(fseek(f, 0, SEEK_CUR) == 0 && fputs("AB", f) >= 0);
  rewind(f);
  CHECK(fgets(line, sizeof line, f) != NULL && strcmp(line, "012AB56789") == 0);
  CHECK(fclose(f) == 0);

  f = fopen(P("stdio.txt"), "a");
  CHECK(f != NULL && ftell(f) == end);
  CHECK(fprintf(f, "appended\n") == 9);
  CHECK(fclose(f) == 0);

  int fd = open(P("fdopen.txt"), O_CREAT | O_RDWR | O_TRUNC, 0644);
  CHECK(fd >= 0);
  f = fdopen(fd, "w");
  CHECK(f != NULL && fileno(f) == fd);
  CHECK(fprintf(f, "through fdopen %d\n", fd > 0) > 0);
  CHECK(fclose(f) == 0);
  CHECK(close(fd) == -1 && errno == EBADF); /* fclose closed it, once */

  f = fopen(P("freopen.txt"), "w");
  CHECK(f != NULL);
  fputs("first\n", f);
  f = freopen(P("freopen2.txt"), "w", f);
  CHECK(f != NULL);
  fputs("second\n", f);
  CHECK(fclose(f) == 0);

  /* Left open: exit() must flush it into the store. */
  FILE* unclosed = fopen(P("unclosed.txt"), "w");
  CHECK(unclosed != NULL);
  CHECK(setvbuf(unclosed, NULL, _IOFBF, 1 << 16) == 0);
  for (int i = 0; i < 100; ++i) fprintf(unclosed, "buffered %d\n", i);
}

static int cmp(const void* a, const void* b) {
  return strcmp(*(const char* const*)a, *(const char* const*)b);
}

static void directory_listing(void) {
  DIR* d = opendir(base);
  CHECK(d != NULL);
  const char* names[32];
  int count = 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL && count < 32) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    names[count++] = strdup(e->d_name);
  }
  CHECK(closedir(d) == 0);
  qsort(names, count, sizeof names[0], cmp);
  const char* want[] = {"fdopen.txt", "freopen.txt", "freopen2.txt", "posix2.bin",
                        "rw.txt",     "stdio.txt",   "sub",          "unclosed.txt"};
  CHECK(count == 8);
  for (int i = 0; i < count; ++i) CHECK(strcmp(names[i], want[i]) == 0);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: io_c BASE\n");
    return 2;
  }
  base = argv[1];
  CHECK(mkdir(base, 0755) == 0);
  posix_family(argc);
  stdio_family();
  directory_listing();
  fprintf(stderr, "io_c: %d checks passed in %s\n", checks, base);
  /* stdout itself onto the checkpoint directory: printf follows. */
  CHECK(freopen(P("stdout.txt"), "w", stdout) == stdout);
  for (int i = 0; i < 20; ++i) printf("report line %d\n", i);
  return 0;
}

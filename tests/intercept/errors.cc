// errors: the bad-input contract of libintercept, run with a prefix BASE in a
// store of about 1 MiB: operations on closed memfs descriptors give EBADF;
// writing past capacity gives ENOSPC through write(), fwrite() (short count,
// ferror, errno) and ofstream (fail state); plus the errno of the usual
// mistakes (EISDIR, ENOTDIR, ENOTEMPTY, EXDEV, ENODEV for mmap, EEXIST). The
// second argument is a directory on disk, where the same calls behave as
// without dlckpt. Exits 0 when every check passed.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#define CHECK(cond)                                                                          \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "errors: %s:%d: check failed: %s (errno %d %s)\n", __FILE__,       \
                   __LINE__, #cond, errno, std::strerror(errno));                            \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: errors MEMFS_DIR DISK_DIR\n");
    return 2;
  }
  std::string m = argv[1], d = argv[2];

  // EBADF on a closed memfs descriptor.
  int fd = open((m + "/closed").c_str(), O_CREAT | O_RDWR, 0644);
  CHECK(fd >= 0);
  CHECK(close(fd) == 0);
  char c = 0;
  errno = 0;
  CHECK(write(fd, "x", 1) == -1 && errno == EBADF);
  CHECK(read(fd, &c, 1) == -1 && errno == EBADF);
  CHECK(lseek(fd, 0, SEEK_SET) == -1 && errno == EBADF);
  struct stat st;
  CHECK(fstat(fd, &st) == -1 && errno == EBADF);
  CHECK(close(fd) == -1 && errno == EBADF);
  CHECK(dup(fd) == -1 && errno == EBADF);
  // Writing to a read-only descriptor.
  fd = open((m + "/closed").c_str(), O_RDONLY);
  CHECK(fd >= 0 && write(fd, "x", 1) == -1 && errno == EBADF);
  CHECK(mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0) == MAP_FAILED && errno == ENODEV);
  CHECK(close(fd) == 0);

  // The usual mistakes.
  CHECK(mkdir((m + "/dir").c_str(), 0755) == 0);
  CHECK(open((m + "/dir").c_str(), O_WRONLY) == -1 && errno == EISDIR);
  CHECK(unlink((m + "/dir").c_str()) == -1 && errno == EISDIR);
  CHECK(open((m + "/closed/x").c_str(), O_CREAT | O_WRONLY, 0644) == -1 && errno == ENOTDIR);
  CHECK(open((m + "/closed").c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644) == -1 && errno == EEXIST);
  CHECK(rename((m + "/closed").c_str(), (m + "/dir/closed").c_str()) == 0);
  CHECK(rmdir((m + "/dir").c_str()) == -1 && errno == ENOTEMPTY);
  CHECK(rename((m + "/dir/closed").c_str(), (d + "/closed").c_str()) == -1 && errno == EXDEV);
  CHECK(open((m + "/missing").c_str(), O_RDONLY) == -1 && errno == ENOENT);
  CHECK(std::fopen((m + "/missing").c_str(), "r") == nullptr && errno == ENOENT);
  CHECK(opendir((m + "/missing").c_str()) == nullptr && errno == ENOENT);

  // ENOSPC through write().
  std::vector<char> mib(1 << 20, 'w');
  fd = open((m + "/full").c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  CHECK(fd >= 0);
  ssize_t total = 0, n = 0;
  while ((n = write(fd, mib.data(), mib.size())) > 0) total += n;
  CHECK(n == -1 && errno == ENOSPC && total > 0 && total <= (1 << 20));
  CHECK(close(fd) == 0);
  CHECK(unlink((m + "/full").c_str()) == 0);

  // ENOSPC through fwrite: a short count, the error flag and errno.
  FILE* f = std::fopen((m + "/full.stdio").c_str(), "w");
  CHECK(f != nullptr);
  size_t put = 0;
  for (int i = 0; i < 4; ++i) put += std::fwrite(mib.data(), 1, mib.size(), f);
  CHECK(put < 4 * mib.size());
  CHECK(std::ferror(f) && errno == ENOSPC);
  std::fclose(f);
  CHECK(unlink((m + "/full.stdio").c_str()) == 0);

  // ENOSPC through ofstream: the stream fails.
  {
    std::ofstream out(m + "/full.ofstream", std::ios::binary);
    CHECK(out.is_open());
    for (int i = 0; i < 4 && out; ++i) out.write(mib.data(), static_cast<std::streamsize>(mib.size()));
    out.flush();
    CHECK(out.fail() || out.bad());
  }
  CHECK(unlink((m + "/full.ofstream").c_str()) == 0);

  // After freeing space, writing works again.
  fd = open((m + "/after").c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  CHECK(fd >= 0 && write(fd, "ok", 2) == 2 && close(fd) == 0);

  // Outside the prefix: the OS, as without dlckpt.
  fd = open((d + "/disk").c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  CHECK(fd >= 0);
  CHECK(write(fd, mib.data(), mib.size()) == static_cast<ssize_t>(mib.size()));
  CHECK(fstat(fd, &st) == 0 && st.st_size == (1 << 20));
  CHECK((fcntl(fd, F_GETFL) & O_PATH) == 0);
  CHECK(close(fd) == 0);
  CHECK(close(fd) == -1 && errno == EBADF);
  CHECK(unlink((d + "/disk").c_str()) == 0);
  CHECK(open((d + "/missing").c_str(), O_RDONLY) == -1 && errno == ENOENT);
  std::printf("errors: ok\n");
  return 0;
}

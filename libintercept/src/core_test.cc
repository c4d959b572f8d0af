// Tests of libintercept's core through its C boundary and public API, on a
// real memfs store (no interposition in this binary: the dlckpt_ic_* calls
// stand for the entry points; libc calls reach the OS directly).
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core_c.h"
#include "dlckpt/intercept/intercept.h"

namespace dlckpt::intercept {
namespace {

class CoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    name_ = "/dlckpt.ictest" + std::to_string(getpid()) + "x" + std::to_string(counter++) +
            ".node.r0";
    StoreConfig c;
    c.store_name = name_;
    c.capacity = 4 << 20;
    c.block_size = 64 << 10;
    ASSERT_TRUE(Configure(c).ok());
    dlckpt_enabled = 0;
  }
  void TearDown() override {
    dlckpt_enabled = 0;
    EXPECT_TRUE(DetachStore().ok());
    (void)memfs::Store::Destroy(name_);
  }

  static int Open(const char* path, int flags, mode_t mode = 0644) {
    int r;
    EXPECT_EQ(dlckpt_ic_open(AT_FDCWD, path, flags, mode, &r), 1) << path;
    return r;
  }
  static ssize_t Write(int fd, const std::string& s) {
    ssize_t r;
    EXPECT_EQ(dlckpt_ic_write(fd, s.data(), s.size(), &r), 1);
    return r;
  }
  static std::string Read(int fd, size_t n) {
    std::string s(n, '\0');
    ssize_t r;
    EXPECT_EQ(dlckpt_ic_read(fd, s.data(), n, &r), 1);
    s.resize(r < 0 ? 0 : static_cast<size_t>(r));
    return s;
  }
  static off_t Seek(int fd, off_t off, int whence) {
    off_t r;
    EXPECT_EQ(dlckpt_ic_lseek(fd, off, whence, &r), 1);
    return r;
  }
  static int Close(int fd) {
    int r;
    EXPECT_EQ(dlckpt_ic_close(fd, &r), 1);
    return r;
  }

  std::string name_;
};

TEST_F(CoreTest, Routing) {
  EXPECT_TRUE(RoutesToMemfs("/dlckpt"));
  EXPECT_TRUE(RoutesToMemfs("/dlckpt/app/x"));
  EXPECT_TRUE(RoutesToMemfs("//dlckpt/./app/../x"));
  EXPECT_FALSE(RoutesToMemfs("/dlckpt/../tmp/x"));
  EXPECT_FALSE(RoutesToMemfs("/tmp/x"));
  EXPECT_FALSE(RoutesToMemfs("relative/x"));
  dlckpt_enabled = 1;
  EXPECT_TRUE(RoutesToMemfs("/tmp/x"));
  EXPECT_TRUE(RoutesToMemfs("relative/x"));
  EXPECT_FALSE(RoutesToMemfs("/proc/self/status"));
  EXPECT_FALSE(RoutesToMemfs("/dev/shm/x"));
  dlckpt_enabled = 0;
  int r;
  EXPECT_EQ(dlckpt_ic_open(AT_FDCWD, "/tmp/x", O_RDONLY, 0, &r), 0);  // not ours
}

TEST_F(CoreTest, WriteReadSeekStat) {
  int fd = Open("/dlckpt/u/a.dat", O_CREAT | O_RDWR | O_TRUNC);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(Write(fd, "hello world"), 11);
  EXPECT_EQ(Seek(fd, 6, SEEK_SET), 6);
  EXPECT_EQ(Read(fd, 100), "world");
  struct stat st;
  int r;
  ASSERT_EQ(dlckpt_ic_fstat(fd, &st, &r), 1);
  ASSERT_EQ(r, 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_size, 11);
  ASSERT_EQ(dlckpt_ic_stat(AT_FDCWD, "/dlckpt//u/./a.dat", &st, 0, &r), 1);
  EXPECT_EQ(r, 0);
  EXPECT_EQ(st.st_size, 11);
  ssize_t n;
  ASSERT_EQ(dlckpt_ic_pwrite(fd, "W", 1, 0, &n), 1);
  char c;
  ASSERT_EQ(dlckpt_ic_pread(fd, &c, 1, 0, &n), 1);
  EXPECT_EQ(c, 'W');
  EXPECT_EQ(Close(fd), 0);
  // Closed: no longer ours, the OS answers (EBADF).
  EXPECT_EQ(dlckpt_ic_write(fd, "x", 1, &n), 0);
  EXPECT_EQ(write(fd, "x", 1), -1);
  EXPECT_EQ(errno, EBADF);
}

TEST_F(CoreTest, PlaceholderIsARealDescriptorThatRefusesIo) {
  int fd = Open("/dlckpt/p", O_CREAT | O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  // The OS sees an O_PATH descriptor: any call that escaped interception fails.
  EXPECT_TRUE(fcntl(fd, F_GETFL) & O_PATH);
  EXPECT_EQ(fcntl(fd, F_GETFD), FD_CLOEXEC);
  EXPECT_EQ(write(fd, "x", 1), -1);
  EXPECT_EQ(errno, EBADF);
  char buf[4];
  EXPECT_EQ(read(fd, buf, 4), -1);
  EXPECT_EQ(errno, EBADF);
  // What the intercepted fcntl reports.
  int r;
  ASSERT_EQ(dlckpt_ic_fcntl(fd, F_GETFL, nullptr, &r), 1);
  EXPECT_EQ(r & O_ACCMODE, O_WRONLY);
  EXPECT_EQ(dlckpt_ic_fcntl(fd, F_GETFD, nullptr, &r), 0);  // the placeholder answers
  EXPECT_EQ(Close(fd), 0);
}

TEST_F(CoreTest, DupSharesOffsetAndSurvivesClose) {
  int fd = Open("/dlckpt/d", O_CREAT | O_RDWR);
  ASSERT_GE(fd, 0);
  int d1, d2, d3;
  ASSERT_EQ(dlckpt_ic_dup(fd, &d1), 1);
  ASSERT_GE(d1, 0);
  ASSERT_EQ(dlckpt_ic_fcntl(fd, F_DUPFD_CLOEXEC, reinterpret_cast<void*>(100), &d2), 1);
  ASSERT_GE(d2, 100);
  EXPECT_EQ(fcntl(d2, F_GETFD), FD_CLOEXEC);
  EXPECT_EQ(fcntl(d1, F_GETFD), 0);
  EXPECT_EQ(Write(fd, "abc"), 3);
  EXPECT_EQ(Write(d1, "def"), 3);  // shared offset: appends after "abc"
  EXPECT_EQ(Seek(d2, 0, SEEK_CUR), 6);
  EXPECT_EQ(Close(fd), 0);
  EXPECT_EQ(Seek(d1, 0, SEEK_SET), 0);
  EXPECT_EQ(Read(d2, 10), "abcdef");
  // dup2 onto a number that holds a real file: the real file is closed.
  int real = open("/dev/null", O_RDONLY);
  ASSERT_GE(real, 0);
  ASSERT_EQ(dlckpt_ic_dup3(d1, real, 0, 1, &d3), 1);
  EXPECT_EQ(d3, real);
  EXPECT_EQ(Seek(d3, 0, SEEK_END), 6);
  // dup2 of a real descriptor over a memfs one makes it real again.
  int devnull = open("/dev/null", O_WRONLY);
  int r;
  ASSERT_EQ(dlckpt_ic_dup3(devnull, d3, 0, 1, &r), 1);
  EXPECT_EQ(r, d3);
  ssize_t n;
  EXPECT_EQ(dlckpt_ic_write(d3, "x", 1, &n), 0);  // not ours any more
  EXPECT_EQ(write(d3, "x", 1), 1);
  close(d3);
  close(devnull);
  EXPECT_EQ(Close(d1), 0);
  EXPECT_EQ(Close(d2), 0);
  // The file outlived every descriptor.
  int again = Open("/dlckpt/d", O_RDONLY);
  EXPECT_EQ(Read(again, 10), "abcdef");
  EXPECT_EQ(Close(again), 0);
}

TEST_F(CoreTest, StaleAfterRollback) {
  auto store = ProcessStore();
  ASSERT_TRUE(store.ok());
  int fd = Open("/dlckpt/ckpt", O_CREAT | O_RDWR | O_TRUNC);
  EXPECT_EQ(Write(fd, "epoch1"), 6);
  auto e = (*store)->Commit();
  ASSERT_TRUE(e.ok());
  ASSERT_TRUE((*store)->Acknowledge(*e).ok());
  EXPECT_EQ(Write(fd, "-more"), 5);
  int other = Open("/dlckpt/new", O_CREAT | O_WRONLY);
  ASSERT_TRUE(RollbackStore().ok());
  ssize_t n;
  ASSERT_EQ(dlckpt_ic_write(fd, "x", 1, &n), 1);
  EXPECT_EQ(n, -1);
  EXPECT_EQ(errno, EBADF);
  struct stat st;
  int r;
  ASSERT_EQ(dlckpt_ic_fstat(other, &st, &r), 1);
  EXPECT_EQ(r, -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(Close(fd), 0);  // releases the number
  EXPECT_EQ(Close(other), 0);
  EXPECT_EQ(fcntl(fd, F_GETFD), -1);
  fd = Open("/dlckpt/ckpt", O_RDONLY);
  EXPECT_EQ(Read(fd, 100), "epoch1");
  EXPECT_EQ(Close(fd), 0);
  ASSERT_EQ(dlckpt_ic_stat(AT_FDCWD, "/dlckpt/new", &st, 0, &r), 1);
  EXPECT_EQ(r, -1);
  EXPECT_EQ(errno, ENOENT);
}

TEST_F(CoreTest, Directories) {
  int r;
  struct stat st;
  // The prefix itself always exists.
  ASSERT_EQ(dlckpt_ic_stat(AT_FDCWD, "/dlckpt", &st, 0, &r), 1);
  EXPECT_EQ(r, 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  ASSERT_EQ(dlckpt_ic_mkdir(AT_FDCWD, "/dlckpt", 0755, &r), 1);
  EXPECT_EQ(errno, EEXIST);
  ASSERT_EQ(dlckpt_ic_mkdir(AT_FDCWD, "/dlckpt/app", 0755, &r), 1);
  EXPECT_EQ(r, 0);
  int fd = Open("/dlckpt/app/run1/ckpt.0", O_CREAT | O_WRONLY);  // parents implied
  ASSERT_GE(fd, 0);
  EXPECT_EQ(Close(fd), 0);
  ASSERT_EQ(dlckpt_ic_stat(AT_FDCWD, "/dlckpt/app/run1", &st, 0, &r), 1);
  EXPECT_EQ(r, 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  ASSERT_EQ(dlckpt_ic_open(AT_FDCWD, "/dlckpt/app/run1/ckpt.0/x", O_CREAT | O_WRONLY, 0644, &r), 1);
  EXPECT_EQ(errno, ENOTDIR);
  ASSERT_EQ(dlckpt_ic_unlink(AT_FDCWD, "/dlckpt/app", 0, &r), 1);
  EXPECT_EQ(errno, EISDIR);
  ASSERT_EQ(dlckpt_ic_unlink(AT_FDCWD, "/dlckpt/app", AT_REMOVEDIR, &r), 1);
  EXPECT_EQ(errno, ENOTEMPTY);
  ASSERT_EQ(dlckpt_ic_unlink(AT_FDCWD, "/dlckpt", AT_REMOVEDIR, &r), 1);
  EXPECT_EQ(errno, EBUSY);
  // Listing.
  DIR* d;
  ASSERT_EQ(dlckpt_ic_opendir("/dlckpt/app", &d), 1);
  ASSERT_NE(d, nullptr);
  std::set<std::string> names;
  while (struct dirent* e = dlckpt_ic_readdir(d)) {
    names.insert(e->d_name);
    if (std::string(e->d_name) == "run1") {
      EXPECT_EQ(e->d_type, DT_DIR);
    }
  }
  EXPECT_EQ(names, (std::set<std::string>{".", "..", "run1"}));
  int dfd = dlckpt_ic_dirfd(d);
  ASSERT_EQ(dlckpt_ic_fstat(dfd, &st, &r), 1);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  // openat relative to a memfs directory descriptor.
  int f2;
  ASSERT_EQ(dlckpt_ic_open(dfd, "run1/ckpt.1", O_CREAT | O_WRONLY, 0644, &f2), 1);
  ASSERT_GE(f2, 0);
  EXPECT_EQ(Close(f2), 0);
  ASSERT_EQ(dlckpt_ic_stat(AT_FDCWD, "/dlckpt/app/run1/ckpt.1", &st, 0, &r), 1);
  EXPECT_EQ(r, 0);
  EXPECT_EQ(dlckpt_ic_closedir(d), 0);
  // Rename of an implied directory, then remove everything.
  ASSERT_EQ(dlckpt_ic_rename(AT_FDCWD, "/dlckpt/app/run1", AT_FDCWD, "/dlckpt/app/run2", 0, &r), 1);
  EXPECT_EQ(r, 0);
  ASSERT_EQ(dlckpt_ic_rename(AT_FDCWD, "/dlckpt/app/run2/ckpt.0", AT_FDCWD, "/tmp/x", 0, &r), 1);
  EXPECT_EQ(errno, EXDEV);
  for (const char* p : {"/dlckpt/app/run2/ckpt.0", "/dlckpt/app/run2/ckpt.1"}) {
    ASSERT_EQ(dlckpt_ic_unlink(AT_FDCWD, p, 0, &r), 1);
    EXPECT_EQ(r, 0) << p;
  }
  ASSERT_EQ(dlckpt_ic_unlink(AT_FDCWD, "/dlckpt/app/run2", AT_REMOVEDIR, &r), 1);
  EXPECT_EQ(r, 0);
  ASSERT_EQ(dlckpt_ic_unlink(AT_FDCWD, "/dlckpt/app", AT_REMOVEDIR, &r), 1);
  EXPECT_EQ(r, 0);
}

TEST_F(CoreTest, StdioStreams) {
  FILE* f;
  ASSERT_EQ(dlckpt_ic_fopen("/dlckpt/s.txt", "w+", &f), 1);
  ASSERT_NE(f, nullptr);
  int fd = fileno(f);
  EXPECT_TRUE(fcntl(fd, F_GETFL) & O_PATH);  // the memfs descriptor's placeholder
  fprintf(f, "line %d\n", 1);
  fputs("line 2\n", f);
  EXPECT_EQ(ftell(f), 14);
  rewind(f);
  char buf[32];
  ASSERT_NE(fgets(buf, sizeof buf, f), nullptr);
  EXPECT_STREQ(buf, "line 1\n");
  fseek(f, 0, SEEK_END);
  fputc('!', f);
  EXPECT_EQ(fclose(f), 0);
  // fclose closed the memfs descriptor exactly once.
  EXPECT_EQ(fcntl(fd, F_GETFD), -1);
  ASSERT_EQ(dlckpt_ic_fopen("/dlckpt/s.txt", "a", &f), 1);
  EXPECT_EQ(ftell(f), 15);
  fputs("tail", f);
  fclose(f);
  ASSERT_EQ(dlckpt_ic_fopen("/dlckpt/s.txt", "r", &f), 1);
  size_t n = fread(buf, 1, sizeof buf, f);
  EXPECT_EQ(std::string(buf, n), "line 1\nline 2\n!tail");
  EXPECT_TRUE(feof(f));
  fclose(f);
  ASSERT_EQ(dlckpt_ic_fopen("/dlckpt/missing", "r", &f), 1);
  EXPECT_EQ(f, nullptr);
  EXPECT_EQ(errno, ENOENT);
}

TEST_F(CoreTest, EnospcIsVisibleToWriteAndFwrite) {
  int fd = Open("/dlckpt/big", O_CREAT | O_WRONLY);
  std::string mib(1 << 20, 'x');
  ssize_t total = 0, n = 0;
  for (int i = 0; i < 8 && n >= 0; ++i) {
    ASSERT_EQ(dlckpt_ic_write(fd, mib.data(), mib.size(), &n), 1);
    if (n > 0) total += n;
  }
  EXPECT_EQ(n, -1);
  EXPECT_EQ(errno, ENOSPC);
  EXPECT_EQ(total, 4 << 20);
  EXPECT_EQ(Close(fd), 0);
  int r;
  ASSERT_EQ(dlckpt_ic_unlink(AT_FDCWD, "/dlckpt/big", 0, &r), 1);
  FILE* f;
  ASSERT_EQ(dlckpt_ic_fopen("/dlckpt/big2", "w", &f), 1);
  size_t written = 0;
  for (int i = 0; i < 8; ++i) written += fwrite(mib.data(), 1, mib.size(), f);
  EXPECT_LT(written, size_t{8} << 20);
  EXPECT_TRUE(ferror(f));
  EXPECT_EQ(errno, ENOSPC);
  fclose(f);
}

TEST_F(CoreTest, DlckptEnabledRoutesAnyPath) {
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
  dlckpt_enabled = 1;
  FILE* f;
  ASSERT_EQ(dlckpt_ic_fopen("file1", "w", &f), 1);
  ASSERT_NE(f, nullptr);
  fputs("in memory", f);
  fclose(f);
  dlckpt_enabled = 0;
  struct stat st;
  EXPECT_EQ(stat("file1", &st), -1);  // nothing on disk
  auto store = ProcessStore();
  ASSERT_TRUE(store.ok());
  auto info = (*store)->Stat(std::string(cwd) + "/file1");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->size, 9u);
}

TEST_F(CoreTest, ForkedChildIsCutOff) {
  int fd = Open("/dlckpt/f", O_CREAT | O_RDWR);
  ASSERT_EQ(Write(fd, "parent"), 6);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ssize_t n;
    int ok = 1;
    ok &= dlckpt_ic_write(fd, "child", 5, &n) == 1 && n == -1 && errno == EBADF;
    int r;
    ok &= dlckpt_ic_open(AT_FDCWD, "/dlckpt/g", O_CREAT | O_WRONLY, 0644, &r) == 1 && r == -1 &&
          errno == EBUSY;
    ok &= dlckpt_ic_close(fd, &r) == 1 && r == 0;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(Write(fd, "+more"), 5);
  EXPECT_EQ(Seek(fd, 0, SEEK_SET), 0);
  EXPECT_EQ(Read(fd, 100), "parent+more");
  EXPECT_EQ(Close(fd), 0);
}

TEST_F(CoreTest, AppendAddedAfterOpen) {
  int fd = Open("/dlckpt/app.log", O_CREAT | O_RDWR | O_TRUNC);
  EXPECT_EQ(Write(fd, "ab"), 2);
  EXPECT_EQ(Seek(fd, 0, SEEK_SET), 0);
  int r;
  ASSERT_EQ(dlckpt_ic_fcntl(fd, F_SETFL, reinterpret_cast<void*>(O_APPEND), &r), 1);
  EXPECT_EQ(r, 0);
  ASSERT_EQ(dlckpt_ic_fcntl(fd, F_GETFL, nullptr, &r), 1);
  EXPECT_TRUE(r & O_APPEND);
  EXPECT_EQ(Write(fd, "c"), 1);  // at the end despite the offset
  ssize_t n;
  ASSERT_EQ(dlckpt_ic_pwrite(fd, "d", 1, 0, &n), 1);  // Linux: appends too
  FILE* f;
  int d;
  ASSERT_EQ(dlckpt_ic_dup(fd, &d), 1);
  ASSERT_EQ(dlckpt_ic_fdopen(d, "a", &f), 1);
  ASSERT_NE(f, nullptr);
  fputs("e", f);
  EXPECT_EQ(fclose(f), 0);
  EXPECT_EQ(Seek(fd, 0, SEEK_SET), 0);
  EXPECT_EQ(Read(fd, 10), "abcde");
  // A native O_APPEND cannot be dropped.
  int g = Open("/dlckpt/native.log", O_CREAT | O_WRONLY | O_APPEND);
  ASSERT_EQ(dlckpt_ic_fcntl(g, F_SETFL, reinterpret_cast<void*>(0), &r), 1);
  EXPECT_EQ(r, -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(Close(g), 0);
  EXPECT_EQ(Close(fd), 0);
}

TEST_F(CoreTest, ConcurrentWritersAndDups) {
  constexpr int kThreads = 4, kRounds = 100;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &failures] {
      std::string path = "/dlckpt/mt/f" + std::to_string(t);
      std::string payload(3000 + t, static_cast<char>('a' + t));
      for (int i = 0; i < kRounds; ++i) {
        int fd = Open(path.c_str(), O_CREAT | O_RDWR | O_TRUNC);
        int d;
        if (fd < 0 || dlckpt_ic_dup(fd, &d) != 1 || d < 0) {
          failures++;
          continue;
        }
        if (Write(fd, payload) != static_cast<ssize_t>(payload.size())) failures++;
        if (Close(fd) != 0) failures++;
        if (Seek(d, 0, SEEK_SET) != 0 || Read(d, payload.size() + 10) != payload) failures++;
        struct stat st;
        int r;
        if (dlckpt_ic_stat(AT_FDCWD, path.c_str(), &st, 0, &r) != 1 || r != 0 ||
            st.st_size != static_cast<off_t>(payload.size())) {
          failures++;
        }
        if (Close(d) != 0) failures++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  DIR* dir;
  ASSERT_EQ(dlckpt_ic_opendir("/dlckpt/mt", &dir), 1);
  int n = 0;
  while (dlckpt_ic_readdir(dir) != nullptr) ++n;
  EXPECT_EQ(n, kThreads + 2);
  EXPECT_EQ(dlckpt_ic_closedir(dir), 0);
}

TEST_F(CoreTest, ConfigureRefusesToSwitchAttachedStore) {
  ASSERT_TRUE(ProcessStore().ok());
  StoreConfig c;
  c.store_name = name_ + "other";
  Status s = Configure(c);
  EXPECT_EQ(s.code(), EBUSY);
  c.store_name = name_;
  EXPECT_TRUE(Configure(c).ok());
  auto n = ProcessStoreName();
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, name_);
}

TEST_F(CoreTest, ConfigureSetsCompressionOfANewStore) {
  StoreConfig c;
  c.store_name = name_;
  c.capacity = 4 << 20;
  c.compress = "lz4";
  c.compress_threshold = 0.5;
  c.compress_chunk_size = 256 << 10;
  ASSERT_TRUE(Configure(c).ok());
  auto s = ProcessStore();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->stats().compression, memfs::Compression::kLz4);
  EXPECT_EQ((*s)->stats().chunk_size, 256u << 10);
  EXPECT_DOUBLE_EQ((*s)->stats().compress_threshold, 0.5);
  ASSERT_TRUE(DetachStore().ok());
  (void)memfs::Store::Destroy(name_);
  c.compress = "zip";
  Status bad = Configure(c);  // refused at once; the previous settings stay
  EXPECT_EQ(bad.code(), EINVAL);
  EXPECT_NE(bad.ToString().find("StoreConfig::compress"), std::string::npos) << bad.ToString();
}

// The shared-file (N-to-1) check: a rank > 0 that opened a file empty and
// never wrote its start is refused at the last close (ENOTSUP), and loses
// nothing; rank 0, a file written from its start (also last), a file that
// was not empty, and DLCKPT_SHARED_FILE_CHECK=0 are not.
class SharedFileTest : public CoreTest {
 protected:
  void SetUp() override {
    CoreTest::SetUp();
    StoreConfig c;
    c.store_name = name_;
    c.capacity = 4 << 20;
    c.block_size = 64 << 10;
    c.rank = 1;
    ASSERT_TRUE(Configure(c).ok());
  }
  static ssize_t Pwrite(int fd, const std::string& s, off_t off) {
    ssize_t r;
    EXPECT_EQ(dlckpt_ic_pwrite(fd, s.data(), s.size(), off, &r), 1);
    return r;
  }
  static std::string Contents(const char* path) {
    int fd = Open(path, O_RDONLY);
    std::string s = Read(fd, 1 << 20);
    EXPECT_EQ(Close(fd), 0);
    return s;
  }
};

TEST_F(SharedFileTest, ARanksPartOfASharedFileIsRefusedAtCloseAndKept) {
  // IOR without -F, rank 1 of 2, two segments of 64 KiB blocks.
  int fd = Open("/dlckpt/ior/testFile", O_CREAT | O_RDWR);
  ASSERT_GE(fd, 0);
  std::string block(64 << 10, 'b');
  EXPECT_EQ(Pwrite(fd, block, 1 * (64 << 10)), 64 << 10);
  EXPECT_EQ(Pwrite(fd, block, 3 * (64 << 10)), 64 << 10);
  errno = 0;
  EXPECT_EQ(Close(fd), -1);
  EXPECT_EQ(errno, ENOTSUP);
  EXPECT_EQ(fcntl(fd, F_GETFD), -1);  // the descriptor is gone all the same
  std::string kept = Contents("/dlckpt/ior/testFile");
  ASSERT_EQ(kept.size(), size_t{4 * (64 << 10)});
  EXPECT_EQ(kept.substr(3 * (64 << 10)), block);
  // Sequential writes after a seek, and stdio, are seen the same way.
  fd = Open("/dlckpt/seq", O_CREAT | O_WRONLY | O_TRUNC);
  EXPECT_EQ(Seek(fd, 4096, SEEK_SET), 4096);
  EXPECT_EQ(Write(fd, "data"), 4);
  EXPECT_EQ(Close(fd), -1);
  EXPECT_EQ(errno, ENOTSUP);
  FILE* f;
  ASSERT_EQ(dlckpt_ic_fopen("/dlckpt/stream", "w", &f), 1);
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(fseek(f, 8192, SEEK_SET), 0);
  fputs("tail", f);
  EXPECT_EQ(fclose(f), EOF);
  EXPECT_EQ(errno, ENOTSUP);
  EXPECT_EQ(Contents("/dlckpt/stream").substr(8192), "tail");
}

TEST_F(SharedFileTest, OnlyTheLastCloseOfADescriptionDecides) {
  int fd = Open("/dlckpt/dup", O_CREAT | O_WRONLY);
  int d;
  ASSERT_EQ(dlckpt_ic_dup(fd, &d), 1);
  EXPECT_EQ(Pwrite(fd, "x", 100), 1);
  EXPECT_EQ(Close(fd), 0);
  EXPECT_EQ(Close(d), -1);
  EXPECT_EQ(errno, ENOTSUP);
}

TEST_F(SharedFileTest, PrivateFilesOfARankAreNotRefused) {
  // Written from the start, as every rank's private file of one name is.
  int fd = Open("/dlckpt/private", O_CREAT | O_WRONLY | O_TRUNC);
  EXPECT_EQ(Write(fd, "whole file"), 10);
  EXPECT_EQ(Close(fd), 0);
  // The header written last.
  fd = Open("/dlckpt/header_last", O_CREAT | O_WRONLY | O_TRUNC);
  EXPECT_EQ(Pwrite(fd, "body", 64), 4);
  EXPECT_EQ(Pwrite(fd, "head", 0), 4);
  EXPECT_EQ(Close(fd), 0);
  // Appended to an empty file: the first write is at 0.
  fd = Open("/dlckpt/log", O_CREAT | O_WRONLY | O_APPEND);
  EXPECT_EQ(Write(fd, "line\n"), 5);
  EXPECT_EQ(Close(fd), 0);
  // A file that was not empty: patched in place past its start.
  fd = Open("/dlckpt/private", O_WRONLY);
  EXPECT_EQ(Pwrite(fd, "X", 5), 1);
  EXPECT_EQ(Close(fd), 0);
  // Opened read-only, or nothing written.
  fd = Open("/dlckpt/empty", O_CREAT | O_RDWR);
  EXPECT_EQ(Close(fd), 0);
  // Turned off.
  setenv("DLCKPT_SHARED_FILE_CHECK", "0", 1);
  fd = Open("/dlckpt/sparse", O_CREAT | O_WRONLY);
  EXPECT_EQ(Pwrite(fd, "x", 4096), 1);
  EXPECT_EQ(Close(fd), 0);
  unsetenv("DLCKPT_SHARED_FILE_CHECK");
}

TEST_F(CoreTest, RankZeroIsNeverRefused) {
  int fd = Open("/dlckpt/ior/testFile", O_CREAT | O_RDWR);
  EXPECT_EQ(Seek(fd, 65536, SEEK_SET), 65536);
  EXPECT_EQ(Write(fd, "rank 0 skips its start"), 22);
  EXPECT_EQ(Close(fd), 0);
}

}  // namespace
}  // namespace dlckpt::intercept

// Env: shared memory objects are adopted only when this uid made them (mode
// 0600, a regular file), and ReadFile reads bounded regular files only,
// never blocking on a FIFO or reading a device forever.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <cstring>

#include <gtest/gtest.h>

#include "dlckpt/base/env.h"

namespace dlckpt {
namespace {

constexpr uid_t kNobody = 65534;

// A test that regresses into a blocking open or read is killed by SIGALRM
// instead of hanging the suite.
class Deadline {
 public:
  explicit Deadline(unsigned seconds) { alarm(seconds); }
  ~Deadline() { alarm(0); }
};

class EnvShmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    name_ = "/dlckpt.envtest" + std::to_string(getpid()) + ".n0.r0";
    path_ = "/dev/shm" + name_;
  }
  void TearDown() override { unlink(path_.c_str()); }

  // Creates `path_` as another user would: any mode, any owner.
  void Plant(mode_t mode, uid_t uid) {
    int fd = shm_open(name_.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd, 0) << path_;
    ASSERT_EQ(ftruncate(fd, 1 << 16), 0);
    ASSERT_EQ(fchmod(fd, mode), 0);
    if (uid != geteuid()) {
      ASSERT_EQ(fchown(fd, uid, static_cast<gid_t>(-1)), 0);
    }
    close(fd);
  }

  std::string name_, path_;
};

TEST_F(EnvShmTest, CreatesMode0600WhateverTheUmask) {
  mode_t old = umask(0);
  auto created = Env::Default()->CreateShm(name_, 4096, false);
  umask(old);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  struct stat st;
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, geteuid());
  // The owner attaches again (after a crash, a restart).
  created->reset();
  for (bool writable : {false, true}) {
    auto again = Env::Default()->OpenShm(name_, writable);
    EXPECT_TRUE(again.ok()) << again.status().ToString();
  }
}

TEST_F(EnvShmTest, ShrinkKeepsTheFrontAndFreesTheTail) {
  auto created = Env::Default()->CreateShm(name_, 64 * 4096, true);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  MappedShm& m = **created;
  std::memset(m.data(), 0x5a, m.size());
  struct stat st;
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_GE(static_cast<uint64_t>(st.st_blocks) * 512, 64u * 4096);
  ASSERT_TRUE(m.Shrink(4 * 4096 + 100).ok());
  EXPECT_EQ(m.size(), 4u * 4096 + 100);
  EXPECT_EQ(m.data()[0], 0x5a);
  EXPECT_EQ(m.data()[4 * 4096 + 99], 0x5a);
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 4 * 4096 + 100);
  EXPECT_LE(static_cast<uint64_t>(st.st_blocks) * 512, 5u * 4096);  // the tail's memory is freed
  // Growing, or to nothing, is refused and changes nothing.
  EXPECT_EQ(m.Shrink(8 * 4096).code(), EINVAL);
  EXPECT_EQ(m.Shrink(0).code(), EINVAL);
  EXPECT_EQ(m.size(), 4u * 4096 + 100);
  // Reopened, the object is the shorter one.
  created->reset();
  auto again = Env::Default()->OpenShm(name_, false);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->size(), 4u * 4096 + 100);
  EXPECT_EQ((*again)->data()[4 * 4096], 0x5a);
}

TEST_F(EnvShmTest, RefusesAnObjectOfAnotherUid) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give an object to uid 65534";
  Plant(0600, kNobody);
  for (bool writable : {false, true}) {
    auto r = Env::Default()->OpenShm(name_, writable);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), EPERM);
    EXPECT_EQ(r.status().message(),
              "store " + path_ + " is owned by uid 65534, not by uid 0 (this process); refusing to "
              "attach: remove it or choose another --job");
  }
}

TEST_F(EnvShmTest, RefusesAnObjectWithAnotherMode) {
  Plant(0666, geteuid());
  for (bool writable : {false, true}) {
    auto r = Env::Default()->OpenShm(name_, writable);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), EACCES);
    EXPECT_NE(r.status().message().find(path_ + " has mode 0666, expected 0600"), std::string::npos)
        << r.status().ToString();
  }
  ASSERT_EQ(chmod(path_.c_str(), 0400), 0);
  auto r = Env::Default()->OpenShm(name_, false);
  EXPECT_EQ(r.status().code(), EACCES);
  EXPECT_NE(r.status().message().find("has mode 0400, expected 0600"), std::string::npos)
      << r.status().ToString();
}

TEST_F(EnvShmTest, RefusesAPlantedFifoWithoutBlocking) {
  ASSERT_EQ(mkfifo(path_.c_str(), 0600), 0);
  Deadline deadline(10);
  for (bool writable : {false, true}) {
    auto r = Env::Default()->OpenShm(name_, writable);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), EPERM);
    EXPECT_NE(r.status().message().find(path_ + " is a FIFO, not a regular file"), std::string::npos)
        << r.status().ToString();
  }
}

TEST_F(EnvShmTest, RefusesAPlantedSymlink) {
  ASSERT_EQ(symlink("/dev/zero", path_.c_str()), 0);
  auto r = Env::Default()->OpenShm(name_, false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), EPERM);
  EXPECT_NE(r.status().message().find(path_ + " is a symbolic link"), std::string::npos)
      << r.status().ToString();
}

TEST_F(EnvShmTest, CreateNeverAdoptsAPlantedName) {
  uid_t uid = geteuid() == 0 ? kNobody : geteuid();
  Plant(0666, uid);
  auto r = Env::Default()->CreateShm(name_, 4096, false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), EEXIST);
  EXPECT_NE(r.status().message().find(name_), std::string::npos);
  struct stat st;
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, uid);
  EXPECT_EQ(st.st_mode & 07777, 0666u);
  EXPECT_EQ(st.st_size, 1 << 16);  // untouched
}

TEST(EnvShmNamesTest, NamesTheKindOfObject) {
  std::string name = "/dlckpt.envtest" + std::to_string(getpid()) + ".n0.parity1";
  int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  ASSERT_EQ(fchmod(fd, 0644), 0);
  close(fd);
  auto r = Env::Default()->OpenShm(name, false);
  shm_unlink(name.c_str());
  EXPECT_EQ(r.status().code(), EACCES);
  EXPECT_NE(r.status().message().find("parity object /dev/shm" + name + " has mode 0644"), std::string::npos)
      << r.status().ToString();
}

class ReadFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dlckpt_env_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::string cmd = "rm -rf '" + dir_ + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }
  std::string dir_;
};

TEST_F(ReadFileTest, ReadsRegularFilesAndSymlinksToThem) {
  std::string file = dir_ + "/f", link = dir_ + "/l";
  std::string big(200000, 'x');
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(file, big, 0600).ok());
  ASSERT_EQ(symlink(file.c_str(), link.c_str()), 0);
  auto r = Env::Default()->ReadFile(link);  // no limit by default
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(*r == big) << r->size() << " bytes read";
  auto exact = Env::Default()->ReadFile(file, big.size());
  ASSERT_TRUE(exact.ok()) << exact.status().ToString();
  EXPECT_EQ(exact->size(), big.size());
}

TEST_F(ReadFileTest, RefusesAFileOverTheLimit) {
  std::string file = dir_ + "/f";
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(file, std::string(70000, 'x'), 0600).ok());
  auto r = Env::Default()->ReadFile(file, 65536);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), EFBIG);
  EXPECT_EQ(r.status().message(),
            file + " is 70000 bytes, more than the 65536 bytes expected; refusing to read it");
}

TEST_F(ReadFileTest, RefusesAFifoPromptly) {
  std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  Deadline deadline(10);
  auto start = std::chrono::steady_clock::now();
  auto r = Env::Default()->ReadFile(fifo, 65536);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), EINVAL);
  EXPECT_EQ(r.status().message(), fifo + " is a FIFO, not a regular file; refusing to read it");
}

TEST_F(ReadFileTest, RefusesDevicesBehindSymlinks) {
  Deadline deadline(10);
  for (const char* dev : {"/dev/null", "/dev/zero"}) {
    std::string link = dir_ + "/dev" + std::to_string(dev[5] == 'z');
    ASSERT_EQ(symlink(dev, link.c_str()), 0);
    auto r = Env::Default()->ReadFile(link, 65536);
    ASSERT_FALSE(r.ok()) << dev;
    EXPECT_EQ(r.status().code(), EINVAL) << dev;
    EXPECT_EQ(r.status().message(), link + " is a character device, not a regular file; refusing to read it");
  }
}

TEST_F(ReadFileTest, ADirectoryIsEisdir) {
  auto r = Env::Default()->ReadFile(dir_);
  EXPECT_EQ(r.status().code(), EISDIR);
  EXPECT_EQ(r.status().message(), "read " + dir_ + ": Is a directory");
}

TEST_F(ReadFileTest, MissingFileIsEnoentNamingThePath) {
  auto r = Env::Default()->ReadFile(dir_ + "/none");
  EXPECT_EQ(r.status().code(), ENOENT);
  EXPECT_NE(r.status().message().find(dir_ + "/none"), std::string::npos);
}

}  // namespace
}  // namespace dlckpt

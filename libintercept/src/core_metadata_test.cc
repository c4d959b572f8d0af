// Tests of libintercept's metadata behaviour through its C boundary on a real
// memfs store: statfs/statvfs on memfs paths and descriptors (with and
// without a store), the file table size (Configure, $DLCKPT_MAX_FILES, the
// capacity default), and the store staying attached after metadata calls
// until the process starts a child.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "core_c.h"
#include "dlckpt/intercept/intercept.h"

namespace dlckpt::intercept {
namespace {

class MetadataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    name_ = "/dlckpt.icmeta" + std::to_string(getpid()) + "x" + std::to_string(counter++) +
            ".node.r0";
    unsetenv("DLCKPT_MAX_FILES");
  }
  void TearDown() override {
    unsetenv("DLCKPT_MAX_FILES");
    EXPECT_TRUE(DetachStore().ok());
    (void)memfs::Store::Destroy(name_);
  }
  void Config(uint32_t max_files = 0) {
    StoreConfig c;
    c.store_name = name_;
    c.capacity = 4 << 20;
    c.block_size = 64 << 10;
    c.max_files = max_files;
    ASSERT_TRUE(Configure(c).ok());
  }
  static int Open(const char* path, int flags) {
    int r;
    EXPECT_EQ(dlckpt_ic_open(AT_FDCWD, path, flags, 0644, &r), 1) << path;
    return r;
  }
  static int Close(int fd) {
    int r;
    EXPECT_EQ(dlckpt_ic_close(fd, &r), 1);
    return r;
  }
  // Whether another owner could take the store now (it is not attached here).
  bool StoreFree() {
    auto s = memfs::Store::Attach(name_, memfs::AttachMode::kOwner);
    if (s.ok()) return true;
    EXPECT_EQ(s.status().code(), EBUSY) << s.status().ToString();
    return false;
  }
  bool StoreExists() {
    auto s = memfs::Store::Attach(name_, memfs::AttachMode::kReadOnly);
    return s.ok();
  }

  std::string name_;
};

TEST_F(MetadataTest, StatfsWithoutStoreReportsConfiguredGeometryAndCreatesNothing) {
  Config();
  struct statvfs sv;
  int r = -1;
  ASSERT_EQ(dlckpt_ic_statvfs(-1, "/dlckpt", &sv, &r), 1);
  ASSERT_EQ(r, 0);
  EXPECT_EQ(sv.f_bsize, 64u << 10);
  EXPECT_EQ(sv.f_frsize, 64u << 10);
  EXPECT_EQ(sv.f_blocks, 64u);
  EXPECT_EQ(sv.f_bfree, 64u);
  EXPECT_EQ(sv.f_bavail, 64u);
  EXPECT_EQ(sv.f_files, memfs::DefaultMaxFiles(4 << 20));
  EXPECT_EQ(sv.f_ffree, sv.f_files);
  EXPECT_EQ(sv.f_namemax, memfs::kMaxPath);
  struct statfs sf;
  ASSERT_EQ(dlckpt_ic_statfs(-1, "/dlckpt", &sf, &r), 1);
  ASSERT_EQ(r, 0);
  EXPECT_EQ(sf.f_type, 0x646c636b);
  EXPECT_EQ(sf.f_blocks, 64u);
  EXPECT_EQ(sf.f_files, sv.f_files);
  EXPECT_FALSE(StoreExists());
  // A path that does not exist yet answers too (a file can be created there
  // without its parents), and creates nothing; paths outside the prefixes
  // are the OS's.
  sv = {};
  ASSERT_EQ(dlckpt_ic_statvfs(-1, "/dlckpt/missing/dir", &sv, &r), 1);
  EXPECT_EQ(r, 0);
  EXPECT_EQ(sv.f_blocks, 64u);
  EXPECT_EQ(dlckpt_ic_statvfs(-1, "/tmp", &sv, &r), 0);
  EXPECT_FALSE(StoreExists());
}

// Issue 36: IOR and mdtest statfs their test directory (/dlckpt/ior) before
// its first file exists; that must answer from the store, and fail only
// where a real file system would.
TEST_F(MetadataTest, StatfsOnPathsThatDoNotExistYetAnswersFromTheStore) {
  Config();
  int fd = Open("/dlckpt/other/file", O_CREAT | O_WRONLY);
  ASSERT_GE(fd, 0);
  std::string data(100 << 10, 'y');  // 2 blocks
  ssize_t w;
  ASSERT_EQ(dlckpt_ic_write(fd, data.data(), data.size(), &w), 1);
  EXPECT_EQ(Close(fd), 0);
  int r = -1;
  for (const char* p : {"/dlckpt/ior", "/dlckpt/ior/", "/dlckpt/ior/testFile", "/dlckpt/a/b/c"}) {
    struct statvfs sv{};
    ASSERT_EQ(dlckpt_ic_statvfs(-1, p, &sv, &r), 1) << p;
    EXPECT_EQ(r, 0) << p << ": " << std::strerror(errno);
    EXPECT_EQ(sv.f_blocks, 64u) << p;
    EXPECT_EQ(sv.f_bfree, 64u - 2u) << p;
    struct statfs sf{};
    ASSERT_EQ(dlckpt_ic_statfs(-1, p, &sf, &r), 1) << p;
    EXPECT_EQ(r, 0) << p;
    EXPECT_EQ(sf.f_type, 0x646c636b) << p;
  }
  // Statfs created nothing: /dlckpt/ior is still absent.
  struct stat st;
  ASSERT_EQ(dlckpt_ic_stat(AT_FDCWD, "/dlckpt/ior", &st, 0, &r), 1);
  EXPECT_EQ(r, -1);
  EXPECT_EQ(errno, ENOENT);
  // Below a regular file: ENOTDIR, as on a real file system.
  struct statvfs sv;
  ASSERT_EQ(dlckpt_ic_statvfs(-1, "/dlckpt/other/file/x", &sv, &r), 1);
  EXPECT_EQ(r, -1);
  EXPECT_EQ(errno, ENOTDIR);
  // A path no memfs file can have.
  std::string long_path = "/dlckpt/" + std::string(memfs::kMaxPath, 'n');
  ASSERT_EQ(dlckpt_ic_statvfs(-1, long_path.c_str(), &sv, &r), 1);
  EXPECT_EQ(r, -1);
  EXPECT_EQ(errno, ENAMETOOLONG);
}

TEST_F(MetadataTest, StatfsReportsTheStoresUsageForPathsAndDescriptors) {
  Config();
  int fd = Open("/dlckpt/app/ckpt.0", O_CREAT | O_WRONLY);
  ASSERT_GE(fd, 0);
  std::string data(200 << 10, 'x');  // 4 blocks of 64 KiB
  ssize_t w;
  ASSERT_EQ(dlckpt_ic_write(fd, data.data(), data.size(), &w), 1);
  ASSERT_EQ(w, static_cast<ssize_t>(data.size()));
  auto store = ProcessStore();
  ASSERT_TRUE(store.ok());
  memfs::StoreStats st = (*store)->stats();
  struct statvfs sv;
  int r = -1;
  ASSERT_EQ(dlckpt_ic_statvfs(-1, "/dlckpt/app", &sv, &r), 1);
  ASSERT_EQ(r, 0);
  EXPECT_EQ(sv.f_blocks, st.blocks_total);
  EXPECT_EQ(sv.f_bfree, st.blocks_free);
  EXPECT_EQ(sv.f_bfree, 64u - 4u);
  EXPECT_EQ(sv.f_files, st.max_files);
  EXPECT_EQ(sv.f_ffree, st.max_files - 1);  // one file; /dlckpt/app is implied
  struct statvfs fsv;
  ASSERT_EQ(dlckpt_ic_statvfs(fd, nullptr, &fsv, &r), 1);
  ASSERT_EQ(r, 0);
  EXPECT_EQ(fsv.f_bfree, sv.f_bfree);
  struct statfs sf;
  ASSERT_EQ(dlckpt_ic_statfs(fd, nullptr, &sf, &r), 1);
  ASSERT_EQ(r, 0);
  EXPECT_EQ(sf.f_bfree, sv.f_bfree);
  EXPECT_EQ(sf.f_ffree, sv.f_ffree);
  EXPECT_EQ(Close(fd), 0);
  // A descriptor that is not memfs is the OS's.
  EXPECT_EQ(dlckpt_ic_statfs(0, nullptr, &sf, &r), 0);
}

TEST_F(MetadataTest, ConfiguredFileTableIsFullAtItsSize) {
  Config(4);
  for (int i = 0; i < 4; ++i) {
    std::string p = "/dlckpt/f" + std::to_string(i);
    int fd = Open(p.c_str(), O_CREAT | O_WRONLY);
    ASSERT_GE(fd, 0) << p;
    EXPECT_EQ(Close(fd), 0);
  }
  EXPECT_EQ(Open("/dlckpt/f4", O_CREAT | O_WRONLY), -1);
  EXPECT_EQ(errno, ENOSPC);
  auto store = ProcessStore();
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->stats().max_files, 4u);
  struct statvfs sv;
  int r = -1;
  ASSERT_EQ(dlckpt_ic_statvfs(-1, "/dlckpt", &sv, &r), 1);
  EXPECT_EQ(sv.f_ffree, 0u);
}

TEST_F(MetadataTest, MaxFilesFromTheEnvironmentAndByDefault) {
  setenv("DLCKPT_MAX_FILES", "16", 1);
  Config();
  struct statvfs sv;
  int r = -1;
  ASSERT_EQ(dlckpt_ic_statvfs(-1, "/dlckpt", &sv, &r), 1);
  EXPECT_EQ(sv.f_files, 16u);  // the store it would create
  ASSERT_EQ(dlckpt_ic_mkdir(AT_FDCWD, "/dlckpt/d", 0755, &r), 1);
  ASSERT_EQ(r, 0);
  auto store = ProcessStore();
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->stats().max_files, 16u);
  ASSERT_TRUE(DetachStore().ok());
  ASSERT_TRUE(memfs::Store::Destroy(name_).ok());
  // A bad value is refused when the store would be created.
  setenv("DLCKPT_MAX_FILES", "0", 1);
  ASSERT_EQ(dlckpt_ic_mkdir(AT_FDCWD, "/dlckpt/d", 0755, &r), 1);
  EXPECT_EQ(r, -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_FALSE(StoreExists());
  unsetenv("DLCKPT_MAX_FILES");
  ASSERT_EQ(dlckpt_ic_mkdir(AT_FDCWD, "/dlckpt/d", 0755, &r), 1);
  ASSERT_EQ(r, 0);
  store = ProcessStore();
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->stats().max_files, memfs::DefaultMaxFiles(4 << 20));
}

TEST_F(MetadataTest, StoreStaysAttachedAfterMetadataCallsUntilAChildStarts) {
  Config();
  int r = -1;
  ASSERT_EQ(dlckpt_ic_mkdir(AT_FDCWD, "/dlckpt/d", 0755, &r), 1);  // creates the store
  ASSERT_EQ(r, 0);
  EXPECT_FALSE(StoreFree());  // still attached
  struct stat st;
  ASSERT_EQ(dlckpt_ic_stat(AT_FDCWD, "/dlckpt/d", &st, 0, &r), 1);
  ASSERT_EQ(r, 0);
  EXPECT_FALSE(StoreFree());
  // Starting a child lets a store attached only for metadata go...
  dlckpt_ic_before_spawn();
  EXPECT_TRUE(StoreFree());
  // ...and the next call attaches it again, keeping what was done.
  ASSERT_EQ(dlckpt_ic_stat(AT_FDCWD, "/dlckpt/d", &st, 0, &r), 1);
  ASSERT_EQ(r, 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_FALSE(StoreFree());
  // A process that opened a file keeps its store across children.
  int fd = Open("/dlckpt/d/f", O_CREAT | O_WRONLY);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(Close(fd), 0);
  dlckpt_ic_before_spawn();
  EXPECT_FALSE(StoreFree());
}

}  // namespace
}  // namespace dlckpt::intercept

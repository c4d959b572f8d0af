// The file table's size: the capacity-derived default (DefaultMaxFiles), the
// metadata size formula of memfs.h, and the ENOSPC a full table gives, which
// names the limit and how to raise it.
#include <fcntl.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

#include "dlckpt/memfs/memfs.h"

namespace dlckpt::memfs {
namespace {

class StoreLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    name_ = *StoreName("limits" + std::to_string(getpid()) + "x" + std::to_string(counter++),
                       "n0", 0);
  }
  void TearDown() override { (void)Store::Destroy(name_); }

  static StoreOptions Options(uint64_t capacity, uint32_t max_files) {
    StoreOptions o;
    o.capacity = capacity;
    o.block_size = 64 << 10;
    o.max_files = max_files;
    o.prefault = false;
    return o;
  }

  std::string name_;
};

uint64_t AlignUp4K(uint64_t v) { return (v + 4095) / 4096 * 4096; }

TEST_F(StoreLimitsTest, DefaultMaxFilesIsOnePer32KiBOfCapacityWithinBounds) {
  EXPECT_EQ(DefaultMaxFiles(0), 1024u);
  EXPECT_EQ(DefaultMaxFiles(4 << 20), 1024u);
  EXPECT_EQ(DefaultMaxFiles(32ull << 20), 1024u);
  EXPECT_EQ(DefaultMaxFiles(64ull << 20), 2048u);
  EXPECT_EQ(DefaultMaxFiles(256ull << 20), 8192u);
  EXPECT_EQ(DefaultMaxFiles(1ull << 30), 32768u);
  EXPECT_EQ(DefaultMaxFiles(1ull << 40), 1u << 20);
}

TEST_F(StoreLimitsTest, ZeroMaxFilesTakesTheDefaultAndTheMetadataFormulaHolds) {
  StoreOptions defaults;
  EXPECT_EQ(defaults.max_files, 0u);
  for (bool compressed : {false, true}) {
    SCOPED_TRACE(compressed ? "lz4" : "none");
    StoreOptions o = Options(256ull << 20, 0);
    if (compressed) o.compression = Compression::kLz4;
    auto s = Store::Create(name_, o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    StoreStats st = (*s)->stats();
    EXPECT_EQ(st.max_files, 8192u);
    // memfs.h: 3 slots of (232 + max_files * 320 + blocks * 4 [+ blocks * 8]),
    // each rounded up to 4 KiB, plus a 4 KiB header, plus the capacity.
    uint64_t blocks = st.blocks_total;
    uint64_t slot = AlignUp4K(232 + uint64_t{st.max_files} * 320 + blocks * 4 +
                              (compressed ? blocks * 8 : 0));
    EXPECT_EQ(st.shm_bytes, 4096 + 3 * slot + st.capacity);
    s->reset();
    ASSERT_TRUE(Store::Destroy(name_).ok());
  }
}

TEST_F(StoreLimitsTest, AFullFileTableNamesItsLimitAndHowToRaiseIt) {
  auto s = Store::Create(name_, Options(4 << 20, 3));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->stats().max_files, 3u);
  ASSERT_TRUE((*s)->Mkdir("/dlckpt/d", 0755).ok());
  for (const char* p : {"/dlckpt/d/a", "/dlckpt/d/b"}) {
    auto fd = (*s)->Open(p, O_CREAT | O_WRONLY);
    ASSERT_TRUE(fd.ok()) << fd.status().ToString();
    ASSERT_TRUE((*s)->Close(*fd).ok());
  }
  auto full = (*s)->Open("/dlckpt/d/c", O_CREAT | O_WRONLY);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), ENOSPC);
  const std::string msg = full.status().ToString();
  EXPECT_NE(msg.find("/dlckpt/d/c"), std::string::npos) << msg;
  EXPECT_NE(msg.find("file table full: 3 files and directories (max_files 3)"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("DLCKPT_MAX_FILES"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--max-files"), std::string::npos) << msg;
  Status dir = (*s)->Mkdir("/dlckpt/e", 0755);
  EXPECT_EQ(dir.code(), ENOSPC);
  EXPECT_NE(dir.ToString().find("max_files 3"), std::string::npos) << dir.ToString();
  // Removing an entry makes room again.
  ASSERT_TRUE((*s)->Unlink("/dlckpt/d/a").ok());
  auto again = (*s)->Open("/dlckpt/d/c", O_CREAT | O_WRONLY);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ASSERT_TRUE((*s)->Close(*again).ok());
}

TEST_F(StoreLimitsTest, MaxFilesAboveTheBoundIsRefused) {
  auto s = Store::Create(name_, Options(4 << 20, (1u << 20) + 1));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), EINVAL);
  EXPECT_NE(s.status().ToString().find("max_files"), std::string::npos);
}

}  // namespace
}  // namespace dlckpt::memfs

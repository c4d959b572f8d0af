// Failed writes ("Failed writes" in dlckpt/memfs/memfs.h): every kind of
// failed write into the working files (a write that fails, a short write, a
// write past the capacity, a failed extension, a create lost to a full file
// table) makes Commit refuse, naming the file, the store, its capacity and
// how to raise it, and leaves the committed epochs untouched; writing the
// file anew, truncating it to 0 or removing it ends the refusal; the marks
// reach the next owner through a clean detach, not through a crash.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dlckpt/memfs/memfs.h"
#include "store_test_util.h"

namespace dlckpt::memfs {
namespace {

using testing::Pattern;
using testing::ReadFile;
using testing::UniqueName;
using testing::WriteFile;

constexpr uint64_t kBlock = 64 << 10;
constexpr uint64_t kCapacity = 16 * kBlock;  // 1 MiB
constexpr uint64_t kTooBig = 17 * kBlock;  // more than the whole store
const char* const kPath = "/dlckpt/app/ckpt.0";

class StoreDamageTest : public ::testing::TestWithParam<Compression> {
 protected:
  void SetUp() override {
    name_ = UniqueName("damage");
    auto s = Store::Create(name_, Options());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
    // Epoch 1: a 4-block checkpoint, protected.
    old_ = Pattern(4 * kBlock, 1);
    WriteFile(*store_, kPath, old_);
    ASSERT_EQ(*store_->Commit(), 1u);
    ASSERT_TRUE(store_->Acknowledge(1).ok());
  }
  void TearDown() override {
    store_.reset();
    (void)Store::Destroy(name_);
  }

  StoreOptions Options() const {
    StoreOptions o;
    o.capacity = kCapacity;
    o.block_size = kBlock;
    o.max_files = 4;
    o.prefault = false;
    o.compression = GetParam();
    return o;
  }

  // Opens kPath for writing anew and writes `n` incompressible bytes at
  // once: returns what the write returned.
  Result<size_t> Rewrite(size_t n, int flags = O_WRONLY | O_CREAT | O_TRUNC) {
    auto fd = store_->Open(kPath, flags, 0644);
    if (!fd.ok()) return fd.status();
    std::vector<uint8_t> data = Pattern(n, 2);
    Result<size_t> w = store_->Write(*fd, data.data(), data.size());
    EXPECT_TRUE(store_->Close(*fd).ok());
    return w;
  }

  // Commit is refused with ENOSPC and a message naming `what`, the store,
  // the capacity and the options that raise it; nothing changed.
  void ExpectRefused(const std::string& what) {
    EpochState before = store_->epochs();
    Result<uint64_t> c = store_->Commit();
    ASSERT_FALSE(c.ok()) << "a commit of a failed write was accepted";
    EXPECT_EQ(c.status().code(), ENOSPC);
    const std::string msg = c.status().ToString();
    for (const std::string& part : {what, name_, std::string("refusing to commit epoch 2"),
                                    std::string("1.0 MiB"), std::string("dlckpt-run --capacity"),
                                    std::string("DLCKPT_STORE_CAPACITY"), std::string("DLCKPT_MAX_FILES"),
                                    std::string("acknowledged epoch 1 is unchanged")}) {
      EXPECT_NE(msg.find(part), std::string::npos) << "no '" << part << "' in: " << msg;
    }
    EpochState after = store_->epochs();
    EXPECT_EQ(after.acknowledged, before.acknowledged);
    EXPECT_EQ(after.pending, before.pending);
    EXPECT_EQ(after.next, before.next);
    // The protected epoch is whole.
    ASSERT_TRUE(store_->Verify(1).ok());
  }

  void ExpectCommits() {
    Result<uint64_t> c = store_->Commit();
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ASSERT_TRUE(store_->Acknowledge(*c).ok());
  }

  std::string name_;
  std::unique_ptr<Store> store_;
  std::vector<uint8_t> old_;
};

TEST_P(StoreDamageTest, AShortWriteIsRefusedAndTheProtectedEpochStays) {
  // 12 blocks are free (epoch 1 keeps its 4). An uncompressed store writes
  // what fits; a compressed one may refuse the whole chunk.
  Result<size_t> w = Rewrite(kTooBig);
  if (GetParam() == Compression::kNone) {
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_EQ(*w, 12 * kBlock);
  } else {
    ASSERT_TRUE(!w.ok() || *w < kTooBig);
  }
  ExpectRefused(std::string(kPath) + " is incomplete");
  auto info = store_->Stat(kPath);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->damage, ENOSPC);
  ASSERT_TRUE(store_->Rollback().ok());
  EXPECT_EQ(ReadFile(*store_, kPath), old_);
  ExpectCommits();  // back at epoch 1's files: nothing failed
}

TEST_P(StoreDamageTest, AFailedWriteIsRefused) {
  ASSERT_TRUE(Rewrite(12 * kBlock).ok());  // every block in use
  ASSERT_TRUE(store_->stats().blocks_free == 0);
  auto fd = store_->Open(kPath, O_WRONLY | O_APPEND);
  ASSERT_TRUE(fd.ok());
  std::vector<uint8_t> more = Pattern(kBlock, 3);
  Result<size_t> w = store_->Write(*fd, more.data(), more.size());
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), ENOSPC);
  ASSERT_TRUE(store_->Close(*fd).ok());
  ExpectRefused("a write of 65536 bytes at offset 786432 failed");
}

TEST_P(StoreDamageTest, AWritePastTheCapacityIsRefused) {
  auto fd = store_->Open("/dlckpt/app/sparse", O_WRONLY | O_CREAT, 0644);
  ASSERT_TRUE(fd.ok());
  const uint64_t beyond = GetParam() == Compression::kLz4 ? 16 * 16 * kBlock : kCapacity;
  Result<size_t> w = store_->Pwrite(*fd, "x", 1, beyond);
  ASSERT_FALSE(w.ok());
  ASSERT_TRUE(store_->Close(*fd).ok());
  ExpectRefused("/dlckpt/app/sparse is incomplete");
}

TEST_P(StoreDamageTest, AFailedExtensionIsRefused) {
  auto fd = store_->Open(kPath, O_WRONLY);
  ASSERT_TRUE(fd.ok());
  Status grown = store_->Ftruncate(*fd, 64 * kCapacity);
  ASSERT_FALSE(grown.ok());
  ASSERT_TRUE(store_->Close(*fd).ok());
  ExpectRefused("resizing it to");
  // A truncate to 0 ends it.
  ASSERT_TRUE(store_->Truncate(kPath, 0).ok());
  ExpectCommits();
  // So does the path form of a failed extension fail the commit.
  ASSERT_FALSE(store_->Truncate(kPath, 64 * kCapacity).ok());
  Result<uint64_t> c = store_->Commit();
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find(kPath), std::string::npos) << c.status().ToString();
}

TEST_P(StoreDamageTest, ACreateLostToAFullFileTableIsRefusedOnce) {
  for (const char* p : {"/dlckpt/app/a", "/dlckpt/app/b", "/dlckpt/app/c"}) {
    WriteFile(*store_, p, Pattern(100, 4));
  }
  auto lost = store_->Open("/dlckpt/app/d", O_WRONLY | O_CREAT, 0644);
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.status().code(), ENOSPC);
  ExpectRefused("creating /dlckpt/app/d failed");
  // Reported once: the path is not among the working files.
  ExpectCommits();
  // Created after all (room was made): nothing is refused.
  ASSERT_FALSE(store_->Open("/dlckpt/app/e", O_WRONLY | O_CREAT, 0644).ok());
  ASSERT_TRUE(store_->Unlink("/dlckpt/app/a").ok());
  WriteFile(*store_, "/dlckpt/app/e", Pattern(100, 5));
  ExpectCommits();
  // Given up: removed (rm -f) or its directory removed.
  ASSERT_FALSE(store_->Open("/dlckpt/app/f", O_WRONLY | O_CREAT, 0644).ok());
  EXPECT_EQ(store_->Unlink("/dlckpt/app/f").code(), ENOENT);
  ExpectCommits();
  ASSERT_TRUE(store_->Unlink("/dlckpt/app/b").ok());
  ASSERT_TRUE(store_->Mkdir("/dlckpt/dir", 0755).ok());
  ASSERT_FALSE(store_->Open("/dlckpt/dir/g", O_WRONLY | O_CREAT, 0644).ok());
  ASSERT_TRUE(store_->Rmdir("/dlckpt/dir").ok());
  ExpectCommits();
  // Two lost creates: reported by the refused commit, not forgotten by one removal.
  WriteFile(*store_, "/dlckpt/app/x", Pattern(100, 9));
  ASSERT_FALSE(store_->Open("/dlckpt/app/h", O_WRONLY | O_CREAT, 0644).ok());
  ASSERT_FALSE(store_->Open("/dlckpt/app/i", O_WRONLY | O_CREAT, 0644).ok());
  EXPECT_EQ(store_->Unlink("/dlckpt/app/h").code(), ENOENT);
  Result<uint64_t> refused = store_->Commit();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("and 1 more create(s)"), std::string::npos) << refused.status().ToString();
  ExpectCommits();
}

TEST_P(StoreDamageTest, WritingTheFileAnewOrRemovingItEndsTheRefusal) {
  // O_TRUNC.
  (void)Rewrite(kTooBig);
  ASSERT_FALSE(store_->Commit().ok());
  ASSERT_TRUE(Rewrite(2 * kBlock).ok());
  ExpectCommits();
  // A rewrite of [0, size) without O_TRUNC; a partial one is not enough.
  (void)Rewrite(kTooBig);
  auto info = store_->Stat(kPath);
  ASSERT_TRUE(info.ok());
  ASSERT_GT(info->size, kBlock);
  {
    auto fd = store_->Open(kPath, O_WRONLY);
    ASSERT_TRUE(fd.ok());
    std::vector<uint8_t> data = Pattern(info->size, 6);
    ASSERT_EQ(*store_->Pwrite(*fd, data.data(), kBlock, 0), kBlock);
    ASSERT_TRUE(store_->Close(*fd).ok());
    ASSERT_FALSE(store_->Commit().ok()) << "a partial rewrite ended the damage";
    fd = store_->Open(kPath, O_WRONLY);
    ASSERT_TRUE(fd.ok());
    ASSERT_EQ(*store_->Pwrite(*fd, data.data() + kBlock, info->size - kBlock, kBlock), info->size - kBlock);
    ASSERT_TRUE(store_->Close(*fd).ok());
    ExpectCommits();
  }
  // A truncate to where the bytes are still the application's (the missing
  // ones start at the size a short write left).
  (void)Rewrite(kTooBig);
  ASSERT_FALSE(store_->Commit().ok());
  info = store_->Stat(kPath);
  ASSERT_TRUE(info.ok());
  ASSERT_TRUE(store_->Truncate(kPath, info->size / 2).ok());
  ExpectCommits();
  // Unlink.
  (void)Rewrite(kTooBig);
  ASSERT_FALSE(store_->Commit().ok());
  ASSERT_TRUE(store_->Unlink(kPath).ok());
  ExpectCommits();
  // A rename over it.
  WriteFile(*store_, "/dlckpt/app/new", Pattern(100, 7));
  (void)Rewrite(kTooBig);
  ASSERT_FALSE(store_->Commit().ok());
  ASSERT_TRUE(store_->Rename("/dlckpt/app/new", kPath).ok());
  ExpectCommits();
}

TEST_P(StoreDamageTest, TheNextOwnerAfterADetachRefusesTooNotAfterACrash) {
  for (const char* p : {"/dlckpt/app/a", "/dlckpt/app/b", "/dlckpt/app/c"}) {
    WriteFile(*store_, p, Pattern(100, 4));
  }
  (void)Rewrite(kTooBig);
  ASSERT_FALSE(store_->Open("/dlckpt/app/d", O_WRONLY | O_CREAT, 0644).ok());
  store_.reset();  // a clean detach saves the working files and their marks
  auto next = Store::Attach(name_, AttachMode::kOwner);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  store_ = std::move(*next);
  Result<uint64_t> c = store_->Commit();
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find(std::string(kPath) + " is incomplete"), std::string::npos)
      << c.status().ToString();
  EXPECT_NE(c.status().message().find("creating /dlckpt/app/d failed"), std::string::npos)
      << c.status().ToString();
  // An owner that dies leaves no working files: the next starts from epoch 1.
  (void)Rewrite(kTooBig);
  ASSERT_FALSE(store_->Open("/dlckpt/app/e", O_WRONLY | O_CREAT, 0644).ok());
  store_.reset();
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto child = Store::Attach(name_, AttachMode::kOwner);
    if (!child.ok()) _exit(2);
    std::vector<uint8_t> data = Pattern(16 * kBlock, 8);
    auto fd = (*child)->Open(kPath, O_WRONLY | O_TRUNC);
    if (!fd.ok()) _exit(3);
    Result<size_t> w = (*child)->Write(*fd, data.data(), data.size());
    if (w.ok() && *w == data.size()) _exit(4);
    _exit(0);  // killed: no destructor, nothing saved
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  next = Store::Attach(name_, AttachMode::kOwner);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  store_ = std::move(*next);
  EXPECT_EQ(ReadFile(*store_, kPath), old_);
  ExpectCommits();
}

INSTANTIATE_TEST_SUITE_P(Compression, StoreDamageTest, ::testing::Values(Compression::kNone, Compression::kLz4),
                         [](const ::testing::TestParamInfo<Compression>& i) {
                           return std::string(CompressionName(i.param));
                         });

}  // namespace
}  // namespace dlckpt::memfs

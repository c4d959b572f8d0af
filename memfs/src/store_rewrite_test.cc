// Equal rewrites (FileNode::shadow, blocks.cc): a checkpoint file written
// again whole, with O_TRUNC or in place, keeps the committed blocks whose
// bytes did not change, so the image delta of the incremental encode covers
// only what changed. Also: nothing leaks when the shadowed blocks are given
// up (abort, rollback, unlink). The random cases, against a disk model and
// against a full encode, are in store_differential_test and delta_test.
#include <fcntl.h>

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dlckpt/memfs/memfs.h"
#include "store_test_util.h"

namespace dlckpt::memfs {
namespace {

using testing::ReadFile;
using testing::UniqueName;

constexpr uint32_t kBlock = 4096;
constexpr size_t kSize = 10 * kBlock + 100;  // 11 blocks, the last partial

class EqualRewriteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    name_ = UniqueName("rewrite");
    StoreOptions o;
    o.capacity = 1 << 20;
    o.block_size = kBlock;
    o.max_files = 8;
    auto s = Store::Create(name_, o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
    std::mt19937 rng(7);
    data_.resize(kSize);
    for (auto& b : data_) b = static_cast<uint8_t>(rng());
  }
  void TearDown() override {
    store_.reset();
    (void)Store::Destroy(name_);
  }

  void Write(const std::vector<uint8_t>& bytes, int flags) {
    auto fd = store_->Open("/ckpt", flags, 0644);
    ASSERT_TRUE(fd.ok()) << fd.status().ToString();
    // In pieces, as stdio or a chunked writer would.
    for (size_t off = 0; off < bytes.size(); off += 3000) {
      size_t n = std::min<size_t>(3000, bytes.size() - off);
      ASSERT_TRUE(store_->Write(*fd, bytes.data() + off, n).ok());
    }
    ASSERT_TRUE(store_->Close(*fd).ok());
  }
  uint64_t Commit() {
    auto e = store_->Commit();
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? *e : 0;
  }
  uint64_t CommitAck() {
    uint64_t e = Commit();
    EXPECT_TRUE(store_->Acknowledge(e).ok());
    return e;
  }
  // Both committed: `to` pending, acknowledged after.
  uint64_t DataChangedThenAck(uint64_t from, uint64_t to) {
    uint64_t n = DataChanged(from, to);
    EXPECT_TRUE(store_->Acknowledge(to).ok());
    return n;
  }
  uint64_t Kept() { return store_->stats().equal_blocks_kept; }
  uint64_t DataChanged(uint64_t from, uint64_t to) {
    auto d = store_->Delta(from, to);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_FALSE(d->layout_changed);
    return d->changed_bytes;
  }

  std::string name_;
  std::unique_ptr<Store> store_;
  std::vector<uint8_t> data_;
};

TEST_F(EqualRewriteTest, OTruncRewriteOfEqualBytesKeepsEveryBlock) {
  Write(data_, O_WRONLY | O_CREAT | O_TRUNC);
  uint64_t e1 = CommitAck();
  const uint64_t used = store_->stats().blocks_used;
  Write(data_, O_WRONLY | O_TRUNC);
  uint64_t e2 = Commit();
  EXPECT_EQ(Kept(), 11u);
  // Only the file table's metadata (mtime) differs; not one data block.
  EXPECT_LT(DataChangedThenAck(e1, e2), kBlock);
  EXPECT_EQ(store_->stats().blocks_used, used) << "the rewrite's own blocks were not given back";
  EXPECT_EQ(ReadFile(*store_, "/ckpt"), data_);
}

TEST_F(EqualRewriteTest, OneChangedBlockIsTheOnlyDataInTheDelta) {
  Write(data_, O_WRONLY | O_CREAT | O_TRUNC);
  uint64_t e1 = CommitAck();
  std::vector<uint8_t> changed = data_;
  changed[3 * kBlock + 17] ^= 1;
  Write(changed, O_WRONLY | O_TRUNC);
  uint64_t e2 = Commit();
  EXPECT_EQ(Kept(), 10u);
  uint64_t delta = DataChangedThenAck(e1, e2);
  EXPECT_GE(delta, kBlock);
  EXPECT_LT(delta, 2 * kBlock);
  EXPECT_EQ(ReadFile(*store_, "/ckpt"), changed);
}

TEST_F(EqualRewriteTest, InPlaceRewriteKeepsBlocksAndTheLastPartialOne) {
  Write(data_, O_WRONLY | O_CREAT | O_TRUNC);
  uint64_t e1 = CommitAck();
  Write(data_, O_WRONLY);  // from offset 0 over the committed blocks (copy-on-write)
  uint64_t e2 = Commit();
  EXPECT_EQ(Kept(), 11u);
  EXPECT_LT(DataChangedThenAck(e1, e2), kBlock);
}

TEST_F(EqualRewriteTest, ShorterRewriteIsCorrect) {
  Write(data_, O_WRONLY | O_CREAT | O_TRUNC);
  CommitAck();
  std::vector<uint8_t> shorter(data_.begin(), data_.begin() + 5 * kBlock + 10);
  Write(shorter, O_WRONLY | O_TRUNC);
  CommitAck();
  // The five whole blocks, and the sixth: its first 10 bytes, all the file
  // has of it now, are equal (what lies past a file's end is unspecified).
  EXPECT_EQ(Kept(), 6u);
  EXPECT_EQ(ReadFile(*store_, "/ckpt"), shorter);
}

TEST_F(EqualRewriteTest, GivenUpBlocksDoNotLeak) {
  Write(data_, O_WRONLY | O_CREAT | O_TRUNC);
  CommitAck();
  // A pending epoch, its file rewritten, then the epoch aborted: the shadow
  // held the aborted epoch's blocks and must let them go.
  ASSERT_TRUE(store_->Commit().ok());
  Write(data_, O_WRONLY | O_TRUNC);
  ASSERT_TRUE(store_->AbortPending().ok());
  CommitAck();
  // A rewrite undone by a rollback, and one whose file is then removed.
  Write(data_, O_WRONLY | O_TRUNC);
  ASSERT_TRUE(store_->Rollback().ok());
  Write(data_, O_WRONLY | O_TRUNC);
  ASSERT_TRUE(store_->Unlink("/ckpt").ok());
  CommitAck();  // an empty epoch: nothing may stay allocated
  EXPECT_EQ(store_->stats().blocks_used, 0u);
}

}  // namespace
}  // namespace dlckpt::memfs

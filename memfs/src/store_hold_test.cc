// Store::Hold / Release: an acknowledged epoch held for a reader (a drain to
// disk) stays readable through a read-only View after newer epochs are
// acknowledged and the owner keeps writing, and its blocks are freed only by
// Release.
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

class StoreHoldTest : public ::testing::TestWithParam<Compression> {
 protected:
  void SetUp() override {
    name_ = UniqueName("hold.");
    StoreOptions o;
    o.capacity = 1 << 20;
    o.block_size = 4096;
    o.max_files = 64;
    o.job = "job1";
    o.node = "node0";
    o.compression = GetParam();
    auto r = Store::Create(name_, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    owner_ = std::move(*r);
  }
  void TearDown() override {
    owner_.reset();
    (void)Store::Destroy(name_);
  }
  void CommitAck(uint64_t e) {
    auto c = owner_->Commit(e);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ASSERT_TRUE(owner_->Acknowledge(e).ok());
  }

  std::string name_;
  std::unique_ptr<Store> owner_;
};

TEST_P(StoreHoldTest, HeldEpochStaysReadableWhileOwnerMovesOn) {
  auto v1 = Pattern(300000, 1);
  WriteFile(*owner_, "/ckpt", v1);
  CommitAck(1);
  ASSERT_TRUE(owner_->Hold(1).ok());
  EXPECT_EQ(owner_->held_epoch(), 1u);
  auto reader = Store::Attach(name_, AttachMode::kReadAll);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  ASSERT_TRUE((*reader)->View(1).ok());

  // Two newer epochs, each rewriting the file: without the hold, epoch 1's
  // blocks would be free after epoch 2's acknowledgement and reused.
  for (uint64_t e = 2; e <= 3; ++e) {
    WriteFile(*owner_, "/ckpt", Pattern(300000, static_cast<uint32_t>(e)));
    CommitAck(e);
  }
  WriteFile(*owner_, "/ckpt", Pattern(300000, 9));
  EXPECT_EQ(ReadFile(**reader, "/ckpt"), v1);
  auto st = (*reader)->Stat("/ckpt");
  ASSERT_TRUE(st.ok());

  uint64_t free_held = owner_->stats().blocks_free;
  ASSERT_TRUE(owner_->Release(1).ok());
  EXPECT_EQ(owner_->held_epoch(), 0u);
  EXPECT_GT(owner_->stats().blocks_free, free_held);
}

TEST_P(StoreHoldTest, HeldBlocksCountAsUsedUntilReleased) {
  WriteFile(*owner_, "/ckpt", Pattern(400000, 1));
  CommitAck(1);
  ASSERT_TRUE(owner_->Hold(1).ok());
  WriteFile(*owner_, "/ckpt", Pattern(400000, 2));
  CommitAck(2);
  // Epoch 1 (held), epoch 2 (acknowledged) and a third copy do not fit in 1 MiB.
  auto fd = owner_->Open("/ckpt", O_WRONLY | O_TRUNC);
  ASSERT_TRUE(fd.ok());
  auto big = Pattern(400000, 3);
  auto n = owner_->Write(*fd, big.data(), big.size());
  EXPECT_FALSE(n.ok() && *n == big.size());
  if (!n.ok()) {
    EXPECT_EQ(n.status().code(), ENOSPC);
  }
  ASSERT_TRUE(owner_->Close(*fd).ok());
  ASSERT_TRUE(owner_->Release(1).ok());
  WriteFile(*owner_, "/ckpt", big);
}

TEST_P(StoreHoldTest, OnlyTheAcknowledgedEpochAndOneAtATime) {
  EXPECT_EQ(owner_->Hold(1).code(), EINVAL);  // nothing committed
  WriteFile(*owner_, "/a", Pattern(1000, 1));
  CommitAck(1);
  WriteFile(*owner_, "/a", Pattern(1000, 2));
  ASSERT_TRUE(owner_->Commit(2).ok());
  EXPECT_EQ(owner_->Hold(2).code(), EINVAL);  // pending, not acknowledged
  ASSERT_TRUE(owner_->Hold(1).ok());
  EXPECT_TRUE(owner_->Hold(1).ok());  // again: no-op
  ASSERT_TRUE(owner_->Acknowledge(2).ok());
  EXPECT_EQ(owner_->Hold(2).code(), EBUSY);
  EXPECT_TRUE(owner_->Release(7).ok());  // not held: no-op
  EXPECT_EQ(owner_->held_epoch(), 1u);
  ASSERT_TRUE(owner_->Release(1).ok());
  EXPECT_TRUE(owner_->Hold(2).ok());
  auto reader = Store::Attach(name_, AttachMode::kReadOnly);
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ((*reader)->Hold(2).code(), EROFS);
}

// The drain's read: pieces of the mapping (or of the decompressed chunk)
// that together are the file, without a copy; refused to the owner.
TEST_P(StoreHoldTest, ReadInPlaceGivesTheFileInPieces) {
  auto random = Pattern(300000, 3);           // stored as is, even with LZ4
  std::vector<uint8_t> runs(200000);          // compressible
  for (size_t i = 0; i < runs.size(); ++i) runs[i] = static_cast<uint8_t>(i / 1000);
  WriteFile(*owner_, "/r", random);
  WriteFile(*owner_, "/c", runs);
  ASSERT_TRUE(owner_->Mkdir("/d", 0755).ok());
  CommitAck(1);
  auto ofd = owner_->Open("/r", O_RDONLY);
  ASSERT_TRUE(ofd.ok());
  EXPECT_EQ(owner_->ReadInPlace(*ofd, 0, 100).status().code(), EPERM);
  ASSERT_TRUE(owner_->Close(*ofd).ok());

  auto reader = Store::Attach(name_, AttachMode::kReadAll);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  ASSERT_TRUE((*reader)->View(1).ok());
  for (const auto& [path, want] : {std::pair{"/r", &random}, std::pair{"/c", &runs}}) {
    auto fd = (*reader)->Open(path, O_RDONLY);
    ASSERT_TRUE(fd.ok());
    std::vector<uint8_t> got;
    size_t pieces = 0;
    for (uint64_t off = 0;;) {
      auto e = (*reader)->ReadInPlace(*fd, off, 100000);
      ASSERT_TRUE(e.ok()) << e.status().ToString();
      if (e->len == 0) break;
      ASSERT_LE(e->len, 100000u);
      got.insert(got.end(), e->data, e->data + e->len);
      off += e->len;
      ++pieces;
    }
    EXPECT_EQ(got, *want) << path;
    EXPECT_GE(pieces, want->size() / 100000) << path;
    auto past = (*reader)->ReadInPlace(*fd, want->size() + 5, 10);
    ASSERT_TRUE(past.ok());
    EXPECT_EQ(past->len, 0u);
    ASSERT_TRUE((*reader)->Close(*fd).ok());
  }
  auto dfd = (*reader)->Open("/d", O_RDONLY);
  if (dfd.ok()) {
    EXPECT_EQ((*reader)->ReadInPlace(*dfd, 0, 10).status().code(), EISDIR);
  }
  EXPECT_EQ((*reader)->ReadInPlace(99, 0, 10).status().code(), EBADF);
}

INSTANTIATE_TEST_SUITE_P(Compression, StoreHoldTest,
                         ::testing::Values(Compression::kNone, Compression::kLz4),
                         [](const auto& info) { return std::string(CompressionName(info.param)); });

}  // namespace
}  // namespace dlckpt::memfs

// BlockAllocator (block_allocator.h): block addresses, round-robin
// allocation, reference masks and the free count, over a plain buffer.
#include "block_allocator.h"

#include <vector>

#include <gtest/gtest.h>

namespace dlckpt::memfs {
namespace {

constexpr uint32_t kBlockSize = 4096;

class BlockAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override { Init(4); }

  void Init(uint64_t nblocks) {
    area_.assign(nblocks * kBlockSize, 0);
    blocks_.SetArea(area_.data(), kBlockSize, nblocks);
    blocks_.ResetRefs();
  }

  std::vector<uint8_t> area_;
  BlockAllocator blocks_;
};

TEST_F(BlockAllocatorTest, PtrAddressesBlocksInTheArea) {
  EXPECT_EQ(blocks_.Ptr(0), area_.data());
  EXPECT_EQ(blocks_.Ptr(3), area_.data() + 3 * kBlockSize);
  EXPECT_EQ(blocks_.block_size(), kBlockSize);
  EXPECT_EQ(blocks_.total(), 4u);
}

TEST_F(BlockAllocatorTest, ResetRefsFreesEveryBlock) {
  EXPECT_EQ(blocks_.free(), 4u);
  EXPECT_EQ(blocks_.used(), 0u);
  for (uint32_t b = 0; b < 4; ++b) EXPECT_EQ(blocks_.refs(b), 0);
  blocks_.Allocate();
  blocks_.ResetRefs();
  EXPECT_EQ(blocks_.free(), 4u);
}

TEST_F(BlockAllocatorTest, AllocateHandsOutWorkingBlocksRoundRobin) {
  EXPECT_EQ(blocks_.Allocate(), 0u);
  EXPECT_EQ(blocks_.Allocate(), 1u);
  EXPECT_EQ(blocks_.refs(0), kRefWorking);
  EXPECT_EQ(blocks_.free(), 2u);
  // A block freed behind the cursor is found only after the wrap.
  blocks_.Release(0);
  EXPECT_EQ(blocks_.refs(0), 0);
  EXPECT_EQ(blocks_.Allocate(), 2u);
  EXPECT_EQ(blocks_.Allocate(), 3u);
  EXPECT_EQ(blocks_.Allocate(), 0u);
  EXPECT_EQ(blocks_.free(), 0u);
  EXPECT_EQ(blocks_.used(), 4u);
}

TEST_F(BlockAllocatorTest, ABlockIsFreeOnlyWhenEveryReferenceIsDropped) {
  uint32_t b = blocks_.Allocate();
  blocks_.AddRef(b, kRefPending);
  blocks_.AddRef(b, kRefHeld);
  EXPECT_EQ(blocks_.refs(b), kRefWorking | kRefPending | kRefHeld);
  EXPECT_TRUE(blocks_.refs(b) & kRefFrozen);
  blocks_.Release(b);
  EXPECT_EQ(blocks_.free(), 3u);
  // Pending becomes acknowledged without the block going free in between.
  blocks_.AddRef(b, kRefAcked);
  blocks_.DropRef(b, kRefPending);
  EXPECT_EQ(blocks_.refs(b), kRefAcked | kRefHeld);
  EXPECT_EQ(blocks_.free(), 3u);
  blocks_.DropRef(b, kRefAcked);
  EXPECT_EQ(blocks_.free(), 3u);
  blocks_.DropRef(b, kRefHeld);
  EXPECT_EQ(blocks_.free(), 4u);
}

TEST_F(BlockAllocatorTest, AddRefToAFreeBlockTakesItAndAllocateSkipsIt) {
  // As an owner rebuilding the masks from the published state.
  blocks_.AddRef(0, kRefAcked);
  blocks_.AddRef(1, kRefWorking);
  blocks_.AddRef(1, kRefAcked);
  EXPECT_EQ(blocks_.free(), 2u);
  EXPECT_EQ(blocks_.Allocate(), 2u);
  EXPECT_EQ(blocks_.Allocate(), 3u);
  EXPECT_EQ(blocks_.free(), 0u);
}

TEST_F(BlockAllocatorTest, DroppingFromAFreeBlockKeepsTheCount) {
  blocks_.DropRef(2, kRefWorking);
  EXPECT_EQ(blocks_.free(), 4u);
  EXPECT_EQ(blocks_.refs(2), 0);
}

TEST_F(BlockAllocatorTest, SetAreaKeepsTheMasks) {
  uint32_t b = blocks_.Allocate();
  std::vector<uint8_t> other(4 * kBlockSize);
  blocks_.SetArea(other.data(), kBlockSize, 4);
  EXPECT_EQ(blocks_.Ptr(b), other.data() + uint64_t{b} * kBlockSize);
  EXPECT_EQ(blocks_.refs(b), kRefWorking);
  EXPECT_EQ(blocks_.free(), 3u);
}

}  // namespace
}  // namespace dlckpt::memfs

// VersionSet (versions.h) over a plain buffer laid out as a small store:
// state records, slots written and parsed back, the epoch transitions and
// the block references they move, a read-only reader, and a next owner
// loading what the last one published.
#include "versions.h"

#include <sys/stat.h>

#include <cstring>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

namespace dlckpt::memfs {
namespace {

using namespace layout;  // NOLINT(google-build-using-namespace)

constexpr uint32_t kBs = 4096;
constexpr uint64_t kBlocks = 16;

class VersionSetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    geo_.block_size = kBs;
    geo_.max_files = 8;
    geo_.nblocks = kBlocks;
    geo_.capacity = kBlocks * kBs;
    geo_.slot_offset = kHeaderBytes;
    geo_.slot_size = SlotSize(geo_.max_files, kBlocks, false);
    geo_.data_offset = AlignUp(geo_.slot_offset + kNumSlots * geo_.slot_size, 4096);
    geo_.rank = 3;
    mem_.assign(geo_.data_offset + geo_.capacity, 0);
    blocks_.SetArea(mem_.data() + geo_.data_offset, kBs, kBlocks);
    blocks_.ResetRefs();
    versions_ = NewSet(true, &blocks_);
    StateRecord s{};
    s.acked_slot = s.pending_slot = s.working_slot = kNoSlot;
    s.next_epoch = 1;
    versions_->Publish(s);
    versions_->Publish(s);
  }

  std::unique_ptr<VersionSet> NewSet(bool owner, BlockAllocator* blocks) {
    auto v = std::make_unique<VersionSet>("t", Env::Default(), owner, mem_.data(), blocks);
    v->SetGeometry(geo_);
    return v;
  }

  // A file of `nblocks` working blocks, each filled with `fill`.
  NodePtr AddFile(const std::string& path, uint64_t nblocks, uint8_t fill) {
    NodePtr n = files_.NewNode(path, S_IFREG | 0644, 1);
    for (uint64_t i = 0; i < nblocks; ++i) {
      uint32_t b = blocks_.Allocate();
      std::memset(blocks_.Ptr(b), fill, kBs);
      n->blocks.push_back(b);
    }
    n->size = nblocks * kBs;
    n->crc_valid = false;
    files_.Insert(n);
    return n;
  }

  Geometry geo_{};
  std::vector<uint8_t> mem_;
  BlockAllocator blocks_;
  FileTable files_;
  std::unique_ptr<VersionSet> versions_;
};

TEST_F(VersionSetTest, PublishedStateIsReadBackWithAHigherSeq) {
  StateRecord s = versions_->state();
  EXPECT_EQ(s.seq, 2u);
  s.next_epoch = 7;
  versions_->Publish(s);
  auto r = versions_->ReadState();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->seq, 3u);
  EXPECT_EQ(r->next_epoch, 7u);
  EXPECT_EQ(versions_->state().next_epoch, 7u);
}

TEST_F(VersionSetTest, NoValidStateRecordIsCorruption) {
  std::memset(mem_.data() + kStateOffset, 0xff, 2 * sizeof(StateRecord));
  auto r = versions_->ReadState();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), EBADMSG);
  EXPECT_NE(r.status().message().find("store t"), std::string::npos);
}

TEST_F(VersionSetTest, AFrozenVersionParsesBackToTheSameFiles) {
  NodePtr a = AddFile("/a", 2, 0xaa);
  AddFile("/b", 1, 0xbb);
  versions_->Freeze(versions_->FreeSlot(), 1, nullptr, kRefPending, files_);
  EXPECT_EQ(versions_->state().pending_epoch, 1u);
  EXPECT_EQ(versions_->state().next_epoch, 2u);
  for (uint32_t b : a->blocks) EXPECT_EQ(blocks_.refs(b), kRefWorking | kRefPending);

  auto v = versions_->Committed(1);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->hdr->nfiles, 2u);
  EXPECT_EQ(v->block_count, 3u);
  FileMap nodes = versions_->NodesFrom(*v);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes.at("/a")->blocks, a->blocks);
  EXPECT_EQ(nodes.at("/a")->size, 2 * kBs);
  EXPECT_EQ(nodes.at("/a")->ino, a->ino);
  EXPECT_TRUE(nodes.at("/a")->crc_valid);

  EXPECT_EQ(versions_->Committed(2).status().code(), ENOENT);
  EXPECT_EQ(versions_->ParseSlot(v->slot, 2).status().code(), EBADMSG);  // not that epoch
}

TEST_F(VersionSetTest, ADamagedSlotIsRefused) {
  AddFile("/a", 1, 1);
  uint64_t slot = versions_->FreeSlot();
  versions_->Freeze(slot, 1, nullptr, kRefPending, files_);
  mem_[geo_.slot_offset + slot * geo_.slot_size + sizeof(ImageHeader)] ^= 1;  // an entry's path
  auto v = versions_->Committed(1);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), EBADMSG);
  EXPECT_NE(v.status().message().find("slot " + std::to_string(slot)), std::string::npos);
}

TEST_F(VersionSetTest, AcknowledgeAndAbortMoveTheReferences) {
  NodePtr a = AddFile("/a", 1, 1);
  const uint32_t old = a->blocks[0];
  versions_->Freeze(versions_->FreeSlot(), 1, nullptr, kRefPending, files_);
  EXPECT_EQ(versions_->Acknowledge(2).code(), EINVAL);
  ASSERT_TRUE(versions_->Acknowledge(1).ok());
  EXPECT_EQ(versions_->state().acked_epoch, 1u);
  EXPECT_EQ(versions_->state().pending_epoch, 0u);
  EXPECT_EQ(blocks_.refs(old), kRefWorking | kRefAcked);

  // The working file moves to a new block; epoch 2 is committed, then aborted.
  blocks_.Release(old);
  a->blocks[0] = blocks_.Allocate();
  versions_->Freeze(versions_->FreeSlot(), 2, nullptr, kRefPending, files_);
  EXPECT_NE(versions_->state().pending_slot, versions_->state().acked_slot);
  EXPECT_EQ(blocks_.refs(a->blocks[0]), kRefWorking | kRefPending);
  versions_->AbortPending();
  EXPECT_EQ(versions_->state().pending_epoch, 0u);
  EXPECT_EQ(blocks_.refs(a->blocks[0]), kRefWorking);
  EXPECT_EQ(blocks_.refs(old), kRefAcked);

  // Committed and acknowledged again: the old acknowledged block goes free.
  versions_->Freeze(versions_->FreeSlot(), 3, nullptr, kRefPending, files_);
  ASSERT_TRUE(versions_->Acknowledge(3).ok());
  EXPECT_EQ(blocks_.refs(old), 0);
  EXPECT_EQ(blocks_.free(), kBlocks - 1);
}

TEST_F(VersionSetTest, AHeldEpochKeepsItsBlocksUntilReleased) {
  NodePtr a = AddFile("/a", 1, 1);
  const uint32_t old = a->blocks[0];
  EXPECT_EQ(versions_->Hold(1).code(), EINVAL);  // nothing acknowledged
  versions_->Freeze(versions_->FreeSlot(), 1, nullptr, kRefAcked, files_);
  ASSERT_TRUE(versions_->Hold(1).ok());
  EXPECT_TRUE(versions_->Hold(1).ok());
  EXPECT_EQ(versions_->held_epoch(), 1u);

  blocks_.Release(old);
  a->blocks[0] = blocks_.Allocate();
  versions_->Freeze(versions_->FreeSlot(), 2, nullptr, kRefPending, files_);
  ASSERT_TRUE(versions_->Acknowledge(2).ok());
  EXPECT_EQ(blocks_.refs(old), kRefHeld);
  EXPECT_EQ(versions_->Hold(2).code(), EBUSY);
  versions_->Release(2);  // not the held one: nothing
  EXPECT_EQ(versions_->held_epoch(), 1u);
  versions_->Release(1);
  EXPECT_EQ(versions_->held_epoch(), 0u);
  EXPECT_EQ(blocks_.refs(old), 0);
}

TEST_F(VersionSetTest, AReaderSeesThePublishedVersions) {
  AddFile("/a", 2, 1);
  versions_->Freeze(versions_->FreeSlot(), 1, nullptr, kRefAcked, files_);
  AddFile("/b", 1, 2);
  versions_->Freeze(versions_->FreeSlot(), 2, nullptr, kRefPending, files_);

  auto reader = NewSet(false, nullptr);
  auto s = reader->Current();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->acked_epoch, 1u);
  EXPECT_EQ(s->pending_epoch, 2u);
  EXPECT_TRUE(reader->Committed(1).ok());
  EXPECT_TRUE(reader->Committed(2).ok());
  EXPECT_EQ(reader->PublishedBlocks(), 3u);  // /a's two are in both
}

TEST_F(VersionSetTest, ANextOwnerLoadsTheCommittedAndTheSavedVersions) {
  NodePtr a = AddFile("/a", 1, 1);
  versions_->Freeze(versions_->FreeSlot(), 1, nullptr, kRefAcked, files_);
  AddFile("/b", 1, 2);
  versions_->Freeze(versions_->FreeSlot(), 2, nullptr, kRefPending, files_);
  a->damage.err = EIO;
  versions_->SaveWorking(files_);
  EXPECT_NE(versions_->state().working_slot, kNoSlot);

  BlockAllocator blocks;
  blocks.SetArea(mem_.data() + geo_.data_offset, kBs, kBlocks);
  blocks.ResetRefs();
  auto next = NewSet(true, &blocks);
  auto s = next->ReadState();
  ASSERT_TRUE(s.ok());
  FileMap acked, pending;
  ASSERT_TRUE(next->LoadCommitted(*s, &acked, &pending).ok());
  EXPECT_EQ(acked.size(), 1u);
  EXPECT_EQ(pending.size(), 2u);
  EXPECT_EQ(blocks.refs(a->blocks[0]), kRefAcked | kRefPending);
  EXPECT_EQ(blocks.free(), kBlocks - 2);

  auto saved = next->ParseSlot(s->working_slot, 0);
  ASSERT_TRUE(saved.ok()) << saved.status().ToString();
  FileMap working = next->NodesFrom(*saved);
  EXPECT_EQ(working.at("/a")->damage.err, EIO);
  EXPECT_FALSE(working.at("/a")->crc_valid);  // a working set carries no CRCs

  next->ForgetSavedWorking();
  EXPECT_EQ(next->ReadState()->working_slot, kNoSlot);
  EXPECT_EQ(next->state().acked_epoch, 1u);
}

}  // namespace
}  // namespace dlckpt::memfs

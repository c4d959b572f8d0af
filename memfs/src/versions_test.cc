// VersionSet (versions.h) over a plain buffer laid out as a small store:
// state records, slots written and parsed back, the epoch transitions and
// the block references they move, a read-only reader, and a next owner
// loading what the last one published.
#include "versions.h"

#include <cstring>
#include <memory>

#include <gtest/gtest.h>

#include "versions_test_util.h"

namespace dlckpt::memfs {
namespace {

using namespace layout;  // NOLINT(google-build-using-namespace)

class VersionSetTest : public ::testing::Test, protected testing::SmallStore {};

TEST_F(VersionSetTest, PublishedStateIsReadBackWithAHigherSeq) {
  StateRecord s = versions->state();
  EXPECT_EQ(s.seq, 2u);
  s.next_epoch = 7;
  versions->Publish(s);
  auto r = versions->ReadState();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->seq, 3u);
  EXPECT_EQ(r->next_epoch, 7u);
  EXPECT_EQ(versions->state().next_epoch, 7u);
}

TEST_F(VersionSetTest, NoValidStateRecordIsCorruption) {
  std::memset(mem.data() + kStateOffset, 0xff, 2 * sizeof(StateRecord));
  auto r = versions->ReadState();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), EBADMSG);
  EXPECT_NE(r.status().message().find("store t"), std::string::npos);
}

TEST_F(VersionSetTest, AFrozenVersionParsesBackToTheSameFiles) {
  NodePtr a = AddFile("/a", 2, 0xaa);
  AddFile("/b", 1, 0xbb);
  versions->Freeze(versions->FreeSlot(), 1, nullptr, kRefPending, files);
  EXPECT_EQ(versions->state().pending_epoch, 1u);
  EXPECT_EQ(versions->state().next_epoch, 2u);
  for (uint32_t b : a->blocks) EXPECT_EQ(blocks.refs(b), kRefWorking | kRefPending);

  auto v = versions->Committed(1);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->hdr->nfiles, 2u);
  EXPECT_EQ(v->block_count, 3u);
  FileMap nodes = versions->NodesFrom(*v);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes.at("/a")->blocks, a->blocks);
  EXPECT_EQ(nodes.at("/a")->size, 2 * kBs);
  EXPECT_EQ(nodes.at("/a")->ino, a->ino);
  EXPECT_TRUE(nodes.at("/a")->crc_valid);

  EXPECT_EQ(versions->Committed(2).status().code(), ENOENT);
  EXPECT_EQ(versions->ParseSlot(v->slot, 2).status().code(), EBADMSG);  // not that epoch
}

TEST_F(VersionSetTest, ADamagedSlotIsRefused) {
  AddFile("/a", 1, 1);
  uint64_t slot = versions->FreeSlot();
  versions->Freeze(slot, 1, nullptr, kRefPending, files);
  mem[geo.slot_offset + slot * geo.slot_size + sizeof(ImageHeader)] ^= 1;  // an entry's path
  auto v = versions->Committed(1);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), EBADMSG);
  EXPECT_NE(v.status().message().find("slot " + std::to_string(slot)), std::string::npos);
}

TEST_F(VersionSetTest, AcknowledgeAndAbortMoveTheReferences) {
  NodePtr a = AddFile("/a", 1, 1);
  const uint32_t old = a->blocks[0];
  versions->Freeze(versions->FreeSlot(), 1, nullptr, kRefPending, files);
  EXPECT_EQ(versions->Acknowledge(2).code(), EINVAL);
  ASSERT_TRUE(versions->Acknowledge(1).ok());
  EXPECT_EQ(versions->state().acked_epoch, 1u);
  EXPECT_EQ(versions->state().pending_epoch, 0u);
  EXPECT_EQ(blocks.refs(old), kRefWorking | kRefAcked);

  // The working file moves to a new block; epoch 2 is committed, then aborted.
  blocks.Release(old);
  a->blocks[0] = blocks.Allocate();
  versions->Freeze(versions->FreeSlot(), 2, nullptr, kRefPending, files);
  EXPECT_NE(versions->state().pending_slot, versions->state().acked_slot);
  EXPECT_EQ(blocks.refs(a->blocks[0]), kRefWorking | kRefPending);
  versions->AbortPending();
  EXPECT_EQ(versions->state().pending_epoch, 0u);
  EXPECT_EQ(blocks.refs(a->blocks[0]), kRefWorking);
  EXPECT_EQ(blocks.refs(old), kRefAcked);

  // Committed and acknowledged again: the old acknowledged block goes free.
  versions->Freeze(versions->FreeSlot(), 3, nullptr, kRefPending, files);
  ASSERT_TRUE(versions->Acknowledge(3).ok());
  EXPECT_EQ(blocks.refs(old), 0);
  EXPECT_EQ(blocks.free(), kBlocks - 1);
}

TEST_F(VersionSetTest, AHeldEpochKeepsItsBlocksUntilReleased) {
  NodePtr a = AddFile("/a", 1, 1);
  const uint32_t old = a->blocks[0];
  EXPECT_EQ(versions->Hold(1).code(), EINVAL);  // nothing acknowledged
  versions->Freeze(versions->FreeSlot(), 1, nullptr, kRefAcked, files);
  ASSERT_TRUE(versions->Hold(1).ok());
  EXPECT_TRUE(versions->Hold(1).ok());
  EXPECT_EQ(versions->held_epoch(), 1u);

  blocks.Release(old);
  a->blocks[0] = blocks.Allocate();
  versions->Freeze(versions->FreeSlot(), 2, nullptr, kRefPending, files);
  ASSERT_TRUE(versions->Acknowledge(2).ok());
  EXPECT_EQ(blocks.refs(old), kRefHeld);
  EXPECT_EQ(versions->Hold(2).code(), EBUSY);
  versions->Release(2);  // not the held one: nothing
  EXPECT_EQ(versions->held_epoch(), 1u);
  versions->Release(1);
  EXPECT_EQ(versions->held_epoch(), 0u);
  EXPECT_EQ(blocks.refs(old), 0);
}

TEST_F(VersionSetTest, AReaderSeesThePublishedVersions) {
  AddFile("/a", 2, 1);
  versions->Freeze(versions->FreeSlot(), 1, nullptr, kRefAcked, files);
  AddFile("/b", 1, 2);
  versions->Freeze(versions->FreeSlot(), 2, nullptr, kRefPending, files);

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
  versions->Freeze(versions->FreeSlot(), 1, nullptr, kRefAcked, files);
  AddFile("/b", 1, 2);
  versions->Freeze(versions->FreeSlot(), 2, nullptr, kRefPending, files);
  a->damage.err = EIO;
  versions->SaveWorking(files);
  EXPECT_NE(versions->state().working_slot, kNoSlot);

  BlockAllocator blocks;
  blocks.SetArea(mem.data() + geo.data_offset, kBs, kBlocks);
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

#include "parity.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>

#include "dlckpt/memfs/memfs.h"

namespace dlckpt::codec {

namespace protocol = control::protocol;

namespace {

class ParityTest : public ::testing::Test {
 protected:
  void SetUp() override { job_ = "ptest" + std::to_string(getpid()); }
  void TearDown() override { ParitySlots(job_, "n9").RemoveAll(); }

  protocol::ParityReport Info(uint64_t epoch) {
    protocol::ParityReport p;
    p.epoch = epoch;
    p.generation = 1;
    p.group = 0;
    p.index = 0;
    p.k = 1;
    p.ngroups = 1;
    p.members.push_back({"n0", {0, 1}, {100, 200}});
    return p;
  }

  // Writes a complete parity of `epoch` filled with its number.
  void Write(ParitySlots& s, uint64_t epoch, uint64_t keep) {
    auto p = s.Prepare(Info(epoch), 4096, keep);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    std::memset(*p, static_cast<int>(epoch), 4096);
    ASSERT_TRUE(s.Complete().ok());
  }

  std::string job_;
};

TEST_F(ParityTest, SlotsAlternateAndDescribeThemselves) {
  ParitySlots s(job_, "n9");
  Write(s, 1, 0);
  Write(s, 2, 1);
  auto reports = s.Scan(nullptr);
  ASSERT_EQ(reports.size(), 2u);
  for (const auto& r : reports) {
    EXPECT_TRUE(r.complete);
    ASSERT_EQ(r.members.size(), 1u);
    EXPECT_EQ(r.members[0].sizes[1], 200u);
  }
  auto e1 = s.Find(0, 0, 1, 1);
  ASSERT_TRUE(e1.ok());
  EXPECT_EQ(e1->len, 4096u);
  EXPECT_EQ(e1->data[100], 1);
  EXPECT_EQ(s.Find(0, 0, 3, 1).status().code(), ENOENT);
}

TEST_F(ParityTest, AFreshSlotIsPretouchedAReusedOneIsNot) {
  unsetenv("DLCKPT_PRETOUCH");
  ParitySlots s(job_, "n9");
  auto p = s.Prepare(Info(1), 3 * 4096, 0);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  for (uint64_t off : {0u, 4096u, 8192u}) {
    uint64_t w;
    std::memcpy(&w, *p + off, sizeof w);
    EXPECT_EQ(w, memfs::PretouchWord(off)) << off;
  }
  std::memset(*p, 7, 3 * 4096);
  ASSERT_TRUE(s.Complete().ok());
  Write(s, 2, 1);
  // Epoch 3 reuses slot 0 (epoch 1's): its bytes are left for the encode.
  p = s.Prepare(Info(3), 3 * 4096, 2);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)[0], 7);
  EXPECT_EQ((*p)[4096], 7);
}

TEST_F(ParityTest, ReservedSlotsAreUsedWithoutRecreatingThem) {
  unsetenv("DLCKPT_PRETOUCH");
  ParitySlots s(job_, "n9");
  ASSERT_TRUE(s.Reserve(Info(0), 16 * 4096).ok());
  // Both exist, pre-touched, and a survey sees no parity in them.
  EXPECT_TRUE(s.Scan(nullptr).empty());
  struct stat st;
  for (int slot = 0; slot < 2; ++slot) {
    ASSERT_EQ(stat(("/dev/shm" + s.SlotName(slot)).c_str(), &st), 0);
    EXPECT_GE(st.st_size, 17 * 4096);
  }
  auto p = s.Prepare(Info(1), 16 * 4096, 0);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_FALSE(s.last_prepare_fresh());
  uint64_t w;
  std::memcpy(&w, *p + 4096, sizeof w);
  EXPECT_EQ(w, memfs::PretouchWord(4096));
  std::memset(*p, 1, 16 * 4096);
  ASSERT_TRUE(s.Complete().ok());
  p = s.Prepare(Info(2), 16 * 4096, 1);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(s.last_prepare_fresh());
  std::memset(*p, 2, 16 * 4096);
  ASSERT_TRUE(s.Complete().ok());
  EXPECT_EQ(s.Scan(nullptr).size(), 2u);
  // A reservation later (a relaunched codec) leaves complete parity alone.
  ASSERT_TRUE(s.Reserve(Info(0), 64 * 4096).ok());
  auto e1 = s.Find(0, 0, 1, 1);
  ASSERT_TRUE(e1.ok());
  EXPECT_EQ(e1->data[0], 1);
  EXPECT_EQ(s.Find(0, 0, 2, 1)->data[0], 2);
}

// The warm-up's order: the slot the first Prepare takes, then, after that
// epoch is complete, the other one; neither Prepare creates a slot.
TEST_F(ParityTest, ReservingOneSlotAtATimeFollowsPrepare) {
  ParitySlots s(job_, "n9");
  struct stat st;
  ASSERT_TRUE(s.Reserve(Info(0), 16 * 4096, 1).ok());
  ASSERT_EQ(stat(("/dev/shm" + s.SlotName(0)).c_str(), &st), 0);
  EXPECT_NE(stat(("/dev/shm" + s.SlotName(1)).c_str(), &st), 0) << "only one slot reserved";
  auto p = s.Prepare(Info(1), 16 * 4096, 0);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_FALSE(s.last_prepare_fresh());
  std::memset(*p, 1, 16 * 4096);
  ASSERT_TRUE(s.Complete().ok());
  // Slot 0 holds complete parity now: the second reservation takes slot 1.
  ASSERT_TRUE(s.Reserve(Info(0), 16 * 4096, 2).ok());
  ASSERT_EQ(stat(("/dev/shm" + s.SlotName(1)).c_str(), &st), 0);
  EXPECT_GE(st.st_size, 17 * 4096);
  p = s.Prepare(Info(2), 16 * 4096, 1);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_FALSE(s.last_prepare_fresh());
  std::memset(*p, 2, 16 * 4096);
  ASSERT_TRUE(s.Complete().ok());
  EXPECT_EQ(s.Find(0, 0, 1, 1)->data[0], 1);
  EXPECT_EQ(s.Find(0, 0, 2, 1)->data[0], 2);
}

TEST_F(ParityTest, ASlotFarLargerThanAnEpochNeedsIsShrunkInPlace) {
  ParitySlots s(job_, "n9");
  const uint64_t big = uint64_t{80} << 20;  // more than twice 4 KiB + 64 MiB
  ASSERT_TRUE(s.Reserve(Info(0), big).ok());
  auto p = s.Prepare(Info(1), 4096, 0);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_FALSE(s.last_prepare_fresh());
  std::memset(*p, 1, 4096);
  ASSERT_TRUE(s.Complete().ok());
  struct stat st;
  int small = 0;
  for (int slot = 0; slot < 2; ++slot) {
    ASSERT_EQ(stat(("/dev/shm" + s.SlotName(slot)).c_str(), &st), 0);
    if (static_cast<uint64_t>(st.st_size) < (uint64_t{1} << 20)) ++small;
  }
  EXPECT_EQ(small, 1);  // the written slot; the other until it is written
  auto e1 = s.Find(0, 0, 1, 1);
  ASSERT_TRUE(e1.ok());
  EXPECT_EQ(e1->len, 4096u);
  EXPECT_EQ(e1->data[4095], 1);
}

TEST_F(ParityTest, PretouchOffLeavesAFreshSlotZero) {
  setenv("DLCKPT_PRETOUCH", "0", 1);
  ParitySlots s(job_, "n9");
  auto p = s.Prepare(Info(1), 2 * 4096, 0);
  unsetenv("DLCKPT_PRETOUCH");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ((*p)[0], 0);
  EXPECT_EQ((*p)[4096], 0);
}

TEST_F(ParityTest, TheAcknowledgedEpochsParitySurvivesAFailedEncode) {
  ParitySlots s(job_, "n9");
  Write(s, 5, 0);  // acknowledged
  Write(s, 6, 5);  // complete here, but the encode failed elsewhere: 6 was aborted
  Write(s, 7, 5);  // the next encode must overwrite 6, not 5
  auto five = s.Find(0, 0, 5, 1);
  ASSERT_TRUE(five.ok()) << five.status().ToString();
  EXPECT_EQ(five->data[0], 5);
  EXPECT_TRUE(s.Find(0, 0, 7, 1).ok());
  EXPECT_EQ(s.Find(0, 0, 6, 1).status().code(), ENOENT);
}

TEST_F(ParityTest, AnInterruptedWriteLeavesAnIncompleteSlot) {
  ParitySlots s(job_, "n9");
  Write(s, 1, 0);
  auto p = s.Prepare(Info(2), 8192, 1);  // never completed: the process "dies"
  ASSERT_TRUE(p.ok());
  ParitySlots fresh(job_, "n9");
  int complete = 0;
  for (const auto& r : fresh.Scan(nullptr)) complete += r.complete;
  EXPECT_EQ(complete, 1);
  EXPECT_TRUE(fresh.Find(0, 0, 1, 1).ok());
  EXPECT_EQ(fresh.Find(0, 0, 2, 1).status().code(), ENOENT);
}

// A parity slot planted by another local user (or left readable by others)
// is never taken for this node's parity, nor removed: survey warns naming
// it, rebuild does not read it, and an encode into it fails naming it, as
// Env::OpenShm refuses a planted store.
TEST_F(ParityTest, APlantedSlotIsRefusedNeverAdoptedNorRemoved) {
  {
    ParitySlots s(job_, "n9");
    Write(s, 5, 0);  // slot 0: a complete parity of epoch 5, then given away
  }
  std::string path = "/dev/shm" + ParitySlots(job_, "n9").SlotName(0);
  bool root = geteuid() == 0;
  if (root) {
    ASSERT_EQ(chown(path.c_str(), 65534, static_cast<gid_t>(-1)), 0);
  }
  ASSERT_EQ(chmod(path.c_str(), 0666), 0);
  ParitySlots fresh(job_, "n9");
  std::vector<std::string> warn;
  EXPECT_TRUE(fresh.Scan(&warn).empty());
  ASSERT_EQ(warn.size(), 1u);
  std::string why = root ? " is owned by uid 65534, not by uid 0 (this process)"
                         : " has mode 0666, expected 0600";
  EXPECT_NE(warn[0].find("parity object " + path + why), std::string::npos) << warn[0];
  EXPECT_EQ(fresh.Find(0, 0, 5, 1).status().code(), ENOENT);
  // The next encode targets that slot: refused, the object left as it was.
  auto p = fresh.Prepare(Info(6), 4096, 5);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), root ? EPERM : EACCES);
  EXPECT_NE(p.status().message().find("parity object " + path + why), std::string::npos) << p.status().ToString();
  EXPECT_FALSE(fresh.Reserve(Info(0), 4096).ok());
  fresh.RemoveAll();
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, root ? 65534u : geteuid());
  EXPECT_EQ(st.st_mode & 07777, 0666u);
  ASSERT_EQ(unlink(path.c_str()), 0);
  // Gone: the next encode creates a fresh 0600 object of its own.
  Write(fresh, 6, 5);
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, geteuid());
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_TRUE(fresh.Find(0, 0, 6, 1).ok());
}

TEST(ParityBlocksTest, ChecksumsPerBlockNameTheDamagedOne) {
  std::vector<uint8_t> data(2 * kParityBlock + 100);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 3);
  EXPECT_EQ(ParityBlockCount(0), 0u);
  EXPECT_EQ(ParityBlockCount(1), 1u);
  EXPECT_EQ(ParityBlockCount(kParityBlock), 1u);
  auto crcs = ParityBlockCrcs(data.data(), data.size());
  ASSERT_EQ(crcs.size(), 3u);
  for (uint64_t b = 0; b < 3; ++b) EXPECT_TRUE(CheckParityBlock("p", data.data(), data.size(), b, crcs[b]).ok());
  data[2 * kParityBlock + 99] ^= 1;  // the last, short block
  Status st = CheckParityBlock("p", data.data(), data.size(), 2, crcs[2]);
  EXPECT_EQ(st.code(), EBADMSG);
  EXPECT_NE(st.message().find("p: parity block 2 of 3 (bytes 2097152-2097251): checksum mismatch"),
            std::string::npos)
      << st.ToString();
  EXPECT_TRUE(CheckParityBlock("p", data.data(), data.size(), 1, crcs[1]).ok());
  // Blocks met by ranges, rounded out and merged, clipped to the length.
  std::vector<memfs::Store::ByteRange> r{{10, 5}, {kParityBlock - 1, 2}, {3 * kParityBlock, 1}};
  auto b = BlocksMeeting(r, 2 * kParityBlock + 100);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].offset, 0u);
  EXPECT_EQ(b[0].len, 2 * kParityBlock);
  r = {{kParityBlock + 1, 1}, {2 * kParityBlock + 50, 10}};
  b = BlocksMeeting(r, 2 * kParityBlock + 100);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].offset, kParityBlock);
  EXPECT_EQ(b[0].len, kParityBlock + 100);
}

class ParityDamageTest : public ParityTest {
 protected:
  static constexpr uint64_t kLen = 3 * kParityBlock;
  std::string Path(int slot) { return "/dev/shm" + ParitySlots(job_, "n9").SlotName(slot); }
  // Writes a complete parity of `epoch` (kLen bytes of a pattern) into the
  // slot that does not hold `keep`'s; returns that slot.
  int WriteBig(ParitySlots& s, uint64_t epoch, uint64_t keep) {
    auto p = s.Prepare(Info(epoch), kLen, keep);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (!p.ok()) return -1;
    for (uint64_t i = 0; i < kLen; ++i) (*p)[i] = static_cast<uint8_t>(i * 13 + epoch);
    EXPECT_TRUE(s.Complete().ok());
    return SlotOf(epoch);
  }
  int SlotOf(uint64_t epoch) {
    for (const auto& r : ParitySlots(job_, "n9").Scan(nullptr)) {
      if (r.epoch == epoch) return r.name == ParitySlots(job_, "n9").SlotName(0) ? 0 : 1;
    }
    return -1;
  }
  // Flips one parity byte of `slot` at `offset` (after the one-page header).
  void Flip(int slot, uint64_t offset) {
    FILE* f = std::fopen(Path(slot).c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fseek(f, static_cast<long>(4096 + offset), SEEK_SET), 0);
    int c = std::fgetc(f);
    ASSERT_EQ(std::fseek(f, static_cast<long>(4096 + offset), SEEK_SET), 0);
    std::fputc(c ^ 0x20, f);
    std::fclose(f);
  }
};

// A damaged parity is an erasure, as a damaged store is: the survey leaves it
// out and says which block failed; a rebuild never reads it.
TEST_F(ParityDamageTest, ADamagedParityIsLeftOutAndNeverRead) {
  ParitySlots s(job_, "n9");
  int slot = WriteBig(s, 4, 0);
  ASSERT_GE(slot, 0);
  EXPECT_TRUE(s.Find(0, 0, 4, 1).ok());
  Flip(slot, kParityBlock + 5);
  ParitySlots fresh(job_, "n9");
  std::vector<std::string> warn;
  EXPECT_TRUE(fresh.Scan(&warn).empty());
  ASSERT_EQ(warn.size(), 1u);
  EXPECT_NE(warn[0].find(ParitySlots(job_, "n9").SlotName(slot) +
                         ": parity block 1 of 3 (bytes 1048576-2097151): checksum mismatch"),
            std::string::npos)
      << warn[0];
  auto found = fresh.Find(0, 0, 4, 1);
  EXPECT_EQ(found.status().code(), EBADMSG) << found.status().ToString();
  protocol::ParityReport info;
  EXPECT_EQ(fresh.Kept(0, 0, 4, &info).status().code(), ENOENT);
  // The same parity is found again once its bytes are whole.
  Flip(slot, kParityBlock + 5);
  EXPECT_EQ(ParitySlots(job_, "n9").Scan(nullptr).size(), 1u);
  EXPECT_TRUE(ParitySlots(job_, "n9").Find(0, 0, 4, 1).ok());
}

// An incremental encode updates the kept parity: it may complete only when
// every byte it took from the kept parity was intact, else the kept parity
// is no longer offered for deltas (the next encode is full).
TEST_F(ParityDamageTest, ADeltaCompletesOnlyFromAnIntactKeptParity) {
  const std::vector<memfs::Store::ByteRange> changed{{100, 10}};  // in block 0
  auto delta = [&](ParitySlots& s, uint64_t epoch, uint64_t keep) -> Status {
    protocol::ParityReport kinfo;
    auto kept = s.Kept(0, 0, keep, &kinfo);
    if (!kept.ok()) return kept.status();
    auto p = s.Prepare(Info(epoch), kLen, keep);
    if (!p.ok()) return p.status();
    std::memcpy(*p, kept->data, kLen);  // unchanged bytes copied
    for (const auto& r : changed) {
      for (uint64_t i = r.offset; i < r.offset + r.len; ++i) (*p)[i] ^= 0x5a;  // kept xor delta
    }
    return s.CompleteDelta(keep, changed);
  };
  {
    ParitySlots s(job_, "n9");
    WriteBig(s, 1, 0);
    ASSERT_TRUE(delta(s, 2, 1).ok());
    auto two = s.Find(0, 0, 2, 1);  // its checksums are those of its bytes
    ASSERT_TRUE(two.ok()) << two.status().ToString();
    EXPECT_EQ(two->data[100], static_cast<uint8_t>((100 * 13 + 1) ^ 0x5a));
  }
  const int kept = SlotOf(2);
  ASSERT_GE(kept, 0);
  // Damage in an unchanged block of the kept parity (copied as it is).
  {
    ParitySlots s(job_, "n9");
    Flip(kept, 2 * kParityBlock + 7);
    Status st = delta(s, 3, 2);
    EXPECT_EQ(st.code(), EBADMSG);
    EXPECT_NE(st.message().find("parity block 2 of 3"), std::string::npos) << st.ToString();
    protocol::ParityReport kinfo;
    EXPECT_EQ(s.Kept(0, 0, 2, &kinfo).status().code(), ENOENT);
    EXPECT_EQ(ParitySlots(job_, "n9").Find(0, 0, 3, 1).status().code(), ENOENT);  // never completed
    Flip(kept, 2 * kParityBlock + 7);
  }
  // Damage in the changed block of the kept parity (read, xored).
  {
    ParitySlots s(job_, "n9");
    Flip(kept, 3);
    Status st = delta(s, 3, 2);
    EXPECT_EQ(st.code(), EBADMSG);
    EXPECT_NE(st.message().find("parity block 0 of 3"), std::string::npos) << st.ToString();
    Flip(kept, 3);
  }
  // Damage in the copy itself (the slot written): the kept parity is whole.
  {
    ParitySlots s(job_, "n9");
    protocol::ParityReport kinfo;
    auto kept = s.Kept(0, 0, 2, &kinfo);
    ASSERT_TRUE(kept.ok());
    auto p = s.Prepare(Info(3), kLen, 2);
    ASSERT_TRUE(p.ok());
    std::memcpy(*p, kept->data, kLen);
    (*p)[kParityBlock + 1] ^= 1;
    Status st = s.CompleteDelta(2, changed);
    EXPECT_EQ(st.code(), EBADMSG);
    EXPECT_NE(st.message().find("parity block 1 differs from the block of the kept parity it copies"),
              std::string::npos)
        << st.ToString();
    EXPECT_TRUE(s.Kept(0, 0, 2, &kinfo).ok());
  }
}

// A delta into a reused slot (the slot held the parity the kept one was
// updated from): blocks it neither changed nor copied rest, carry the kept
// block's checksum unread, and a rotating window of them is checked. A
// resting block that went bad completes with the checksum of what it should
// hold, so Find refuses it (never read for a rebuild), and a later update
// of that slot finds it.
TEST_F(ParityDamageTest, RestingBlocksCarryTheKeptChecksumAndAreScrubbed) {
  constexpr uint64_t kBlocks = 12, kBig = kBlocks * kParityBlock;
  const std::vector<memfs::Store::ByteRange> changed{{kParityBlock + 100, 10}};  // in block 1
  ParitySlots s(job_, "n9");
  auto p = s.Prepare(Info(1), kBig, 0);
  ASSERT_TRUE(p.ok());
  for (uint64_t i = 0; i < kBig; ++i) (*p)[i] = static_cast<uint8_t>(i * 7);
  ASSERT_TRUE(s.Complete().ok());
  // Epoch e keeps e-1: copies `copy` (whole blocks; all when null) from the
  // kept parity, applies the change, flips byte `flip` of the new slot if set.
  auto delta = [&](uint64_t e, const std::vector<memfs::Store::ByteRange>* copy, uint64_t flip) -> Status {
    protocol::ParityReport kinfo;
    auto kept = s.Kept(0, 0, e - 1, &kinfo);
    if (!kept.ok()) return kept.status();
    auto q = s.Prepare(Info(e), kBig, e - 1);
    if (!q.ok()) return q.status();
    if (copy == nullptr) {
      std::memcpy(*q, kept->data, kBig);
    } else {
      for (const auto& r : *copy) std::memcpy(*q + r.offset, kept->data + r.offset, r.len);
    }
    for (const auto& r : changed) {
      for (uint64_t i = r.offset; i < r.offset + r.len; ++i) (*q)[i] = static_cast<uint8_t>(kept->data[i] ^ e);
    }
    if (flip != 0) (*q)[flip] ^= 1;
    return s.CompleteDelta(e - 1, changed, copy);
  };
  // Epoch 2 into the empty slot: every block copied and checked.
  ASSERT_TRUE(delta(2, nullptr, 0).ok());
  // Epochs 3.. alternate between the slots, each of which holds the parity
  // two epochs back; only block 1 differs between any two of them.
  const std::vector<memfs::Store::ByteRange> block1{{kParityBlock, kParityBlock}};
  ASSERT_TRUE(delta(3, &block1, 0).ok());
  ASSERT_TRUE(ParitySlots(job_, "n9").Find(0, 0, 3, 1).ok());  // carried checksums match the bytes
  // A resting block (11) of epoch 4's slot is damaged as it is written; the
  // window (blocks 8-11 or later) need not reach it this time.
  const uint64_t bad = 11 * kParityBlock + 5;
  Status st = delta(4, &block1, bad);
  if (st.ok()) {
    auto found = ParitySlots(job_, "n9").Find(0, 0, 4, 1);
    EXPECT_EQ(found.status().code(), EBADMSG) << "a damaged resting block must never be read";
    EXPECT_NE(found.status().message().find("parity block 11 of 12"), std::string::npos) << found.status().ToString();
  }
  // Epoch 5 goes to the other slot; from then on each update of the damaged
  // slot checks another window: within 2 x (12 / 4) updates it is found.
  uint64_t found_at = st.ok() ? 0 : 4;
  for (uint64_t e = 5; e < 5 + 2 * kBlocks / ParitySlots::kScrubBlocks + 2 && found_at == 0; ++e) {
    st = delta(e, &block1, 0);
    if (!st.ok()) {
      EXPECT_EQ(st.code(), EBADMSG);
      EXPECT_NE(st.message().find("parity block 11 differs"), std::string::npos) << st.ToString();
      found_at = e;
    }
  }
  ASSERT_NE(found_at, 0u) << "the scrub never reached the damaged resting block";
  // The damage was in the new slot only: the kept parity is still offered.
  protocol::ParityReport kinfo;
  EXPECT_TRUE(s.Kept(0, 0, found_at - 1, &kinfo).ok());
}

}  // namespace
}  // namespace dlckpt::codec

#include "parity.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>

#include "dlckpt/memfs/memfs.h"

namespace dlckpt::codec {
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
// is never taken for this node's parity: survey warns naming it, rebuild
// does not read it, and a new parity goes into a fresh 0600 object.
TEST_F(ParityTest, APlantedSlotIsNeverAdopted) {
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
  // The next encode replaces the planted object with one of its own.
  Write(fresh, 6, 5);
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, geteuid());
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_TRUE(fresh.Find(0, 0, 6, 1).ok());
  EXPECT_EQ(ParitySlots(job_, "n9").Find(0, 0, 5, 1).status().code(), ENOENT);
}

}  // namespace
}  // namespace dlckpt::codec

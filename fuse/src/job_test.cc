// PlanCheckpoint (the decisions of a job-wide checkpoint), ParseMountStatus
// and the mount pattern.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dlckpt/fuse/job.h"

namespace dlckpt::fusefs {
namespace {

MountState Mount(int rank, uint64_t acked, uint64_t pending = 0, uint64_t next = 0) {
  MountState m;
  m.node = "vn" + std::to_string(rank);
  m.mount = "/mnt/" + m.node;
  m.job = "j1";
  m.rank = rank;
  m.store = "/dlckpt.j1." + m.node + ".r" + std::to_string(rank);
  m.acked = acked;
  m.pending = pending;
  m.next = next ? next : std::max(acked, pending) + 1;
  m.coordinated = true;
  return m;
}

TEST(PlanCheckpoint, FreshAndSteadyJobs) {
  auto p = PlanCheckpoint({Mount(0, 0), Mount(1, 0), Mount(2, 0)}, false);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->epoch, 1u);
  EXPECT_EQ(p->finish, 0u);
  EXPECT_TRUE(p->drop.empty());
  // Epochs are never reused: the largest "next" of all stores wins.
  p = PlanCheckpoint({Mount(0, 4, 0, 7), Mount(1, 4), Mount(2, 4)}, false);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->epoch, 7u);
}

TEST(PlanCheckpoint, DifferentAcknowledgedEpochsAreRefusedUnlessAllowed) {
  std::vector<MountState> m{Mount(0, 3), Mount(1, 2), Mount(2, 3)};
  auto p = PlanCheckpoint(m, false);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), EPROTO);
  EXPECT_NE(p.status().message().find("mount /mnt/vn1 (rank 1, node vn1) epoch 2"), std::string::npos)
      << p.status().message();
  p = PlanCheckpoint(m, true);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->epoch, 4u);
}

TEST(PlanCheckpoint, InterruptedBeforeAnyAcknowledgementIsEncodedAgain) {
  auto p = PlanCheckpoint({Mount(0, 2, 3), Mount(1, 2, 3)}, false);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->finish, 3u);
  EXPECT_TRUE(p->finish_encode);
  EXPECT_EQ(p->epoch, 4u);
}

TEST(PlanCheckpoint, InterruptedDuringAcknowledgementIsFinished) {
  auto p = PlanCheckpoint({Mount(0, 3), Mount(1, 2, 3), Mount(2, 3)}, false);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->finish, 3u);
  EXPECT_FALSE(p->finish_encode);
  EXPECT_EQ(p->epoch, 4u);
}

TEST(PlanCheckpoint, PendingEpochsNotEveryStoreHoldsAreDropped) {
  // Rank 1 never committed 3 (or dropped it): 3 cannot be completed.
  auto p = PlanCheckpoint({Mount(0, 2, 3), Mount(1, 2, 0, 4), Mount(2, 2, 3)}, false);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->finish, 0u);
  EXPECT_EQ(p->drop, (std::vector<size_t>{0, 2}));
  EXPECT_EQ(p->epoch, 4u);
}

TEST(PlanCheckpoint, StoresThatDisagreeAboutAnAcknowledgedEpochNeedARecovery) {
  auto p = PlanCheckpoint({Mount(0, 3), Mount(1, 2)}, false);
  ASSERT_FALSE(p.ok());  // different acknowledged epochs
  EXPECT_EQ(p.status().code(), EPROTO);
  EXPECT_NE(p.status().message().find("different checkpoints"), std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find("--allow-mismatch"), std::string::npos) << p.status().message();
  p = PlanCheckpoint({Mount(0, 3), Mount(1, 2, 0, 4), Mount(2, 2, 3)}, true);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), EPROTO);
  EXPECT_NE(p.status().message().find("disagree about epoch 3"), std::string::npos) << p.status().message();
  EXPECT_EQ(p.status().message().find("--allow-mismatch"), std::string::npos) << p.status().message();
}

TEST(PlanCheckpoint, RefusesMountsThatAreNotOneCoordinatedJob) {
  auto local = Mount(1, 0);
  local.coordinated = false;
  auto p = PlanCheckpoint({Mount(0, 0), local}, false);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), EPERM);
  EXPECT_NE(p.status().message().find("--checkpoint coordinated"), std::string::npos);

  auto other = Mount(1, 0);
  other.job = "j2";
  other.store = "/dlckpt.j2.vn1.r1";
  p = PlanCheckpoint({Mount(0, 0), other}, false);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("different jobs"), std::string::npos);

  auto renamed = Mount(1, 0);
  renamed.store = "/mystore";
  p = PlanCheckpoint({Mount(0, 0), renamed}, false);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("/dlckpt.j1.vn1.r1"), std::string::npos) << p.status().message();

  auto twin = Mount(0, 0);
  twin.node = "vn9";
  twin.mount = "/mnt/vn9";
  twin.store = "/dlckpt.j1.vn9.r0";
  p = PlanCheckpoint({Mount(0, 0), twin}, false);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("two mounts serve rank 0"), std::string::npos);

  EXPECT_FALSE(PlanCheckpoint({}, false).ok());
}

TEST(MountStatus, ParsesTheDaemonsStatusText) {
  auto st = ParseMountStatus("/m", "store: /dlckpt.j.n.r2\npid: 42\njob: j\nnode: n\nrank: 2\n"
                                   "acknowledged_epoch: 5\npending_epoch: 6\nnext_epoch: 9\n"
                                   "checkpoint_mode: coordinated\nlast_checkpoint: error: x: y\n");
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->store, "/dlckpt.j.n.r2");
  EXPECT_EQ(st->pid, 42);
  EXPECT_EQ(st->rank, 2);
  EXPECT_EQ(st->acked, 5u);
  EXPECT_EQ(st->pending, 6u);
  EXPECT_EQ(st->next, 9u);
  EXPECT_TRUE(st->coordinated);
  st = ParseMountStatus("/m", "store: s\npid: 1\njob: j\nnode: n\nrank: x\n");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), EBADMSG);
  EXPECT_NE(st.status().message().find("'rank'"), std::string::npos);
}

TEST(MountPattern, ReplacesNodeAndRank) {
  EXPECT_EQ(ExpandMountPattern("/tmp/x/{node}/r{rank}/{node}", "vn2", 7), "/tmp/x/vn2/r7/vn2");
  EXPECT_EQ(ExpandMountPattern("/mnt/ckpt", "vn2", 7), "/mnt/ckpt");
}

}  // namespace
}  // namespace dlckpt::fusefs

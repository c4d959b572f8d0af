#include "dlckpt/codec/recovery.h"

#include <gtest/gtest.h>

namespace dlckpt::recovery {
namespace {

using protocol::MemberRecord;
using protocol::NodeReport;
using protocol::ParityReport;
using protocol::StoreReport;

// A cluster of data nodes vn0..vn3 with 2 ranks each and groups
// {vn0, vn1} (parity on vn4) and {vn2, vn3} (parity on vn5), XOR.
class RecoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int r = 0; r < 8; ++r) in_.placement[r] = "vn" + std::to_string(r / 2);
    for (int n = 0; n < 6; ++n) nodes_["vn" + std::to_string(n)].node = "vn" + std::to_string(n);
    in_.free_nodes = {"vn4", "vn5"};
  }

  void Stores(uint64_t acked, uint64_t pending) {
    for (auto& [name, n] : nodes_) n.stores.clear();
    for (const auto& [r, node] : in_.placement) {
      nodes_[node].stores.push_back(StoreReport{"/dlckpt.j." + node + ".r" + std::to_string(r), "j", r,
                                                acked, pending, ""});
    }
  }

  static MemberRecord Member(int node) {
    return MemberRecord{"vn" + std::to_string(node), {2 * node, 2 * node + 1}, {100, 100}};
  }

  void Parity(const std::string& node, uint32_t group, uint32_t index, uint32_t k, uint64_t epoch,
              bool complete, std::vector<int> member_nodes, uint32_t ngroups = 2,
              uint64_t generation = 1) {
    ParityReport p;
    p.name = "/dlckpt.j." + node + ".g" + std::to_string(group) + ".p" + std::to_string(index);
    p.group = group;
    p.index = index;
    p.k = k;
    p.ngroups = ngroups;
    p.scheme = k > 1;
    p.epoch = epoch;
    p.generation = generation;
    p.complete = complete;
    for (int m : member_nodes) p.members.push_back(Member(m));
    nodes_[node].parities.push_back(p);
  }

  void Kill(const std::string& node) {
    in_.dead_nodes.insert(node);
    nodes_.erase(node);
  }

  Result<Plan> Run() {
    in_.survey.nodes.clear();
    for (auto& [name, n] : nodes_) in_.survey.nodes.push_back(n);
    return Decide(in_);
  }

  Input in_;
  std::map<std::string, NodeReport> nodes_;
};

TEST_F(RecoveryTest, ProcessCrashWithoutLossRestoresNewestAcknowledged) {
  Stores(3, 4);
  Parity("vn4", 0, 0, 1, 3, true, {0, 1});
  Parity("vn5", 1, 0, 1, 3, true, {2, 3});
  Parity("vn4", 0, 0, 1, 4, true, {0, 1});
  Parity("vn5", 1, 0, 1, 4, false, {2, 3});  // encode of 4 interrupted
  auto p = Run();
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->epoch, 3u);
  EXPECT_TRUE(p->rebuilds.empty());
  EXPECT_TRUE(p->lost_nodes.empty());
  EXPECT_EQ(p->placement, in_.placement);
}

TEST_F(RecoveryTest, PendingEpochWhoseEncodingCompletedIsChosen) {
  Stores(3, 4);  // DONE(4) was sent but the application died before acknowledging
  Parity("vn4", 0, 0, 1, 4, true, {0, 1});
  Parity("vn5", 1, 0, 1, 4, true, {2, 3});
  auto p = Run();
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->epoch, 4u);
}

TEST_F(RecoveryTest, LostNodeIsRebuiltOnItsGroupsSpare) {
  Stores(3, 0);
  Parity("vn4", 0, 0, 1, 3, true, {0, 1});
  Parity("vn5", 1, 0, 1, 3, true, {2, 3});
  Kill("vn1");
  auto p = Run();
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->epoch, 3u);
  EXPECT_EQ(p->generation, 1u);
  ASSERT_EQ(p->rebuilds.size(), 1u);
  EXPECT_EQ(p->rebuilds[0].group, 0u);
  EXPECT_EQ(p->rebuilds[0].member, 1u);
  EXPECT_EQ(p->rebuilds[0].target_node, "vn4");
  EXPECT_EQ(p->placement.at(2), "vn4");
  EXPECT_EQ(p->placement.at(3), "vn4");
  EXPECT_EQ(p->placement.at(0), "vn0");
  EXPECT_EQ(p->lost_nodes, std::vector<std::string>{"vn1"});
  auto msg = ToRecoverMessage(*p);
  EXPECT_EQ(msg.epoch, 3u);
  EXPECT_EQ(msg.rebuilds.size(), 1u);
}

TEST_F(RecoveryTest, StandbySpareIsPreferred) {
  nodes_["vn6"].node = "vn6";
  in_.free_nodes = {"vn4", "vn5", "vn6"};
  Stores(3, 0);
  Parity("vn4", 0, 0, 1, 3, true, {0, 1});
  Parity("vn5", 1, 0, 1, 3, true, {2, 3});
  Kill("vn2");
  auto p = Run();
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->rebuilds.size(), 1u);
  EXPECT_EQ(p->rebuilds[0].target_node, "vn6");
}

TEST_F(RecoveryTest, TwoLossesInOneXorGroupAreUnrecoverable) {
  Stores(5, 0);
  Parity("vn4", 0, 0, 1, 5, true, {0, 1});
  Parity("vn5", 1, 0, 1, 5, true, {2, 3});
  Kill("vn2");
  Kill("vn3");
  auto p = Run();
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), ENOTRECOVERABLE);
  const std::string& m = p.status().message();
  EXPECT_NE(m.find("group 1"), std::string::npos) << m;
  EXPECT_NE(m.find("lost 2 member(s)"), std::string::npos) << m;
  EXPECT_NE(m.find("epoch 5 on 4 of 8 ranks"), std::string::npos) << m;
}

TEST_F(RecoveryTest, LossesInDifferentGroupsAreBothRebuilt) {
  Stores(5, 0);
  Parity("vn4", 0, 0, 1, 5, true, {0, 1});
  Parity("vn5", 1, 0, 1, 5, true, {2, 3});
  Kill("vn0");
  Kill("vn3");
  auto p = Run();
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->rebuilds.size(), 2u);
  EXPECT_EQ(p->placement.at(0), "vn4");
  EXPECT_EQ(p->placement.at(7), "vn5");
}

TEST_F(RecoveryTest, ReedSolomonRebuildsTwoMembersOfOneGroup) {
  // One group of four data nodes with parity on vn4 and vn5 (k = 2).
  Stores(2, 0);
  Parity("vn4", 0, 0, 2, 2, true, {0, 1, 2, 3}, 1);
  Parity("vn5", 0, 1, 2, 2, true, {0, 1, 2, 3}, 1);
  Kill("vn1");
  Kill("vn2");
  auto p = Run();
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->rebuilds.size(), 2u);
  std::set<std::string> targets{p->rebuilds[0].target_node, p->rebuilds[1].target_node};
  EXPECT_EQ(targets, (std::set<std::string>{"vn4", "vn5"}));
  // Three losses exceed k = 2.
  Kill("vn3");
  auto q = Run();
  EXPECT_EQ(q.status().code(), ENOTRECOVERABLE);
}

TEST_F(RecoveryTest, InterruptedEncodeFallsBackToPreviousEpoch) {
  Stores(3, 4);
  Parity("vn4", 0, 0, 1, 3, true, {0, 1});
  Parity("vn5", 1, 0, 1, 3, true, {2, 3});
  Parity("vn4", 0, 0, 1, 4, true, {0, 1});
  Parity("vn5", 1, 0, 1, 4, false, {2, 3});
  Kill("vn0");
  auto p = Run();
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->epoch, 3u);
  ASSERT_EQ(p->rebuilds.size(), 1u);
  EXPECT_EQ(p->rebuilds[0].target_node, "vn4");
}

TEST_F(RecoveryTest, SpareLossAloneNeedsNoRebuild) {
  Stores(3, 0);
  Parity("vn4", 0, 0, 1, 3, true, {0, 1});
  Parity("vn5", 1, 0, 1, 3, true, {2, 3});
  Kill("vn4");
  in_.free_nodes = {"vn5"};
  auto p = Run();
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->epoch, 3u);
  EXPECT_TRUE(p->rebuilds.empty());
  EXPECT_TRUE(p->lost_nodes.empty());
}

TEST_F(RecoveryTest, NothingAcknowledgedRestartsFromScratch) {
  Stores(0, 0);
  Kill("vn1");
  auto p = Run();
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->epoch, 0u);
  EXPECT_EQ(p->placement.at(2), "vn4");
  EXPECT_EQ(p->placement.at(3), "vn4");
  EXPECT_EQ(p->lost_nodes, std::vector<std::string>{"vn1"});
}

TEST_F(RecoveryTest, DamagedStoreCountsAsLostAndIsNamed) {
  Stores(3, 0);
  Parity("vn4", 0, 0, 1, 3, true, {0, 1});
  Parity("vn5", 1, 0, 1, 3, true, {2, 3});
  nodes_["vn0"].stores[0].error = "header checksum mismatch";
  Kill("vn1");
  auto p = Run();
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("header checksum mismatch"), std::string::npos)
      << p.status().message();
}

TEST_F(RecoveryTest, NoSpareLeftIsAClearError) {
  Stores(3, 0);
  Parity("vn4", 0, 0, 1, 3, true, {0, 1});
  Parity("vn5", 1, 0, 1, 3, true, {2, 3});
  in_.free_nodes = {};
  Kill("vn1");
  auto p = Run();
  EXPECT_EQ(p.status().code(), ENOTRECOVERABLE);
  EXPECT_NE(p.status().message().find("no spare node left"), std::string::npos);
}

}  // namespace
}  // namespace dlckpt::recovery

#include "dlckpt/control/recovery.h"

#include <gtest/gtest.h>

#include <bit>
#include <random>

#include "recovery_internal.h"

namespace dlckpt::control::recovery {
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
                                                acked, pending, "", true, true, ""});
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

// vn4 holds group 0's parity, vn5 group 1's: vn1 of group 0 goes to vn5, so
// that no node holds two chunks of group 0.
TEST_F(RecoveryTest, LostNodeIsRebuiltOnASpareHoldingNoChunkOfItsGroup) {
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
  EXPECT_EQ(p->rebuilds[0].target_node, "vn5");
  EXPECT_EQ(p->placement.at(2), "vn5");
  EXPECT_EQ(p->placement.at(3), "vn5");
  EXPECT_TRUE(p->degraded.empty()) << DescribeDegraded(*p);
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
  // Each goes to the other group's spare: no node holds two chunks of a group.
  EXPECT_EQ(p->placement.at(0), "vn5");
  EXPECT_EQ(p->placement.at(7), "vn4");
  EXPECT_TRUE(p->degraded.empty()) << DescribeDegraded(*p);
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

// A parity the survey left out (its bytes failed their checksums) is an
// erasure: RS k=2 rebuilds from the other parity; with both damaged, or the
// only XOR parity, the decision is ENOTRECOVERABLE and names the damage.
TEST_F(RecoveryTest, ADamagedParityIsAnErasure) {
  const std::string why = "/dlckpt.j.vn4.parity0: parity block 0 of 1 (bytes 0-99): checksum mismatch";
  Stores(2, 0);
  nodes_["vn4"].parity_damage.push_back(why);
  Parity("vn5", 0, 1, 2, 2, true, {0, 1, 2, 3}, 1);
  Kill("vn1");
  auto p = Run();
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->rebuilds.size(), 1u);
  EXPECT_EQ(p->rebuilds[0].member, 1u);
  EXPECT_NE(p->damage.find("parity on vn4: " + why), std::string::npos) << p->damage;
  // Both parities damaged: nothing can rebuild vn1.
  nodes_["vn5"].parities.clear();
  nodes_["vn5"].parity_damage.push_back("/dlckpt.j.vn5.parity1: parity block 0 of 1: checksum mismatch");
  auto q = Run();
  ASSERT_EQ(q.status().code(), ENOTRECOVERABLE);
  const std::string& m = q.status().message();
  EXPECT_EQ(m.find("unrecoverable: "), 0u) << m;
  EXPECT_NE(m.find("damaged parity: (vn4: " + why + ")"), std::string::npos) << m;
  EXPECT_NE(m.find("(vn5: /dlckpt.j.vn5.parity1"), std::string::npos) << m;
}

TEST_F(RecoveryTest, ADamagedXorParityMakesALossUnrecoverable) {
  Stores(5, 0);
  nodes_["vn4"].parity_damage.push_back("/dlckpt.j.vn4.parity0: parity block 0 of 1: checksum mismatch");
  Parity("vn5", 1, 0, 1, 5, true, {2, 3});
  Kill("vn1");
  auto p = Run();
  ASSERT_EQ(p.status().code(), ENOTRECOVERABLE);
  EXPECT_NE(p.status().message().find("damaged parity: (vn4: "), std::string::npos) << p.status().message();
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
  EXPECT_EQ(p->rebuilds[0].target_node, "vn5");
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
  in_.oversubscribe = false;  // --on-spares-exhausted halt
  Kill("vn1");
  auto p = Run();
  EXPECT_EQ(p.status().code(), ENOTRECOVERABLE);
  EXPECT_NE(p.status().message().find("no spare node left"), std::string::npos);
}

// With no free node, the lost member's ranks run on a survivor: first one
// holding no chunk of its group (vn2, vn3 are group 1's), then the least
// loaded; the summary says so.
TEST_F(RecoveryTest, NoSpareLeftRelaunchesOnASurvivorOutsideTheGroup) {
  Stores(3, 0);
  Parity("vn4", 0, 0, 1, 3, true, {0, 1});
  Parity("vn5", 1, 0, 1, 3, true, {2, 3});
  in_.free_nodes = {};
  Kill("vn1");
  Kill("vn4");  // and group 0's parity node is gone too: nothing to rebuild from
  EXPECT_EQ(Run().status().code(), ENOTRECOVERABLE);
  in_ = Input{};
  nodes_.clear();
  SetUp();
  Stores(3, 0);
  Parity("vn4", 0, 0, 1, 3, true, {0, 1});
  Parity("vn5", 1, 0, 1, 3, true, {2, 3});
  in_.free_nodes = {};
  Kill("vn1");
  auto p = Run();
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->rebuilds.size(), 1u);
  EXPECT_EQ(p->rebuilds[0].target_node, "vn2");  // not vn0 (group 0's) nor vn4 (its parity, no ranks)
  EXPECT_EQ(p->placement.at(2), "vn2");
  EXPECT_EQ(p->placement.at(3), "vn2");
  EXPECT_EQ(p->oversubscribed, std::vector<std::string>{"vn2"});
  EXPECT_NE(p->summary.find("no spare node left: vn2 now runs ranks 2,3,4,5 (oversubscribed)"), std::string::npos)
      << p->summary;
}

// Spread parity: one XOR group of vn0..vn3 (2 ranks each), no spare; member
// m keeps parity object m (stripe m's parity).
class SpreadTest : public RecoveryTest {
 protected:
  void SetUp() override {
    RecoveryTest::SetUp();
    nodes_.erase("vn4");
    nodes_.erase("vn5");
    in_.free_nodes = {};
  }
  void SpreadParity(uint32_t k, uint64_t epoch, const std::vector<int>& holders = {0, 1, 2, 3}) {
    for (int m : holders) {
      Parity("vn" + std::to_string(m), 0, static_cast<uint32_t>(m), k, epoch, true, {0, 1, 2, 3}, 1);
      nodes_["vn" + std::to_string(m)].parities.back().layout = 1;
    }
  }
};

TEST_F(SpreadTest, StripesKeepParityOnTheMembers) {
  Stores(3, 0);
  SpreadParity(1, 3);
  Kill("vn1");
  in_.survey.nodes.clear();
  for (auto& [name, n] : nodes_) in_.survey.nodes.push_back(n);
  internal::Inventory inv = internal::TakeInventory(in_);
  const internal::GroupInfo& gi = inv.encodings.at({3, 1}).groups.at(0);
  EXPECT_TRUE(gi.spread());
  auto stripes = internal::StripesOf(inv, gi, 3);
  ASSERT_EQ(stripes.size(), 4u);
  // Stripe 0: parity on vn0, data of members 1, 2, 3 (member 1 lost).
  EXPECT_EQ(stripes[0].member, (std::vector<uint32_t>{1, 2, 3}));
  EXPECT_EQ(stripes[0].holder, (std::vector<std::string>{"", "vn2", "vn3", "vn0"}));
  // Stripe 1: its parity was on vn1.
  EXPECT_EQ(stripes[1].holder, (std::vector<std::string>{"vn0", "vn2", "vn3", ""}));
  EXPECT_EQ(internal::Tolerance(stripes), 0);
}

TEST_F(SpreadTest, LossRebuildsOntoASurvivorFromEveryStripe) {
  Stores(3, 0);
  SpreadParity(1, 3);
  Kill("vn1");
  auto p = Run();
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->epoch, 3u);
  ASSERT_EQ(p->rebuilds.size(), 1u);
  EXPECT_EQ(p->rebuilds[0].member, 1u);
  EXPECT_EQ(p->rebuilds[0].target_node, "vn0");  // the least loaded survivor, first by name
  ASSERT_EQ(p->groups.size(), 1u);
  const auto& g = p->groups[0];
  EXPECT_EQ(g.layout, 1);
  ASSERT_EQ(g.sources.size(), 16u);  // 4 stripes of 4 chunks
  EXPECT_EQ(std::vector<std::string>(g.sources.begin(), g.sources.begin() + 4),
            (std::vector<std::string>{"", "vn2", "vn3", "vn0"}));
  EXPECT_EQ(std::vector<std::string>(g.sources.begin() + 4, g.sources.begin() + 8),
            (std::vector<std::string>{"vn0", "vn2", "vn3", ""}));
  ASSERT_EQ(p->degraded.size(), 1u);
  EXPECT_EQ(p->degraded[0].tolerance, 0);
  EXPECT_NE(p->summary.find("spread: d0,d1@vn0 d2@vn2 d3@vn3; parity p0@vn0 p2@vn2 p3@vn3"), std::string::npos)
      << p->summary;
  EXPECT_EQ(p->placement.at(2), "vn0");
  EXPECT_EQ(p->placement.at(3), "vn0");
}

TEST_F(SpreadTest, TwoLossesExceedXorButNotReedSolomon) {
  Stores(3, 0);
  SpreadParity(1, 3);
  Kill("vn1");
  Kill("vn2");
  auto p = Run();
  EXPECT_EQ(p.status().code(), ENOTRECOVERABLE);
  EXPECT_NE(p.status().message().find("of its spread parity keeps chunks"), std::string::npos)
      << p.status().ToString();

  in_ = Input{};
  nodes_.clear();
  SetUp();
  Stores(3, 0);
  SpreadParity(2, 3);
  Kill("vn1");
  Kill("vn2");
  auto q = Run();
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->rebuilds.size(), 2u);
  ASSERT_EQ(q->groups.size(), 1u);
  // Every stripe gives at least its n - k = 2 chunks, each from another node.
  for (size_t s = 0; s < 4; ++s) {
    std::set<std::string> nodes;
    for (size_t c = 0; c < 4; ++c) {
      const std::string& src = q->groups[0].sources[s * 4 + c];
      if (!src.empty()) {
        EXPECT_TRUE(nodes.insert(src).second) << "stripe " << s;
      }
    }
    EXPECT_GE(nodes.size(), 2u) << "stripe " << s;
  }
}

TEST_F(RecoveryTest, OwnParityNodeIsTheLastChoiceAndTheSummarySaysWhatItCosts) {
  Stores(3, 0);
  Parity("vn4", 0, 0, 1, 3, true, {0, 1});
  Parity("vn5", 1, 0, 1, 3, true, {2, 3});
  in_.free_nodes = {"vn4"};
  Kill("vn1");
  auto p = Run();
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->rebuilds.size(), 1u);
  EXPECT_EQ(p->rebuilds[0].target_node, "vn4");
  ASSERT_EQ(p->degraded.size(), 1u);
  EXPECT_EQ(p->degraded[0].group, 0u);
  EXPECT_EQ(p->degraded[0].tolerance, 0);
  EXPECT_NE(p->summary.find("group 0 survives 0 more node loss(es) until the next encode (chunks d0@vn0 "
                            "d1,p0@vn4, 1 parity)"),
            std::string::npos)
      << p->summary;
}

// One Reed-Solomon group (k = 2) of data nodes vn0..vn3, parity p0 on vn4 and
// p1 on vn5, 2 ranks per node, every store at epoch 3.
class ReedSolomonTest : public RecoveryTest {
 protected:
  void SetUp() override {
    RecoveryTest::SetUp();
    Stores(3, 0);
    Parity("vn4", 0, 0, 2, 3, true, {0, 1, 2, 3}, 1);
    Parity("vn5", 0, 1, 2, 3, true, {0, 1, 2, 3}, 1);
  }

  // Applies a plan as dlckpt-run and the codec would: rebuilt ranks' stores
  // move to their targets; the free nodes are the live nodes without ranks.
  void Apply(const Plan& p) {
    for (const auto& t : p.rebuilds) {
      for (int32_t r : Member(static_cast<int>(t.member)).ranks) {
        for (auto& [name, n] : nodes_) {
          std::erase_if(n.stores, [&](const StoreReport& s) { return s.rank == r; });
        }
        nodes_[t.target_node].stores.push_back(
            StoreReport{"/dlckpt.j." + t.target_node + ".r" + std::to_string(r), "j", r, 3, 0, "", true, true, ""});
      }
    }
    in_.placement = p.placement;
    in_.dead_nodes.clear();
    std::set<std::string> busy;
    for (const auto& [r, node] : in_.placement) busy.insert(node);
    in_.free_nodes.clear();
    for (const auto& [name, n] : nodes_) {
      if (!busy.count(name)) in_.free_nodes.push_back(name);
    }
  }
};

// The soak's failure: vn2 is rebuilt on vn4, which also holds p0; then vn0 is
// lost before the next encode. d1@vn1 d3@vn3 d2,p0@vn4 p1@vn5 still lie on
// four distinct nodes, enough to rebuild d0 (on vn5). Then d0,p1@vn5 d1@vn1
// d2,p0@vn4 d3@vn3: any one more loss leaves one data chunk to rebuild from
// at least four surviving chunks (vn4 or vn5 folding its two into one
// source), so the group still survives one loss; two losses that take two
// data chunks, or a node holding two chunks and one more, do not.
TEST_F(ReedSolomonTest, LossesAfterRebuildsOntoParityHolders) {
  Kill("vn2");
  auto first = Run();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(first->rebuilds.size(), 1u);
  EXPECT_EQ(first->rebuilds[0].target_node, "vn4");
  ASSERT_EQ(first->degraded.size(), 1u);
  EXPECT_EQ(first->degraded[0].tolerance, 1) << first->summary;
  Apply(*first);
  Kill("vn0");
  auto second = Run();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->epoch, 3u);
  ASSERT_EQ(second->rebuilds.size(), 1u);
  EXPECT_EQ(second->rebuilds[0].member, 0u);
  EXPECT_EQ(second->rebuilds[0].target_node, "vn5");
  ASSERT_EQ(second->groups.size(), 1u);
  EXPECT_EQ(second->groups[0].sources, (std::vector<std::string>{"", "vn1", "vn4", "vn3", "", "vn5"}));
  ASSERT_EQ(second->degraded.size(), 1u);
  EXPECT_EQ(second->degraded[0].tolerance, 1) << second->summary;
  EXPECT_NE(second->summary.find("group 0 survives 1 more node loss(es) until the next encode (chunks d1@vn1 "
                                 "d3@vn3 d2,p0@vn4 d0,p1@vn5, 2 parity)"),
            std::string::npos)
      << second->summary;
  Apply(*second);
  const auto saved_nodes = nodes_;
  const auto saved_in = in_;

  // Two data chunks lost at once, the four survivors on two nodes: each
  // would have to give two chunks to two different outputs.
  Kill("vn1");
  Kill("vn3");
  auto two_outputs = Run();
  ASSERT_FALSE(two_outputs.ok());
  EXPECT_EQ(two_outputs.status().code(), ENOTRECOVERABLE);
  EXPECT_NE(two_outputs.status().message().find(
                "its surviving chunks d2,p0@vn4 d0,p1@vn5 on 2 node(s): 2 lost chunks of one stripe need their "
                "4 sources on distinct nodes"),
            std::string::npos)
      << two_outputs.status().message();

  // A node holding two chunks and one more: three chunks left.
  nodes_ = saved_nodes;
  in_ = saved_in;
  Kill("vn5");
  Kill("vn1");
  auto too_few = Run();
  ASSERT_FALSE(too_few.ok());
  EXPECT_NE(too_few.status().message().find(
                "its surviving chunks d3@vn3 d2,p0@vn4 on 2 node(s): 3 chunk(s), and a rebuild needs 4"),
            std::string::npos)
      << too_few.status().message();

  // One loss: d1 is rebuilt from d0@vn5, d2 and p0 folded on vn4, d3@vn3.
  nodes_ = saved_nodes;
  in_ = saved_in;
  Kill("vn1");
  auto third = Run();
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_EQ(third->epoch, 3u);
  ASSERT_EQ(third->rebuilds.size(), 1u);
  EXPECT_EQ(third->rebuilds[0].member, 1u);
  ASSERT_EQ(third->groups.size(), 1u);
  EXPECT_EQ(third->groups[0].sources, (std::vector<std::string>{"vn5", "", "vn4", "vn3", "vn4", ""}));
  EXPECT_NE(third->summary.find("restore epoch 3; lost node(s) vn1; rebuild group 0 member vn1 on "),
            std::string::npos)
      << third->summary;
}

// Every ordered pair of losses, one recovery after the other with no encode
// between them, is recoverable with k = 2; the placement keeps every rank.
TEST_F(ReedSolomonTest, EveryPairOfLossesBeforeTheNextEncode) {
  const std::vector<std::string> all{"vn0", "vn1", "vn2", "vn3", "vn4", "vn5"};
  const auto saved_nodes = nodes_;
  const auto saved_in = in_;
  for (const auto& a : all) {
    for (const auto& b : all) {
      if (a == b) continue;
      nodes_ = saved_nodes;
      in_ = saved_in;
      Kill(a);
      auto first = Run();
      ASSERT_TRUE(first.ok()) << a << " then " << b << ": " << first.status().ToString();
      Apply(*first);
      Kill(b);
      auto second = Run();
      ASSERT_TRUE(second.ok()) << a << " then " << b << ": " << second.status().ToString();
      EXPECT_EQ(second->epoch, 3u);
      EXPECT_EQ(second->placement.size(), 8u);
      for (const auto& [r, node] : second->placement) {
        EXPECT_NE(node, a) << a << " then " << b << ": rank " << r;
        EXPECT_NE(node, b) << a << " then " << b << ": rank " << r;
      }
    }
  }
}

// A pending epoch hides nothing: the survey verified the acknowledged epoch,
// vn1's copy failed, so it is an erasure rebuilt in place on vn1.
TEST_F(RecoveryTest, DamagedAcknowledgedEpochIsRebuiltInPlace) {
  Stores(3, 4);
  Parity("vn4", 0, 0, 1, 3, true, {0, 1});
  Parity("vn5", 1, 0, 1, 3, true, {2, 3});
  Parity("vn4", 0, 0, 1, 4, false, {0, 1});  // encode of 4 interrupted
  nodes_["vn1"].stores[0].acked_ok = false;
  nodes_["vn1"].stores[0].damage = "epoch 3: CRC32C mismatch in /heat2d/r2";
  auto p = Run();
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->epoch, 3u);
  ASSERT_EQ(p->rebuilds.size(), 1u);
  EXPECT_EQ(p->rebuilds[0].member, 1u);
  EXPECT_EQ(p->rebuilds[0].target_node, "vn1");
  EXPECT_TRUE(p->lost_nodes.empty());
  EXPECT_EQ(p->placement, in_.placement);
  EXPECT_NE(p->summary.find("rebuild group 0 member vn1 on vn1 (damaged store)"), std::string::npos) << p->summary;
  EXPECT_NE(p->damage.find("CRC32C mismatch"), std::string::npos) << p->damage;
}

// Reed-Solomon: one lost node plus one corrupt survivor are two erasures.
TEST_F(ReedSolomonTest, LossPlusCorruptSurvivorIsRecoverable) {
  nodes_["vn0"].stores[1].acked_ok = false;
  nodes_["vn0"].stores[1].damage = "epoch 3: CRC32C mismatch";
  Kill("vn2");
  auto p = Run();
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->rebuilds.size(), 2u);
  std::map<uint32_t, std::string> target;
  for (const auto& t : p->rebuilds) target[t.member] = t.target_node;
  EXPECT_EQ(target[0], "vn0");
  EXPECT_NE(target[2], "vn2");
  // With XOR the same pattern is two erasures for one parity: refused, naming both.
  nodes_["vn4"].parities[0].k = 1;
  nodes_["vn5"].parities.clear();
  auto q = Run();
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("lost 2 member(s) (vn0, vn2)"), std::string::npos) << q.status().message();
  EXPECT_NE(q.status().message().find("CRC32C mismatch"), std::string::npos) << q.status().message();
}

// A rank whose group's parity all lived on lost nodes: the error says so.
TEST_F(RecoveryTest, RankWhoseGroupLostItsParityIsExplained) {
  Stores(3, 0);
  Parity("vn4", 0, 0, 1, 3, true, {0, 1});
  Parity("vn5", 1, 0, 1, 3, true, {2, 3});
  Kill("vn0");
  Kill("vn4");
  auto p = Run();
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("rank 0 has no copy of epoch 3, and no parity of group(s) 0 of epoch 3's "
                                      "encoding survives"),
            std::string::npos)
      << p.status().message();
}

// ---- the stages, one at a time ---------------------------------------------------------

// The stripe model: a member survives when all its ranks have the epoch on
// one node; a node holding two chunks gives only its first to a rebuild.
TEST_F(RecoveryTest, StripeModelAndOneSourcePerNode) {
  Stores(3, 4);
  Parity("vn4", 0, 0, 1, 3, true, {0, 1});
  Kill("vn1");
  in_.survey.nodes.clear();
  for (auto& [name, n] : nodes_) in_.survey.nodes.push_back(n);
  internal::Inventory inv = internal::TakeInventory(in_);
  EXPECT_TRUE(inv.Has(0, 3));
  EXPECT_TRUE(inv.Has(0, 4));
  EXPECT_FALSE(inv.Has(2, 3));  // on vn1
  EXPECT_EQ(inv.newest_acked, 3u);
  const internal::GroupInfo& gi = inv.encodings.at({3, 1}).groups.at(0);
  internal::Stripe st = internal::StripeOf(inv, gi, 3);
  EXPECT_EQ(st.holder, (std::vector<std::string>{"vn0", "", "vn4"}));
  EXPECT_EQ(st.LostData(), std::vector<uint32_t>{1});
  EXPECT_EQ(st.DistinctHolders(), 2u);
  // Rank 1 lives on vn0 too, but its copy lacks epoch 5: member 0 is lost at 5.
  EXPECT_EQ(internal::StripeOf(inv, gi, 5).holder[0], "");
  internal::Stripe two;
  two.n = 2;
  two.holder = {"vn0", "vn4", "vn4", "vn5"};  // vn4 rebuilt d1 and holds p0
  EXPECT_EQ(two.Sources(), (std::vector<std::string>{"vn0", "vn4", "", "vn5"}));
}

// A node may give two chunks of a stripe that rebuilds one: d2 = d0 ^ d1 ^ d3
// ^ p0 with d1 and p0 on vn4 (issue 32, test 4); not of one that rebuilds two.
TEST(StripeTest, OneLostChunkMayTakeTwoChunksOfANode) {
  internal::Stripe x;
  x.n = 4;
  x.holder = {"vn0", "vn4", "", "vn3", "vn4"};
  EXPECT_TRUE(x.Rebuildable());
  EXPECT_EQ(x.Surviving(), 4u);
  EXPECT_EQ(x.DistinctHolders(), 3u);
  EXPECT_EQ(x.Sources(), x.holder);
  // Nothing more may be lost: vn4 takes two chunks with it, any other node a
  // second data chunk.
  x.holder[2] = "vn2";
  EXPECT_EQ(internal::Tolerance({x}), 0);

  // RS n = 4, k = 2: d1 lost; one chunk per node makes three, so p0 (vn0's
  // second) is given back; p1 on vn0 too is not needed.
  internal::Stripe rs;
  rs.n = 4;
  rs.holder = {"vn0", "", "vn2", "vn3", "vn0", "vn0"};
  EXPECT_TRUE(rs.Rebuildable());
  EXPECT_EQ(rs.Sources(), (std::vector<std::string>{"vn0", "", "vn2", "vn3", "vn0", ""}));
  // Distinct nodes enough: one chunk each, as before.
  rs.holder = {"vn0", "", "vn2", "vn3", "vn0", "vn5"};
  EXPECT_EQ(rs.Sources(), (std::vector<std::string>{"vn0", "", "vn2", "vn3", "", "vn5"}));
  // Two lost, four survivors on three nodes: refused.
  rs.holder = {"vn0", "", "", "vn3", "vn0", "vn5"};
  EXPECT_FALSE(rs.Rebuildable());
  EXPECT_EQ(internal::Tolerance({rs}), -1);
  // One lost but three survivors: refused.
  rs.holder = {"vn0", "", "vn2", "vn3", "", ""};
  EXPECT_FALSE(rs.Rebuildable());

  // RS n = 3, k = 2, d0,p0@A d1,p1@B d2@C: one loss takes at most one data
  // chunk and leaves three chunks, so it is survived (more than d - n = 0);
  // two are not.
  internal::Stripe three;
  three.n = 3;
  three.holder = {"A", "B", "C", "A", "B"};
  EXPECT_EQ(internal::Tolerance({three}), 1);
  // Everything on distinct nodes: k.
  three.holder = {"A", "B", "C", "D", "E"};
  EXPECT_EQ(internal::Tolerance({three}), 2);
  // The group's worst stripe counts.
  internal::Stripe worse = three;
  worse.holder = {"A", "B", "C", "D", "D"};
  EXPECT_EQ(internal::Tolerance({three, worse}), 1);
}

// Tolerance against its definition, by every set of nodes lost, on random
// small stripes: the smallest set after which the stripe is not Rebuildable,
// minus one.
TEST(StripeTest, ToleranceIsTheSmallestFatalLossMinusOne) {
  std::mt19937 rng(32);
  for (int iter = 0; iter < 3000; ++iter) {
    internal::Stripe s;
    s.n = 1 + rng() % 4;
    const size_t k = 1 + rng() % 3, nodes = 1 + rng() % 6;
    for (size_t c = 0; c < s.n + k; ++c) {
      const size_t pick = rng() % (nodes + 1);  // nodes: lost
      s.holder.push_back(pick == nodes ? "" : "vn" + std::to_string(pick));
    }
    std::vector<std::string> held;
    for (const auto& h : s.holder) {
      if (!h.empty() && std::find(held.begin(), held.end(), h) == held.end()) held.push_back(h);
    }
    int want = s.Rebuildable() ? static_cast<int>(held.size()) : -1;
    for (uint32_t mask = 0; mask < (1u << held.size()) && want >= 0; ++mask) {
      internal::Stripe after = s;
      for (auto& h : after.holder) {
        for (size_t i = 0; i < held.size(); ++i) {
          if ((mask >> i & 1) && h == held[i]) h.clear();
        }
      }
      if (!after.Rebuildable()) want = std::min(want, std::popcount(mask) - 1);
    }
    std::string desc;
    for (const auto& h : s.holder) desc += (h.empty() ? "-" : h) + " ";
    ASSERT_EQ(internal::Tolerance({s}), want) << "n " << s.n << ": " << desc;
  }
}

// The choice of epoch, apart from the placement: the newest epoch whose
// encoding covers every missing rank, with the members to rebuild.
TEST_F(RecoveryTest, ChoiceOfEpochNamesTheEncodingAndTheLostMembers) {
  Stores(3, 4);
  Parity("vn4", 0, 0, 1, 3, true, {0, 1});
  Parity("vn5", 1, 0, 1, 3, true, {2, 3});
  Parity("vn4", 0, 0, 1, 4, true, {0, 1});
  Parity("vn5", 1, 0, 1, 4, false, {2, 3});  // 4 never completed
  Kill("vn3");
  in_.survey.nodes.clear();
  for (auto& [name, n] : nodes_) in_.survey.nodes.push_back(n);
  internal::Inventory inv = internal::TakeInventory(in_);
  auto c = internal::ChooseEpoch(inv, in_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->epoch, 3u);
  ASSERT_NE(c->encoding, nullptr);
  EXPECT_EQ(c->encoding->generation, 1u);
  EXPECT_EQ(c->lost, (std::vector<std::pair<uint32_t, uint32_t>>{{1, 1}}));
}

// The placement carries what the codec executes: the group's members, its
// scheme, and the node giving each surviving chunk.
TEST_F(RecoveryTest, PlacementCarriesTheChunkSourcesOfEveryRebuiltGroup) {
  Stores(3, 0);
  Parity("vn4", 0, 0, 1, 3, true, {0, 1});
  Parity("vn5", 1, 0, 1, 3, true, {2, 3});
  Kill("vn1");
  in_.survey.nodes.clear();
  for (auto& [name, n] : nodes_) in_.survey.nodes.push_back(n);
  internal::Inventory inv = internal::TakeInventory(in_);
  auto c = internal::ChooseEpoch(inv, in_);
  ASSERT_TRUE(c.ok());
  Plan plan;
  ASSERT_TRUE(internal::Place(inv, *c, in_, &plan).ok());
  ASSERT_EQ(plan.groups.size(), 1u);  // group 1 lost nothing
  const protocol::RebuildGroup& g = plan.groups[0];
  EXPECT_EQ(g.group, 0u);
  EXPECT_EQ(g.k, 1u);
  EXPECT_EQ(g.scheme, 0);
  ASSERT_EQ(g.members.size(), 2u);
  EXPECT_EQ(g.members[1].ranks, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(g.sources, (std::vector<std::string>{"vn0", "", "vn4"}));
  protocol::Recover msg = ToRecoverMessage(plan);
  ASSERT_EQ(msg.groups.size(), 1u);
  EXPECT_EQ(msg.groups[0].sources, g.sources);
}

// After a rebuild onto a parity holder, that node holds two chunks of the
// group: the next rebuild reads only one of them from it.
TEST_F(ReedSolomonTest, SourcesGiveOneChunkPerNodeAfterARebuildOntoAParityHolder) {
  Kill("vn2");
  auto first = Run();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  Apply(*first);
  Kill("vn0");
  auto second = Run();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  ASSERT_EQ(second->groups.size(), 1u);
  const auto& src = second->groups[0].sources;
  std::set<std::string> nodes;
  size_t given = 0;
  for (const auto& n : src) {
    if (n.empty()) continue;
    ++given;
    EXPECT_TRUE(nodes.insert(n).second) << n << " gives two chunks";
  }
  EXPECT_EQ(given, second->groups[0].members.size());
}

}  // namespace
}  // namespace dlckpt::control::recovery

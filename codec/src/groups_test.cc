#include "dlckpt/codec/groups.h"

#include <gtest/gtest.h>

#include <set>

namespace dlckpt::codec {
namespace {

// `data` nodes with `ranks_per_node` application ranks each, then `spares`
// spare nodes; codec ranks are assigned in a shuffled but fixed order.
std::vector<NodeInfo> Cluster(int data, int spares, int ranks_per_node = 1) {
  std::vector<NodeInfo> nodes;
  int codec = 0;
  for (int s = 0; s < spares; ++s) nodes.push_back({codec++, "spare" + std::to_string(s), {}});
  for (int d = data - 1; d >= 0; --d) {
    NodeInfo n{codec++, "node" + std::to_string(d), {}};
    for (int r = 0; r < ranks_per_node; ++r) n.app_ranks.push_back(d * ranks_per_node + r);
    nodes.push_back(n);
  }
  return nodes;
}

std::vector<int> Sizes(const GroupLayout& layout) {
  std::vector<int> sizes;
  for (const auto& g : layout.groups) sizes.push_back(g.n());
  return sizes;
}

void CheckInvariants(const GroupLayout& layout, const std::vector<NodeInfo>& nodes, int k) {
  std::set<std::string> seen;
  size_t members = layout.standby.size();
  for (const auto& g : layout.groups) {
    std::set<std::string> in_group;
    for (const auto& m : g.data) {
      EXPECT_FALSE(m.app_ranks.empty());
      EXPECT_TRUE(in_group.insert(m.node).second) << "two members on node " << m.node;
    }
    for (const auto& m : g.spares) {
      EXPECT_TRUE(m.app_ranks.empty());
      EXPECT_TRUE(in_group.insert(m.node).second) << "two members on node " << m.node;
    }
    EXPECT_EQ(g.k(), k);
    for (const auto& n : in_group) EXPECT_TRUE(seen.insert(n).second) << n << " in two groups";
    members += g.data.size() + g.spares.size();
  }
  EXPECT_EQ(members, nodes.size());
}

struct Case {
  int data, spares, group_size, k;
  std::vector<int> sizes;
  size_t standby;
};

TEST(FormGroups, SizesAndRemainderSpread) {
  const Case cases[] = {
      {4, 1, 4, 1, {4}, 0},
      {8, 2, 4, 1, {4, 4}, 0},
      {10, 3, 4, 1, {4, 3, 3}, 0},       // G does not divide the node count
      {10, 4, 4, 1, {4, 3, 3}, 1},       // one standby spare
      {7, 6, 3, 2, {3, 2, 2}, 0},
      {5, 3, 5, 3, {5}, 0},
      {1, 1, 8, 1, {1}, 0},
      {9, 5, 2, 1, {2, 2, 2, 2, 1}, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.data) + " data, " + std::to_string(c.spares) + " spares, G=" +
                 std::to_string(c.group_size) + " k=" + std::to_string(c.k));
    auto nodes = Cluster(c.data, c.spares);
    auto layout = FormGroups(nodes, {c.group_size, c.k});
    ASSERT_TRUE(layout.ok()) << layout.status().ToString();
    EXPECT_EQ(Sizes(*layout), c.sizes);
    EXPECT_EQ(layout->standby.size(), c.standby);
    CheckInvariants(*layout, nodes, c.k);
  }
}

TEST(FormGroups, OrderFollowsApplicationRanksAndSchemes) {
  auto nodes = Cluster(6, 4, 2);
  auto layout = FormGroups(nodes, {3, 2});
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  ASSERT_EQ(layout->groups.size(), 2u);
  const Group& g0 = layout->groups[0];
  EXPECT_EQ(g0.data[0].node, "node0");
  EXPECT_EQ(g0.data[0].app_ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(g0.data[2].node, "node2");
  EXPECT_EQ(g0.spares[0].node, "spare0");
  EXPECT_EQ(g0.spares[1].node, "spare1");
  EXPECT_EQ(layout->groups[1].spares[0].node, "spare2");
  EXPECT_EQ(g0.scheme(), Scheme::kReedSolomon);
  EXPECT_EQ(g0.codec_ranks(), (std::vector<int>{9, 8, 7, 0, 1}));

  auto one = FormGroups(Cluster(3, 1), {3, 1});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->groups[0].scheme(), Scheme::kXor);
  EXPECT_EQ(DescribeLayout(*one), "group 0 (xor, 3+1): data node0 node1 node2; spares spare0\n");
}

TEST(FormGroups, Roles) {
  auto nodes = Cluster(5, 3);
  auto layout = FormGroups(nodes, {3, 1});
  ASSERT_TRUE(layout.ok());
  // spares are codec ranks 0..2, data node d has codec rank 3 + (4 - d).
  auto r = FindRole(*layout, 7);  // node0
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kind, RoleKind::kData);
  EXPECT_EQ(r->group, 0);
  EXPECT_EQ(r->chunk, 0);
  r = FindRole(*layout, 1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kind, RoleKind::kSpare);
  EXPECT_EQ(r->group, 1);
  EXPECT_EQ(r->chunk, 2);  // group 1 holds 2 data nodes
  r = FindRole(*layout, 2);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kind, RoleKind::kStandby);
  EXPECT_EQ(FindRole(*layout, 99).status().code(), ENOENT);
}

TEST(FormGroups, ClearErrors) {
  auto err = [](std::vector<NodeInfo> nodes, GroupOptions o) {
    auto layout = FormGroups(nodes, o);
    EXPECT_FALSE(layout.ok());
    EXPECT_EQ(layout.status().code(), EINVAL);
    return layout.status().message();
  };
  EXPECT_EQ(err(Cluster(8, 3), {4, 2}),
            "3 spare nodes cannot give 2 groups 2 spares each (8 data nodes, --group-size 4 make "
            "2 groups, needing 4 spare nodes); use --group-size 8 or more, or start 1 more spare "
            "node");
  EXPECT_EQ(err(Cluster(4, 1), {2, 2}),
            "1 spare node cannot give 2 groups 2 spares each (4 data nodes, --group-size 2 make 2 "
            "groups, needing 4 spare nodes); start 3 more spare nodes or lower "
            "--spares-per-group");
  EXPECT_EQ(err(Cluster(4, 0), {4, 1}).substr(0, 34), "0 spare nodes cannot give 1 group ");
  EXPECT_EQ(err(Cluster(0, 3), {4, 1}),
            "none of the 3 nodes runs application ranks: nothing to protect");
  EXPECT_EQ(err({}, {4, 1}), "no codec process: cannot form groups");
  EXPECT_EQ(err(Cluster(4, 1), {0, 1}), "--group-size 0: must be at least 1");
  EXPECT_EQ(err(Cluster(4, 1), {4, 0}), "--spares-per-group 0: must be at least 1");

  auto dup_node = Cluster(3, 1);
  dup_node[2].node = dup_node[1].node;
  EXPECT_NE(err(dup_node, {3, 1}).find("runs two codec processes"), std::string::npos);
  auto dup_rank = Cluster(3, 1);
  dup_rank[2].codec_rank = dup_rank[1].codec_rank;
  EXPECT_NE(err(dup_rank, {3, 1}).find("listed twice"), std::string::npos);
  auto dup_app = Cluster(3, 1);
  dup_app[2].app_ranks = dup_app[1].app_ranks;
  EXPECT_NE(err(dup_app, {3, 1}).find("reported on two nodes"), std::string::npos);
  auto unnamed = Cluster(3, 1);
  unnamed[0].node.clear();
  EXPECT_NE(err(unnamed, {3, 1}).find("empty node name"), std::string::npos);
  EXPECT_NE(err(Cluster(300, 1), {300, 1}).find("exceeds the 256 chunks"), std::string::npos);
}

TEST(FormGroups, ManyShapesKeepInvariants) {
  for (int data = 1; data <= 40; ++data) {
    for (int g = 1; g <= 12; ++g) {
      for (int k = 1; k <= 3; ++k) {
        int groups = (data + g - 1) / g;
        auto nodes = Cluster(data, groups * k + data % 3);
        auto layout = FormGroups(nodes, {g, k});
        ASSERT_TRUE(layout.ok()) << layout.status().ToString();
        CheckInvariants(*layout, nodes, k);
        auto sizes = Sizes(*layout);
        auto [lo, hi] = std::minmax_element(sizes.begin(), sizes.end());
        EXPECT_LE(*hi - *lo, 1);
        EXPECT_LE(*hi, g);
        EXPECT_EQ(static_cast<int>(sizes.size()), groups);
        EXPECT_EQ(layout->standby.size(), static_cast<size_t>(data % 3));
      }
    }
  }
}

TEST(FormGroups, SpreadParityNeedsNoSpareAndKeepsSparesAsStandby) {
  auto nodes = Cluster(6, 2);
  auto layout = FormGroups(nodes, {3, 1, ParityMode::kSpread});
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  ASSERT_EQ(layout->groups.size(), 2u);
  for (const auto& g : layout->groups) {
    EXPECT_TRUE(g.spread);
    EXPECT_TRUE(g.spares.empty());
    EXPECT_EQ(g.n(), 3);
    EXPECT_EQ(g.k(), 1);
    EXPECT_EQ(g.scheme(), Scheme::kXor);
  }
  EXPECT_EQ(layout->standby.size(), 2u);
  auto role = FindRole(*layout, layout->groups[1].data[2].codec_rank);
  ASSERT_TRUE(role.ok());
  EXPECT_EQ(role->kind, RoleKind::kData);
  EXPECT_EQ(role->chunk, 2);
  EXPECT_NE(DescribeLayout(*layout).find("group 1 (xor, 3+1 spread): data node3 node4 node5; parity spread"),
            std::string::npos)
      << DescribeLayout(*layout);
  // Reed-Solomon k = 2 over 4 members, no spare at all.
  auto rs = FormGroups(Cluster(4, 0), {4, 2, ParityMode::kSpread});
  ASSERT_TRUE(rs.ok()) << rs.status().ToString();
  EXPECT_EQ(rs->groups[0].scheme(), Scheme::kReedSolomon);
  EXPECT_EQ(rs->groups[0].k(), 2);
}

TEST(FormGroups, AutoGivesSparesWhileTheyLastThenSpreads) {
  // 3 groups of 2, k = 1, one spare: group 0 gets it, groups 1 and 2 spread.
  auto layout = FormGroups(Cluster(6, 1), {2, 1, ParityMode::kAuto});
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  ASSERT_EQ(layout->groups.size(), 3u);
  EXPECT_FALSE(layout->groups[0].spread);
  EXPECT_EQ(layout->groups[0].spares.size(), 1u);
  EXPECT_TRUE(layout->groups[1].spread);
  EXPECT_TRUE(layout->groups[2].spread);
  EXPECT_TRUE(layout->standby.empty());
  // Enough spares: auto is the spares layout.
  auto full = FormGroups(Cluster(6, 3), {2, 1, ParityMode::kAuto});
  ASSERT_TRUE(full.ok());
  for (const auto& g : full->groups) EXPECT_FALSE(g.spread);
}

TEST(FormGroups, SpreadNeedsMoreMembersThanParity) {
  auto one = FormGroups(Cluster(1, 0), {1, 1, ParityMode::kSpread});
  ASSERT_FALSE(one.ok());
  EXPECT_EQ(one.status().code(), EINVAL);
  EXPECT_NE(one.status().message().find("needs more than 1 data node per group"), std::string::npos)
      << one.status().ToString();
  EXPECT_FALSE(FormGroups(Cluster(4, 0), {2, 2, ParityMode::kSpread}).ok());
  EXPECT_TRUE(FormGroups(Cluster(4, 0), {4, 3, ParityMode::kSpread}).ok());
  // A group that gets spares in auto needs no more members than k.
  EXPECT_TRUE(FormGroups(Cluster(1, 1), {1, 1, ParityMode::kAuto}).ok());
  EXPECT_EQ(ParseParityMode("spread").value(), ParityMode::kSpread);
  EXPECT_EQ(ParseParityMode("bogus").status().code(), EINVAL);
  EXPECT_STREQ(ParityModeName(ParityMode::kAuto), "auto");
}

}  // namespace
}  // namespace dlckpt::codec

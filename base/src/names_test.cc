// Tests of the node-identity rule and of shared-memory object names.
#include <cstdlib>

#include <gtest/gtest.h>

#include "dlckpt/base/names.h"
#include "dlckpt/base/node.h"

namespace dlckpt {
namespace {

TEST(NodeName, KeepsValidCharactersAndReplacesOthers) {
  EXPECT_EQ(NodeNameFrom("vn0"), "vn0");
  EXPECT_EQ(NodeNameFrom("node-1.cluster_a"), "node-1.cluster_a");
  EXPECT_EQ(NodeNameFrom("a b/c:d"), "a_b_c_d");
  EXPECT_EQ(NodeNameFrom(""), "localhost");
  EXPECT_EQ(NodeNameFrom(std::string(100, 'x')).size(), kMaxNodeName);
  // Every result is a valid node of a store name.
  for (const char* raw : {"", "a b", "\xff\xfe", "host.example.org", "x/y"}) {
    EXPECT_TRUE(ValidNodeName(NodeNameFrom(raw))) << raw;
  }
}

TEST(NodeName, EnvironmentOverridesTheHostName) {
  setenv("DLCKPT_NODE", "vn 7", 1);
  EXPECT_EQ(ThisNode(), "vn_7");
  unsetenv("DLCKPT_NODE");
  EXPECT_EQ(ThisNode(), NodeNameFrom(HostName()));
}

TEST(Names, StoreNameRoundTrips) {
  auto n = StoreName("job7", "node.a", 12);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, "/dlckpt.job7.node.a.r12");
  EXPECT_EQ(n->rfind(StorePrefix("job7", "node.a"), 0), 0u);
  EXPECT_EQ(n->rfind(NodePrefix("job7", "node.a"), 0), 0u);
  EXPECT_EQ(n->rfind(JobPrefix("job7"), 0), 0u);
  auto id = ParseStoreName(*n);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(id->job, "job7");
  EXPECT_EQ(id->node, "node.a");
  EXPECT_EQ(id->rank, 12);
}

TEST(Names, RejectsInvalidParts) {
  EXPECT_EQ(StoreName("a.b", "n", 0).status().code(), EINVAL);
  EXPECT_EQ(StoreName("j", "", 0).status().code(), EINVAL);
  EXPECT_EQ(StoreName("j", "n/x", 0).status().code(), EINVAL);
  EXPECT_EQ(StoreName("j", std::string(64, 'n'), 0).status().code(), EINVAL);
  EXPECT_EQ(StoreName("j", "n", -1).status().code(), EINVAL);
  for (const char* bad : {"", "/dlckpt.", "/dlckpt.j.n", "/dlckpt.j.n.parity0", "/dlckpt.j.n.rx",
                          "/other.j.n.r1", "/dlckpt.j.n.r"}) {
    EXPECT_FALSE(ParseStoreName(bad).ok()) << bad;
  }
}

TEST(Names, ParityNames) { EXPECT_EQ(ParityName("j", "spare", 1), "/dlckpt.j.spare.parity1"); }

}  // namespace
}  // namespace dlckpt

#include "paths.h"

#include <gtest/gtest.h>

namespace dlckpt::intercept {
namespace {

TEST(NormalizeAbsolute, Table) {
  struct Case {
    const char* in;
    const char* out;
  } cases[] = {
      {"/", "/"},
      {"//", "/"},
      {"/dlckpt", "/dlckpt"},
      {"/dlckpt/", "/dlckpt"},
      {"//dlckpt//app///ckpt.0", "/dlckpt/app/ckpt.0"},
      {"/dlckpt/./app/./ckpt", "/dlckpt/app/ckpt"},
      {"/dlckpt/app/../ckpt", "/dlckpt/ckpt"},
      {"/dlckpt/../etc/passwd", "/etc/passwd"},
      {"/..", "/"},
      {"/../../dlckpt/x", "/dlckpt/x"},
      {"/a/b/c/../../d", "/a/d"},
      {"/a/.../b", "/a/.../b"},
      {"/a/..b/c", "/a/..b/c"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(NormalizeAbsolute(c.in), c.out) << c.in;
    EXPECT_TRUE(IsNormalizedAbsolute(NormalizeAbsolute(c.in))) << c.in;
    EXPECT_EQ(IsNormalizedAbsolute(c.in), NormalizeAbsolute(c.in) == c.in) << c.in;
  }
}

TEST(JoinAndNormalize, Relative) {
  EXPECT_EQ(JoinAndNormalize("/home/u", "ckpt"), "/home/u/ckpt");
  EXPECT_EQ(JoinAndNormalize("/home/u", "../../dlckpt/x"), "/dlckpt/x");
  EXPECT_EQ(JoinAndNormalize("/", "./a//b/"), "/a/b");
  EXPECT_TRUE(HasDotDot("../x"));
  EXPECT_TRUE(HasDotDot("a/.."));
  EXPECT_FALSE(HasDotDot("a/..b/c.."));
  EXPECT_FALSE(HasDotDot(""));
}

TEST(ParentOf, Cases) {
  EXPECT_EQ(ParentOf("/a/b"), "/a");
  EXPECT_EQ(ParentOf("/a"), "/");
  EXPECT_EQ(ParentOf("/"), "/");
}

TEST(PseudoFs, Cases) {
  EXPECT_TRUE(IsPseudoFs("/proc"));
  EXPECT_TRUE(IsPseudoFs("/proc/self/fd/3"));
  EXPECT_TRUE(IsPseudoFs("/dev/null"));
  EXPECT_TRUE(IsPseudoFs("/sys/kernel"));
  EXPECT_FALSE(IsPseudoFs("/devices"));
  EXPECT_FALSE(IsPseudoFs("/home/proc"));
}

TEST(PrefixSet, DefaultIsDlckpt) {
  PrefixSet set;
  EXPECT_TRUE(set.Contains("/dlckpt"));
  EXPECT_TRUE(set.Contains("/dlckpt/app/ckpt.0"));
  EXPECT_FALSE(set.Contains("/dlckpt2/x"));
  EXPECT_FALSE(set.Contains("/dlckp"));
  EXPECT_FALSE(set.Contains("/"));
  EXPECT_TRUE(set.IsRoot("/dlckpt"));
  EXPECT_FALSE(set.IsRoot("/dlckpt/a"));
  EXPECT_TRUE(set.IsAncestor("/"));
  EXPECT_FALSE(set.IsAncestor("/dlckpt"));
}

TEST(PrefixSet, ParseList) {
  std::vector<std::string> rejected;
  PrefixSet set = PrefixSet::Parse("/scratch/ckpt/::relative:/:/dlckpt//x/..:/scratch/ckpt", &rejected);
  ASSERT_EQ(set.prefixes().size(), 2u);
  EXPECT_EQ(set.prefixes()[0], "/scratch/ckpt");
  EXPECT_EQ(set.prefixes()[1], "/dlckpt");
  EXPECT_EQ(rejected, (std::vector<std::string>{"relative", "/"}));
  EXPECT_TRUE(set.Contains("/scratch/ckpt/a"));
  EXPECT_FALSE(set.Contains("/scratch/ckpt2"));
  EXPECT_TRUE(set.IsAncestor("/scratch"));
  EXPECT_FALSE(set.IsAncestor("/scratch/ckpt"));
}

TEST(PrefixSet, NothingValidFallsBackToDefault) {
  std::vector<std::string> rejected;
  PrefixSet set = PrefixSet::Parse("rel:/", &rejected);
  EXPECT_EQ(set.prefixes(), std::vector<std::string>{"/dlckpt"});
  EXPECT_EQ(rejected.size(), 2u);
}

TEST(PrefixSet, MaybeContainsNeverMissesALexicalMatch) {
  PrefixSet set;
  EXPECT_FALSE(set.MaybeContains("/etc/passwd"));
  EXPECT_TRUE(set.MaybeContains("/dlckpt/x"));
  // Not normalised: cannot decide without normalising.
  EXPECT_TRUE(set.MaybeContains("/usr/../dlckpt/x"));
  EXPECT_TRUE(set.MaybeContains("//dlckpt"));
  EXPECT_TRUE(set.Contains(NormalizeAbsolute("/usr/../dlckpt/x")));
}

TEST(PrefixSet, WalksThrough) {
  PrefixSet set;
  EXPECT_TRUE(set.WalksThrough("/dlckpt/../etc"));
  EXPECT_TRUE(set.WalksThrough("/dlckpt/x"));
  EXPECT_TRUE(set.WalksThrough("/a/../dlckpt/../b"));
  EXPECT_FALSE(set.WalksThrough("/etc/../usr"));
  EXPECT_FALSE(set.WalksThrough("/dlckpt2/../x"));
}

}  // namespace
}  // namespace dlckpt::intercept

#include "inode_table.h"

#include <gtest/gtest.h>

namespace dlckpt::fusefs {
namespace {

TEST(InodeTable, RootIsAlwaysThere) {
  InodeTable t;
  ASSERT_NE(t.Find(kRootId), nullptr);
  EXPECT_EQ(t.Find(kRootId)->path, "/");
  EXPECT_TRUE(t.Forget(kRootId, 100));
  EXPECT_NE(t.Find(kRootId), nullptr);
  t.Unlinked(kRootId);
  EXPECT_TRUE(t.Find(kRootId)->linked);
}

TEST(InodeTable, LookupCountsDecideLifetime) {
  InodeTable t;
  t.Ref(5, "/a", 0100644);
  t.Ref(5, "/a", 0100644);
  EXPECT_TRUE(t.Forget(5, 1));
  ASSERT_NE(t.Find(5), nullptr);
  EXPECT_TRUE(t.Forget(5, 1));
  EXPECT_EQ(t.Find(5), nullptr);
  EXPECT_FALSE(t.Forget(5, 1));  // unknown node
  t.Ref(6, "/b", 0100644);
  EXPECT_FALSE(t.Forget(6, 2));  // more than given: reported, entry dropped
  EXPECT_EQ(t.Find(6), nullptr);
}

TEST(InodeTable, OpenDescriptorsKeepAnEntry) {
  InodeTable t;
  t.Ref(7, "/f", 0100644);
  t.AddFd(7, 3);
  t.Unlinked(7);
  EXPECT_TRUE(t.Forget(7, 1));
  ASSERT_NE(t.Find(7), nullptr);  // unlinked, forgotten, still open
  EXPECT_FALSE(t.Find(7)->linked);
  EXPECT_FALSE(t.RemoveFd(7, 4));
  EXPECT_TRUE(t.RemoveFd(7, 3));
  EXPECT_EQ(t.Find(7), nullptr);
}

TEST(InodeTable, RenameOfFileAndDirectoryMovesPathsBelow) {
  InodeTable t;
  t.Ref(2, "/d", 0100644);
  t.Ref(3, "/d/x", 0100644);
  t.Ref(4, "/d/sub", 0100644);
  t.Ref(5, "/d/sub/y", 0100644);
  t.Ref(6, "/dd", 0100644);     // shares the prefix "/d" but is not below /d
  t.Ref(7, "/d.txt", 0100644);  // likewise
  t.Renamed("/d", "/e/f");
  EXPECT_EQ(t.Find(2)->path, "/e/f");
  EXPECT_EQ(t.Find(3)->path, "/e/f/x");
  EXPECT_EQ(t.Find(4)->path, "/e/f/sub");
  EXPECT_EQ(t.Find(5)->path, "/e/f/sub/y");
  EXPECT_EQ(t.Find(6)->path, "/dd");
  EXPECT_EQ(t.Find(7)->path, "/d.txt");
  t.Renamed("/e/f/x", "/x");
  EXPECT_EQ(t.Find(3)->path, "/x");
}

TEST(InodeTable, ReplacedTargetDoesNotFollowRename) {
  InodeTable t;
  t.Ref(2, "/a", 0100644);
  t.Ref(3, "/b", 0100644);
  t.AddFd(3, 0);
  t.Unlinked(3);  // rename /a over /b: /b's old entry is gone from the namespace
  t.Renamed("/a", "/b");
  EXPECT_EQ(t.Find(2)->path, "/b");
  EXPECT_FALSE(t.Find(3)->linked);
  // A later rename of /b moves only the live entry.
  t.Renamed("/b", "/c");
  EXPECT_EQ(t.Find(2)->path, "/c");
  EXPECT_EQ(t.Find(3)->path, "/b");
}

TEST(InodeTable, RefRelinksAndUpdatesPath) {
  InodeTable t;
  t.Ref(9, "/old", 0100644);
  t.Ref(9, "/new", 0100644);
  EXPECT_EQ(t.Find(9)->path, "/new");
  EXPECT_EQ(t.Find(9)->nlookup, 2u);
  EXPECT_EQ(t.size(), 2u);  // root + 9
}

}  // namespace
}  // namespace dlckpt::fusefs

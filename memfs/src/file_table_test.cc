// FileTable (file_table.h): lookups in path order, prefixes and children,
// inode numbering, and moving a file or a directory with everything below it.
#include "file_table.h"

#include <sys/stat.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace dlckpt::memfs {
namespace {

class FileTableTest : public ::testing::Test {
 protected:
  NodePtr Add(const std::string& path, uint32_t type = S_IFREG) {
    NodePtr n = table_.NewNode(path, type | 0644, 7);
    table_.Insert(n);
    return n;
  }

  std::vector<std::string> Paths(std::string_view prefix = "") const {
    std::vector<std::string> out;
    for (const auto& [path, node] : table_.WithPrefix(prefix)) {
      EXPECT_EQ(path, node->path);
      out.push_back(path);
    }
    return out;
  }

  FileTable table_;
};

TEST_F(FileTableTest, NewNodesAreEmptyAndNumberedInOrder) {
  NodePtr a = table_.NewNode("/a", S_IFREG | 0600, 42);
  NodePtr b = table_.NewNode("/b", S_IFDIR | 0700, 43);
  EXPECT_EQ(a->ino, 1u);
  EXPECT_EQ(b->ino, 2u);
  EXPECT_EQ(a->path, "/a");
  EXPECT_EQ(a->mode, S_IFREG | 0600u);
  EXPECT_EQ(a->mtime_ns, 42);
  EXPECT_EQ(a->size, 0u);
  EXPECT_TRUE(a->crc_valid);
  EXPECT_EQ(a->crc, 0u);  // CRC32C of no bytes
  EXPECT_TRUE(a->linked);
  EXPECT_EQ(table_.size(), 0u);  // not in the table until inserted
  EXPECT_EQ(table_.next_ino(), 3u);
}

TEST_F(FileTableTest, InsertFindAndEraseByPath) {
  NodePtr a = Add("/a");
  EXPECT_TRUE(table_.contains("/a"));
  EXPECT_FALSE(table_.contains("/b"));
  EXPECT_EQ(table_.find("/a")->second, a);
  // A taken path keeps its node.
  table_.Insert(table_.NewNode("/a", S_IFREG, 0));
  EXPECT_EQ(table_.find("/a")->second, a);
  EXPECT_EQ(table_.size(), 1u);
  EXPECT_EQ(table_.Erase(table_.find("/a")), a);
  EXPECT_EQ(table_.size(), 0u);
}

TEST_F(FileTableTest, InodeNumbersStayAboveEveryNodeGiven) {
  auto given = std::make_shared<FileNode>();
  given->path = "/old";
  given->ino = 10;
  table_.Insert(given);
  EXPECT_EQ(table_.NewNode("/x", S_IFREG, 0)->ino, 11u);

  FileMap loaded;
  auto n = std::make_shared<FileNode>();
  n->path = "/loaded";
  n->ino = 20;
  loaded.emplace(n->path, n);
  FileMap elsewhere;
  auto m = std::make_shared<FileNode>();
  m->path = "/pending";
  m->ino = 30;
  elsewhere.emplace(m->path, m);
  table_.ReserveInos(elsewhere);
  EXPECT_EQ(table_.size(), 1u);  // reserved, not added
  table_.Assign(std::move(loaded));
  EXPECT_EQ(Paths(), std::vector<std::string>{"/loaded"});
  EXPECT_EQ(table_.next_ino(), 31u);
  table_.Clear();
  EXPECT_EQ(table_.size(), 0u);
  EXPECT_EQ(table_.next_ino(), 31u);  // numbers are never reused
}

TEST_F(FileTableTest, PrefixesAreTextChildrenArePaths) {
  Add("/a", S_IFDIR);
  Add("/a/x");
  Add("/ab");
  Add("/b", S_IFDIR);
  EXPECT_EQ(Paths("/a"), (std::vector<std::string>{"/a", "/a/x", "/ab"}));
  EXPECT_EQ(Paths("/a/"), std::vector<std::string>{"/a/x"});
  EXPECT_TRUE(Paths("/c").empty());
  EXPECT_TRUE(table_.HasChildren("/a"));
  EXPECT_FALSE(table_.HasChildren("/b"));
  EXPECT_FALSE(table_.HasChildren("/a/x"));
}

TEST_F(FileTableTest, MoveAFile) {
  NodePtr f = Add("/f");
  table_.Move("/f", "/g");
  EXPECT_FALSE(table_.contains("/f"));
  EXPECT_EQ(table_.find("/g")->second, f);
  EXPECT_EQ(f->path, "/g");
}

TEST_F(FileTableTest, MoveADirectoryWithEverythingBelowIt) {
  NodePtr d = Add("/d", S_IFDIR);
  NodePtr x = Add("/d/x");
  Add("/d/s", S_IFDIR);
  NodePtr y = Add("/d/s/y");
  Add("/dz");  // not below /d
  table_.Move("/d", "/e/f");
  EXPECT_EQ(Paths(), (std::vector<std::string>{"/dz", "/e/f", "/e/f/s", "/e/f/s/y", "/e/f/x"}));
  EXPECT_EQ(d->path, "/e/f");
  EXPECT_EQ(x->path, "/e/f/x");
  EXPECT_EQ(y->path, "/e/f/s/y");
  EXPECT_EQ(table_.find("/e/f/s/y")->second, y);
}

}  // namespace
}  // namespace dlckpt::memfs

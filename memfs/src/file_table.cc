// file_table.cc — FileTable (see file_table.h).
#include "file_table.h"

#include <sys/stat.h>

#include <algorithm>

#include "dlckpt/base/crc32c.h"

namespace dlckpt::memfs {

std::ranges::subrange<FileTable::const_iterator> FileTable::WithPrefix(
    std::string_view prefix) const {
  auto first = files_.lower_bound(prefix);
  auto last = first;
  while (last != files_.end() && last->first.compare(0, prefix.size(), prefix) == 0) ++last;
  return {first, last};
}

bool FileTable::HasChildren(std::string_view dir) const {
  std::string prefix = std::string(dir) + "/";
  auto it = files_.lower_bound(prefix);
  return it != files_.end() && it->first.compare(0, prefix.size(), prefix) == 0;
}

NodePtr FileTable::NewNode(std::string_view path, uint32_t mode, int64_t mtime_ns) {
  auto node = std::make_shared<FileNode>();
  node->path = std::string(path);
  node->mode = mode;
  node->mtime_ns = mtime_ns;
  node->ino = next_ino_++;
  node->crc = Crc32c(nullptr, 0);
  node->crc_valid = true;
  return node;
}

void FileTable::Insert(NodePtr node) {
  next_ino_ = std::max(next_ino_, node->ino + 1);
  std::string path = node->path;
  files_.emplace(std::move(path), std::move(node));
}

NodePtr FileTable::Erase(iterator it) {
  NodePtr node = std::move(it->second);
  files_.erase(it);
  return node;
}

void FileTable::Move(std::string_view from, std::string_view to) {
  auto src = files_.find(from);
  NodePtr node = src->second;
  files_.erase(src);
  std::string new_path(to);
  node->path = new_path;
  files_.emplace(new_path, node);
  if (!S_ISDIR(node->mode)) return;
  // Move every path below the directory.
  const std::string from_dir = std::string(from) + "/";
  std::vector<NodePtr> moved;
  for (auto it = files_.lower_bound(from_dir);
       it != files_.end() && it->first.compare(0, from_dir.size(), from_dir) == 0;) {
    moved.push_back(it->second);
    it = files_.erase(it);
  }
  for (auto& m : moved) {
    std::string p = new_path + m->path.substr(from.size());
    m->path = p;
    files_.emplace(p, m);
  }
}

void FileTable::Assign(FileMap files) {
  ReserveInos(files);
  files_ = std::move(files);
}

void FileTable::ReserveInos(const FileMap& files) {
  for (const auto& [path, node] : files) next_ino_ = std::max(next_ino_, node->ino + 1);
}

}  // namespace dlckpt::memfs

#include "inode_table.h"

#include <algorithm>

namespace dlckpt::fusefs {

InodeTable::InodeTable() {
  Inode root;
  root.path = "/";
  root.mode = 040755;
  root.nlookup = 1;  // the kernel never forgets the root
  inodes_.emplace(kRootId, std::move(root));
}

InodeTable::Inode* InodeTable::Find(uint64_t id) {
  auto it = inodes_.find(id);
  return it == inodes_.end() ? nullptr : &it->second;
}

void InodeTable::Ref(uint64_t id, const std::string& path, uint32_t mode) {
  Inode& inode = inodes_[id];
  inode.path = path;
  inode.mode = mode;
  inode.linked = true;
  inode.nlookup++;
}

bool InodeTable::Forget(uint64_t id, uint64_t n) {
  if (id == kRootId) return true;
  auto it = inodes_.find(id);
  if (it == inodes_.end()) return false;
  bool ok = it->second.nlookup >= n;
  it->second.nlookup = ok ? it->second.nlookup - n : 0;
  EraseIfUnused(it);
  return ok;
}

void InodeTable::AddFd(uint64_t id, int fd) { inodes_[id].fds.push_back(fd); }

bool InodeTable::RemoveFd(uint64_t id, int fd) {
  auto it = inodes_.find(id);
  if (it == inodes_.end()) return false;
  auto& fds = it->second.fds;
  auto pos = std::find(fds.begin(), fds.end(), fd);
  if (pos == fds.end()) return false;
  fds.erase(pos);
  EraseIfUnused(it);
  return true;
}

void InodeTable::Unlinked(uint64_t id) {
  if (id == kRootId) return;
  if (Inode* inode = Find(id)) inode->linked = false;
}

void InodeTable::Renamed(std::string_view from, std::string_view to) {
  if (from == to) return;
  for (auto& [id, inode] : inodes_) {
    if (id == kRootId || !inode.linked) continue;
    const std::string& p = inode.path;
    if (p.size() < from.size() || p.compare(0, from.size(), from) != 0) continue;
    if (p.size() == from.size()) {
      inode.path = std::string(to);
    } else if (p[from.size()] == '/') {
      inode.path = std::string(to) + p.substr(from.size());
    }
  }
}

void InodeTable::EraseIfUnused(std::unordered_map<uint64_t, Inode>::iterator it) {
  if (it->first != kRootId && it->second.nlookup == 0 && it->second.fds.empty()) {
    inodes_.erase(it);
  }
}

}  // namespace dlckpt::fusefs

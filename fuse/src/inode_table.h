// The kernel's view of a store: the FUSE node ids the kernel holds, the store
// path each stands for, its lookup count and its open store descriptors.
//
// Node ids: the root is 1 (FUSE_ROOT_ID, store path "/"); a store entry with
// memfs inode number `ino` (stable, never reused by an owner) is ino + 1.
// An entry lives while the kernel holds lookups on it or it has open
// descriptors. Paths follow renames (a directory rename moves every path below
// it); an unlinked entry keeps only its descriptors (memfs keeps an unlinked
// open file readable through them).
//
// Not thread-safe: the caller holds one mutex around every call.
#ifndef DLCKPT_FUSE_INODE_TABLE_H_
#define DLCKPT_FUSE_INODE_TABLE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace dlckpt::fusefs {

inline constexpr uint64_t kRootId = 1;
inline uint64_t NodeIdOf(uint64_t store_ino) { return store_ino + 1; }

class InodeTable final {
 public:
  struct Inode {
    std::string path;       // store path while linked
    uint32_t mode = 0;      // type and permissions when last looked up
    uint64_t nlookup = 0;   // references held by the kernel
    bool linked = true;     // false once unlinked or replaced by a rename
    std::vector<int> fds;   // open store descriptors
  };

  InodeTable();
  InodeTable(const InodeTable&) = delete;
  InodeTable& operator=(const InodeTable&) = delete;

  // nullptr if the kernel holds no such node.
  Inode* Find(uint64_t id);
  // One more kernel reference to `id`, the store entry at `path` with `mode`
  // (a reply to lookup, create, mkdir or mknod).
  void Ref(uint64_t id, const std::string& path, uint32_t mode);
  // The kernel dropped `n` references. False if `id` is unknown or held
  // fewer (the table and the kernel disagree; the entry is then dropped).
  bool Forget(uint64_t id, uint64_t n);
  void AddFd(uint64_t id, int fd);
  // False if `fd` was not recorded for `id`.
  bool RemoveFd(uint64_t id, int fd);
  // The store path of `id` no longer names it (unlink, rmdir, replaced).
  void Unlinked(uint64_t id);
  // The store renamed `from` to `to`; entries at `from` and below `from/`
  // follow. Call after marking a replaced target Unlinked.
  void Renamed(std::string_view from, std::string_view to);

  size_t size() const { return inodes_.size(); }

 private:
  void EraseIfUnused(std::unordered_map<uint64_t, Inode>::iterator it);
  std::unordered_map<uint64_t, Inode> inodes_;
};

}  // namespace dlckpt::fusefs

#endif  // DLCKPT_FUSE_INODE_TABLE_H_

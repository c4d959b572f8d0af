// memfs/src/file_table.h — a store's files in process memory: the nodes
// (FileNode) and the table that maps paths to them and numbers them
// (FileTable). Private to memfs/src.
//
// A FileNode is a file or directory of a store's working (owner) or viewed
// (read-only) file set: its metadata, the data blocks holding its bytes and,
// in a compressed store, its chunks (see store_impl.h for how the two lists
// line up). Nodes are shared (NodePtr): an open descriptor keeps a node
// alive after the table dropped it.
//
// FileTable: the map from path to node, in path order, and the inode number
// the next new node gets. It never hands out an inode number below one that
// a node it was given (Insert, Assign, ReserveInos) already has.
//
// Ownership: the table owns its map and shares the nodes with whoever holds a
// NodePtr. It knows nothing of blocks: dropping a node from the table frees
// no block (the caller releases them: Store::Impl::ReleaseNodeLocked).
//
// Thread safety: none of its own. In a store, Store::Impl's one mutex guards
// it and its nodes: every method is called with Impl::mu_ held.
//
// Failure: nothing here returns an error; paths are checked and errors
// named by the caller. Preconditions are stated per method.
#ifndef DLCKPT_MEMFS_FILE_TABLE_H_
#define DLCKPT_MEMFS_FILE_TABLE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <ranges>
#include <string>
#include <string_view>
#include <vector>

namespace dlckpt::memfs {

// A block list entry past the LZ4 block of a compressed chunk.
inline constexpr uint32_t kNoBlock = ~0u;

// One chunk of a file in a compressed store.
struct FileChunk {
  uint32_t stored = 0;  // compressed: bytes of its LZ4 block; raw: 0
  uint32_t crc = 0;     // CRC32C of its uncompressed bytes, if crc_valid
  bool compressed = false;
  bool crc_valid = false;
  bool decided = false;  // raw: compression judged since its last change
};

struct FileNode {
  std::string path;
  uint32_t mode = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  uint64_t ino = 0;
  std::vector<uint32_t> blocks;    // ceil(size / block_size) entries (or kNoBlock)
  std::vector<FileChunk> chunks;   // compressed stores: ceil(size / chunk_size) entries
  uint32_t crc = 0;
  bool crc_valid = false;
  // Uncompressed stores, CRC while writing (blocks.cc): block_crcs[i] holds
  // the CRC32C of the first `len` bytes of block i as computed when they
  // were written, so that a commit reads again only what it does not cover.
  // Entries past the end count as {0, 0} (nothing known), which is always
  // true. After a cut inside a block its prefix may be longer than the
  // block's bytes; the commit then ignores it and a write inside it forgets it.
  struct BlockCrc {
    uint32_t crc = 0;
    uint32_t len = 0;
  };
  std::vector<BlockCrc> block_crcs;
  // Uncompressed stores: the committed blocks that copy-on-write or a cut
  // took out of this file since the last commit, by block index, each still
  // holding the working reference it had and the CRC prefix it had then
  // (block kNoBlock: none). At the next commit a block rewritten with equal
  // bytes gives its place back to the committed one, so that the image keeps
  // that block and the incremental encode sees it unchanged (an O_TRUNC
  // rewrite of equal bytes included); see Store::Impl::KeepEqualBlocksLocked.
  struct Shadow {
    uint32_t block = ~0u;
    BlockCrc crc;
  };
  std::vector<Shadow> shadow;
  int open_count = 0;
  bool linked = true;
  // A failed write left the file incomplete (see "Failed writes" in
  // memfs.h): damage.err != 0. `rewritten`: bytes [0, rewritten) written
  // successfully since; the damage ends when that covers the whole file.
  struct Damage {
    int err = 0;
    uint32_t op = 0;  // layout::DamageOp
    uint64_t offset = 0;
    uint64_t len = 0;
  } damage;
  uint64_t rewritten = 0;
};

using NodePtr = std::shared_ptr<FileNode>;
using FileMap = std::map<std::string, NodePtr, std::less<>>;

class FileTable {
 public:
  using iterator = FileMap::iterator;
  using const_iterator = FileMap::const_iterator;

  FileTable() = default;
  FileTable(const FileTable&) = delete;
  FileTable& operator=(const FileTable&) = delete;

  // The entries (path, node) in path order.
  size_t size() const { return files_.size(); }
  iterator begin() { return files_.begin(); }
  iterator end() { return files_.end(); }
  const_iterator begin() const { return files_.begin(); }
  const_iterator end() const { return files_.end(); }
  iterator find(std::string_view path) { return files_.find(path); }
  const_iterator find(std::string_view path) const { return files_.find(path); }
  bool contains(std::string_view path) const { return files_.find(path) != files_.end(); }

  // The entries whose paths start with `prefix` (plain text: "/a" also
  // matches "/ab"), in path order.
  std::ranges::subrange<const_iterator> WithPrefix(std::string_view prefix) const;
  // Whether a path below directory `dir` ("dir/...") is in the table.
  bool HasChildren(std::string_view dir) const;

  // A new node at `path` with `mode` (type and permissions), modified at
  // `mtime_ns`, empty (its CRC that of no bytes), with the next inode
  // number. Not in the table until Insert.
  NodePtr NewNode(std::string_view path, uint32_t mode, int64_t mtime_ns);
  // Adds `node` under its path, unless that path is taken (then the table is
  // unchanged but for the inode numbers); later new nodes get higher inode
  // numbers than node->ino.
  void Insert(NodePtr node);
  // Removes the entry at `it` (a valid iterator) and returns its node.
  NodePtr Erase(iterator it);
  // Moves the node at `from` to `to`, and for a directory every path below
  // `from` to the same place below `to`; node paths follow. Requires `from`
  // in the table and `to` not; `to` not below `from`.
  void Move(std::string_view from, std::string_view to);

  // Replaces every entry with `files` (nodes keyed by their paths).
  void Assign(FileMap files);
  // Later new nodes get higher inode numbers than every node of `files`.
  void ReserveInos(const FileMap& files);
  void Clear() { files_.clear(); }
  // The inode number the next new node gets.
  uint64_t next_ino() const { return next_ino_; }

 private:
  FileMap files_;
  uint64_t next_ino_ = 1;
};

}  // namespace dlckpt::memfs

#endif  // DLCKPT_MEMFS_FILE_TABLE_H_

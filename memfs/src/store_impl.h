// memfs/src/store_impl.h — Store::Impl, the state behind one attached store.
// Private to memfs/src; see dlckpt/memfs/memfs.h for the public contract and
// layout.h for the bytes in shared memory.
//
// Ownership. An Impl owns its mapping of the shared memory object (shm_) and
// everything in process memory: the open descriptors (handles_) and its
// collaborators, each with its contract in its own header:
//   files_     FileTable (file_table.h): the working (or viewed) file set,
//              a map of path to FileNode with its block list; inode numbers
//   blocks_    BlockAllocator (block_allocator.h): the data area and one
//              reference mask per block (acked / pending / working / held)
//   versions_  VersionSet (versions.h): the version slots and state records,
//              the epochs and the blocks they keep
//   images_    VersionImage (image.h): a version's image (extents) and the
//              verification of its CRCs
// Committed versions live in slots in shared memory and are never written
// again while referenced by the published state. The destructor of an owner
// saves the working files into a free slot for the next owner (unless
// Abandon()ed).
//
// Thread safety. Lock order: an Impl has one mutex, mu_, held by every public
// method; nothing else is locked. Methods named *Locked, and the private
// helpers, expect mu_ held by the caller; so do the collaborators, which have
// no lock of their own and are called only with mu_ held. Read-only attachers
// share nothing with the owner process but the mapping and read its state
// records lock-free (VersionSet::ReadState retries torn reads).
//
// Failure. Every method returns a Status naming the store (and path or fd);
// nothing throws on purpose (std::bad_alloc may escape to the C API's guard).
// Invariants that cannot break (a free block or slot that must exist) abort.
// Operations that fail leave the working files as they were, except where a
// method says otherwise (a short write).
//
// Compressed stores: a Node also has one Chunk per chunk_size bytes, and its
// block list keeps one entry per block_size bytes of the file, so block i
// still holds bytes [i * bs, (i + 1) * bs) of a raw chunk; a compressed chunk
// has its LZ4 block in its first ceil(stored / bs) entries and kNoBlock in
// the rest. Chunk streams are never modified in place: compressing,
// decompressing (Expand) and copy-on-write give a chunk fresh blocks.
//
// The methods are defined by concern:
//   store.cc          construction, attach, geometry, stats, the Store facade
//   files.cc          the file operations and descriptors
//   damage.cc         failed writes: damaged files, lost creates, refused commits
//   blocks.cc         the raw data path (read, write, truncate)
//   chunks.cc         LZ4 chunks of compressed stores
//   epochs.cc         commit / acknowledge / rollback / restore, owner and view loading
//   image.cc          GetImage and the verification of epochs and files
//   image_builder.cc  ImageBuilder and the Impl methods it builds a store with
#ifndef DLCKPT_MEMFS_STORE_IMPL_H_
#define DLCKPT_MEMFS_STORE_IMPL_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "dlckpt/base/env.h"
#include "dlckpt/base/status.h"
#include "dlckpt/memfs/memfs.h"
#include "block_allocator.h"
#include "file_table.h"
#include "image.h"
#include "layout.h"
#include "versions.h"

namespace dlckpt::memfs {

class Store::Impl {
  // ---- types ------------------------------------------------------------------

  using Chunk = FileChunk;
  using Node = FileNode;

  struct Handle {
    NodePtr node;
    int flags = 0;
    uint64_t offset = 0;
  };

  // What undoes a compressed-store write that must not half-happen (see
  // WriteCompressedLocked): the state of the chunk holding the old end of file.
  // Blocks that chunk gives up during the operation are kept (still referenced)
  // until the operation ends.
  struct Undo {
    Node* node = nullptr;
    uint64_t size = 0;      // the file's size before
    uint64_t chunk = 0;     // size / chunk_size
    bool has_chunk = false; // the size is not chunk-aligned: that chunk exists
    Chunk saved;
    std::vector<uint32_t> saved_blocks;
    std::vector<uint32_t> kept;
  };

 public:
  Impl(Env* env, std::unique_ptr<MappedShm> shm, bool owner);
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // ---- construction (store.cc) --------------------------------------------------

  static Result<std::unique_ptr<Impl>> Create(const std::string& name, const StoreOptions& o,
                                              Env* env);
  static Result<std::unique_ptr<Impl>> Attach(const std::string& name, AttachMode mode, Env* env,
                                              uint32_t max_open);

  const std::string& name() const { return shm_->name(); }
  bool owner() const { return owner_; }
  StoreStats Stats();
  EpochState Epochs();

  // ---- file operations (files.cc): Store's methods of the same names ---------------

  Result<int> Open(std::string_view path, int flags, mode_t mode);
  Status Close(int fd);
  // `at` null: at the descriptor's offset, which advances.
  Result<size_t> Read(int fd, void* buf, size_t len, const uint64_t* at);
  Result<size_t> Write(int fd, const void* buf, size_t len, const uint64_t* at);
  Result<Extent> ReadInPlace(int fd, uint64_t off, size_t len);
  Result<uint64_t> Seek(int fd, int64_t offset, int whence);
  Status Ftruncate(int fd, uint64_t size);
  Status Truncate(std::string_view path, uint64_t size);
  Result<FileInfo> Fstat(int fd);
  Result<FileInfo> Stat(std::string_view path);
  Result<int> OpenFlags(int fd);
  Status Unlink(std::string_view path);
  Status Rename(std::string_view from, std::string_view to);
  Status Mkdir(std::string_view path, mode_t mode);
  Status Rmdir(std::string_view path);
  Result<std::vector<FileInfo>> List(std::string_view prefix);

  // ---- epochs (epochs.cc, image.cc): Store's methods of the same names ---------------

  Result<uint64_t> Commit(uint64_t want_epoch);
  Status Acknowledge(uint64_t epoch);
  Status AbortPending();
  Status Rollback();
  Status Restore(uint64_t epoch);
  Status View(uint64_t epoch);
  Status Hold(uint64_t epoch);
  Status Release(uint64_t epoch);
  uint64_t HeldEpoch() const;
  Status Verify(uint64_t epoch);
  Result<uint64_t> VerifyFile(std::string_view path);
  Status CheckSlots();
  Result<Image> GetImage(uint64_t epoch);

  // ---- used by ImageBuilder (image_builder.cc); caller holds mu() ------------------

  Status AddEntryLocked(const layout::FileEntry& e);
  Result<size_t> AppendLocked(const std::string& path, const uint8_t* p, size_t n);
  Status AppendStoredLocked(const std::string& path, uint64_t ci, uint64_t len,
                            const layout::ChunkEntry& ce, uint64_t at, const uint8_t* p, size_t n);
  Status PublishImageLocked(const uint8_t* meta, uint64_t epoch);
  Status VerifyAckedLocked();
  std::mutex& mu() { return mu_; }
  const layout::Geometry& geometry() const { return geo_; }
  void Abandon() { abandoned_ = true; }

 private:
  // ---- geometry and loading (store.cc) ------------------------------------------------

  Status ValidateGeometry();
  void SetGeometry(const layout::Geometry& g);

  // ---- file table and descriptors (files.cc) -------------------------------------------

  std::string Where(std::string_view path) const;
  // ENOSPC for a create of `path` into a full file table, naming the limit
  // and how to raise it. mu_ held.
  Status FileTableFullLocked(std::string_view path) const;
  // "Failed writes" (memfs.h). mu_ held. MarkDamagedLocked records that
  // `failed`, an operation on `node` of kind `op`, left the file's bytes
  // from `offset` on other than asked (`len`: the bytes a write asked for,
  // the size a resize asked for); of several failures the one with the
  // lowest offset stays. WrittenLocked records that [off, off + n) was
  // written successfully: the damage ends once [0, size) was rewritten
  // since. ResizedLocked records a successful truncate: the damage ends if
  // the new size is at most the damage's offset, or all was rewritten.
  void MarkDamagedLocked(Node& node, const Status& failed, uint32_t op, uint64_t offset, uint64_t len);
  void WrittenLocked(Node& node, uint64_t off, uint64_t n);
  void ResizedLocked(Node& node);
  // Records (and publishes) a create lost to a full file table; clears it;
  // clears it if it was the only one and `path` is its path or a directory
  // above it (created after all, or given up).
  void LoseCreateLocked(std::string_view path, int err);
  void ClearLostCreateLocked();
  void ForgetLostCreateLocked(std::string_view path);
  // Loads the published LostCreate into lost_ (a next owner with a saved
  // working set); false if none is valid.
  bool LoadLostCreateLocked();
  // OK, or the refusal of a commit of `epoch` naming every failed write
  // of the working files and how to avoid it.
  Status DamageLocked(uint64_t epoch) const;
  std::string Where(int fd) const;
  Status CheckPath(std::string_view path) const;
  Status RequireOwner(const char* what) const;
  Result<FileTable::iterator> FileToChangeLocked(std::string_view path);
  int FreeHandleLocked();
  Result<Handle*> GetHandle(int fd);
  FileInfo InfoLocked(const Node& n) const;
  void DropLinkLocked(FileTable::iterator it);
  void ReleaseNodeLocked(Node& node);

  // ---- blocks and the raw data path (blocks.cc) -----------------------------------------

  // blocks_.Allocate(), dropping the decompression cache if it was keyed
  // by the block handed out.
  uint32_t AllocBlockLocked();
  Result<size_t> ReadAtLocked(const Node& node, uint8_t* out, size_t len, uint64_t off);
  uint64_t MaxFileSize() const;
  Result<size_t> WriteAtLocked(Node& node, const uint8_t* src, size_t len, uint64_t off);
  Status FullLocked(const Node& node) const;
  uint64_t WriteRangeLocked(Node& node, const uint8_t* src, uint64_t off, uint64_t from,
                            uint64_t to, uint64_t need);
  Status TruncateLocked(Node& node, uint64_t size);
  Status ResizeLocked(Node& node, uint64_t size);  // files.cc
  Status TooBigLocked(const Node& node, uint64_t size) const;
  Status ShrinkLocked(Node& node, uint64_t size);
  FileNode::BlockCrc* CrcToExtendLocked(Node& node, uint64_t bi, uint64_t bo);
  Result<uint32_t> NodeCrcLocked(Node& node);
  // Equal rewrites (FileNode::shadow). ShadowLocked: committed block `b`
  // leaves entry `bi` of `node`, keeping its working reference in the shadow
  // (uncompressed stores; otherwise its working reference is dropped).
  // KeepEqualBlocksLocked: at a commit, puts back every shadowed block whose
  // entry now holds equal bytes, then drops the shadow. DropShadowLocked /
  // DropAllShadowsLocked: give the shadowed blocks up (the committed epochs
  // they belong to change otherwise than by a commit).
  void ShadowLocked(Node& node, uint64_t bi, uint32_t b);
  void KeepEqualBlocksLocked(Node& node);
  void DropShadowLocked(Node& node);
  void DropAllShadowsLocked();

  // ---- compression (chunks.cc) ------------------------------------------------------------
  //
  // Chunk ci of a node covers bytes [ci * chunk_size, ...) and block entries
  // [ci * cpb_, ...). Its blocks are given up through DropWorkingRefLocked, so
  // that an Undo in progress can keep them.

  uint64_t ChunkLen(const Node& node, uint64_t ci) const {
    return std::min<uint64_t>(geo_.chunk_size, node.size - ci * geo_.chunk_size);
  }
  uint64_t ChunkEntries(const Node& node, uint64_t ci) const {
    return std::min<uint64_t>(cpb_, node.blocks.size() - ci * cpb_);
  }
  bool UndoKeepsLocked(const Node& node, uint64_t bi) const;
  void DropWorkingRefLocked(const Node& node, uint64_t bi, uint32_t b);
  uint64_t ReclaimableLocked(const Node& node, uint64_t ci) const;
  void DropChunkLocked(Node& node, uint64_t ci);
  void FillFreshLocked(Node& node, uint64_t first, const uint8_t* p, uint64_t n);
  const uint8_t* ContiguousLocked(const uint32_t* blocks, uint64_t n,
                                  std::vector<uint8_t>* buf) const;
  Status DecompressLocked(const uint32_t* blocks, uint64_t stored, uint8_t* out, uint64_t len,
                          const std::string& what);
  Result<const uint8_t*> DecompressedLocked(const Node& node, uint64_t ci);
  uint32_t CompressLocked(const uint8_t* in, uint64_t len);
  void TryCompressLocked(Node& node, uint64_t ci);
  bool StoreWholeChunkLocked(Node& node, uint64_t ci, const uint8_t* data);
  Status ExpandLocked(Node& node, uint64_t ci);
  Result<size_t> WriteCompressedLocked(Node& node, const uint8_t* src, uint64_t off, uint64_t end,
                                       uint64_t need);
  Result<uint64_t> WriteChunksLocked(Node& node, const uint8_t* src, uint64_t off, uint64_t end);
  void RollBackLocked(Node& node, const Undo& u);

  // ---- loading (epochs.cc) ----------------------------------------------------------------

  Status LoadAsOwner();
  Status LoadView(uint64_t epoch);
  Status ResetWorkingToAckedLocked();

  // ---- images (image.cc) ------------------------------------------------------------------

  // images_.Verify with this store's decompressor.
  Status VerifyVersionLocked(const Version& v);

  // ---- state --------------------------------------------------------------------------------

  Env* env_;
  std::unique_ptr<MappedShm> shm_;
  bool owner_;
  bool abandoned_ = false;  // owner that must not save working files on detach
  uint8_t* base_;
  layout::Geometry geo_{};
  uint32_t max_open_ = 1024;

  mutable std::mutex mu_;
  FileTable files_;          // the working (owner) or viewed (read-only) files
  std::vector<Handle> handles_;
  BlockAllocator blocks_;    // the data area and the blocks' reference masks
  VersionSet versions_;      // the slots, the state and the epochs; uses blocks_
  VersionImage images_;      // the encoding view of versions; uses blocks_
  uint64_t crc_reread_bytes_ = 0;   // bytes commits read again for CRCs (StoreStats)
  uint64_t equal_blocks_kept_ = 0;  // StoreStats::equal_blocks_kept
  uint64_t pretouch_bytes_ = 0;     // data area pre-touched by Create (StoreStats)
  double pretouch_seconds_ = 0;
  uint64_t view_epoch_ = 0;
  // Owner: creates lost to a full file table since the working files were
  // reset or a commit reported them (mirrored in the header: LostCreate).
  struct {
    int err = 0;
    uint32_t count = 0;
    std::string path;  // the first one
  } lost_;

  // Compression (see the top of this file); buffers are allocated on first use.
  bool compressed_ = false;
  uint64_t cpb_ = 0;             // blocks per chunk
  Undo* undo_ = nullptr;         // the write being journaled, if any
  std::vector<uint8_t> gather_;  // a chunk or LZ4 block gathered from scattered blocks
  std::vector<uint8_t> cbuf_;    // compressor output
  std::vector<uint8_t> zeros_;   // a chunk of zeros
  std::vector<uint8_t> cache_;   // the last decompressed chunk
  uint32_t cache_block_ = kNoBlock;
  uint64_t cache_stored_ = 0, cache_len_ = 0;
};

}  // namespace dlckpt::memfs

#endif  // DLCKPT_MEMFS_STORE_IMPL_H_

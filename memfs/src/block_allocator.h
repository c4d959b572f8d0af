// memfs/src/block_allocator.h — the data blocks of one store: where each
// block is, and which blocks are referenced by what. Private to memfs/src.
//
// A store's data area is nblocks blocks of block_size bytes (layout.h). Each
// block has a reference mask: one bit per holder (BlockRef: the acknowledged
// and the pending epoch, the working files, the held epoch). A block is free
// when its mask is 0; Allocate hands out a free block referenced by the
// working files only.
//
// Ownership: the allocator owns the masks and the free count; it does not own
// the data area (the store's mapping), which must outlive it or be replaced
// by SetArea. It never reads or writes block contents. Read-only attachers
// set the area only (Ptr) and never call ResetRefs: they have no masks.
//
// Thread safety: none of its own. In a store, Store::Impl's one mutex guards
// it: every method is called with Impl::mu_ held.
//
// Failure: nothing here returns an error. Preconditions (the caller's
// accounting): a block index is below total(); Allocate is called only when
// free() > 0 — if that invariant broke (the masks and the count disagree), it
// aborts rather than hand out a referenced block.
#ifndef DLCKPT_MEMFS_BLOCK_ALLOCATOR_H_
#define DLCKPT_MEMFS_BLOCK_ALLOCATOR_H_

#include <cstdint>
#include <vector>

namespace dlckpt::memfs {

// The holders of a block, one bit each in its reference mask.
enum BlockRef : uint8_t {
  kRefAcked = 1,    // the acknowledged epoch
  kRefPending = 2,  // the pending epoch
  kRefWorking = 4,  // the working files
  kRefHeld = 8,     // the held epoch (Store::Hold), not published
};
// A block of a committed epoch: never written again while that holds it.
inline constexpr uint8_t kRefFrozen = kRefAcked | kRefPending;

class BlockAllocator {
 public:
  BlockAllocator() = default;
  BlockAllocator(const BlockAllocator&) = delete;
  BlockAllocator& operator=(const BlockAllocator&) = delete;

  // The data area: `nblocks` blocks of `block_size` bytes from `data`.
  // Leaves the masks alone.
  void SetArea(uint8_t* data, uint32_t block_size, uint64_t nblocks);
  // Every block free (no masks before: a new store, or an owner about to
  // rebuild the masks from the published state with AddRef).
  void ResetRefs();

  uint8_t* Ptr(uint32_t b) const { return data_ + uint64_t{b} * block_size_; }
  uint32_t block_size() const { return block_size_; }
  uint64_t total() const { return nblocks_; }
  uint64_t free() const { return free_; }
  uint64_t used() const { return nblocks_ - free_; }

  // A free block, now referenced by kRefWorking alone; the search starts
  // after the block allocated last (round robin). Requires free() > 0.
  uint32_t Allocate();
  // The reference mask of block b.
  uint8_t refs(uint32_t b) const { return refs_[b]; }
  // Adds reference `ref` to block b (a free block stops being free).
  void AddRef(uint32_t b, uint8_t ref);
  // Drops reference `ref` from block b; it is free once nothing refers to it.
  void DropRef(uint32_t b, uint8_t ref);
  // The working files stop using block b: DropRef(b, kRefWorking).
  void Release(uint32_t b) { DropRef(b, kRefWorking); }

 private:
  uint8_t* data_ = nullptr;
  uint32_t block_size_ = 0;
  uint64_t nblocks_ = 0;
  std::vector<uint8_t> refs_;  // one mask per block (owner only)
  uint64_t free_ = 0;          // masks that are 0
  uint64_t cursor_ = 0;        // where the next search starts
};

}  // namespace dlckpt::memfs

#endif  // DLCKPT_MEMFS_BLOCK_ALLOCATOR_H_

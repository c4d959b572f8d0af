// memfs/src/versions.h — a store's versions: the three version slots and
// the two state records in shared memory (layout.h), which epochs they hold,
// and the blocks each committed epoch keeps (VersionSet). Private to
// memfs/src.
//
// A version is a file set serialised into a slot: committed as epoch N (the
// acknowledged or the pending one), or the working files an owner saved when
// it detached (epoch 0, the state's working slot). The state record says
// which slot holds which. An epoch moves pending -> acknowledged
// (Acknowledge) or goes (AbortPending); committing (Freeze) makes the
// working files the pending or acknowledged epoch. The held epoch (Hold) is
// the acknowledged one as of the Hold, kept readable after it is replaced.
//
// Ownership: the slots and records live in the store's mapping, which must
// outlive the VersionSet. Only the owner writes them, and never a slot the
// published state refers to: WriteSlot fills a free slot, Publish then
// overwrites the older record (invalidated first, CRC last), so a reader
// always finds one valid record. The VersionSet owns the lists of the blocks
// of the acknowledged, pending and held epochs and keeps their references
// (kRefAcked, kRefPending, kRefHeld) in the BlockAllocator it is given, which
// must outlive it (a read-only attacher may give none); a transition publishes the new state first, then moves the
// references, so a crash in between leaves the published state consistent.
// Nodes built from a version (NodesFrom) are new objects owned by the caller
// and point at no shared memory; a Version points into the mapping.
//
// Thread safety: none of its own. In a store, Store::Impl's one mutex guards
// it: every method is called with Impl::mu_ held. Other processes read the
// same records and slots without a lock: ReadState retries torn records (100
// tries, 100 us apart), and ParseSlot checks every checksum and index of a
// version before anything uses it.
//
// Failure: EBADMSG naming the store, slot and epoch for a damaged version or
// state; ENOENT for an epoch that is not committed; EINVAL / EBUSY for an
// epoch that cannot be acknowledged or held. Nothing changes on failure.
// FreeSlot aborts if no slot is free (an invariant: at most two slots are
// referenced while an owner runs). The owner-only methods (Publish,
// WriteSlot, Freeze, Acknowledge, AbortPending, Hold, Release, SaveWorking,
// LoadCommitted, ForgetSavedWorking) must not be called by a read-only
// attacher.
#ifndef DLCKPT_MEMFS_VERSIONS_H_
#define DLCKPT_MEMFS_VERSIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "dlckpt/base/env.h"
#include "dlckpt/base/status.h"
#include "block_allocator.h"
#include "file_table.h"
#include "layout.h"

namespace dlckpt::memfs {

// A committed (or saved working) version parsed and validated from a slot;
// its pointers are into the store's mapping.
struct Version {
  uint64_t slot = layout::kNoSlot;
  uint64_t epoch = 0;
  const layout::ImageHeader* hdr = nullptr;
  const layout::FileEntry* entries = nullptr;
  const uint32_t* blocks = nullptr;  // all files' blocks, in entry order
  uint64_t block_count = 0;
  // Compressed stores: all files' chunks, in entry order.
  const layout::ChunkEntry* chunks = nullptr;
};

// The chunk of `len` bytes a chunk entry describes.
FileChunk ChunkFrom(const layout::ChunkEntry& ce, uint64_t len);

class VersionSet {
 public:
  // The versions of store `name` (for messages) mapped at `base`; `owner`:
  // this process owns the store. Usable once SetGeometry was called.
  VersionSet(std::string name, Env* env, bool owner, uint8_t* base, BlockAllocator* blocks);
  VersionSet(const VersionSet&) = delete;
  VersionSet& operator=(const VersionSet&) = delete;

  // The store's geometry (validated by the caller).
  void SetGeometry(const layout::Geometry& g);

  // ---- state records ----------------------------------------------------------

  // Owner: the state as last published (or loaded).
  const layout::StateRecord& state() const { return state_; }
  // The newer valid record in shared memory.
  Result<layout::StateRecord> ReadState() const;
  // The state an operation goes by: the owner's own, else ReadState().
  Result<layout::StateRecord> Current() const;
  // Publishes `s` (seq and crc are set here) and makes it state().
  void Publish(layout::StateRecord s);

  // ---- slots --------------------------------------------------------------------

  // A slot the published state does not refer to.
  uint64_t FreeSlot() const;
  // Serialises `files` into `slot` as version `epoch` (0: a saved working
  // set, with the files' damage). With `meta`, the image header and tables
  // are copied verbatim from it (an image being rebuilt) and only the block
  // list comes from `files`.
  void WriteSlot(uint64_t slot, uint64_t epoch, const uint8_t* meta, const FileTable& files);
  // Parses and validates the version in `slot`; `epoch` 0 expects a working slot.
  Result<Version> ParseSlot(uint64_t slot, uint64_t epoch) const;
  // The committed version `epoch` (acknowledged or pending) of Current().
  Result<Version> Committed(uint64_t epoch) const;
  // The nodes of version v, with their blocks and chunks; checksums count
  // as valid for a committed version only.
  FileMap NodesFrom(const Version& v) const;
  // Parses every version the published state refers to (Store::CheckSlots).
  Status CheckPublished() const;
  // Read-only attachers: the blocks the published state's versions fill.
  uint64_t PublishedBlocks() const;

  // ---- epochs (owner) ---------------------------------------------------------------

  // Loads the committed versions of `s` (which must be ReadState()'s) into an
  // allocator without references: their block lists and references, and
  // their nodes into *acked and *pending (left empty if there is no such
  // epoch). On success `s` is state().
  Status LoadCommitted(const layout::StateRecord& s, FileMap* acked, FileMap* pending);
  // The saved working files are no longer the current ones: publishes the
  // state without a working slot, if it had one.
  void ForgetSavedWorking();
  // Writes `files` into `slot` as `epoch` (meta: see WriteSlot) and
  // publishes it as the pending (ref kRefPending) or acknowledged
  // (kRefAcked) epoch, replacing that epoch's block list; every block of
  // `files` gets that reference.
  void Freeze(uint64_t slot, uint64_t epoch, const uint8_t* meta, uint8_t ref,
              const FileTable& files);
  // The pending epoch `epoch` becomes the acknowledged one (EINVAL if it is
  // not the pending one); the old acknowledged epoch's blocks lose kRefAcked.
  Status Acknowledge(uint64_t epoch);
  // Drops the pending epoch, if any.
  void AbortPending();
  // Holds the acknowledged epoch `epoch` (EINVAL if it is not; EBUSY if
  // another is held; OK if it already is).
  Status Hold(uint64_t epoch);
  // Releases the held epoch if it is `epoch` (else nothing).
  void Release(uint64_t epoch);
  uint64_t held_epoch() const { return held_epoch_; }
  // Writes `files` into a free slot as the saved working set and publishes it.
  void SaveWorking(const FileTable& files);

 private:
  uint8_t* SlotPtr(uint64_t slot) const {
    return base_ + geo_.slot_offset + slot * geo_.slot_size;
  }
  std::string Where() const { return "store " + name_; }  // for messages

  const std::string name_;
  Env* const env_;
  const bool owner_;
  uint8_t* const base_;
  BlockAllocator* const blocks_;
  layout::Geometry geo_{};
  bool compressed_ = false;

  layout::StateRecord state_{};  // owner: as published
  std::vector<uint32_t> acked_blocks_, pending_blocks_;
  std::vector<uint32_t> held_blocks_;  // carry kRefHeld
  uint64_t held_epoch_ = 0;
};

}  // namespace dlckpt::memfs

#endif  // DLCKPT_MEMFS_VERSIONS_H_

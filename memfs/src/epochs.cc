// epochs.cc — commit, acknowledge, abort, rollback and restore of epochs, and
// loading a store's state as owner or read-only viewer (Store::Impl, see
// store_impl.h and "Epochs" in dlckpt/memfs/memfs.h).
//
// Ownership: acked_blocks_ and pending_blocks_ list the blocks of the two
// committed versions and carry the kRefAcked / kRefPending bits in the
// blocks' reference masks (blocks_); the working files carry kRefWorking. A
// transition first publishes the new state record, then moves the bits, so a
// crash between the two leaves the published state consistent (the next
// owner rebuilds the masks from it).
//
// Thread safety: every public method takes mu_; the *Locked helpers and
// LoadView expect it held; LoadAsOwner takes it itself (it runs before the
// Impl is shared).
//
// Failure: EROFS for a read-only attacher, EBUSY if an epoch is still
// pending, EINVAL for an epoch number that is not newer (Commit) or not the
// pending one (Acknowledge), ENOENT for an epoch not committed here (Restore),
// EBADMSG for a damaged version; every message names the store. Commit fails
// before anything is published if a file's CRC cannot be computed.
#include <algorithm>
#include <cstring>

#include "store_impl.h"

namespace dlckpt::memfs {

using namespace layout;  // NOLINT(google-build-using-namespace)

EpochState Store::Impl::Epochs() {
  std::lock_guard<std::mutex> lock(mu_);
  StateRecord s;
  if (owner_) {
    s = state_;
  } else {
    auto r = ReadState();
    if (!r.ok()) return {};
    s = *r;
  }
  return EpochState{s.acked_epoch, s.pending_epoch, s.next_epoch};
}

Result<uint64_t> Store::Impl::Commit(uint64_t want_epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_RETURN_IF_ERROR(RequireOwner("commit"));
  if (state_.pending_epoch != 0) {
    return Status::Busy("store " + name() + ": epoch " + std::to_string(state_.pending_epoch) +
                        " still awaits acknowledgement");
  }
  uint64_t epoch = want_epoch == 0 ? state_.next_epoch : want_epoch;
  if (epoch < state_.next_epoch) {
    return Status::InvalidArgument("store " + name() + ": epoch " + std::to_string(epoch) +
                                   " is not newer than every epoch seen (next is " +
                                   std::to_string(state_.next_epoch) + ")");
  }
  Status damaged = DamageLocked(epoch);
  if (!damaged.ok()) {
    ClearLostCreateLocked();  // reported; damaged files stay damaged until written again
    return damaged;
  }
  for (auto& [path, node] : files_) {
    if (!node->crc_valid) {
      DLCKPT_ASSIGN_OR_RETURN(node->crc, NodeCrcLocked(*node));
      node->crc_valid = true;
    }
  }
  FreezeWorkingLocked(FreeSlotLocked(), epoch, nullptr, kRefPending);
  return epoch;
}

Status Store::Impl::Acknowledge(uint64_t epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_RETURN_IF_ERROR(RequireOwner("acknowledge"));
  return AcknowledgeLocked(epoch);
}

Status Store::Impl::AbortPending() {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_RETURN_IF_ERROR(RequireOwner("abort"));
  AbortPendingLocked();
  return Status::OK();
}

Status Store::Impl::Rollback() {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_RETURN_IF_ERROR(RequireOwner("rollback"));
  AbortPendingLocked();
  return ResetWorkingToAckedLocked();
}

Status Store::Impl::Restore(uint64_t epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_RETURN_IF_ERROR(RequireOwner("restore"));
  if (epoch != 0 && epoch == state_.pending_epoch) {
    DLCKPT_RETURN_IF_ERROR(AcknowledgeLocked(epoch));
  } else if (epoch == 0 || epoch != state_.acked_epoch) {
    return Status::NotFound("store " + name() + ": epoch " + std::to_string(epoch) +
                            " is not committed here (acknowledged " +
                            std::to_string(state_.acked_epoch) + ", pending " +
                            std::to_string(state_.pending_epoch) + ")");
  }
  AbortPendingLocked();
  return ResetWorkingToAckedLocked();
}

Status Store::Impl::View(uint64_t epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  if (owner_) return Status::InvalidArgument("store " + name() + ": View is for read-only attach");
  return LoadView(epoch);
}

Status Store::Impl::Hold(uint64_t epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_RETURN_IF_ERROR(RequireOwner("hold"));
  if (held_epoch_ == epoch && epoch != 0) return Status::OK();
  if (held_epoch_ != 0) {
    return Status::Busy("store " + name() + ": epoch " + std::to_string(held_epoch_) +
                        " is held; release it before holding epoch " + std::to_string(epoch));
  }
  if (epoch == 0 || epoch != state_.acked_epoch) {
    return Status::InvalidArgument("store " + name() + ": cannot hold epoch " +
                                   std::to_string(epoch) + " (acknowledged is " +
                                   std::to_string(state_.acked_epoch) + ")");
  }
  held_blocks_ = acked_blocks_;
  for (uint32_t b : held_blocks_) blocks_.AddRef(b, kRefHeld);
  held_epoch_ = epoch;
  return Status::OK();
}

Status Store::Impl::Release(uint64_t epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_RETURN_IF_ERROR(RequireOwner("release"));
  if (epoch == 0 || epoch != held_epoch_) return Status::OK();
  ReleaseHoldLocked();
  return Status::OK();
}

void Store::Impl::ReleaseHoldLocked() {
  for (uint32_t b : held_blocks_) blocks_.DropRef(b, kRefHeld);
  held_blocks_.clear();
  held_epoch_ = 0;
}

uint64_t Store::Impl::HeldEpoch() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_epoch_;
}

// Writes the working files into `slot` as version `epoch` (with `meta`, the
// image header and tables verbatim: see WriteSlotLocked), publishes it as the
// pending (ref kRefPending) or acknowledged (kRefAcked) epoch, and gives every
// working block that reference.
void Store::Impl::FreezeWorkingLocked(uint64_t slot, uint64_t epoch, const uint8_t* meta,
                                      uint8_t ref) {
  WriteSlotLocked(slot, epoch, meta);
  StateRecord s = state_;
  if (ref == kRefPending) {
    s.pending_epoch = epoch;
    s.pending_slot = slot;
  } else {
    s.acked_epoch = epoch;
    s.acked_slot = slot;
  }
  s.next_epoch = epoch + 1;
  PublishStateLocked(s);
  std::vector<uint32_t>& frozen = ref == kRefPending ? pending_blocks_ : acked_blocks_;
  frozen.clear();
  for (auto& [path, node] : files_) {
    for (uint32_t b : node->blocks) {
      if (b == kNoBlock) continue;
      blocks_.AddRef(b, ref);
      frozen.push_back(b);
    }
  }
}

Status Store::Impl::LoadAsOwner() {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_ASSIGN_OR_RETURN(StateRecord s, ReadState());
  blocks_.ResetRefs();
  FileMap working;
  bool have_working = false;
  if (s.acked_epoch != 0) {
    DLCKPT_ASSIGN_OR_RETURN(Version v, ParseSlotLocked(s.acked_slot, s.acked_epoch));
    acked_blocks_.assign(v.blocks, v.blocks + v.block_count);
    for (uint32_t b : acked_blocks_) blocks_.AddRef(b, kRefAcked);
    working = NodesFrom(v);
    files_.ReserveInos(working);
  }
  if (s.pending_epoch != 0) {
    DLCKPT_ASSIGN_OR_RETURN(Version v, ParseSlotLocked(s.pending_slot, s.pending_epoch));
    pending_blocks_.assign(v.blocks, v.blocks + v.block_count);
    for (uint32_t b : pending_blocks_) blocks_.AddRef(b, kRefPending);
    files_.ReserveInos(NodesFrom(v));
  }
  if (s.working_slot != kNoSlot) {
    auto v = ParseSlotLocked(s.working_slot, 0);
    if (v.ok()) {
      working = NodesFrom(*v);
      have_working = true;
    }
  }
  // Creates lost to a full file table belong to the saved working files.
  if (!have_working || !LoadLostCreateLocked()) ClearLostCreateLocked();
  files_.Assign(std::move(working));
  for (auto& [path, node] : files_) {
    for (uint32_t b : node->blocks) {
      if (b != kNoBlock) blocks_.AddRef(b, kRefWorking);
    }
  }
  state_ = s;
  if (s.working_slot != kNoSlot) {
    s.working_slot = kNoSlot;  // this owner's writes now diverge from the saved copy
    PublishStateLocked(s);
  }
  return Status::OK();
}

// Read-only: loads the version `epoch` sees (0: the newest one: a cleanly
// saved working set, else pending, else acknowledged).
Status Store::Impl::LoadView(uint64_t epoch) {
  DLCKPT_ASSIGN_OR_RETURN(StateRecord s, ReadState());
  handles_.clear();
  cache_block_ = kNoBlock;  // the owner may have reused any block since
  if (epoch == 0) {
    if (s.working_slot != kNoSlot) {
      auto v = ParseSlotLocked(s.working_slot, 0);
      if (v.ok()) {
        files_.Assign(NodesFrom(*v));
        view_epoch_ = 0;
        return Status::OK();
      }
    }
    epoch = s.pending_epoch != 0 ? s.pending_epoch : s.acked_epoch;
    if (epoch == 0) {
      files_.Clear();
      view_epoch_ = 0;
      return Status::OK();
    }
  }
  state_ = s;
  DLCKPT_ASSIGN_OR_RETURN(Version v, CommittedVersionLocked(epoch));
  files_.Assign(NodesFrom(v));
  view_epoch_ = epoch;
  return Status::OK();
}

Status Store::Impl::AcknowledgeLocked(uint64_t epoch) {
  if (epoch == 0 || epoch != state_.pending_epoch) {
    return Status::InvalidArgument("store " + name() + ": cannot acknowledge epoch " +
                                   std::to_string(epoch) + " (pending is " +
                                   std::to_string(state_.pending_epoch) + ")");
  }
  StateRecord s = state_;
  s.acked_epoch = s.pending_epoch;
  s.acked_slot = s.pending_slot;
  s.pending_epoch = 0;
  s.pending_slot = kNoSlot;
  PublishStateLocked(s);
  for (uint32_t b : acked_blocks_) blocks_.DropRef(b, kRefAcked);
  for (uint32_t b : pending_blocks_) {
    blocks_.AddRef(b, kRefAcked);
    blocks_.DropRef(b, kRefPending);
  }
  acked_blocks_ = std::move(pending_blocks_);
  pending_blocks_.clear();
  return Status::OK();
}

void Store::Impl::AbortPendingLocked() {
  if (state_.pending_epoch == 0) return;
  StateRecord s = state_;
  s.pending_epoch = 0;
  s.pending_slot = kNoSlot;
  PublishStateLocked(s);
  for (uint32_t b : pending_blocks_) blocks_.DropRef(b, kRefPending);
  pending_blocks_.clear();
}

Status Store::Impl::ResetWorkingToAckedLocked() {
  for (auto& h : handles_) {
    // An unlinked file lives only while open: it goes with its last handle.
    if (h.node && --h.node->open_count == 0 && !h.node->linked) ReleaseNodeLocked(*h.node);
    h = Handle{};
  }
  for (auto& [path, node] : files_) ReleaseNodeLocked(*node);
  files_.Clear();
  ClearLostCreateLocked();
  if (state_.acked_epoch != 0) {
    DLCKPT_ASSIGN_OR_RETURN(Version v, ParseSlotLocked(state_.acked_slot, state_.acked_epoch));
    files_.Assign(NodesFrom(v));
    for (auto& [path, node] : files_) {
      for (uint32_t b : node->blocks) {
        if (b == kNoBlock) continue;
        blocks_.AddRef(b, kRefWorking);
      }
    }
  }
  return Status::OK();
}

void Store::Impl::SaveWorkingLocked() {
  uint64_t slot = FreeSlotLocked();
  WriteSlotLocked(slot, 0, nullptr);
  StateRecord s = state_;
  s.working_slot = slot;
  PublishStateLocked(s);
}

}  // namespace dlckpt::memfs

// epochs.cc — commit, acknowledge, abort, rollback and restore of epochs, and
// loading a store's state as owner or read-only viewer (Store::Impl, see
// store_impl.h and "Epochs" in dlckpt/memfs/memfs.h).
//
// Ownership: the slots, the state and the blocks of the committed epochs are
// versions_' (a VersionSet, versions.h), which makes the transitions; the
// working files carry kRefWorking on their blocks (blocks_). Loading rebuilds
// both from the published state.
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
  auto s = versions_.Current();
  if (!s.ok()) return {};
  return EpochState{s->acked_epoch, s->pending_epoch, s->next_epoch};
}

Result<uint64_t> Store::Impl::Commit(uint64_t want_epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_RETURN_IF_ERROR(RequireOwner("commit"));
  const StateRecord& state = versions_.state();
  if (state.pending_epoch != 0) {
    return Status::Busy("store " + name() + ": epoch " + std::to_string(state.pending_epoch) +
                        " still awaits acknowledgement");
  }
  uint64_t epoch = want_epoch == 0 ? state.next_epoch : want_epoch;
  if (epoch < state.next_epoch) {
    return Status::InvalidArgument("store " + name() + ": epoch " + std::to_string(epoch) +
                                   " is not newer than every epoch seen (next is " +
                                   std::to_string(state.next_epoch) + ")");
  }
  Status damaged = DamageLocked(epoch);
  if (!damaged.ok()) {
    ClearLostCreateLocked();  // reported; damaged files stay damaged until written again
    return damaged;
  }
  // Blocks rewritten with their committed bytes stay shared with that epoch;
  // files unlinked while open are not committed and keep nothing.
  for (auto& [path, node] : files_) KeepEqualBlocksLocked(*node);
  DropAllShadowsLocked();
  for (auto& [path, node] : files_) {
    if (!node->crc_valid) {
      DLCKPT_ASSIGN_OR_RETURN(node->crc, NodeCrcLocked(*node));
      node->crc_valid = true;
    }
  }
  versions_.Freeze(versions_.FreeSlot(), epoch, nullptr, kRefPending, files_);
  return epoch;
}

Status Store::Impl::Acknowledge(uint64_t epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_RETURN_IF_ERROR(RequireOwner("acknowledge"));
  return versions_.Acknowledge(epoch);
}

Status Store::Impl::AbortPending() {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_RETURN_IF_ERROR(RequireOwner("abort"));
  versions_.AbortPending();
  DropAllShadowsLocked();  // their blocks may belong to the aborted epoch alone
  return Status::OK();
}

Status Store::Impl::Rollback() {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_RETURN_IF_ERROR(RequireOwner("rollback"));
  versions_.AbortPending();
  return ResetWorkingToAckedLocked();
}

Status Store::Impl::Restore(uint64_t epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_RETURN_IF_ERROR(RequireOwner("restore"));
  const StateRecord& state = versions_.state();
  if (epoch != 0 && epoch == state.pending_epoch) {
    DLCKPT_RETURN_IF_ERROR(versions_.Acknowledge(epoch));
  } else if (epoch == 0 || epoch != state.acked_epoch) {
    return Status::NotFound("store " + name() + ": epoch " + std::to_string(epoch) +
                            " is not committed here (acknowledged " +
                            std::to_string(state.acked_epoch) + ", pending " +
                            std::to_string(state.pending_epoch) + ")");
  }
  versions_.AbortPending();
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
  return versions_.Hold(epoch);
}

Status Store::Impl::Release(uint64_t epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_RETURN_IF_ERROR(RequireOwner("release"));
  versions_.Release(epoch);
  return Status::OK();
}

uint64_t Store::Impl::HeldEpoch() const {
  std::lock_guard<std::mutex> lock(mu_);
  return versions_.held_epoch();
}

Status Store::Impl::LoadAsOwner() {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_ASSIGN_OR_RETURN(StateRecord s, versions_.ReadState());
  blocks_.ResetRefs();
  FileMap working, pending;
  DLCKPT_RETURN_IF_ERROR(versions_.LoadCommitted(s, &working, &pending));
  files_.ReserveInos(working);
  files_.ReserveInos(pending);
  bool have_working = false;
  if (s.working_slot != kNoSlot) {
    auto v = versions_.ParseSlot(s.working_slot, 0);
    if (v.ok()) {
      working = versions_.NodesFrom(*v);
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
  versions_.ForgetSavedWorking();  // this owner's writes now diverge from the saved copy
  return Status::OK();
}

// Read-only: loads the version `epoch` sees (0: the newest one: a cleanly
// saved working set, else pending, else acknowledged).
Status Store::Impl::LoadView(uint64_t epoch) {
  DLCKPT_ASSIGN_OR_RETURN(StateRecord s, versions_.ReadState());
  handles_.clear();
  cache_block_ = kNoBlock;  // the owner may have reused any block since
  if (epoch == 0) {
    if (s.working_slot != kNoSlot) {
      auto v = versions_.ParseSlot(s.working_slot, 0);
      if (v.ok()) {
        files_.Assign(versions_.NodesFrom(*v));
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
  DLCKPT_ASSIGN_OR_RETURN(Version v, versions_.Committed(epoch));
  files_.Assign(versions_.NodesFrom(v));
  view_epoch_ = epoch;
  return Status::OK();
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
  const StateRecord& state = versions_.state();
  if (state.acked_epoch != 0) {
    DLCKPT_ASSIGN_OR_RETURN(Version v, versions_.ParseSlot(state.acked_slot, state.acked_epoch));
    files_.Assign(versions_.NodesFrom(v));
    for (auto& [path, node] : files_) {
      for (uint32_t b : node->blocks) {
        if (b == kNoBlock) continue;
        blocks_.AddRef(b, kRefWorking);
      }
    }
  }
  return Status::OK();
}

}  // namespace dlckpt::memfs

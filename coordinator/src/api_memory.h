// Protected memory regions (dlckpt_protect and friends in dlckpt/dlckpt.h):
// the region table of this process and the copies between regions and the
// rank's store. Region `id` is the store file RegionPath(id) =
// "/.dlckpt-mem/<id>": the region's raw bytes, its size the region's. The
// directory lies outside every interception prefix, so the application's
// own I/O never reaches it.
//
// Thread safety: none; the API is called from the thread that initialised
// MPI. Ownership: the table holds the caller's pointers, never the memory.
// Failure: Status with an errno-valued code and a message naming the region.
#ifndef DLCKPT_COORDINATOR_API_MEMORY_H_
#define DLCKPT_COORDINATOR_API_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dlckpt/base/status.h"
#include "dlckpt/memfs/memfs.h"

namespace dlckpt::api::memory {

inline constexpr std::string_view kRegionDir = "/.dlckpt-mem/";
std::string RegionPath(int id);

// The store the recover functions read (dlckpt_init sets it, dlckpt_finalize
// clears it); nullptr: not initialised (EINVAL from them).
void Attach(memfs::Store* store);

// Collective use, from dlckpt_checkpoint before the commit: writes every
// protected region into `store`'s working files and unlinks the region files
// of ids no longer protected. A write that fails (ENOSPC) leaves the file
// marked damaged, so the commit would refuse as well.
//
// Only what changed (dirty_pages.h): a region whose pages are tracked and
// whose store file is still the one the previous StoreRegions wrote (same
// inode, mtime, size, not damaged) gets only its dirty ranges written in
// place, so memfs copies on write only those blocks and the incremental
// encode sees only them; the first checkpoint of a region, a region
// re-protected with another pointer or size, an untracked region and the
// fallback ($DLCKPT_DIRTY_TRACKING=off, a kernel without userfaultfd's
// asynchronous write protection) write it whole. Correctness rests on the
// store's copy-on-write: bytes not written keep the previous epoch's, which
// equal the region's then.
//
// A selection (SelectNext) limits this call to the chosen ids: the files of
// the others are dropped from the checkpoint like unprotected ones (they
// stay protected, and are written whole at their next checkpoint). The
// selection applies to this call only.
Status StoreRegions(memfs::Store* store);
// The next StoreRegions stores only `ids` (each must be protected: EINVAL
// naming the first that is not, and the selection is left unchanged).
// Clears a selection when `ids` is nullptr. For the compatibility layers'
// selective checkpoints (VELOC_Checkpoint_selective).
Status SelectNext(const std::vector<int>* ids);
// After the checkpoint round: a failed one makes every region whole next
// time (the working files may no longer be what StoreRegions left).
void CheckpointEnded(const Status& outcome);

// The protected ids, ascending.
std::vector<int> ProtectedIds();
// The size of region `id` in the attached store's working files (the newest
// checkpoint), ENOENT naming the id if it holds none.
Result<uint64_t> CheckpointedSize(int id);
// Copies `ids` (all protected) back from the attached store, checking every
// one (present, same size) before copying any. `what` prefixes errors.
Status Recover(const std::vector<int>& ids, std::string_view what);

// Whole-file helpers over a store's working files, for the compatibility
// layers: `len` bytes from `data` as file `path` (created 0600 or
// truncated), and the file `path` whole.
Status WriteStoreFile(memfs::Store* store, std::string_view path, const void* data, size_t len);
Result<std::string> ReadStoreFile(memfs::Store* store, std::string_view path);

}  // namespace dlckpt::api::memory

#endif  // DLCKPT_COORDINATOR_API_MEMORY_H_

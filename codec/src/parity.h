// Parity objects on a spare node: two POSIX shared memory slots per node
// ("/dlckpt.<job>.<node>.parity0" and "...parity1"), double-buffered so a
// failure while encoding epoch e leaves the newest complete parity whole.
//
// A slot is a self-describing header (magic, CRC, then the parity's identity
// and the group it encodes: epoch, generation, group, index, k, n, ngroups,
// scheme, length, and every member's node, ranks and image sizes) followed by
// the parity bytes. Writing a new parity: Prepare() picks the slot that does
// not hold the newest complete parity, marks it incomplete, returns the data
// area; Complete() marks it complete. A crash in between leaves an incomplete
// slot, which survey and rebuild ignore. Slots are pre-faulted, reused
// while large enough, shrunk in place when far larger than needed, and stay
// mapped between epochs (only this object writes its node's slots, so no
// page is faulted twice). A fresh slot's data pages are pre-touched
// ($DLCKPT_PRETOUCH, dlckpt/memfs/memfs.h); Reserve does both before the
// first encode. Not thread-safe; one ParitySlots per codec process.
//
// Ownership: a slot is adopted only if this uid created it with mode 0600
// (Env::OpenShm); another object under a slot's name is reported by Scan,
// never read by Find, and replaced by Prepare with a fresh object, or, if
// this uid may not remove it, Prepare fails naming its owner.
#ifndef DLCKPT_CODEC_PARITY_H_
#define DLCKPT_CODEC_PARITY_H_

#include <memory>
#include <string>
#include <vector>

#include "dlckpt/base/env.h"
#include "dlckpt/memfs/extent.h"
#include "dlckpt/codec/protocol.h"
#include "dlckpt/base/status.h"

namespace dlckpt::codec {

class ParitySlots {
 public:
  ParitySlots(std::string job, std::string node, Env* env = Env::Default())
      : job_(std::move(job)), node_(std::move(node)), env_(env) {}

  std::string SlotName(int slot) const;

  // The valid parity objects of this node (complete or not; not a slot
  // Reserve made that no Prepare has written yet), for a survey.
  // Damaged headers are skipped (logged through `warn`).
  std::vector<protocol::ParityReport> Scan(std::vector<std::string>* warn);

  // Starts writing a parity described by `info` (info.complete ignored) of
  // `length` bytes into the slot that does not hold the complete parity of
  // epoch `keep` (the acknowledged epoch; when no slot holds it, or keep is
  // 0: the slot that does not hold the newest complete parity); returns where
  // its bytes go.
  Result<uint8_t*> Prepare(const protocol::ParityReport& info, uint64_t length, uint64_t keep);
  // Creates, pre-faulted and pre-touched, each slot that is missing or
  // smaller than a parity of `length` bytes for a group of `shape` (its
  // members' records; epoch and sizes ignored) needs, so that the first
  // encodes write pages already written once. A slot holding a complete
  // parity is left alone. The slots carry a valid incomplete header until a
  // Prepare. Prepare later shrinks a slot far larger than an epoch needs.
  // Fails (ENOSPC, ...) leaving the slot absent: Prepare creates it then.
  Status Reserve(const protocol::ParityReport& shape, uint64_t length);
  // Marks the prepared parity complete.
  Status Complete();

  // The bytes of a complete parity (group, index, epoch, generation) held
  // here, for a rebuild. The mapping stays valid while this object lives.
  Result<Extent> Find(uint32_t group, uint32_t index, uint64_t epoch, uint64_t generation);

  // Incremental encode: the complete parity (group, index) of epoch `epoch`
  // held here, of any generation (the newest if both slots hold one), and
  // its header in *info. NotFound otherwise. Call before Prepare: the bytes
  // stay valid and unchanged through the Prepare that keeps this epoch and
  // the Complete after it (Prepare never writes the slot it keeps).
  Result<Extent> Kept(uint32_t group, uint32_t index, uint64_t epoch, protocol::ParityReport* info);

  // Incremental encode: true if the slot a Prepare keeping `keep` would
  // write holds the complete parity (group, index) of epoch `epoch` now.
  bool OtherHolds(uint32_t group, uint32_t index, uint64_t keep, uint64_t epoch);
  // True if the last Prepare created its slot afresh (its old bytes are gone).
  bool last_prepare_fresh() const { return last_fresh_; }

  // Removes both slots (a node that stopped being a spare, or shutdown).
  void RemoveAll();

 private:
  struct Mapped {
    std::unique_ptr<MappedShm> shm;
    protocol::ParityReport info;
    uint64_t header_bytes = 0;
    uint64_t length = 0;  // parity bytes after the header
    bool valid = false;
  };
  Status Load(int slot, Mapped* m);
  // Writes m->info and m->length as the slot's header (torn writes never validate).
  Status WriteHeader(Mapped* m);

  std::string job_, node_;
  Env* env_;
  Mapped slots_[2];
  int prepared_ = -1;
  bool last_fresh_ = false;
};

}  // namespace dlckpt::codec

#endif  // DLCKPT_CODEC_PARITY_H_

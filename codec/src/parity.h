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
// Integrity: Complete records a CRC32C of every kParityBlock bytes of the
// parity in the header. A complete parity is checked against them before it
// is reported (Scan) or read (Find, CompleteDelta); a parity that fails is
// an erasure, as a damaged store is: Scan leaves it out and warns, Find
// refuses it (Corruption naming the slot and the block). Find does not check
// again a parity whose blocks this object checked (Scan) under the same
// header: a survey and the rebuild after it read each parity byte twice.
//
// Ownership: a slot is adopted only if this uid created it with mode 0600
// (Env::OpenShm). Another object under a slot's name (another uid's, not a
// regular file, another mode) is reported by Scan, never read by Find, and
// never removed: Prepare and Reserve fail with Env::OpenShm's EPERM/EACCES
// naming /dev/shm/NAME, and RemoveAll leaves it.
#ifndef DLCKPT_CODEC_PARITY_H_
#define DLCKPT_CODEC_PARITY_H_

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dlckpt/base/env.h"
#include "dlckpt/memfs/extent.h"
#include "dlckpt/memfs/memfs.h"
#include "dlckpt/control/protocol.h"
#include "dlckpt/base/status.h"

namespace dlckpt::codec {

// Bytes covered by one parity checksum (the last block of a parity may be
// shorter).
inline constexpr uint64_t kParityBlock = uint64_t{1} << 20;
// The number of blocks of a parity of `length` bytes.
uint64_t ParityBlockCount(uint64_t length, uint64_t block = kParityBlock);
// The CRC32C of every block of data[0, length).
std::vector<uint32_t> ParityBlockCrcs(const uint8_t* data, uint64_t length, uint64_t block = kParityBlock);
// OK when block `b` of data[0, length) has CRC32C `crc`; otherwise
// Corruption "<what>: parity block B of N (bytes X-Y): checksum mismatch".
Status CheckParityBlock(const std::string& what, const uint8_t* data, uint64_t length, uint64_t b, uint32_t crc,
                        uint64_t block = kParityBlock);
// The blocks that meet any of `ranges` (sorted, disjoint), as byte ranges
// rounded out to block boundaries and clipped to [0, limit).
std::vector<memfs::Store::ByteRange> BlocksMeeting(std::span<const memfs::Store::ByteRange> ranges, uint64_t limit,
                                                   uint64_t block = kParityBlock);

// The refusal (EPERM/EACCES, naming /dev/shm/NAME) when an object named
// `name` exists but is not this uid's to use or remove (Env::OpenShm's
// ownership check); OK otherwise, also when there is none.
Status ForeignShm(Env* env, const std::string& name);

class ParitySlots {
 public:
  ParitySlots(std::string job, std::string node, Env* env = Env::Default())
      : job_(std::move(job)), node_(std::move(node)), env_(env) {}

  std::string SlotName(int slot) const;

  // The valid parity objects of this node (complete or not; not a slot
  // Reserve made that no Prepare has written yet), for a survey.
  // Damaged headers are skipped (logged through `warn`).
  std::vector<control::protocol::ParityReport> Scan(std::vector<std::string>* warn);

  // Starts writing a parity described by `info` (info.complete ignored) of
  // `length` bytes into the slot that does not hold the complete parity of
  // epoch `keep` (the acknowledged epoch; when no slot holds it, or keep is
  // 0: the slot that does not hold the newest complete parity); returns where
  // its bytes go.
  Result<uint8_t*> Prepare(const control::protocol::ParityReport& info, uint64_t length, uint64_t keep);
  // Prepare sets last_prepare_fresh() also when the slot held a complete
  // parity and its data area moved (a header of another size): that
  // parity's bytes are then not where they were.
  // Makes sure that the first `slots` (1 or 2) slots holding no complete
  // parity, in slot order, exist and hold a parity of `length` bytes for a
  // group of `shape` (its members' records; epoch and sizes ignored):
  // creates, pre-faulted and pre-touched, each one missing or too small, so
  // that the encodes write pages already written once. The first such slot
  // is the one the next Prepare takes. A slot holding a complete parity is
  // left alone. The slots carry a valid incomplete header until a Prepare.
  // Prepare later shrinks a slot far larger than an epoch needs. Fails
  // (ENOSPC, ...) leaving the slot absent: Prepare creates it then.
  Status Reserve(const control::protocol::ParityReport& shape, uint64_t length, int slots = 2);
  // Marks the prepared parity complete, with the CRC32C of each block.
  Status Complete();
  // Incremental encode: as Complete, for a parity written by updating the
  // complete parity of epoch `keep` that the Prepare kept, after proving
  // that every byte it took from that parity was intact. `changed`: the
  // ranges the update changed (sorted, disjoint); every other byte of a
  // block that meets none of them was copied, or is the same as before.
  // Such a block must carry the kept block's CRC; every kept block that
  // meets `changed` (or whose end moved with the length) must match its
  // own. Otherwise Corruption naming the slot and block; the new parity
  // stays incomplete, and a kept parity found damaged is no longer offered
  // by Kept (the next encode is a full one).
  //
  // `rewritten` (optional): the ranges the update wrote into the slot by
  // copying from the kept parity. Given, every block that meets neither it
  // nor `changed` is taken as resting: the slot held it before this update,
  // and the caller guarantees its bytes equal the kept block's (the slot
  // held the parity the kept one was updated from; DeltaParitySink's reuse).
  // A resting block carries the kept block's checksum without being read,
  // except a rotating window of them per call (kScrubBlocks, or an eighth of
  // the blocks if that is more: each slot is read whole every 8 of its
  // updates at most), which is checked (a mismatch: Corruption as above, after the kept block is
  // checked). A resting block that went bad is therefore found by a later
  // scrub, by Scan, or by Find before any rebuild reads it: never used.
  Status CompleteDelta(uint64_t keep, std::span<const memfs::Store::ByteRange> changed,
                       const std::vector<memfs::Store::ByteRange>* rewritten = nullptr);
  // Resting blocks checked per CompleteDelta at least (above).
  static constexpr uint64_t kScrubBlocks = 4;

  // The bytes of a complete parity (group, index, epoch, generation) held
  // here, for a rebuild. The mapping stays valid while this object lives.
  Result<Extent> Find(uint32_t group, uint32_t index, uint64_t epoch, uint64_t generation);

  // Incremental encode: the complete parity (group, index) of epoch `epoch`
  // held here, of any generation (the newest if both slots hold one), and
  // its header in *info. NotFound otherwise, and for a parity found damaged
  // (CompleteDelta, Scan). Call before Prepare: the bytes
  // stay valid and unchanged through the Prepare that keeps this epoch and
  // the Complete after it (Prepare never writes the slot it keeps).
  Result<Extent> Kept(uint32_t group, uint32_t index, uint64_t epoch, control::protocol::ParityReport* info);

  // Incremental encode: true if the slot a Prepare keeping `keep` would
  // write holds the complete parity (group, index) of epoch `epoch` now.
  bool OtherHolds(uint32_t group, uint32_t index, uint64_t keep, uint64_t epoch);
  // True if the last Prepare created its slot afresh (its old bytes are gone).
  bool last_prepare_fresh() const { return last_fresh_; }

  // Removes both slots (a node that stopped being a spare, or shutdown);
  // an object under a slot's name that is not this uid's is left alone.
  void RemoveAll();

 private:
  struct Mapped {
    std::unique_ptr<MappedShm> shm;
    control::protocol::ParityReport info;
    uint64_t header_bytes = 0;
    uint64_t length = 0;  // parity bytes after the header
    uint64_t block = kParityBlock;
    std::vector<uint32_t> crcs;  // per block; meaningful once complete
    bool valid = false;
    bool damaged = false;  // a check of its blocks failed (until rewritten)
    // The checksum of the header last loaded, and of the one whose blocks
    // were last checked whole (verified: only this process writes the slot,
    // so the blocks of an unchanged complete header need no second check).
    uint32_t header_crc = 0;
    bool verified = false;
    uint32_t verified_crc = 0;
  };
  Status Load(int slot, Mapped* m);
  // Checks every block of a complete slot; marks it damaged on failure.
  Status Verify(Mapped* m);
  // A fresh object of `size` bytes for `slot`, replacing this uid's object
  // under its name; another's is refused (EPERM/EACCES), never removed.
  Result<std::unique_ptr<MappedShm>> Recreate(int slot, uint64_t size);
  // Writes m->info and m->length as the slot's header (torn writes never validate).
  Status WriteHeader(Mapped* m);

  std::string job_, node_;
  Env* env_;
  Mapped slots_[2];
  int prepared_ = -1;
  int kept_ = -1;  // the slot the last Prepare kept, or -1
  uint64_t scrub_next_ = 0;  // the resting block the next CompleteDelta checks first
  bool last_fresh_ = false;
};

}  // namespace dlckpt::codec

#endif  // DLCKPT_CODEC_PARITY_H_

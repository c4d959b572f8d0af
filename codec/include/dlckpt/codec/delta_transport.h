// dlckpt/codec/delta_transport.h — the two ends of an incremental encode on
// the MPI transport (reduce_transport.h), on top of the math of delta.h.
//
// Data nodes contribute (old xor new) of their member image over the
// group's union of changed ranges U, packed one range after the other, to
// the same ring reduce-scatter as a full encode, as two inputs read in place
// (DeltaInputs: the new and the old bytes; the xor is never formed): it
// delivers the packed parity deltas sum_i c_ji * delta_i to the spares. Spare j writes the parity
// of the new epoch into the slot that does not hold the kept one
// (DeltaParitySink): the unchanged bytes copied from the kept parity, the
// changed ones = kept xor packed delta. The kept parity is only read, so a
// failure anywhere leaves it whole.
//
// Why a local copy and not a per-block slot map: the copy of the unchanged
// parity runs at memcpy speed on the spare (bench/README.md, "Incremental
// encode"), below the transport's time for the changed bytes at every
// fraction we measured, and it keeps the slot a flat byte image that survey
// and rebuild read unchanged; a slot map would make every rebuild and survey
// follow indirections across two slots whose lifetimes then depend on each
// other.
//
// Thread safety: none (one encode at a time on the thread running the
// transport).
#ifndef DLCKPT_CODEC_DELTA_TRANSPORT_H_
#define DLCKPT_CODEC_DELTA_TRANSPORT_H_

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "dlckpt/codec/delta.h"
#include "dlckpt/codec/reduce_transport.h"

namespace dlckpt::codec {

// Spare side of a delta encode (see the file comment). `kept[j]`: the kept
// parity of output j (j as in the spec; outputs this process does not own
// may be empty; an owned one that is empty makes Begin fail with ENOENT);
// `length`: the new parity length L (max member image);
// `prepare(j, L, &reused)`: where the new parity j goes (the other slot,
// never `kept`); it sets *reused when that slot still holds the older parity
// `stale` describes. `stale` (optional): the ranges outside which that older
// parity equals the kept one (the previous delta's union and everything
// past the shorter length); with it and *reused only those ranges are
// copied instead of every unchanged byte (see CopyRanges).
class DeltaParitySink final : public OutputSink {
 public:
  using PrepareFn = std::function<Result<uint8_t*>(int output, uint64_t length, bool* reused)>;
  DeltaParitySink(std::shared_ptr<const PackedMap> map, uint64_t length,
                  std::vector<std::span<const uint8_t>> kept, PrepareFn prepare,
                  const std::vector<ByteRange>* stale = nullptr);

  // Optional, before the transport's Run: prepares output j's new parity
  // and copies its unchanged bytes now, while the data nodes start their
  // ring (Begin then finds it done).
  Status PrepareAhead(int output);

  Result<uint8_t*> Begin(int output, uint64_t packed_length) override;
  Status Write(int output, uint64_t offset, const uint8_t* data, size_t len) override;
  Status Finish(int output) override;

  double copy_seconds() const { return copy_seconds_; }  // of the unchanged bytes
  uint64_t copied_bytes() const { return copied_bytes_; }

 private:
  std::shared_ptr<const PackedMap> map_;
  uint64_t length_;
  std::vector<std::span<const uint8_t>> kept_;
  PrepareFn prepare_;
  bool have_stale_ = false;
  std::vector<ByteRange> stale_;
  std::vector<uint8_t*> out_;
  double copy_seconds_ = 0;
  uint64_t copied_bytes_ = 0;
};

}  // namespace dlckpt::codec

#endif  // DLCKPT_CODEC_DELTA_TRANSPORT_H_

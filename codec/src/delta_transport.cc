// delta_transport.cc — DeltaParitySink (contract in
// dlckpt/codec/delta_transport.h).
#include "dlckpt/codec/delta_transport.h"

#include <chrono>
#include <cstring>

namespace dlckpt::codec {

DeltaParitySink::DeltaParitySink(std::shared_ptr<const PackedMap> map, uint64_t length,
                                 std::vector<std::span<const uint8_t>> kept, PrepareFn prepare,
                                 const std::vector<ByteRange>* stale)
    : map_(std::move(map)), length_(length), kept_(std::move(kept)), prepare_(std::move(prepare)) {
  if (stale) {
    have_stale_ = true;
    stale_ = SubtractRanges(*stale, map_->ranges());  // the packed ranges are written anyway
  }
}

Result<uint8_t*> DeltaParitySink::Begin(int output, uint64_t packed_length) {
  if (packed_length != map_->packed_bytes()) {
    return Status::InvalidArgument("delta parity: the transport delivers " + std::to_string(packed_length) +
                                   " packed bytes, the plan has " + std::to_string(map_->packed_bytes()));
  }
  if (static_cast<size_t>(output) >= out_.size() || out_[static_cast<size_t>(output)] == nullptr) {
    DLCKPT_RETURN_IF_ERROR(PrepareAhead(output));
  }
  return nullptr;  // the packed bytes come through Write
}

Status DeltaParitySink::PrepareAhead(int output) {
  if (output < 0 || static_cast<size_t>(output) >= kept_.size()) {
    return Status::InvalidArgument("delta parity: no kept parity for output " + std::to_string(output));
  }
  if (kept_[static_cast<size_t>(output)].data() == nullptr) {
    return Status::NotFound("delta parity: the kept parity of output " + std::to_string(output) + " is gone");
  }
  if (out_.size() <= static_cast<size_t>(output)) out_.resize(static_cast<size_t>(output) + 1, nullptr);
  bool reused = false;
  DLCKPT_ASSIGN_OR_RETURN(uint8_t * dst, prepare_(output, length_, &reused));
  const auto& kept = kept_[static_cast<size_t>(output)];
  if (dst < kept.data() + kept.size() && kept.data() < dst + length_) {
    return Status::InvalidArgument("delta parity: the new parity would overwrite the kept one");
  }
  out_[static_cast<size_t>(output)] = dst;
  auto t0 = std::chrono::steady_clock::now();
  if (reused && have_stale_) {
    CopyRanges(kept, stale_, dst, length_);
    for (const ByteRange& r : stale_) copied_bytes_ += r.offset < length_ ? std::min(r.len, length_ - r.offset) : 0;
  } else {
    CopyUnchanged(kept, *map_, dst, length_);
    copied_bytes_ += length_ - std::min(length_, map_->packed_bytes());
  }
  copy_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return Status::OK();
}

Status DeltaParitySink::Write(int output, uint64_t offset, const uint8_t* data, size_t len) {
  if (static_cast<size_t>(output) >= out_.size() || out_[static_cast<size_t>(output)] == nullptr ||
      offset + len > map_->packed_bytes()) {
    return Status::InvalidArgument("delta parity: bytes outside the plan for output " +
                                   std::to_string(output));
  }
  ApplyPacked(kept_[static_cast<size_t>(output)], *map_, offset, data, len,
              out_[static_cast<size_t>(output)], length_);
  return Status::OK();
}

Status DeltaParitySink::Finish(int /*output*/) { return Status::OK(); }

}  // namespace dlckpt::codec

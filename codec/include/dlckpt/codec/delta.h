// dlckpt/codec/delta.h — the math of incremental (delta) encoding: parity is
// linear, so the parity of epoch e follows from the parity of epoch e-1 and
// the data that changed:
//   P_j(e) = P_j(e-1) xor sum_i c_ji * (D_i(e-1) xor D_i(e))
// (XOR: every c_ji = 1). Only the bytes in the changed ranges of any member
// carry a nonzero delta. No MPI, no I/O: byte ranges and buffers.
//
// Terms. A member image is its stores' images concatenated in rank order
// (what the codec encodes for one data node). Ranges are sorted, disjoint
// [offset, offset + len) stretches of an image. The *packed* form of a byte
// stream over ranges U is the concatenation of its bytes in U, in order; the
// transport reduces packed deltas exactly as it reduces full images.
//
// Contracts. Images are extent lists read as zeros past their end. Every
// function is pure (thread-safe) and writes only its output buffer; buffers
// must not overlap the inputs. Lengths are bytes.
#ifndef DLCKPT_CODEC_DELTA_H_
#define DLCKPT_CODEC_DELTA_H_

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "dlckpt/memfs/extent.h"
#include "dlckpt/memfs/memfs.h"

namespace dlckpt::codec {

using ByteRange = memfs::Store::ByteRange;

// The sum of the ranges' lengths.
uint64_t RangeBytes(std::span<const ByteRange> ranges);

// Sorted, disjoint, non-adjacent union of range lists, clipped to [0, limit).
std::vector<ByteRange> UnionRanges(std::span<const std::vector<ByteRange>> lists, uint64_t limit);

// The changed ranges of a member image whose stores (in rank order) changed
// as `stores` says: each store's ranges shifted by its offset in the member
// image when that offset is the same in both epochs; from the first store
// whose offset moved, everything to the end of the longer member image.
std::vector<ByteRange> MemberDelta(std::span<const memfs::Store::ImageDelta> stores);

// out[0 .. RangeBytes(ranges)) := packed (old xor new) over `ranges`. `own`:
// ranges outside which old and new are known equal (their packed bytes are
// written as zeros without reading the images); pass `ranges` itself when
// nothing more is known.
void PackDelta(std::span<const Extent> old_image, std::span<const Extent> new_image,
               std::span<const ByteRange> ranges, std::span<const ByteRange> own, uint8_t* out);

// The same bytes as PackDelta, as two extent lists whose xor they are, for
// ReduceTransport::Run's second input: over `ranges` one after the other,
// *fresh holds new_image's and *old old_image's bytes inside `own`, both
// holes (null) elsewhere and past an image's end. The images hold no holes
// themselves (as memfs images: ExtentCursor). Nothing is copied; the
// extents point into the images (valid while they are).
void DeltaInputs(std::span<const Extent> old_image, std::span<const Extent> new_image,
                 std::span<const ByteRange> ranges, std::span<const ByteRange> own, std::vector<Extent>* fresh,
                 std::vector<Extent>* old);

// Spread layout (dlckpt/control/stripes.h): member images cut into
// segments of `seg` bytes, segment t holding image bytes [t·seg, (t+1)·seg).
// StripeUnion: the changed ranges of one stripe in segment coordinates
// [0, seg): the union over its data chunks i of member_ranges[i] (the
// chunk's member's changed image ranges, sorted) inside segment
// segments[i], each piece widened to multiples of `align` (which must
// divide seg). Every chunk of the stripe packs over the same ranges, so the
// packed chunks have equal lengths.
std::vector<ByteRange> StripeUnion(std::span<const std::vector<ByteRange>> member_ranges,
                                   std::span<const uint32_t> segments, uint64_t seg, uint64_t align);
// `u` (segment coordinates) shifted into segment t of an image.
std::vector<ByteRange> InSegment(std::span<const ByteRange> u, uint32_t t, uint64_t seg);

// Maps offsets of a packed stream over `ranges` back to image offsets.
class PackedMap {
 public:
  explicit PackedMap(std::vector<ByteRange> ranges);
  const std::vector<ByteRange>& ranges() const { return ranges_; }
  uint64_t packed_bytes() const { return prefix_.empty() ? 0 : prefix_.back(); }
  // Calls fn(image_offset, packed_offset, n) for the pieces of packed bytes
  // [packed, packed + len), in order (packed + len <= packed_bytes()).
  template <class Fn>
  void ForEach(uint64_t packed, uint64_t len, Fn&& fn) const;

 private:
  size_t Find(uint64_t packed) const;  // index of the range holding packed byte `packed`
  std::vector<ByteRange> ranges_;
  std::vector<uint64_t> prefix_;  // prefix_[i] = packed end of range i
};

template <class Fn>
void PackedMap::ForEach(uint64_t packed, uint64_t len, Fn&& fn) const {
  for (size_t i = Find(packed); len > 0 && i < ranges_.size(); ++i) {
    uint64_t start = prefix_[i] - ranges_[i].len;  // packed offset of range i
    uint64_t in = packed - start;
    uint64_t n = std::min(len, ranges_[i].len - in);
    fn(ranges_[i].offset + in, packed, n);
    packed += n;
    len -= n;
  }
}

// Spare side, unchanged part: out[x] := old[x] (zero at x >= old.size()) for
// every x in [0, out_len) outside the map's ranges.
void CopyUnchanged(std::span<const uint8_t> old_parity, const PackedMap& map, uint8_t* out,
                   uint64_t out_len);
// Spare side, changed part: for the packed parity delta bytes [packed,
// packed + len) in `data`: out[x] := old[x] xor data[...] at their image
// offsets x (old read as zeros past its end; x < out_len).
void ApplyPacked(std::span<const uint8_t> old_parity, const PackedMap& map, uint64_t packed,
                 const uint8_t* data, uint64_t len, uint8_t* out, uint64_t out_len);

// Spare side, reusing a slot: out[x] := old[x] (zero at x >= old.size())
// for every x in `ranges` below out_len. When the slot already holds an
// older parity P' that differs from the kept parity P only in ranges R
// (the previous delta's union) and past P''s length, copying
// SubtractRanges(R ∪ [min length, out_len), U) replaces CopyUnchanged.
void CopyRanges(std::span<const uint8_t> old_parity, std::span<const ByteRange> ranges, uint8_t* out,
                uint64_t out_len);

// The parts of `a` outside `b` (both sorted and disjoint), sorted.
std::vector<ByteRange> SubtractRanges(std::span<const ByteRange> a, std::span<const ByteRange> b);

}  // namespace dlckpt::codec

#endif  // DLCKPT_CODEC_DELTA_H_

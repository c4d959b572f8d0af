// delta.cc — range arithmetic, delta packing and the spare's parity update
// for incremental encoding (contract in dlckpt/codec/delta.h). Pure: no MPI,
// no I/O, no state.
#include "dlckpt/codec/delta.h"

#include <algorithm>
#include <cstring>

#include "dlckpt/codec/erasure.h"

namespace dlckpt::codec {

namespace {

// Bytes past an image's end read as zero (ExtentCursor gives null there).
using Cursor = ExtentCursor;

void XorImages(Cursor& a, Cursor& b, uint64_t x, uint64_t n, uint8_t* out) {
  while (n > 0) {
    uint64_t ra = 0, rb = 0;
    const uint8_t* pa = a.At(x, &ra);
    const uint8_t* pb = b.At(x, &rb);
    uint64_t m = std::min({ra, rb, n});
    if (pa && pb) {
      Xor2(out, pa, pb, m);
    } else if (pa || pb) {
      std::memcpy(out, pa ? pa : pb, m);
    } else {
      std::memset(out, 0, m);
    }
    x += m;
    out += m;
    n -= m;
  }
}

}  // namespace

uint64_t RangeBytes(std::span<const ByteRange> ranges) {
  uint64_t n = 0;
  for (const ByteRange& r : ranges) n += r.len;
  return n;
}

std::vector<ByteRange> UnionRanges(std::span<const std::vector<ByteRange>> lists, uint64_t limit) {
  std::vector<ByteRange> all;
  for (const auto& l : lists) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end(),
            [](const ByteRange& a, const ByteRange& b) { return a.offset < b.offset; });
  std::vector<ByteRange> out;
  for (const ByteRange& r : all) {
    uint64_t lo = r.offset, hi = std::min(r.offset + r.len, limit);
    if (hi <= lo) continue;
    if (!out.empty() && out.back().offset + out.back().len >= lo) {
      ByteRange& last = out.back();
      last.len = std::max(last.offset + last.len, hi) - last.offset;
    } else {
      out.push_back(ByteRange{lo, hi - lo});
    }
  }
  return out;
}

std::vector<ByteRange> MemberDelta(std::span<const memfs::Store::ImageDelta> stores) {
  std::vector<ByteRange> out;
  uint64_t off_from = 0, off_to = 0;
  for (const auto& d : stores) {
    if (off_from != off_to) break;
    for (const ByteRange& r : d.ranges) out.push_back(ByteRange{off_to + r.offset, r.len});
    off_from += d.from_size;
    off_to += d.to_size;
  }
  uint64_t total_from = 0, total_to = 0;
  for (const auto& d : stores) {
    total_from += d.from_size;
    total_to += d.to_size;
  }
  // From the first store whose offset moved (or the end of the shorter
  // member image) to the end of the longer one.
  uint64_t moved = std::min(off_from, off_to);
  uint64_t end = std::max(total_from, total_to);
  if (moved < end) out.push_back(ByteRange{moved, end - moved});
  std::vector<std::vector<ByteRange>> one{std::move(out)};
  return UnionRanges(one, end);
}

std::vector<ByteRange> StripeUnion(std::span<const std::vector<ByteRange>> member_ranges,
                                   std::span<const uint32_t> segments, uint64_t seg, uint64_t align) {
  if (seg == 0 || align == 0) return {};
  std::vector<std::vector<ByteRange>> pieces(1);
  for (size_t i = 0; i < member_ranges.size() && i < segments.size(); ++i) {
    const uint64_t lo_seg = uint64_t{segments[i]} * seg, hi_seg = lo_seg + seg;
    const auto& list = member_ranges[i];
    // The first range ending past the segment's start.
    auto it = std::partition_point(list.begin(), list.end(),
                                   [&](const ByteRange& r) { return r.offset + r.len <= lo_seg; });
    for (; it != list.end() && it->offset < hi_seg; ++it) {
      const uint64_t lo = std::max(it->offset, lo_seg) - lo_seg;
      const uint64_t hi = std::min(it->offset + it->len, hi_seg) - lo_seg;
      pieces[0].push_back(ByteRange{lo / align * align, std::min(seg, (hi + align - 1) / align * align) - lo / align * align});
    }
  }
  return UnionRanges(pieces, seg);
}

std::vector<ByteRange> InSegment(std::span<const ByteRange> u, uint32_t t, uint64_t seg) {
  std::vector<ByteRange> out;
  out.reserve(u.size());
  for (const ByteRange& r : u) out.push_back(ByteRange{uint64_t{t} * seg + r.offset, r.len});
  return out;
}

namespace {

// Calls piece(x, n, inside) for the consecutive pieces of `ranges` (sorted,
// disjoint), in order: inside when the piece lies in an `own` range.
template <class Fn>
void ForEachOwnPiece(std::span<const ByteRange> ranges, std::span<const ByteRange> own, Fn piece) {
  size_t oi = 0;
  for (const ByteRange& r : ranges) {
    uint64_t x = r.offset;
    const uint64_t end = r.offset + r.len;
    while (x < end) {
      while (oi < own.size() && own[oi].offset + own[oi].len <= x) ++oi;
      const bool inside = oi < own.size() && own[oi].offset <= x;
      const uint64_t n = (inside ? std::min(end, own[oi].offset + own[oi].len)
                                 : (oi < own.size() ? std::min(end, own[oi].offset) : end)) - x;
      piece(x, n, inside);
      x += n;
    }
  }
}

// Appends [p, p + n) to `out`, merged with the last extent where they touch
// (two holes, or adjacent bytes).
void Emit(std::vector<Extent>* out, const uint8_t* p, uint64_t n) {
  if (n == 0) return;
  if (!out->empty()) {
    Extent& last = out->back();
    if ((last.data == nullptr && p == nullptr) || (last.data != nullptr && p == last.data + last.len)) {
      last.len += static_cast<size_t>(n);
      return;
    }
  }
  out->push_back(Extent{p, static_cast<size_t>(n)});
}

// Image bytes [x, x + n) appended to `out` as extents (a hole past the
// image's end). Offsets never decrease between calls on one cursor.
void Slice(Cursor& c, uint64_t x, uint64_t n, std::vector<Extent>* out) {
  while (n > 0) {
    uint64_t run = 0;
    const uint8_t* p = c.At(x, &run);
    const uint64_t take = std::min(run, n);
    Emit(out, p, take);
    x += take;
    n -= take;
  }
}

}  // namespace

void PackDelta(std::span<const Extent> old_image, std::span<const Extent> new_image,
               std::span<const ByteRange> ranges, std::span<const ByteRange> own, uint8_t* out) {
  Cursor a(old_image), b(new_image);
  ForEachOwnPiece(ranges, own, [&](uint64_t x, uint64_t n, bool inside) {
    if (inside) {
      XorImages(a, b, x, n, out);  // old xor new
    } else {
      std::memset(out, 0, n);  // known equal: zeros
    }
    out += n;
  });
}

void DeltaInputs(std::span<const Extent> old_image, std::span<const Extent> new_image,
                 std::span<const ByteRange> ranges, std::span<const ByteRange> own, std::vector<Extent>* fresh,
                 std::vector<Extent>* old) {
  fresh->clear();
  old->clear();
  Cursor a(old_image), b(new_image);
  ForEachOwnPiece(ranges, own, [&](uint64_t x, uint64_t n, bool inside) {
    if (inside) {  // both images' bytes
      Slice(b, x, n, fresh);
      Slice(a, x, n, old);
    } else {  // known equal: nothing to add
      Emit(fresh, nullptr, n);
      Emit(old, nullptr, n);
    }
  });
}

PackedMap::PackedMap(std::vector<ByteRange> ranges) : ranges_(std::move(ranges)) {
  uint64_t sum = 0;
  prefix_.reserve(ranges_.size());
  for (const ByteRange& r : ranges_) prefix_.push_back(sum += r.len);
}

size_t PackedMap::Find(uint64_t packed) const {
  return static_cast<size_t>(std::upper_bound(prefix_.begin(), prefix_.end(), packed) - prefix_.begin());
}

void CopyUnchanged(std::span<const uint8_t> old_parity, const PackedMap& map, uint8_t* out,
                   uint64_t out_len) {
  auto copy = [&](uint64_t lo, uint64_t hi) {
    hi = std::min(hi, out_len);
    if (hi <= lo) return;
    uint64_t have = old_parity.size() > lo ? std::min<uint64_t>(old_parity.size(), hi) - lo : 0;
    if (have > 0) std::memcpy(out + lo, old_parity.data() + lo, have);
    if (lo + have < hi) std::memset(out + lo + have, 0, hi - lo - have);
  };
  uint64_t x = 0;
  for (const ByteRange& r : map.ranges()) {
    copy(x, r.offset);
    x = r.offset + r.len;
  }
  copy(x, out_len);
}

void CopyRanges(std::span<const uint8_t> old_parity, std::span<const ByteRange> ranges, uint8_t* out,
                uint64_t out_len) {
  for (const ByteRange& r : ranges) {
    uint64_t lo = r.offset, hi = std::min(r.offset + r.len, out_len);
    if (hi <= lo) continue;
    uint64_t have = old_parity.size() > lo ? std::min<uint64_t>(old_parity.size(), hi) - lo : 0;
    if (have > 0) std::memcpy(out + lo, old_parity.data() + lo, have);
    if (lo + have < hi) std::memset(out + lo + have, 0, hi - lo - have);
  }
}

std::vector<ByteRange> SubtractRanges(std::span<const ByteRange> a, std::span<const ByteRange> b) {
  std::vector<ByteRange> out;
  size_t j = 0;
  for (const ByteRange& r : a) {
    uint64_t x = r.offset, end = r.offset + r.len;
    while (j < b.size() && b[j].offset + b[j].len <= x) ++j;
    for (size_t k = j; x < end && k < b.size() && b[k].offset < end; ++k) {
      if (b[k].offset > x) out.push_back(ByteRange{x, b[k].offset - x});
      x = std::max(x, b[k].offset + b[k].len);
    }
    if (x < end) out.push_back(ByteRange{x, end - x});
  }
  return out;
}

void ApplyPacked(std::span<const uint8_t> old_parity, const PackedMap& map, uint64_t packed,
                 const uint8_t* data, uint64_t len, uint8_t* out, uint64_t out_len) {
  map.ForEach(packed, len, [&](uint64_t x, uint64_t p, uint64_t n) {
    const uint8_t* src = data + (p - packed);
    if (x >= out_len) return;
    n = std::min(n, out_len - x);
    uint64_t have = old_parity.size() > x ? std::min<uint64_t>(old_parity.size() - x, n) : 0;
    if (have > 0) Xor2(out + x, old_parity.data() + x, src, have);
    if (have < n) std::memcpy(out + x + have, src + have, n - have);
  });
}

}  // namespace dlckpt::codec

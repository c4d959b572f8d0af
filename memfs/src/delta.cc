// delta.cc — which bytes of an epoch's encoding image changed since another
// epoch (Store::Delta, Store::Diff; contract in dlckpt/memfs/memfs.h,
// "incremental encode"). The codec uses it to send only the changed bytes of
// an image to the spares (codec/src/delta.cc).
//
// How. Both images are extent lists into the same mapping. Copy-on-write
// never modifies a block of a committed epoch, so where both images read the
// same address at the same image offset their bytes are equal; everywhere
// else in the data area they count as changed. The metadata (header, file
// table, chunk table: a few KiB) differs every epoch in the header at least
// and lives in different version slots, so it is compared byte by byte in
// granules. A file that grew, shrank, appeared or vanished, or a chunk that
// recompressed to another stored size, moves every later byte of the image;
// those bytes then read from other addresses and count as changed: the delta
// applies only where the layout is stable, and stays exact.
//
// Thread safety: Diff is a pure function of its arguments; Delta takes the
// store's mutex through GetImage. Nothing here writes shared memory.
#include <algorithm>
#include <cstring>

#include "store_impl.h"

namespace dlckpt::memfs {

using namespace layout;  // NOLINT(google-build-using-namespace)

namespace {

constexpr uint64_t kMetaGranule = 256;

// Appends [lo, hi) to sorted ranges, merging with the last one if they touch.
void AddRange(std::vector<Store::ByteRange>* out, uint64_t lo, uint64_t hi) {
  if (hi <= lo) return;
  if (!out->empty() && out->back().offset + out->back().len >= lo) {
    Store::ByteRange& last = out->back();
    last.len = std::max(last.offset + last.len, hi) - last.offset;
    return;
  }
  out->push_back(Store::ByteRange{lo, hi - lo});
}

using Cursor = ExtentCursor;

// The image's metadata bytes (header, file table, chunk table), copied.
std::vector<uint8_t> Metadata(const Image& img) {
  if (img.size < sizeof(ImageHeader)) return {};
  ImageHeader h;
  CopyFromImage(img, 0, &h, sizeof h);
  uint64_t meta = std::min<uint64_t>(h.meta_bytes, img.size);
  std::vector<uint8_t> out(meta);
  CopyFromImage(img, 0, out.data(), out.size());
  return out;
}

// True if the file set, any file size or any chunk's stored size differ.
bool LayoutChanged(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size() || a.size() < sizeof(ImageHeader)) return true;
  ImageHeader ha, hb;
  std::memcpy(&ha, a.data(), sizeof ha);
  std::memcpy(&hb, b.data(), sizeof hb);
  if (ha.nfiles != hb.nfiles || ha.nchunks != hb.nchunks || ha.data_bytes != hb.data_bytes) return true;
  uint64_t head = sizeof(ImageHeader) + uint64_t{ha.nfiles} * sizeof(FileEntry);
  if (head + ha.nchunks * sizeof(ChunkEntry) > a.size()) return true;
  for (uint32_t i = 0; i < ha.nfiles; ++i) {
    FileEntry ea, eb;
    std::memcpy(&ea, a.data() + sizeof(ImageHeader) + i * sizeof(FileEntry), sizeof ea);
    std::memcpy(&eb, b.data() + sizeof(ImageHeader) + i * sizeof(FileEntry), sizeof eb);
    if (ea.size != eb.size || std::strncmp(ea.path, eb.path, sizeof ea.path) != 0) return true;
  }
  for (uint64_t c = 0; c < ha.nchunks; ++c) {
    ChunkEntry ca, cb;
    std::memcpy(&ca, a.data() + head + c * sizeof(ChunkEntry), sizeof ca);
    std::memcpy(&cb, b.data() + head + c * sizeof(ChunkEntry), sizeof cb);
    if (ca.stored != cb.stored) return true;
  }
  return false;
}

}  // namespace

Store::ImageDelta Store::Diff(const Image& from, const Image& to) {
  ImageDelta d;
  d.from_epoch = from.epoch;
  d.to_epoch = to.epoch;
  d.from_size = from.size;
  d.to_size = to.size;
  std::vector<uint8_t> ma = Metadata(from), mb = Metadata(to);
  d.layout_changed = LayoutChanged(ma, mb);
  const uint64_t common = std::min(from.size, to.size);
  const uint64_t end = std::max(from.size, to.size);

  // Metadata: granule by granule where both have the same metadata length,
  // else all of it.
  uint64_t data_start = std::max<uint64_t>(ma.size(), mb.size());
  if (ma.size() == mb.size()) {
    for (uint64_t g = 0; g < ma.size(); g += kMetaGranule) {
      uint64_t n = std::min<uint64_t>(kMetaGranule, ma.size() - g);
      if (std::memcmp(ma.data() + g, mb.data() + g, n) != 0) AddRange(&d.ranges, g, g + n);
    }
  } else {
    AddRange(&d.ranges, 0, std::min(data_start, end));
  }

  // Data: equal where both read the same address. Extents shorter than the
  // stated size (never, for images of GetImage) leave the rest changed.
  Cursor ca(from.extents), cb(to.extents);
  uint64_t x = data_start;
  while (x < common) {
    uint64_t ra = 0, rb = 0;
    const uint8_t* pa = ca.At(x, &ra);
    const uint8_t* pb = cb.At(x, &rb);
    if (pa == nullptr || pb == nullptr) break;
    uint64_t n = std::min({ra, rb, common - x});
    if (pa != pb) AddRange(&d.ranges, x, x + n);
    x += n;
  }
  AddRange(&d.ranges, x, common);
  AddRange(&d.ranges, common, end);
  for (const ByteRange& r : d.ranges) d.changed_bytes += r.len;
  return d;
}

Result<Store::ImageDelta> Store::Delta(uint64_t from, uint64_t to) {
  DLCKPT_ASSIGN_OR_RETURN(Image a, GetImage(from));
  DLCKPT_ASSIGN_OR_RETURN(Image b, GetImage(to));
  return Diff(a, b);
}

}  // namespace dlckpt::memfs

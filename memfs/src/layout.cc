// layout.cc — checks and checksums of the structs in layout.h.
//
// Contract: pure functions over bytes the caller provides (often in a store's
// mapping, which the caller keeps alive); thread-safe; nothing is written but
// the caller's out-parameters. LoadState reads a StateRecord with atomic
// loads: if a concurrent owner is rewriting it, its CRC does not match and
// StateValid says so. Failures are returned as text ("" means valid) or
// false, never thrown or logged; callers wrap them in a Status that names the
// store.
#include "layout.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "dlckpt/base/crc32c.h"
#include "dlckpt/memfs/memfs.h"

namespace dlckpt::memfs::layout {

std::string CheckCompression(uint32_t compression, uint32_t chunk_size, uint32_t permille,
                             uint32_t block_size) {
  if (compression == kCompressNone) {
    if (chunk_size != 0 || permille != 0) return "compression fields set without compression";
    return "";
  }
  if (compression != kCompressLz4) return "unknown compression " + std::to_string(compression);
  if (!PowerOfTwo(chunk_size) || chunk_size < 2ull * block_size || chunk_size > kMaxChunkSize) {
    return "chunk size " + std::to_string(chunk_size) +
           " is not a power of two in [2 blocks, 64 MiB]";
  }
  if (permille == 0 || permille > 1000) return "compression threshold out of (0, 1]";
  return "";
}

void CopyIdentity(char (&dst)[kIdentityBytes], std::string_view s) {
  std::memset(dst, 0, sizeof dst);
  std::memcpy(dst, s.data(), std::min(s.size(), sizeof dst - 1));
}

std::string IdentityString(const char (&src)[kIdentityBytes]) {
  return std::string(src, strnlen(src, sizeof src));
}

uint32_t GeometryCrc(const Geometry& g) {
  Geometry copy = g;
  copy.crc = 0;
  return Crc32c(&copy, sizeof copy);
}

uint32_t ImageHeaderCrc(const ImageHeader& h) {
  ImageHeader copy = h;
  copy.header_crc = 0;
  return Crc32c(&copy, sizeof copy);
}

uint64_t StateCrc(const StateRecord& r) { return Crc32c(&r, kStateWords * sizeof(uint64_t)); }

StateRecord LoadState(const StateRecord* src) {
  StateRecord r;
  auto* in = reinterpret_cast<const uint64_t*>(src);
  auto* out = reinterpret_cast<uint64_t*>(&r);
  out[7] = __atomic_load_n(&in[7], __ATOMIC_ACQUIRE);
  for (size_t i = 0; i < kStateWords; ++i) out[i] = __atomic_load_n(&in[i], __ATOMIC_ACQUIRE);
  return r;
}

bool StateValid(const StateRecord& r) { return r.crc == StateCrc(r); }

uint32_t LostCreateCrc(const LostCreate& l) {
  LostCreate c = l;
  c.crc = 0;
  return Crc32c(&c, sizeof c);
}

std::string CheckTables(const ImageHeader& h, const FileEntry* entries, const ChunkEntry* chunks,
                        uint64_t* blocks) {
  const bool compressed = h.compression != kCompressNone;
  const uint64_t bs = h.block_size, cs = h.chunk_size, nblocks = h.capacity / bs;
  if (h.meta_bytes != sizeof(ImageHeader) + uint64_t{h.nfiles} * sizeof(FileEntry) +
                          h.nchunks * sizeof(ChunkEntry)) {
    return "metadata size mismatch";
  }
  if (compressed ? h.nchunks > nblocks : h.nchunks != 0) return "bad chunk count";
  if (h.entries_crc != Crc32c(entries, uint64_t{h.nfiles} * sizeof(FileEntry))) {
    return "file table checksum mismatch";
  }
  if (h.chunks_crc != Crc32c(chunks, h.nchunks * sizeof(ChunkEntry))) {
    return "chunk table checksum mismatch";
  }
  const uint64_t max_size = compressed ? nblocks * cs : h.capacity;
  uint64_t logical = 0, data = 0, nb = 0, ci = 0;
  for (uint32_t i = 0; i < h.nfiles; ++i) {
    const FileEntry& e = entries[i];
    size_t len = strnlen(e.path, sizeof e.path);
    if (len == 0 || len > kMaxPath) return "bad path in entry " + std::to_string(i);
    if (i > 0 && std::strcmp(entries[i - 1].path, e.path) >= 0) return "entries unsorted";
    if (!S_ISREG(e.mode) && !(S_ISDIR(e.mode) && e.size == 0)) {
      return std::string(e.path) + ": bad mode";
    }
    if (e.size > max_size) return std::string(e.path) + ": size beyond capacity";
    if (h.epoch != 0 && e.damage_errno != 0) return std::string(e.path) + ": damaged in a committed version";
    logical += e.size;
    if (!compressed) {
      data += e.size;
      nb += BlocksFor(e.size, bs);
      continue;
    }
    for (uint64_t off = 0; off < e.size; off += cs, ++ci) {
      if (ci >= h.nchunks) return "chunk table too short";
      uint64_t clen = std::min(cs, e.size - off), stored = chunks[ci].stored;
      if (stored > clen || stored == 0 ||
          (stored < clen && BlocksFor(stored, bs) >= BlocksFor(clen, bs))) {
        return std::string(e.path) + ": bad chunk at offset " + std::to_string(off);
      }
      data += stored;
      nb += BlocksFor(stored, bs);
    }
  }
  if (ci != h.nchunks) return "chunk count mismatch";
  if (logical != h.logical_bytes || data != h.data_bytes) return "sizes do not add up";
  *blocks = nb;
  return "";
}

}  // namespace dlckpt::memfs::layout

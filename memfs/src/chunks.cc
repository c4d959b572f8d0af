// chunks.cc — LZ4 chunks of compressed stores (Store::Impl, see store_impl.h
// and "Compression" in dlckpt/memfs/memfs.h).
//
// Ownership: a Node's chunks and the blocks behind them belong to the working
// file set; a chunk changes representation (compressed <-> raw) only by
// taking fresh blocks and giving up the old ones through
// DropWorkingRefLocked, so committed copies stay intact. The scratch buffers
// (gather_, cbuf_, zeros_) and the one-chunk decompression cache (cache_,
// keyed by the chunk's first block) belong to the Impl.
//
// Thread safety: every function here expects mu_ held (the scratch buffers
// and the cache are shared by all callers).
//
// Failure: ENOSPC when the blocks a chunk needs are not there (nothing
// changes); EBADMSG naming the path and chunk offset for an LZ4 block that
// does not decompress. A compressed write that cannot reach `need` is undone
// completely (Undo/RollBackLocked), the chunk holding the old end of file
// included. A chunk that does not compress well enough simply stays raw.
#include <lz4.h>

#include <algorithm>
#include <cstring>

#include "dlckpt/base/crc32c.h"
#include "store_impl.h"

namespace dlckpt::memfs {

using namespace layout;  // NOLINT(google-build-using-namespace)

namespace {

// Incompressibility probe: three samples of kProbeBytes, for chunks of at
// least kProbeMinChunk bytes.
constexpr uint64_t kProbeBytes = 16 << 10;
constexpr uint64_t kProbeMinChunk = 8 * kProbeBytes;

}  // namespace

bool Store::Impl::UndoKeepsLocked(const Node& node, uint64_t bi) const {
  return undo_ != nullptr && undo_->node == &node && undo_->has_chunk && bi / cpb_ == undo_->chunk;
}

// The working copy stops using block `b` (entry `bi` of `node`).
void Store::Impl::DropWorkingRefLocked(const Node& node, uint64_t bi, uint32_t b) {
  if (compressed_ && UndoKeepsLocked(node, bi)) {
    undo_->kept.push_back(b);
  } else {
    blocks_.Release(b);
  }
}

// Blocks that dropping chunk ci would free now.
uint64_t Store::Impl::ReclaimableLocked(const Node& node, uint64_t ci) const {
  uint64_t first = ci * cpb_;
  if (ci >= node.chunks.size() || UndoKeepsLocked(node, first)) return 0;
  uint64_t n = 0;
  for (uint64_t i = first; i < first + ChunkEntries(node, ci); ++i) {
    uint32_t b = node.blocks[i];
    if (b != kNoBlock && blocks_.refs(b) == kRefWorking) ++n;
  }
  return n;
}

// Gives up every block of chunk ci; its entries become kNoBlock and it a
// raw, undecided chunk without bytes (the caller fills it at once).
void Store::Impl::DropChunkLocked(Node& node, uint64_t ci) {
  uint64_t first = ci * cpb_;
  for (uint64_t i = first; i < first + ChunkEntries(node, ci); ++i) {
    if (node.blocks[i] != kNoBlock) DropWorkingRefLocked(node, i, node.blocks[i]);
    node.blocks[i] = kNoBlock;
  }
  node.chunks[ci] = Chunk{};
}

// Copies `n` bytes into fresh blocks set as entries first, first + 1, ...
void Store::Impl::FillFreshLocked(Node& node, uint64_t first, const uint8_t* p, uint64_t n) {
  const uint64_t bs = geo_.block_size;
  for (uint64_t j = 0; j * bs < n; ++j) {
    uint32_t b = AllocBlockLocked();
    node.blocks[first + j] = b;
    std::memcpy(blocks_.Ptr(b), p + j * bs, std::min(bs, n - j * bs));
  }
}

// `n` bytes held by `blocks`: in place if the blocks are consecutive, else
// gathered into *buf.
const uint8_t* Store::Impl::ContiguousLocked(const uint32_t* blocks, uint64_t n,
                                             std::vector<uint8_t>* buf) const {
  const uint64_t bs = geo_.block_size, k = BlocksFor(n, bs);
  bool consecutive = true;
  for (uint64_t j = 1; j < k && consecutive; ++j) consecutive = blocks[j] == blocks[0] + j;
  if (consecutive) return blocks_.Ptr(blocks[0]);
  if (buf->size() < k * bs) buf->resize(k * bs);
  for (uint64_t j = 0; j < k; ++j) {
    std::memcpy(buf->data() + j * bs, blocks_.Ptr(blocks[j]), std::min(bs, n - j * bs));
  }
  return buf->data();
}

// Decompresses the `stored`-byte LZ4 block held in `blocks` into out[len].
Status Store::Impl::DecompressLocked(const uint32_t* blocks, uint64_t stored, uint8_t* out,
                                     uint64_t len, const std::string& what) {
  const uint8_t* src = ContiguousLocked(blocks, stored, &gather_);
  int r = LZ4_decompress_safe(reinterpret_cast<const char*>(src), reinterpret_cast<char*>(out),
                              static_cast<int>(stored), static_cast<int>(len));
  if (r < 0 || static_cast<uint64_t>(r) != len) {
    return Status::Corruption(what + ": damaged compressed data (" + std::to_string(stored) +
                              " bytes do not decompress to " + std::to_string(len) + ")");
  }
  return Status::OK();
}

// The uncompressed bytes of compressed chunk ci, through a one-chunk cache
// keyed by the chunk's first block (blocks of a chunk stream never change
// while allocated; AllocBlockLocked and LoadView invalidate the key).
Result<const uint8_t*> Store::Impl::DecompressedLocked(const Node& node, uint64_t ci) {
  const Chunk& c = node.chunks[ci];
  const uint32_t* blocks = &node.blocks[ci * cpb_];
  uint64_t len = ChunkLen(node, ci);
  if (cache_block_ == blocks[0] && cache_stored_ == c.stored && cache_len_ == len) {
    return cache_.data();
  }
  cache_block_ = kNoBlock;
  if (cache_.size() < geo_.chunk_size) cache_.resize(geo_.chunk_size);
  DLCKPT_RETURN_IF_ERROR(DecompressLocked(blocks, c.stored, cache_.data(), len,
                                          Where(node.path) + ": chunk at offset " +
                                              std::to_string(ci * geo_.chunk_size)));
  cache_block_ = blocks[0];
  cache_stored_ = c.stored;
  cache_len_ = len;
  return cache_.data();
}

// Compresses in[0, len) into cbuf_ if that is worth it: returns the LZ4
// block's size, or 0 to keep the chunk raw (it would not fill at most
// threshold * its raw blocks and fewer blocks than raw, or the probe says it
// is incompressible).
uint32_t Store::Impl::CompressLocked(const uint8_t* in, uint64_t len) {
  const uint64_t bs = geo_.block_size, nraw = BlocksFor(len, bs);
  if (nraw < 2) return 0;
  uint64_t max_blocks = std::min(nraw - 1, nraw * geo_.threshold_permille / 1000);
  if (max_blocks == 0) return 0;
  if (cbuf_.empty()) cbuf_.resize(static_cast<size_t>(LZ4_compressBound(static_cast<int>(geo_.chunk_size))));
  auto* out = reinterpret_cast<char*>(cbuf_.data());
  if (len >= kProbeMinChunk) {
    // Three samples (start, middle, end): if they do not shrink to halfway
    // between the threshold and 1, do not try the whole chunk.
    uint64_t sampled = 0;
    for (uint64_t k = 0; k < 3; ++k) {
      uint64_t at = (len - kProbeBytes) * k / 2;
      int r = LZ4_compress_default(reinterpret_cast<const char*>(in + at), out,
                                   static_cast<int>(kProbeBytes), static_cast<int>(cbuf_.size()));
      sampled += r > 0 ? static_cast<uint64_t>(r) : kProbeBytes;
    }
    if (sampled * 2000 > 3 * kProbeBytes * (1000 + geo_.threshold_permille)) return 0;
  }
  // The unbounded output path: 2-3x faster than LZ4's bounded one on
  // compressible data, which is what passes the probe.
  int r = LZ4_compress_default(reinterpret_cast<const char*>(in), out, static_cast<int>(len),
                               static_cast<int>(cbuf_.size()));
  if (r <= 0 || BlocksFor(static_cast<uint64_t>(r), bs) > max_blocks) return 0;
  return static_cast<uint32_t>(r);
}

// Judges raw, undecided chunk ci (and computes its CRC): compresses it into
// fewer blocks if that is worth it and the blocks are there.
void Store::Impl::TryCompressLocked(Node& node, uint64_t ci) {
  Chunk& c = node.chunks[ci];
  if (c.compressed || c.decided) return;
  uint64_t len = ChunkLen(node, ci), first = ci * cpb_;
  const uint8_t* in = ContiguousLocked(&node.blocks[first], len, &gather_);
  c.crc = Crc32c(in, len);
  c.crc_valid = true;
  c.decided = true;
  uint32_t n = CompressLocked(in, len);
  if (n == 0 || BlocksFor(n, geo_.block_size) > blocks_.free() + ReclaimableLocked(node, ci)) return;
  uint32_t crc = c.crc;
  DropChunkLocked(node, ci);
  FillFreshLocked(node, first, cbuf_.data(), n);
  node.chunks[ci] = Chunk{n, crc, true, true, true};
}

// Writes a whole chunk ci (chunk_size bytes: `data`, or zeros if null)
// straight from the buffer, compressed if worth it. False if the blocks are
// not there (nothing changed).
bool Store::Impl::StoreWholeChunkLocked(Node& node, uint64_t ci, const uint8_t* data) {
  const uint64_t cs = geo_.chunk_size;
  if (data == nullptr) {
    if (zeros_.size() < cs) zeros_.assign(cs, 0);
    data = zeros_.data();
  }
  uint32_t crc = Crc32c(data, cs);
  uint32_t n = CompressLocked(data, cs);
  uint64_t need = n ? BlocksFor(n, geo_.block_size) : cpb_;
  if (need > blocks_.free() + ReclaimableLocked(node, ci)) return false;
  uint64_t first = ci * cpb_;
  if (ci < node.chunks.size()) DropChunkLocked(node, ci);
  if (node.blocks.size() < first + cpb_) node.blocks.resize(first + cpb_, kNoBlock);
  FillFreshLocked(node, first, n ? cbuf_.data() : data, n ? n : cs);
  node.size = std::max(node.size, (ci + 1) * cs);
  if (node.chunks.size() < ci + 1) node.chunks.resize(ci + 1);
  node.chunks[ci] = Chunk{n, crc, n != 0, true, true};
  node.crc_valid = false;
  node.mtime_ns = env_->WallNanos();
  return true;
}

// Compressed chunk ci becomes raw (same bytes) in fresh blocks; ENOSPC if
// they are not there (nothing changed).
Status Store::Impl::ExpandLocked(Node& node, uint64_t ci) {
  uint64_t len = ChunkLen(node, ci), nraw = BlocksFor(len, geo_.block_size);
  uint64_t avail = blocks_.free() + ReclaimableLocked(node, ci);
  if (nraw > avail) {
    return Status::NoSpace(Where(node.path) + ": store full (decompressing the chunk at offset " +
                           std::to_string(ci * geo_.chunk_size) + " needs " +
                           std::to_string(nraw) + " blocks, " + std::to_string(avail) +
                           " available)");
  }
  DLCKPT_ASSIGN_OR_RETURN(const uint8_t* raw, DecompressedLocked(node, ci));
  Chunk keep = node.chunks[ci];
  DropChunkLocked(node, ci);
  FillFreshLocked(node, ci * cpb_, raw, len);  // cache_ stays intact while blocks are allocated
  node.chunks[ci] = Chunk{0, keep.crc, false, keep.crc_valid, false};
  return Status::OK();
}

// Compressed stores: the write of [off, end) (zeros below off from the old
// end of file, src or zeros from off). Chunk by chunk: whole chunks go
// straight from the buffer; others are written raw (a compressed chunk is
// dropped if all its bytes are overwritten, else decompressed first) and
// compressed when the write reaches their end. If less than up to `need`
// is written, everything is undone (the chunk holding the old end of file
// included) and the result is ENOSPC; otherwise the byte count from off.
Result<size_t> Store::Impl::WriteCompressedLocked(Node& node, const uint8_t* src, uint64_t off,
                                                  uint64_t end, uint64_t need) {
  const uint64_t cs = geo_.chunk_size;
  Undo u;
  u.node = &node;
  u.size = node.size;
  u.chunk = node.size / cs;
  u.has_chunk = node.size % cs != 0;
  if (u.has_chunk) {
    u.saved = node.chunks[u.chunk];
    u.saved_blocks.assign(node.blocks.begin() + static_cast<long>(u.chunk * cpb_), node.blocks.end());
  }
  undo_ = &u;
  Result<uint64_t> reached = WriteChunksLocked(node, src, off, end);
  undo_ = nullptr;
  if (!reached.ok() || *reached < need) {
    RollBackLocked(node, u);
    if (!reached.ok()) return reached.status();
    return FullLocked(node);
  }
  for (uint32_t b : u.kept) blocks_.Release(b);
  return static_cast<size_t>(*reached - off);
}

Result<uint64_t> Store::Impl::WriteChunksLocked(Node& node, const uint8_t* src, uint64_t off, uint64_t end) {
  const uint64_t cs = geo_.chunk_size;
  uint64_t pos = std::min(off, node.size);
  while (pos < end) {
    uint64_t ci = pos / cs, c0 = ci * cs, c1 = c0 + cs, b = std::min(end, c1);
    if (pos == c0 && b == c1 && (b <= off || pos >= off)) {
      const uint8_t* data = (b <= off || src == nullptr) ? nullptr : src + (pos - off);
      if (StoreWholeChunkLocked(node, ci, data)) {
        pos = c1;
        continue;
      }
    }
    if (ci < node.chunks.size() && node.chunks[ci].compressed) {
      if (pos == c0 && b >= c0 + ChunkLen(node, ci)) {
        // Every byte of the chunk is overwritten: no need to decompress.
        if (BlocksFor(b - c0, geo_.block_size) > blocks_.free() + ReclaimableLocked(node, ci)) {
          return pos;
        }
        DropChunkLocked(node, ci);
      } else {
        Status s = ExpandLocked(node, ci);
        if (s.code() == ENOSPC) return pos;
        DLCKPT_RETURN_IF_ERROR(s);
      }
    }
    uint64_t r = WriteRangeLocked(node, src, off, pos, b, pos + 1);
    if (r < b) return r;
    pos = b;
    if (b == c1) TryCompressLocked(node, ci);
  }
  return pos;
}

// Restores the file as it was before the write that `u` journaled.
void Store::Impl::RollBackLocked(Node& node, const Undo& u) {
  auto saved = [&](uint32_t b) {
    return std::find(u.saved_blocks.begin(), u.saved_blocks.end(), b) != u.saved_blocks.end();
  };
  uint64_t first = u.chunk * cpb_;
  for (uint64_t i = first; i < node.blocks.size(); ++i) {
    uint32_t b = node.blocks[i];
    if (b != kNoBlock && !saved(b)) blocks_.Release(b);
  }
  for (uint32_t b : u.kept) {
    if (!saved(b)) blocks_.Release(b);
  }
  node.blocks.resize(first);
  node.blocks.insert(node.blocks.end(), u.saved_blocks.begin(), u.saved_blocks.end());
  node.chunks.resize(u.chunk);
  if (u.has_chunk) node.chunks.push_back(u.saved);
  node.size = u.size;
}

}  // namespace dlckpt::memfs

// blocks.cc — the raw data path of a store's working files: reading, writing
// with copy-on-write, truncating, and file CRCs computed while writing
// (Store::Impl, see store_impl.h; the blocks themselves are BlockAllocator's,
// block_allocator.h).
//
// Ownership: a Node's block list holds one working reference (kRefWorking)
// per block. Only the owner allocates. A block referenced by a committed
// epoch (kRefFrozen) is never written: a write into it copies the block first
// (copy-on-write) and drops the working reference to the old one.
//
// Thread safety: every function here expects mu_ held.
//
// Failure: ENOSPC naming the store and path when blocks run out. Writes are
// counted before any block is touched, so a failed write changes nothing and
// a partial one stops at a block boundary; TruncateLocked extends
// all-or-nothing. AllocBlockLocked is called only when a block is free (see
// BlockAllocator::Allocate).
// In compressed stores reads may fail with EBADMSG (a damaged LZ4 block).
#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include "dlckpt/base/crc32c.h"
#include "store_impl.h"

namespace dlckpt::memfs {

using namespace layout;  // NOLINT(google-build-using-namespace)

uint32_t Store::Impl::AllocBlockLocked() {
  uint32_t b = blocks_.Allocate();
  if (b == cache_block_) cache_block_ = kNoBlock;  // the cached chunk's block is reused
  return b;
}

Result<size_t> Store::Impl::ReadAtLocked(const Node& node, uint8_t* out, size_t len, uint64_t off) {
  if (off >= node.size) return size_t{0};
  size_t n = static_cast<size_t>(std::min<uint64_t>(len, node.size - off));
  const uint64_t bs = geo_.block_size;
  size_t done = 0;
  while (done < n) {
    uint64_t pos = off + done;
    if (compressed_) {
      uint64_t ci = pos / geo_.chunk_size;
      if (node.chunks[ci].compressed) {
        DLCKPT_ASSIGN_OR_RETURN(const uint8_t* raw, DecompressedLocked(node, ci));
        uint64_t co = pos - ci * geo_.chunk_size;
        size_t piece = static_cast<size_t>(std::min<uint64_t>(ChunkLen(node, ci) - co, n - done));
        std::memcpy(out + done, raw + co, piece);
        done += piece;
        continue;
      }
    }
    uint64_t bi = pos / bs, bo = pos % bs;
    size_t piece = static_cast<size_t>(std::min<uint64_t>(bs - bo, n - done));
    std::memcpy(out + done, blocks_.Ptr(node.blocks[bi]) + bo, piece);
    done += piece;
  }
  return n;
}

// The largest size a file may have: a compressed chunk fills one block at
// least, so a compressed store holds at most nblocks chunks.
uint64_t Store::Impl::MaxFileSize() const {
  return compressed_ ? geo_.nblocks * geo_.chunk_size : geo_.capacity;
}

// Writes `len` bytes of `src` (zeros if null) at `off`, zero-filling any gap
// between the old end of file and `off`. Writes as much as fits: returns the
// count written, or ENOSPC if nothing fits. Never leaves a partial block
// allocation behind.
Result<size_t> Store::Impl::WriteAtLocked(Node& node, const uint8_t* src, size_t len, uint64_t off) {
  if (len == 0) return size_t{0};
  if (S_ISDIR(node.mode)) return Status::Error(EISDIR, Where(node.path) + ": is a directory");
  const uint64_t limit = MaxFileSize();
  if (off >= limit) {
    return Status::NoSpace(Where(node.path) + ": offset " + std::to_string(off) +
                           " beyond the store's capacity");
  }
  uint64_t end = std::min<uint64_t>(off + std::min<uint64_t>(len, limit), limit);
  if (compressed_) return WriteCompressedLocked(node, src, off, end, off + 1);
  uint64_t reached = WriteRangeLocked(node, src, off, std::min(off, node.size), end, off + 1);
  if (reached <= off) return FullLocked(node);
  return static_cast<size_t>(reached - off);
}

Status Store::Impl::FullLocked(const Node& node) const {
  return Status::NoSpace(Where(node.path) + ": store full (" + std::to_string(geo_.capacity) +
                         " bytes, " + std::to_string(blocks_.free()) + " blocks free)");
}

// Writes file positions [from, to) (from <= size) block by block: bytes
// below `off` are zeros, the others src[pos - off] (zeros if src is null).
// Counts the blocks first and writes only up to the first block that does
// not fit, and nothing at all if that end would be below `need`. Returns
// the position reached. Compressed stores: no compressed chunk may overlap
// the range; the chunks written become raw and undecided.
uint64_t Store::Impl::WriteRangeLocked(Node& node, const uint8_t* src, uint64_t off,
                                       uint64_t from, uint64_t to, uint64_t need) {
  const uint64_t bs = geo_.block_size;
  uint64_t budget = blocks_.free();
  uint64_t first_b = from / bs, last_b = (to - 1) / bs;
  uint64_t end = to;
  for (uint64_t b = first_b; b <= last_b; ++b) {
    bool fresh = b >= node.blocks.size() || node.blocks[b] == kNoBlock ||
                 (blocks_.refs(node.blocks[b]) & kRefFrozen);
    if (!fresh) continue;
    if (budget == 0) {
      end = b * bs;
      break;
    }
    budget--;
  }
  if (end < need || end <= from) return from;
  for (uint64_t pos = from; pos < end;) {
    uint64_t bi = pos / bs, bo = pos % bs;
    uint64_t piece = std::min(bs - bo, end - pos);
    uint8_t* blk;
    if (bi >= node.blocks.size()) {
      uint32_t b = AllocBlockLocked();
      node.blocks.push_back(b);
      blk = blocks_.Ptr(b);
    } else if (node.blocks[bi] == kNoBlock) {
      // A dropped compressed chunk: its old bytes are all being overwritten.
      node.blocks[bi] = AllocBlockLocked();
      blk = blocks_.Ptr(node.blocks[bi]);
    } else if (blocks_.refs(node.blocks[bi]) & kRefFrozen) {
      // Copy-on-write: the committed bytes stay where they are.
      uint32_t old = node.blocks[bi];
      uint32_t b = AllocBlockLocked();
      blk = blocks_.Ptr(b);
      if (piece < bs) std::memcpy(blk, blocks_.Ptr(old), bs);
      node.blocks[bi] = b;
      ShadowLocked(node, bi, old);
    } else {
      blk = blocks_.Ptr(node.blocks[bi]);
    }
    // [pos, pos + piece): zeros up to zero_end (the hole below `off`, or
    // everything when src is null), then src's bytes.
    FileNode::BlockCrc* c = compressed_ ? nullptr : CrcToExtendLocked(node, bi, bo);
    uint32_t crc = c ? c->crc : 0;
    const uint64_t zero_end = src ? std::min(std::max(pos, off), pos + piece) : pos + piece;
    if (zero_end > pos) {
      std::memset(blk + bo, 0, zero_end - pos);
      if (c) crc = Crc32c(blk + bo, zero_end - pos, crc);
    }
    if (pos + piece > zero_end) {
      uint8_t* d = blk + bo + (zero_end - pos);
      const uint8_t* from_src = src + (zero_end - off);
      const uint64_t n = pos + piece - zero_end;
      if (c) {
        crc = Crc32cCopy(d, from_src, n, crc);
      } else {
        std::memcpy(d, from_src, n);
      }
    }
    if (c) *c = {crc, static_cast<uint32_t>(bo + piece)};
    pos += piece;
    if (pos > node.size) node.size = pos;
  }
  if (compressed_) {
    const uint64_t cs = geo_.chunk_size;
    node.chunks.resize(BlocksFor(node.size, cs));
    for (uint64_t ci = from / cs; ci <= (end - 1) / cs; ++ci) {
      node.chunks[ci].decided = false;
      node.chunks[ci].crc_valid = false;
    }
  }
  node.crc_valid = false;
  node.mtime_ns = env_->WallNanos();
  return end;
}

Status Store::Impl::TruncateLocked(Node& node, uint64_t size) {
  if (size > node.size) {
    // Extend with zeros; all-or-nothing.
    uint64_t old = node.size;
    if (compressed_) {
      if (size > MaxFileSize()) return TooBigLocked(node, size);
      return WriteCompressedLocked(node, nullptr, old, size, size).status();
    }
    DLCKPT_ASSIGN_OR_RETURN(size_t n, WriteAtLocked(node, nullptr, size - old, old));
    if (old + n < size) {
      // Undo the partial extension.
      DLCKPT_RETURN_IF_ERROR(ShrinkLocked(node, old));
      return TooBigLocked(node, size);
    }
    return Status::OK();
  }
  if (size < node.size) DLCKPT_RETURN_IF_ERROR(ShrinkLocked(node, size));
  node.mtime_ns = env_->WallNanos();
  return Status::OK();
}

Status Store::Impl::TooBigLocked(const Node& node, uint64_t size) const {
  return Status::NoSpace(Where(node.path) + ": store full, cannot extend to " +
                         std::to_string(size) + " bytes");
}

// Cuts the file to `size` bytes. Cannot fail in an uncompressed store; in a
// compressed one, a cut inside a compressed chunk decompresses it (ENOSPC).
Status Store::Impl::ShrinkLocked(Node& node, uint64_t size) {
  const uint64_t cs = geo_.chunk_size;
  if (compressed_ && size % cs != 0 && node.chunks[size / cs].compressed) {
    DLCKPT_RETURN_IF_ERROR(ExpandLocked(node, size / cs));
  }
  uint64_t keep = BlocksFor(size, geo_.block_size);
  for (uint64_t i = keep; i < node.blocks.size(); ++i) {
    if (node.blocks[i] != kNoBlock) ShadowLocked(node, i, node.blocks[i]);
  }
  node.blocks.resize(keep);
  node.size = size;
  node.crc_valid = false;
  if (node.block_crcs.size() > keep) node.block_crcs.resize(keep);
  if (compressed_) {
    node.chunks.resize(BlocksFor(size, cs));
    if (size % cs != 0) {
      node.chunks.back().decided = false;
      node.chunks.back().crc_valid = false;
    }
  }
  return Status::OK();
}

// CRC while writing: a write is about to put bytes at [bo, ...) of block
// `bi` of `node`. Returns the block's known CRC prefix when the write
// continues it, or a new empty one when the write starts the block: the
// caller extends it with the bytes while they are in cache (Crc32cCopy).
// Otherwise null: the prefix stays if the write lies beyond it, and is
// forgotten if the write changes bytes inside it.
FileNode::BlockCrc* Store::Impl::CrcToExtendLocked(Node& node, uint64_t bi, uint64_t bo) {
  if (node.block_crcs.size() <= bi) node.block_crcs.resize(bi + 1);
  FileNode::BlockCrc& c = node.block_crcs[bi];
  if (bo == c.len) return &c;
  if (bo == 0 || bo < c.len) c = {};
  return bo == 0 ? &c : nullptr;
}

// The CRC32C of a file's bytes. Uncompressed stores: from the blocks' CRCs
// kept while writing, reading (and counting in crc_reread_bytes_) only the
// bytes they do not cover. Compressed stores: from the chunks' CRCs,
// compressing (or judging) the chunks still undecided first.
Result<uint32_t> Store::Impl::NodeCrcLocked(Node& node) {
  if (!compressed_) {
    const uint64_t bs = geo_.block_size;
    uint32_t crc = 0;
    uint64_t left = node.size;
    for (uint64_t i = 0; i < node.blocks.size(); ++i) {
      uint64_t n = std::min<uint64_t>(left, bs);
      // A prefix longer than the block's bytes (the file was cut inside it) is not used.
      FileNode::BlockCrc known;
      if (i < node.block_crcs.size() && node.block_crcs[i].len <= n) known = node.block_crcs[i];
      uint32_t bc = known.crc;
      if (known.len < n) {
        bc = Crc32c(blocks_.Ptr(node.blocks[i]) + known.len, n - known.len, bc);
        crc_reread_bytes_ += n - known.len;
      }
      crc = Crc32cCombine(crc, bc, n);
      left -= n;
    }
    return crc;
  }
  uint32_t crc = 0;
  for (uint64_t ci = 0; ci < node.chunks.size(); ++ci) {
    Chunk& c = node.chunks[ci];
    uint64_t len = ChunkLen(node, ci);
    if (!c.compressed && !c.decided) TryCompressLocked(node, ci);
    if (!c.crc_valid) {
      const uint8_t* raw;
      if (c.compressed) {
        DLCKPT_ASSIGN_OR_RETURN(raw, DecompressedLocked(node, ci));
      } else {
        raw = ContiguousLocked(&node.blocks[ci * cpb_], len, &gather_);
      }
      c.crc = Crc32c(raw, len);
      c.crc_valid = true;
    }
    crc = Crc32cCombine(crc, c.crc, len);
  }
  return crc;
}

// ---- equal rewrites ------------------------------------------------------------------------
//
// A checkpoint file rewritten whole (O_TRUNC, or from offset 0 over its
// committed blocks) gets new blocks even where its bytes did not change, and
// the incremental encode, which compares block addresses, would count them
// all as changed. So a committed block that leaves a file (copy-on-write, a
// cut) waits in FileNode::shadow until the next commit, which puts it back
// where the new block holds the same bytes. The bytes are compared only where
// the new block's CRC, computed while writing, covers it and equals the old
// block's; the old block's CRC is its prefix from when it was written, or is
// computed then (files loaded from a committed version).

void Store::Impl::ShadowLocked(Node& node, uint64_t bi, uint32_t b) {
  if (compressed_ || !(blocks_.refs(b) & kRefFrozen)) {
    DropWorkingRefLocked(node, bi, b);
    return;
  }
  if (node.shadow.size() <= bi) node.shadow.resize(bi + 1);
  FileNode::Shadow& s = node.shadow[bi];
  if (s.block != kNoBlock) blocks_.Release(s.block);  // not reached: one committed block per entry
  s.block = b;
  s.crc = bi < node.block_crcs.size() ? node.block_crcs[bi] : FileNode::BlockCrc{};
}

void Store::Impl::KeepEqualBlocksLocked(Node& node) {
  const uint64_t bs = geo_.block_size;
  for (uint64_t i = 0; i < node.shadow.size(); ++i) {
    FileNode::Shadow& s = node.shadow[i];
    if (s.block == kNoBlock) continue;
    if (i < node.blocks.size() && i * bs < node.size && node.blocks[i] != kNoBlock &&
        !(blocks_.refs(node.blocks[i]) & kRefFrozen)) {
      const uint32_t b = node.blocks[i];
      const uint64_t n = std::min<uint64_t>(bs, node.size - i * bs);
      const FileNode::BlockCrc now = i < node.block_crcs.size() ? node.block_crcs[i] : FileNode::BlockCrc{};
      if (now.len == n) {
        const uint32_t old_crc = s.crc.len == n ? s.crc.crc : Crc32c(blocks_.Ptr(s.block), n, 0);
        if (old_crc == now.crc && std::memcmp(blocks_.Ptr(b), blocks_.Ptr(s.block), n) == 0) {
          node.blocks[i] = s.block;  // with the working reference the shadow held
          blocks_.Release(b);
          s.block = kNoBlock;
          ++equal_blocks_kept_;
          continue;
        }
      }
    }
    blocks_.Release(s.block);
    s.block = kNoBlock;
  }
  node.shadow.clear();
}

void Store::Impl::DropShadowLocked(Node& node) {
  for (const FileNode::Shadow& s : node.shadow) {
    if (s.block != kNoBlock) blocks_.Release(s.block);
  }
  node.shadow.clear();
}

void Store::Impl::DropAllShadowsLocked() {
  for (auto& [path, node] : files_) DropShadowLocked(*node);
  for (auto& h : handles_) {
    if (h.node) DropShadowLocked(*h.node);
  }
}

}  // namespace dlckpt::memfs

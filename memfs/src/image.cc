// image.cc — the encoding view of a committed epoch (VersionImage, see
// image.h; CopyFromImage), and the Store::Impl methods built on it: GetImage,
// Verify, VerifyFile and CheckSlots (see store_impl.h and "Image" in
// dlckpt/memfs/memfs.h).
//
// Ownership: an Image's extents point into the store's mapping; they stay
// valid while the Store object lives and the epoch stays committed. Nothing
// here writes shared memory.
//
// Thread safety: GetImage, Verify, VerifyFile and CheckSlots take mu_;
// read-only attachers may call them while the owner runs (the version is
// parsed and checked first, and a committed version is never rewritten while
// published).
//
// Failure: ENOENT for an epoch that is not committed (or a file not in the
// view); EBADMSG naming the store, epoch, file (and chunk offset) for a
// damaged version, a checksum mismatch or an LZ4 block that does not
// decompress.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "dlckpt/base/crc32c.h"
#include "image.h"
#include "store_impl.h"

namespace dlckpt::memfs {

using namespace layout;  // NOLINT(google-build-using-namespace)

namespace {

std::string Hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

}  // namespace

Status Store::Impl::Verify(uint64_t epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_ASSIGN_OR_RETURN(Version v, versions_.Committed(epoch));
  return VerifyVersionLocked(v);
}

Status Store::Impl::VerifyVersionLocked(const Version& v) {
  return images_.Verify(v, [this](const uint32_t* blocks, uint64_t stored, uint8_t* out,
                                  uint64_t len, const std::string& what) {
    return DecompressLocked(blocks, stored, out, len, what);
  });
}

Status Store::Impl::CheckSlots() {
  std::lock_guard<std::mutex> lock(mu_);
  return versions_.CheckPublished();
}

Result<uint64_t> Store::Impl::VerifyFile(std::string_view path) {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_RETURN_IF_ERROR(CheckPath(path));
  auto it = files_.find(path);
  if (it == files_.end()) return Status::NotFound(Where(path) + ": no such file");
  const Node& node = *it->second;
  uint64_t epoch = 0;
  uint32_t want = 0;
  if (!owner_ && view_epoch_ != 0) {
    epoch = view_epoch_;
    want = node.crc;
  } else {
    // Working files: the committed version still holding exactly these
    // blocks (the file is unchanged since that commit) vouches for them.
    DLCKPT_ASSIGN_OR_RETURN(StateRecord s, versions_.Current());
    for (auto [slot, e] : {std::pair{s.pending_slot, s.pending_epoch}, std::pair{s.acked_slot, s.acked_epoch}}) {
      if (e == 0) continue;
      DLCKPT_ASSIGN_OR_RETURN(Version v, versions_.ParseSlot(slot, e));
      FileMap committed = versions_.NodesFrom(v);
      auto c = committed.find(path);
      if (c == committed.end() || c->second->size != node.size || c->second->blocks != node.blocks) {
        continue;
      }
      bool same_chunks = c->second->chunks.size() == node.chunks.size();
      for (size_t i = 0; same_chunks && i < node.chunks.size(); ++i) {
        same_chunks = c->second->chunks[i].compressed == node.chunks[i].compressed &&
                      c->second->chunks[i].stored == node.chunks[i].stored;
      }
      if (!same_chunks) continue;
      epoch = e;
      want = c->second->crc;
      break;
    }
    if (epoch == 0) return uint64_t{0};
  }
  std::vector<uint8_t> buf(std::min<uint64_t>(node.size, 1u << 20));
  uint32_t crc = 0;
  for (uint64_t off = 0; off < node.size;) {
    DLCKPT_ASSIGN_OR_RETURN(size_t n, ReadAtLocked(node, buf.data(), buf.size(), off));
    if (n == 0) break;
    crc = Crc32c(buf.data(), n, crc);
    off += n;
  }
  if (crc != want) {
    return Status::Corruption("store " + name() + " epoch " + std::to_string(epoch) + ": " +
                              std::string(path) + ": checksum mismatch (stored " + Hex(want) +
                              ", computed " + Hex(crc) + ")");
  }
  return epoch;
}

Result<Image> Store::Impl::GetImage(uint64_t epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_ASSIGN_OR_RETURN(Version v, versions_.Committed(epoch));
  return images_.Extents(v);
}

// ---- VersionImage -------------------------------------------------------------------

VersionImage::VersionImage(std::string name, const BlockAllocator* blocks)
    : name_(std::move(name)), blocks_(blocks) {}

void VersionImage::SetGeometry(const Geometry& g) {
  block_size_ = g.block_size;
  chunk_size_ = g.chunk_size;
}

Result<Image> VersionImage::Extents(const Version& v) const {
  Image img;
  img.epoch = v.epoch;
  const uint64_t head = sizeof(ImageHeader) + uint64_t{v.hdr->nfiles} * sizeof(FileEntry);
  img.extents.push_back(Extent{reinterpret_cast<const uint8_t*>(v.hdr), head});
  if (v.hdr->nchunks > 0) {
    img.extents.push_back(Extent{reinterpret_cast<const uint8_t*>(v.chunks),
                                 v.hdr->nchunks * sizeof(ChunkEntry)});
  }
  img.size = v.hdr->meta_bytes;
  Status walked = ForEachPiece(v, [&](const Piece& pc) {
    uint64_t left = pc.stored;
    for (uint64_t k = 0; left > 0; ++k) {
      uint64_t n = std::min<uint64_t>(left, block_size_);
      const uint8_t* p = blocks_->Ptr(pc.blocks[k]);
      Extent& last = img.extents.back();
      if (last.data + last.len == p) {
        last.len += n;
      } else {
        img.extents.push_back(Extent{p, n});
      }
      img.size += n;
      left -= n;
    }
    return Status::OK();
  });
  DLCKPT_RETURN_IF_ERROR(walked);
  return img;
}

template <class Fn>
Status VersionImage::ForEachPiece(const Version& v, Fn&& fn) const {
  uint64_t bi = 0, ci = 0;
  for (uint32_t i = 0; i < v.hdr->nfiles; ++i) {
    const FileEntry& e = v.entries[i];
    if (!v.chunks) {
      if (e.size > 0) DLCKPT_RETURN_IF_ERROR(fn(Piece{i, 0, e.size, e.size, 0, v.blocks + bi}));
      bi += BlocksFor(e.size, block_size_);
      continue;
    }
    for (uint64_t off = 0; off < e.size; off += chunk_size_, ++ci) {
      uint64_t len = std::min<uint64_t>(chunk_size_, e.size - off);
      const ChunkEntry& ce = v.chunks[ci];
      DLCKPT_RETURN_IF_ERROR(fn(Piece{i, off, len, ce.stored, ce.crc32c, v.blocks + bi}));
      bi += BlocksFor(ce.stored, block_size_);
    }
  }
  return Status::OK();
}

Status VersionImage::Verify(const Version& v, const Decompress& decompress) const {
  const uint64_t bs = block_size_;
  std::vector<uint8_t> raw;
  std::vector<uint32_t> crcs(v.hdr->nfiles, 0);
  DLCKPT_RETURN_IF_ERROR(ForEachPiece(v, [&](const Piece& pc) -> Status {
    const FileEntry& e = v.entries[pc.file];
    std::string where = "store " + name_ + " epoch " + std::to_string(v.epoch) + ": " + e.path;
    uint32_t crc = 0;
    if (pc.stored < pc.len) {
      if (raw.size() < pc.len) raw.resize(pc.len);
      DLCKPT_RETURN_IF_ERROR(decompress(pc.blocks, pc.stored, raw.data(), pc.len,
                                        where + ": chunk at offset " + std::to_string(pc.offset)));
      crc = Crc32c(raw.data(), pc.len);
    } else {
      uint64_t left = pc.len;
      for (uint64_t k = 0; left > 0; ++k) {
        uint64_t n = std::min(left, bs);
        crc = Crc32c(blocks_->Ptr(pc.blocks[k]), n, crc);
        left -= n;
      }
    }
    if (v.chunks && crc != pc.crc) {
      return Status::Corruption(where + ": checksum mismatch in the chunk at offset " +
                                std::to_string(pc.offset) + " (stored " + Hex(pc.crc) +
                                ", computed " + Hex(crc) + ")");
    }
    crcs[pc.file] = Crc32cCombine(crcs[pc.file], crc, pc.len);
    return Status::OK();
  }));
  for (uint32_t i = 0; i < v.hdr->nfiles; ++i) {
    const FileEntry& e = v.entries[i];
    if (crcs[i] != e.crc32c) {
      return Status::Corruption("store " + name_ + " epoch " + std::to_string(v.epoch) + ": " +
                                e.path + ": checksum mismatch (stored " + Hex(e.crc32c) +
                                ", computed " + Hex(crcs[i]) + ")");
    }
  }
  return Status::OK();
}

void CopyFromImage(const Image& image, uint64_t offset, void* out, size_t len) {
  auto* dst = static_cast<uint8_t*>(out);
  uint64_t pos = 0;
  for (const Extent& e : image.extents) {
    if (len == 0) break;
    if (offset < pos + e.len) {
      uint64_t in = offset - pos;
      size_t n = static_cast<size_t>(std::min<uint64_t>(e.len - in, len));
      std::memcpy(dst, e.data + in, n);
      dst += n;
      offset += n;
      len -= n;
    }
    pos += e.len;
  }
  if (len > 0) std::memset(dst, 0, len);
}

}  // namespace dlckpt::memfs

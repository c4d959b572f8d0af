// versions.cc — VersionSet: version slots, state records and the
// transitions of epochs (see versions.h and layout.h).
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "dlckpt/base/crc32c.h"
#include "versions.h"

namespace dlckpt::memfs {

using namespace layout;  // NOLINT(google-build-using-namespace)

VersionSet::VersionSet(std::string name, Env* env, bool owner, uint8_t* base,
                       BlockAllocator* blocks)
    : name_(std::move(name)), env_(env), owner_(owner), base_(base), blocks_(blocks) {}

void VersionSet::SetGeometry(const Geometry& g) {
  geo_ = g;
  compressed_ = g.compression != kCompressNone;
}

uint64_t VersionSet::FreeSlot() const {
  for (uint64_t s = 0; s < kNumSlots; ++s) {
    if (s != state_.acked_slot && s != state_.pending_slot && s != state_.working_slot) return s;
  }
  std::abort();  // at most two slots are referenced while the owner runs
}

void VersionSet::WriteSlot(uint64_t slot, uint64_t epoch, const uint8_t* meta,
                           const FileTable& files) {
  uint8_t* p = SlotPtr(slot);
  auto* hdr = reinterpret_cast<ImageHeader*>(p);
  auto* entries = reinterpret_cast<FileEntry*>(p + sizeof(ImageHeader));
  auto* ctab = reinterpret_cast<ChunkEntry*>(p + ChunkTableOffset(geo_.max_files));
  uint32_t nfiles = static_cast<uint32_t>(files.size());
  if (meta) {
    const auto* mh = reinterpret_cast<const ImageHeader*>(meta);
    uint64_t head = sizeof(ImageHeader) + uint64_t{mh->nfiles} * sizeof(FileEntry);
    std::memcpy(p, meta, head);
    if (mh->nchunks > 0) std::memcpy(ctab, meta + head, mh->nchunks * sizeof(ChunkEntry));
  } else {
    ImageHeader h{};
    std::memcpy(h.magic, kImageMagic, sizeof h.magic);
    h.format_version = kFormatVersion;
    h.nfiles = nfiles;
    h.epoch = epoch;
    h.capacity = geo_.capacity;
    h.block_size = geo_.block_size;
    h.max_files = geo_.max_files;
    std::memcpy(h.job, geo_.job, sizeof h.job);
    h.rank = geo_.rank;
    h.commit_ns = env_->WallNanos();
    h.compression = geo_.compression;
    h.chunk_size = geo_.chunk_size;
    h.threshold_permille = geo_.threshold_permille;
    uint32_t i = 0;
    for (const auto& [path, node] : files) {
      FileEntry e{};
      std::memcpy(e.path, path.data(), path.size());
      e.size = node->size;
      e.ino = node->ino;
      e.mtime_ns = node->mtime_ns;
      e.mode = node->mode;
      e.crc32c = (epoch != 0 && node->crc_valid) ? node->crc : 0;
      if (epoch == 0 && node->damage.err != 0) {
        e.damage_errno = static_cast<uint32_t>(node->damage.err);
        e.damage_op = node->damage.op;
        e.damage_offset = node->damage.offset;
        e.damage_len = node->damage.len;
      }
      h.logical_bytes += node->size;
      if (compressed_) {
        for (uint64_t ci = 0; ci < node->chunks.size(); ++ci) {
          const FileChunk& c = node->chunks[ci];
          ChunkEntry ce{};
          const uint64_t len = std::min<uint64_t>(geo_.chunk_size, node->size - ci * geo_.chunk_size);
          ce.stored = c.compressed ? c.stored : static_cast<uint32_t>(len);
          ce.crc32c = (epoch != 0 && c.crc_valid) ? c.crc : 0;
          h.data_bytes += ce.stored;
          std::memcpy(&ctab[h.nchunks++], &ce, sizeof ce);
        }
      } else {
        h.data_bytes += node->size;
      }
      std::memcpy(&entries[i++], &e, sizeof e);
    }
    h.meta_bytes = sizeof(ImageHeader) + uint64_t{nfiles} * sizeof(FileEntry) +
                   h.nchunks * sizeof(ChunkEntry);
    h.entries_crc = Crc32c(entries, uint64_t{nfiles} * sizeof(FileEntry));
    h.chunks_crc = Crc32c(ctab, h.nchunks * sizeof(ChunkEntry));
    h.header_crc = ImageHeaderCrc(h);
    std::memcpy(hdr, &h, sizeof h);
  }
  auto* blh = reinterpret_cast<BlockListHeader*>(p + BlockListOffset(geo_.max_files, geo_.nblocks, compressed_));
  auto* list = reinterpret_cast<uint32_t*>(blh + 1);
  uint64_t count = 0;
  for (const auto& [path, node] : files) {
    for (uint32_t b : node->blocks) {
      if (b != kNoBlock) list[count++] = b;
    }
  }
  BlockListHeader b{};
  b.count = count;
  b.crc = Crc32c(list, count * 4);
  std::memcpy(blh, &b, sizeof b);
}

void VersionSet::Publish(StateRecord s) {
  auto* recs = reinterpret_cast<StateRecord*>(base_ + kStateOffset);
  StateRecord r0 = LoadState(&recs[0]), r1 = LoadState(&recs[1]);
  // Overwrite the older (or invalid) record so the newer stays readable.
  int target;
  if (!StateValid(r0)) {
    target = 0;
  } else if (!StateValid(r1)) {
    target = 1;
  } else {
    target = r0.seq <= r1.seq ? 0 : 1;
  }
  uint64_t top = std::max(StateValid(r0) ? r0.seq : 0, StateValid(r1) ? r1.seq : 0);
  s.seq = top + 1;
  s.crc = StateCrc(s);
  auto* out = reinterpret_cast<uint64_t*>(&recs[target]);
  const auto* in = reinterpret_cast<const uint64_t*>(&s);
  __atomic_store_n(&out[7], ~in[7], __ATOMIC_RELEASE);  // invalidate first
  for (size_t i = 0; i < kStateWords; ++i) __atomic_store_n(&out[i], in[i], __ATOMIC_RELEASE);
  __atomic_store_n(&out[7], in[7], __ATOMIC_RELEASE);
  state_ = s;
}

Result<StateRecord> VersionSet::ReadState() const {
  const auto* recs = reinterpret_cast<const StateRecord*>(base_ + kStateOffset);
  for (int attempt = 0; attempt < 100; ++attempt) {
    StateRecord r0 = LoadState(&recs[0]), r1 = LoadState(&recs[1]);
    bool v0 = StateValid(r0), v1 = StateValid(r1);
    if (v0 || v1) {
      if (v0 && v1) return r0.seq >= r1.seq ? r0 : r1;
      return v0 ? r0 : r1;
    }
    env_->SleepForMicros(100);  // an owner may be rewriting both in turn
  }
  return Status::Corruption(Where() + ": no valid state record (damaged header)");
}

Result<StateRecord> VersionSet::Current() const {
  if (owner_) return state_;
  return ReadState();
}

Result<Version> VersionSet::ParseSlot(uint64_t slot, uint64_t epoch) const {
  auto bad = [&](const std::string& why) {
    return Status::Corruption(Where() + ": version slot " + std::to_string(slot) +
                              " (epoch " + std::to_string(epoch) + ") is damaged: " + why);
  };
  if (slot >= kNumSlots) return bad("slot index out of range");
  const uint8_t* p = SlotPtr(slot);
  ImageHeader h;
  std::memcpy(&h, p, sizeof h);
  if (std::memcmp(h.magic, kImageMagic, sizeof h.magic) != 0) return bad("bad magic");
  if (h.header_crc != ImageHeaderCrc(h)) return bad("header checksum mismatch");
  if (h.format_version != kFormatVersion || h.epoch != epoch || h.nfiles > geo_.max_files ||
      h.capacity != geo_.capacity || h.block_size != geo_.block_size ||
      h.max_files != geo_.max_files || h.rank != geo_.rank ||
      std::memcmp(h.job, geo_.job, sizeof h.job) != 0 || h.compression != geo_.compression ||
      h.chunk_size != geo_.chunk_size || h.threshold_permille != geo_.threshold_permille) {
    return bad("header does not match the store");
  }
  const auto* entries = reinterpret_cast<const FileEntry*>(p + sizeof(ImageHeader));
  const auto* chunks = reinterpret_cast<const ChunkEntry*>(p + ChunkTableOffset(geo_.max_files));
  uint64_t blocks = 0;
  std::string why = CheckTables(h, entries, chunks, &blocks);
  if (!why.empty()) return bad(why);
  const auto* blh = reinterpret_cast<const BlockListHeader*>(
      p + BlockListOffset(geo_.max_files, geo_.nblocks, compressed_));
  BlockListHeader bl;
  std::memcpy(&bl, blh, sizeof bl);
  const auto* list = reinterpret_cast<const uint32_t*>(blh + 1);
  if (bl.count != blocks || bl.count > geo_.nblocks) return bad("block count mismatch");
  if (bl.crc != Crc32c(list, bl.count * 4)) return bad("block list checksum mismatch");
  std::vector<bool> seen(geo_.nblocks);
  for (uint64_t i = 0; i < bl.count; ++i) {
    if (list[i] >= geo_.nblocks || seen[list[i]]) return bad("bad or repeated block index");
    seen[list[i]] = true;
  }
  Version v;
  v.slot = slot;
  v.epoch = epoch;
  v.hdr = reinterpret_cast<const ImageHeader*>(p);
  v.entries = entries;
  v.blocks = list;
  v.block_count = bl.count;
  v.chunks = compressed_ ? chunks : nullptr;
  return v;
}

Result<Version> VersionSet::Committed(uint64_t epoch) const {
  DLCKPT_ASSIGN_OR_RETURN(StateRecord s, Current());
  uint64_t slot = kNoSlot;
  if (epoch != 0 && epoch == s.acked_epoch) slot = s.acked_slot;
  if (epoch != 0 && epoch == s.pending_epoch) slot = s.pending_slot;
  if (slot == kNoSlot) {
    return Status::NotFound(Where() + ": epoch " + std::to_string(epoch) +
                            " is not committed here (acknowledged " +
                            std::to_string(s.acked_epoch) + ", pending " +
                            std::to_string(s.pending_epoch) + ")");
  }
  return ParseSlot(slot, epoch);
}

FileChunk ChunkFrom(const ChunkEntry& ce, uint64_t len) {
  FileChunk c;
  c.compressed = ce.stored < len;
  c.stored = c.compressed ? ce.stored : 0;
  c.crc = ce.crc32c;
  return c;
}

FileMap VersionSet::NodesFrom(const Version& v) const {
  FileMap out;
  const uint64_t bs = geo_.block_size;
  uint64_t bi = 0, ci = 0;
  for (uint32_t i = 0; i < v.hdr->nfiles; ++i) {
    const FileEntry& e = v.entries[i];
    auto n = std::make_shared<FileNode>();
    n->path = e.path;
    n->mode = e.mode;
    n->size = e.size;
    n->mtime_ns = e.mtime_ns;
    n->ino = e.ino;
    n->crc = e.crc32c;
    n->crc_valid = v.epoch != 0;
    if (e.damage_errno != 0) {  // a saved working set only (CheckTables)
      n->damage = FileNode::Damage{static_cast<int>(e.damage_errno), e.damage_op, e.damage_offset, e.damage_len};
    }
    if (!compressed_) {
      uint64_t nb = BlocksFor(e.size, bs);
      n->blocks.assign(v.blocks + bi, v.blocks + bi + nb);
      bi += nb;
    } else {
      n->blocks.reserve(BlocksFor(e.size, bs));
      for (uint64_t off = 0; off < e.size; off += geo_.chunk_size, ++ci) {
        uint64_t len = std::min<uint64_t>(geo_.chunk_size, e.size - off);
        const ChunkEntry& ce = v.chunks[ci];
        FileChunk c = ChunkFrom(ce, len);
        c.crc_valid = v.epoch != 0;
        c.decided = v.epoch != 0;
        uint64_t k = BlocksFor(ce.stored, bs);
        n->blocks.insert(n->blocks.end(), v.blocks + bi, v.blocks + bi + k);
        n->blocks.resize(n->blocks.size() + BlocksFor(len, bs) - k, kNoBlock);
        bi += k;
        n->chunks.push_back(c);
      }
    }
    out.emplace(n->path, n);
  }
  return out;
}

Status VersionSet::CheckPublished() const {
  DLCKPT_ASSIGN_OR_RETURN(StateRecord s, ReadState());
  if (s.acked_epoch != 0) {
    DLCKPT_RETURN_IF_ERROR(ParseSlot(s.acked_slot, s.acked_epoch).status());
  }
  if (s.pending_epoch != 0) {
    DLCKPT_RETURN_IF_ERROR(ParseSlot(s.pending_slot, s.pending_epoch).status());
  }
  if (s.working_slot != kNoSlot) {
    Status w = ParseSlot(s.working_slot, 0).status();
    if (!w.ok()) return Status::Corruption(w.message() + " (the saved working files)");
  }
  return Status::OK();
}

uint64_t VersionSet::PublishedBlocks() const {
  auto s = ReadState();
  if (!s.ok()) return 0;
  std::vector<bool> used(geo_.nblocks);
  uint64_t count = 0;
  auto add = [&](uint64_t slot, uint64_t epoch) {
    if (slot == kNoSlot) return;
    auto v = ParseSlot(slot, epoch);
    if (!v.ok()) return;
    for (uint64_t i = 0; i < v->block_count; ++i) {
      if (!used[v->blocks[i]]) {
        used[v->blocks[i]] = true;
        ++count;
      }
    }
  };
  if (s->acked_epoch != 0) add(s->acked_slot, s->acked_epoch);
  if (s->pending_epoch != 0) add(s->pending_slot, s->pending_epoch);
  add(s->working_slot, 0);
  return count;
}

// ---- epochs ------------------------------------------------------------------------

Status VersionSet::LoadCommitted(const StateRecord& s, FileMap* acked, FileMap* pending) {
  if (s.acked_epoch != 0) {
    DLCKPT_ASSIGN_OR_RETURN(Version v, ParseSlot(s.acked_slot, s.acked_epoch));
    acked_blocks_.assign(v.blocks, v.blocks + v.block_count);
    for (uint32_t b : acked_blocks_) blocks_->AddRef(b, kRefAcked);
    *acked = NodesFrom(v);
  }
  if (s.pending_epoch != 0) {
    DLCKPT_ASSIGN_OR_RETURN(Version v, ParseSlot(s.pending_slot, s.pending_epoch));
    pending_blocks_.assign(v.blocks, v.blocks + v.block_count);
    for (uint32_t b : pending_blocks_) blocks_->AddRef(b, kRefPending);
    *pending = NodesFrom(v);
  }
  state_ = s;
  return Status::OK();
}

void VersionSet::ForgetSavedWorking() {
  if (state_.working_slot == kNoSlot) return;
  StateRecord s = state_;
  s.working_slot = kNoSlot;
  Publish(s);
}

void VersionSet::Freeze(uint64_t slot, uint64_t epoch, const uint8_t* meta, uint8_t ref,
                        const FileTable& files) {
  WriteSlot(slot, epoch, meta, files);
  StateRecord s = state_;
  if (ref == kRefPending) {
    s.pending_epoch = epoch;
    s.pending_slot = slot;
  } else {
    s.acked_epoch = epoch;
    s.acked_slot = slot;
  }
  s.next_epoch = epoch + 1;
  Publish(s);
  std::vector<uint32_t>& frozen = ref == kRefPending ? pending_blocks_ : acked_blocks_;
  frozen.clear();
  for (const auto& [path, node] : files) {
    for (uint32_t b : node->blocks) {
      if (b == kNoBlock) continue;
      blocks_->AddRef(b, ref);
      frozen.push_back(b);
    }
  }
}

Status VersionSet::Acknowledge(uint64_t epoch) {
  if (epoch == 0 || epoch != state_.pending_epoch) {
    return Status::InvalidArgument(Where() + ": cannot acknowledge epoch " +
                                   std::to_string(epoch) + " (pending is " +
                                   std::to_string(state_.pending_epoch) + ")");
  }
  StateRecord s = state_;
  s.acked_epoch = s.pending_epoch;
  s.acked_slot = s.pending_slot;
  s.pending_epoch = 0;
  s.pending_slot = kNoSlot;
  Publish(s);
  for (uint32_t b : acked_blocks_) blocks_->DropRef(b, kRefAcked);
  for (uint32_t b : pending_blocks_) {
    blocks_->AddRef(b, kRefAcked);
    blocks_->DropRef(b, kRefPending);
  }
  acked_blocks_ = std::move(pending_blocks_);
  pending_blocks_.clear();
  return Status::OK();
}

void VersionSet::AbortPending() {
  if (state_.pending_epoch == 0) return;
  StateRecord s = state_;
  s.pending_epoch = 0;
  s.pending_slot = kNoSlot;
  Publish(s);
  for (uint32_t b : pending_blocks_) blocks_->DropRef(b, kRefPending);
  pending_blocks_.clear();
}

Status VersionSet::Hold(uint64_t epoch) {
  if (held_epoch_ == epoch && epoch != 0) return Status::OK();
  if (held_epoch_ != 0) {
    return Status::Busy(Where() + ": epoch " + std::to_string(held_epoch_) +
                        " is held; release it before holding epoch " + std::to_string(epoch));
  }
  if (epoch == 0 || epoch != state_.acked_epoch) {
    return Status::InvalidArgument(Where() + ": cannot hold epoch " + std::to_string(epoch) +
                                   " (acknowledged is " + std::to_string(state_.acked_epoch) +
                                   ")");
  }
  held_blocks_ = acked_blocks_;
  for (uint32_t b : held_blocks_) blocks_->AddRef(b, kRefHeld);
  held_epoch_ = epoch;
  return Status::OK();
}

void VersionSet::Release(uint64_t epoch) {
  if (epoch == 0 || epoch != held_epoch_) return;
  for (uint32_t b : held_blocks_) blocks_->DropRef(b, kRefHeld);
  held_blocks_.clear();
  held_epoch_ = 0;
}

void VersionSet::SaveWorking(const FileTable& files) {
  uint64_t slot = FreeSlot();
  WriteSlot(slot, 0, nullptr, files);
  StateRecord s = state_;
  s.working_slot = slot;
  Publish(s);
}

}  // namespace dlckpt::memfs

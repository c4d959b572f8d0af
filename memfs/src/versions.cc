// versions.cc — version slots and state records in shared memory
// (Store::Impl, see store_impl.h and layout.h).
//
// Ownership: the slots and the two StateRecords are in the store's mapping.
// Only the owner writes them, and never a slot the published state refers to:
// WriteSlotLocked fills a free slot, PublishStateLocked then overwrites the
// older StateRecord (invalidated first, CRC last) so a reader always finds
// one valid record. Nodes built from a version (NodesFrom) are new objects
// owned by the caller; they point at no shared memory.
//
// Thread safety: the *Locked functions expect mu_ held. Readers in other
// processes take no lock: ReadState retries torn records (100 tries, 100 us
// apart), and ParseSlotLocked checks every checksum and index of a version
// before anything uses it.
//
// Failure: EBADMSG naming the store, slot and epoch for a damaged version or
// state; ENOENT for an epoch that is not committed. FreeSlotLocked aborts if
// no slot is free (at most two are referenced while an owner runs).
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "dlckpt/base/crc32c.h"
#include "store_impl.h"

namespace dlckpt::memfs {

using namespace layout;  // NOLINT(google-build-using-namespace)

uint64_t Store::Impl::FreeSlotLocked() const {
  for (uint64_t s = 0; s < kNumSlots; ++s) {
    if (s != state_.acked_slot && s != state_.pending_slot && s != state_.working_slot) return s;
  }
  std::abort();  // at most two slots are referenced while the owner runs
}

// Serialises the working files into `slot`. With `meta`, the image header and
// entries are copied verbatim from it (an image being rebuilt).
void Store::Impl::WriteSlotLocked(uint64_t slot, uint64_t epoch, const uint8_t* meta) {
  uint8_t* p = SlotPtr(slot);
  auto* hdr = reinterpret_cast<ImageHeader*>(p);
  auto* entries = reinterpret_cast<FileEntry*>(p + sizeof(ImageHeader));
  auto* ctab = reinterpret_cast<ChunkEntry*>(p + ChunkTableOffset(geo_.max_files));
  uint32_t nfiles = static_cast<uint32_t>(files_.size());
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
    for (auto& [path, node] : files_) {
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
          const Chunk& c = node->chunks[ci];
          ChunkEntry ce{};
          ce.stored = c.compressed ? c.stored : static_cast<uint32_t>(ChunkLen(*node, ci));
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
  for (auto& [path, node] : files_) {
    for (uint32_t b : node->blocks) {
      if (b != kNoBlock) list[count++] = b;
    }
  }
  BlockListHeader b{};
  b.count = count;
  b.crc = Crc32c(list, count * 4);
  std::memcpy(blh, &b, sizeof b);
}

void Store::Impl::PublishStateLocked(StateRecord s) {
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

Result<StateRecord> Store::Impl::ReadState() const {
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
  return Status::Corruption("store " + name() + ": no valid state record (damaged header)");
}

// Parses and validates the version in `slot`; `epoch` 0 expects a working slot.
Result<Store::Impl::Version> Store::Impl::ParseSlotLocked(uint64_t slot, uint64_t epoch) const {
  auto bad = [&](const std::string& why) {
    return Status::Corruption("store " + name() + ": version slot " + std::to_string(slot) +
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

Result<Store::Impl::Version> Store::Impl::CommittedVersionLocked(uint64_t epoch) const {
  StateRecord s = state_;
  if (!owner_) {
    DLCKPT_ASSIGN_OR_RETURN(s, ReadState());
  }
  uint64_t slot = kNoSlot;
  if (epoch != 0 && epoch == s.acked_epoch) slot = s.acked_slot;
  if (epoch != 0 && epoch == s.pending_epoch) slot = s.pending_slot;
  if (slot == kNoSlot) {
    return Status::NotFound("store " + name() + ": epoch " + std::to_string(epoch) +
                            " is not committed here (acknowledged " +
                            std::to_string(s.acked_epoch) + ", pending " +
                            std::to_string(s.pending_epoch) + ")");
  }
  return ParseSlotLocked(slot, epoch);
}

Store::Impl::Chunk Store::Impl::ChunkFrom(const ChunkEntry& ce, uint64_t len) {
  Chunk c;
  c.compressed = ce.stored < len;
  c.stored = c.compressed ? ce.stored : 0;
  c.crc = ce.crc32c;
  return c;
}

FileMap Store::Impl::NodesFrom(const Version& v) const {
  FileMap out;
  const uint64_t bs = geo_.block_size;
  uint64_t bi = 0, ci = 0;
  for (uint32_t i = 0; i < v.hdr->nfiles; ++i) {
    const FileEntry& e = v.entries[i];
    auto n = std::make_shared<Node>();
    n->path = e.path;
    n->mode = e.mode;
    n->size = e.size;
    n->mtime_ns = e.mtime_ns;
    n->ino = e.ino;
    n->crc = e.crc32c;
    n->crc_valid = v.epoch != 0;
    if (e.damage_errno != 0) {  // a saved working set only (CheckTables)
      n->damage = Node::Damage{static_cast<int>(e.damage_errno), e.damage_op, e.damage_offset, e.damage_len};
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
        Chunk c = ChunkFrom(ce, len);
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

// Read-only attachers: the blocks of the versions the published state names.
uint64_t Store::Impl::PublishedBlocksLocked() const {
  auto s = ReadState();
  if (!s.ok()) return 0;
  std::vector<bool> used(geo_.nblocks);
  uint64_t count = 0;
  auto add = [&](uint64_t slot, uint64_t epoch) {
    if (slot == kNoSlot) return;
    auto v = ParseSlotLocked(slot, epoch);
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

}  // namespace dlckpt::memfs

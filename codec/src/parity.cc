#include "parity.h"

#include <algorithm>
#include <cstring>

#include "dlckpt/base/crc32c.h"
#include "dlckpt/base/names.h"
#include "dlckpt/memfs/memfs.h"

namespace dlckpt::codec {

namespace protocol = control::protocol;

namespace {

constexpr char kMagic[8] = {'D', 'L', 'C', 'K', 'P', 'T', 'P', '2'};
constexpr uint64_t kPage = 4096;
// Header: magic[8], u32 body length, u32 CRC32C of the body, body.
constexpr uint64_t kPrefix = 16;
// A slot larger than twice what an epoch needs plus this is shrunk.
constexpr uint64_t kSlack = uint64_t{64} << 20;

// Body: the parity's identity, its length, the block size and one CRC32C
// per block (zeros until Complete; the header is sized for them at Prepare).
std::string EncodeInfo(const protocol::ParityReport& p, uint64_t length, uint64_t block,
                       const std::vector<uint32_t>& crcs) {
  protocol::Writer w;
  protocol::PutParity(w, p);
  w.U64(length);
  w.U64(block);
  w.U32(static_cast<uint32_t>(crcs.size()));
  for (uint32_t c : crcs) w.U32(c);
  return w.Take();
}

Status DecodeInfo(std::string_view body, protocol::ParityReport* p, uint64_t* length, uint64_t* block,
                  std::vector<uint32_t>* crcs) {
  protocol::Reader r(body, "parity header");
  DLCKPT_RETURN_IF_ERROR(protocol::GetParity(r, p));
  DLCKPT_RETURN_IF_ERROR(r.U64(length));
  DLCKPT_RETURN_IF_ERROR(r.U64(block));
  uint32_t n = 0;
  DLCKPT_RETURN_IF_ERROR(r.Count(&n, 4));
  if (*block == 0 || n != ParityBlockCount(*length, *block)) {
    return Status::Corruption("parity header: " + std::to_string(n) + " block checksums for " +
                              std::to_string(*length) + " bytes in blocks of " + std::to_string(*block));
  }
  crcs->resize(n);
  for (uint32_t& c : *crcs) DLCKPT_RETURN_IF_ERROR(r.U32(&c));
  return r.End();
}

uint64_t HeaderBytesFor(size_t body) { return (kPrefix + body + kPage - 1) / kPage * kPage; }

// The header bytes of a parity of `length` bytes described by `info`.
uint64_t HeaderFor(const protocol::ParityReport& info, uint64_t length) {
  return HeaderBytesFor(EncodeInfo(info, length, kParityBlock,
                                   std::vector<uint32_t>(ParityBlockCount(length), 0)).size());
}

}  // namespace

Status ForeignShm(Env* env, const std::string& name) {
  auto existing = env->OpenShm(name, false);
  if (existing.ok()) return Status::OK();
  const int code = existing.status().code();
  return code == EPERM || code == EACCES ? existing.status() : Status::OK();
}

uint64_t ParityBlockCount(uint64_t length, uint64_t block) { return (length + block - 1) / block; }

std::vector<uint32_t> ParityBlockCrcs(const uint8_t* data, uint64_t length, uint64_t block) {
  std::vector<uint32_t> out(ParityBlockCount(length, block));
  for (uint64_t b = 0; b < out.size(); ++b) {
    const uint64_t lo = b * block;
    out[b] = Crc32c(data + lo, std::min(block, length - lo));
  }
  return out;
}

Status CheckParityBlock(const std::string& what, const uint8_t* data, uint64_t length, uint64_t b, uint32_t crc,
                        uint64_t block) {
  const uint64_t lo = b * block, hi = std::min(lo + block, length);
  if (lo < length && Crc32c(data + lo, hi - lo) == crc) return Status::OK();
  return Status::Corruption(what + ": parity block " + std::to_string(b) + " of " +
                            std::to_string(ParityBlockCount(length, block)) + " (bytes " + std::to_string(lo) +
                            "-" + std::to_string(hi == 0 ? 0 : hi - 1) + "): checksum mismatch");
}

std::vector<memfs::Store::ByteRange> BlocksMeeting(std::span<const memfs::Store::ByteRange> ranges, uint64_t limit,
                                                   uint64_t block) {
  std::vector<memfs::Store::ByteRange> out;
  for (const auto& r : ranges) {
    if (r.len == 0 || r.offset >= limit) continue;
    uint64_t lo = r.offset / block * block;
    uint64_t hi = std::min(limit, (std::min(r.offset + r.len, limit) + block - 1) / block * block);
    if (!out.empty() && lo <= out.back().offset + out.back().len) {
      out.back().len = std::max(out.back().len, hi - out.back().offset);
    } else {
      out.push_back({lo, hi - lo});
    }
  }
  return out;
}

std::string ParitySlots::SlotName(int slot) const {
  return ParityName(job_, node_, slot);
}

Status ParitySlots::Load(int slot, Mapped* m) {
  m->valid = false;
  if (!m->shm) {
    DLCKPT_ASSIGN_OR_RETURN(m->shm, env_->OpenShm(SlotName(slot), true));
  }
  const uint8_t* p = m->shm->data();
  size_t size = m->shm->size();
  if (size < kPrefix || std::memcmp(p, kMagic, sizeof kMagic) != 0) {
    return Status::Corruption(SlotName(slot) + ": not a parity object");
  }
  uint32_t body_len, crc;
  std::memcpy(&body_len, p + 8, 4);
  std::memcpy(&crc, p + 12, 4);
  if (kPrefix + body_len > size || Crc32c(p + kPrefix, body_len) != crc) {
    return Status::Corruption(SlotName(slot) + ": parity header checksum mismatch");
  }
  uint64_t length = 0, block = 0;
  protocol::ParityReport info;
  std::vector<uint32_t> crcs;
  DLCKPT_RETURN_IF_ERROR(
      DecodeInfo(std::string_view(reinterpret_cast<const char*>(p + kPrefix), body_len), &info, &length, &block,
                 &crcs)
          .Prefixed(SlotName(slot)));
  m->header_bytes = HeaderBytesFor(body_len);
  m->length = length;
  m->block = block;
  m->crcs = std::move(crcs);
  if (m->header_bytes + length > size) {
    return Status::Corruption(SlotName(slot) + ": parity length beyond the object");
  }
  info.name = SlotName(slot);
  m->info = info;
  m->header_crc = crc;
  m->valid = true;
  return Status::OK();
}

Status ParitySlots::Verify(Mapped* m) {
  const uint8_t* data = m->shm->data() + m->header_bytes;
  for (uint64_t b = 0; b < m->crcs.size(); ++b) {
    Status st = CheckParityBlock(m->info.name, data, m->length, b, m->crcs[b], m->block);
    if (!st.ok()) {
      m->damaged = true;
      m->verified = false;
      return st;
    }
  }
  m->verified = true;
  m->verified_crc = m->header_crc;
  return Status::OK();
}

std::vector<protocol::ParityReport> ParitySlots::Scan(std::vector<std::string>* warn) {
  std::vector<protocol::ParityReport> out;
  for (int s = 0; s < 2; ++s) {
    // The mapping stays: only this process writes its node's slots.
    Status st = Load(s, &slots_[s]);
    // A complete parity whose bytes fail their checksums is an erasure.
    if (st.ok() && slots_[s].info.complete) st = Verify(&slots_[s]);
    if (st.ok()) {
      if (slots_[s].info.epoch == 0) continue;  // reserved (Reserve): no parity yet
      out.push_back(slots_[s].info);
    } else if (st.code() != ENOENT && warn) {
      warn->push_back(st.ToString());
    }
  }
  return out;
}

Status ParitySlots::WriteHeader(Mapped* m) {
  std::string body = EncodeInfo(m->info, m->length, m->block, m->crcs);
  if (HeaderBytesFor(body.size()) > m->header_bytes) {
    return Status::Error(EOVERFLOW, m->info.name + ": parity header does not fit");
  }
  uint8_t* p = m->shm->data();
  uint32_t body_len = static_cast<uint32_t>(body.size());
  uint32_t crc = Crc32c(body.data(), body.size());
  // Invalidate, write the body, then the CRC: a torn header never validates.
  std::memset(p + 12, 0xff, 4);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  std::memcpy(p, kMagic, sizeof kMagic);
  std::memcpy(p + 8, &body_len, 4);
  std::memcpy(p + kPrefix, body.data(), body.size());
  __atomic_thread_fence(__ATOMIC_RELEASE);
  std::memcpy(p + 12, &crc, 4);
  return Status::OK();
}

Result<std::unique_ptr<MappedShm>> ParitySlots::Recreate(int slot, uint64_t size) {
  const std::string name = SlotName(slot);
  DLCKPT_RETURN_IF_ERROR(ForeignShm(env_, name));
  Status removed = env_->UnlinkShm(name);
  auto made = env_->CreateShm(name, size, true);
  if (!made.ok() && made.status().code() == EEXIST && !removed.ok()) {
    // Planted between the check and the creation: say whose, not just EEXIST.
    Status theirs = env_->OpenShm(name, false).status();
    if (!theirs.ok()) return theirs;
  }
  return made;
}

Result<uint8_t*> ParitySlots::Prepare(const protocol::ParityReport& info, uint64_t length,
                                      uint64_t keep_epoch) {
  // Keep the newest complete parity; write the other slot.
  for (int s = 0; s < 2; ++s) (void)Load(s, &slots_[s]);
  auto newer = [](const protocol::ParityReport& a, const protocol::ParityReport& b) {
    return a.epoch != b.epoch ? a.epoch > b.epoch : a.generation > b.generation;
  };
  int keep = -1;
  for (int s = 0; s < 2; ++s) {
    if (keep_epoch != 0 && slots_[s].valid && slots_[s].info.complete &&
        slots_[s].info.epoch == keep_epoch && (keep < 0 || newer(slots_[s].info, slots_[keep].info))) {
      keep = s;
    }
  }
  if (keep < 0) {
    for (int s = 0; s < 2; ++s) {
      if (slots_[s].valid && slots_[s].info.complete &&
          (keep < 0 || newer(slots_[s].info, slots_[keep].info))) {
        keep = s;
      }
    }
  }
  kept_ = keep;
  prepared_ = -1;
  int target = keep == 0 ? 1 : 0;
  Mapped& m = slots_[target];
  // Where the bytes of a complete parity this slot holds begin (0: none).
  const uint64_t old_header = m.valid && m.info.complete ? m.header_bytes : 0;
  last_fresh_ = false;
  protocol::ParityReport want = info;
  want.complete = false;
  want.name = SlotName(target);
  uint64_t header = HeaderFor(want, length);
  uint64_t need = header + length;
  // Room to grow a little without recreating the slot every epoch.
  const uint64_t room = std::max((length + length / 16 + kPage - 1) / kPage * kPage, kPage);
  if (m.shm && m.shm->size() > 2 * need + kSlack) {
    // Far larger than needed (a reservation sized from the stores' capacity,
    // or an epoch that shrank): give the tail back, keep the pages in front,
    // which are already written once.
    if (!m.shm->Shrink(header + room).ok()) m.shm.reset();
  }
  if (!m.shm || m.shm->size() < need) {
    m.shm.reset();
    m.valid = false;
    DLCKPT_ASSIGN_OR_RETURN(m.shm, Recreate(target, header + room));
    last_fresh_ = true;
    // Pre-touch (dlckpt/memfs/memfs.h): the fresh object holds no parity yet,
    // so one word per page of its data area is written now rather than the
    // encode paying the slow first write of each page. Never done to a slot
    // that is reused: it may hold the newest complete parity's bytes.
    if (memfs::PretouchEnabled()) {
      memfs::PretouchPages(m.shm->data() + header, m.shm->size() - header);
    }
  } else if (old_header != 0 && old_header != header) {
    last_fresh_ = true;  // the data area moved: the old parity's bytes are not where they were
  }
  m.info = want;
  m.header_bytes = header;
  m.length = length;
  m.block = kParityBlock;
  m.crcs.assign(ParityBlockCount(length), 0);
  m.damaged = false;
  m.verified = false;
  DLCKPT_RETURN_IF_ERROR(WriteHeader(&m));
  m.valid = true;
  prepared_ = target;
  return m.shm->data() + header;
}

Status ParitySlots::Reserve(const protocol::ParityReport& shape, uint64_t length, int slots) {
  protocol::ParityReport want = shape;
  want.epoch = 0;
  want.complete = false;
  for (int s = 0, taken = 0; s < 2 && taken < slots; ++s) {
    Mapped& m = slots_[s];
    (void)Load(s, &m);
    want.name = SlotName(s);
    const uint64_t header = HeaderFor(want, length);
    const uint64_t size = header + std::max((length + kPage - 1) / kPage * kPage, kPage);
    if (m.valid && m.info.complete) continue;  // may be the parity a recovery needs
    ++taken;
    if (m.shm && m.shm->size() >= size) continue;
    m.shm.reset();
    m.valid = false;
    DLCKPT_ASSIGN_OR_RETURN(m.shm, Recreate(s, size));
    if (memfs::PretouchEnabled()) memfs::PretouchPages(m.shm->data() + header, m.shm->size() - header);
    // A valid, incomplete header: survey and rebuild ignore the slot, Prepare writes it.
    m.info = want;
    m.header_bytes = header;
    m.length = 0;
    m.block = kParityBlock;
    m.crcs.clear();
    m.damaged = false;
    m.verified = false;
    DLCKPT_RETURN_IF_ERROR(WriteHeader(&m));
    m.valid = true;
  }
  return Status::OK();
}

Status ParitySlots::Complete() {
  if (prepared_ < 0) return Status::InvalidArgument("parity: Complete without Prepare");
  Mapped& m = slots_[prepared_];
  prepared_ = -1;
  m.crcs = ParityBlockCrcs(m.shm->data() + m.header_bytes, m.length, m.block);
  m.info.complete = true;
  return WriteHeader(&m);
}

Status ParitySlots::CompleteDelta(uint64_t keep, std::span<const memfs::Store::ByteRange> changed,
                                  const std::vector<memfs::Store::ByteRange>* rewritten) {
  if (prepared_ < 0) return Status::InvalidArgument("parity: Complete without Prepare");
  Mapped& m = slots_[prepared_];
  prepared_ = -1;
  if (kept_ < 0 || !slots_[kept_].valid || !slots_[kept_].info.complete || slots_[kept_].info.epoch != keep ||
      slots_[kept_].info.group != m.info.group || slots_[kept_].info.index != m.info.index ||
      slots_[kept_].block != m.block) {
    return Status::NotFound(m.info.name + ": the parity of epoch " + std::to_string(keep) +
                            " that this one updates is not in the kept slot");
  }
  Mapped& k = slots_[kept_];
  const uint8_t* data = m.shm->data() + m.header_bytes;
  const uint8_t* kept_data = k.shm->data() + k.header_bytes;
  const uint64_t nblocks = ParityBlockCount(m.length, m.block);
  std::vector<uint32_t> crcs(nblocks, 0);
  // Which blocks are resting (see parity.h), and the window of them to scrub.
  std::vector<char> resting(nblocks, 0);
  uint64_t nresting = 0;
  if (rewritten != nullptr) {
    std::fill(resting.begin(), resting.end(), 1);
    auto clear = [&](std::span<const memfs::Store::ByteRange> ranges) {
      for (const auto& r : BlocksMeeting(ranges, m.length, m.block)) {
        for (uint64_t b = r.offset / m.block; b * m.block < r.offset + r.len && b < nblocks; ++b) resting[b] = 0;
      }
    };
    clear(changed);
    clear(*rewritten);
    for (uint64_t b = 0; b < nblocks; ++b) {
      const uint64_t lo = b * m.block, hi = std::min(lo + m.block, m.length);
      // Only a whole block of the kept parity, of the same extent, can rest.
      if (resting[b] && (lo >= k.length || hi != std::min(lo + k.block, k.length))) resting[b] = 0;
      nresting += resting[b] ? 1 : 0;
    }
  }
  // The scrub window: resting blocks from scrub_next_ on (wrapping).
  std::vector<char> scrub(nblocks, 0);
  if (nresting > 0) {
    uint64_t want = std::min<uint64_t>(std::max(kScrubBlocks, nblocks / 8), nresting), b = scrub_next_ % nblocks;
    for (uint64_t seen = 0; want > 0 && seen < nblocks; ++seen, b = (b + 1) % nblocks) {
      if (resting[b]) {
        scrub[b] = 1;
        --want;
      }
    }
    scrub_next_ = b;
  }
  size_t r = 0;  // the first range of `changed` not wholly before the block
  for (uint64_t b = 0; b < nblocks; ++b) {
    const uint64_t lo = b * m.block;
    const uint64_t hi = std::min(lo + m.block, m.length);
    while (r < changed.size() && changed[r].offset + changed[r].len <= lo) ++r;
    if (resting[b] && !scrub[b]) {
      crcs[b] = k.crcs[b];
      continue;
    }
    crcs[b] = Crc32c(data + lo, hi - lo);
    if (lo >= k.length) continue;  // past the kept parity's end: nothing of it was taken
    const bool copied = !(r < changed.size() && changed[r].offset < hi) && hi == std::min(lo + k.block, k.length);
    // A copied (or resting) block carries the kept block's checksum: that proves both.
    if (copied && crcs[b] == k.crcs[b]) continue;
    // Else the kept block it was computed from must be intact.
    if (Status st = CheckParityBlock(k.info.name, kept_data, k.length, b, k.crcs[b], k.block); !st.ok()) {
      k.damaged = true;
      return st;
    }
    if (copied) {
      return Status::Corruption(m.info.name + ": parity block " + std::to_string(b) +
                                " differs from the block of the kept parity it copies");
    }
  }
  m.crcs = std::move(crcs);
  m.info.complete = true;
  return WriteHeader(&m);
}

Result<Extent> ParitySlots::Find(uint32_t group, uint32_t index, uint64_t epoch, uint64_t generation) {
  for (int s = 0; s < 2; ++s) {
    if (!Load(s, &slots_[s]).ok()) continue;
    const auto& i = slots_[s].info;
    if (i.complete && i.group == group && i.index == index && i.epoch == epoch &&
        i.generation == generation) {
      if (!slots_[s].verified || slots_[s].verified_crc != slots_[s].header_crc) {
        DLCKPT_RETURN_IF_ERROR(Verify(&slots_[s]));
      }
      return Extent{slots_[s].shm->data() + slots_[s].header_bytes, slots_[s].length};
    }
  }
  return Status::NotFound("node " + node_ + " holds no complete parity " + std::to_string(index) +
                          " of group " + std::to_string(group) + " for epoch " + std::to_string(epoch));
}

Result<Extent> ParitySlots::Kept(uint32_t group, uint32_t index, uint64_t epoch,
                                 protocol::ParityReport* info) {
  int best = -1;
  for (int s = 0; s < 2; ++s) {
    if (!Load(s, &slots_[s]).ok() || slots_[s].damaged || slots_[s].block != kParityBlock) continue;
    const auto& i = slots_[s].info;
    if (i.complete && i.group == group && i.index == index && i.epoch == epoch &&
        (best < 0 || i.generation > slots_[best].info.generation)) {
      best = s;
    }
  }
  if (best < 0 || epoch == 0) {
    return Status::NotFound("node " + node_ + " holds no complete parity " + std::to_string(index) +
                            " of group " + std::to_string(group) + " for epoch " + std::to_string(epoch));
  }
  *info = slots_[best].info;
  return Extent{slots_[best].shm->data() + slots_[best].header_bytes, slots_[best].length};
}

bool ParitySlots::OtherHolds(uint32_t group, uint32_t index, uint64_t keep, uint64_t epoch) {
  int kept = -1;
  for (int s = 0; s < 2; ++s) {
    if (!Load(s, &slots_[s]).ok()) continue;
    const auto& i = slots_[s].info;
    if (i.complete && i.epoch == keep && (kept < 0 || i.generation > slots_[kept].info.generation)) kept = s;
  }
  if (kept < 0) return false;
  const Mapped& o = slots_[kept == 0 ? 1 : 0];
  return o.valid && o.info.complete && o.info.group == group && o.info.index == index && o.info.epoch == epoch;
}

void ParitySlots::RemoveAll() {
  for (int s = 0; s < 2; ++s) {
    slots_[s].shm.reset();
    slots_[s].valid = false;
    slots_[s].damaged = false;
    slots_[s].verified = false;
    if (ForeignShm(env_, SlotName(s)).ok()) (void)env_->UnlinkShm(SlotName(s));
  }
  prepared_ = -1;
  kept_ = -1;
}

}  // namespace dlckpt::codec

#include "parity.h"

#include <algorithm>
#include <cstring>

#include "dlckpt/base/crc32c.h"
#include "dlckpt/base/names.h"
#include "dlckpt/memfs/memfs.h"

namespace dlckpt::codec {

namespace {

constexpr char kMagic[8] = {'D', 'L', 'C', 'K', 'P', 'T', 'P', '1'};
constexpr uint64_t kPage = 4096;
// Header: magic[8], u32 body length, u32 CRC32C of the body, body.
constexpr uint64_t kPrefix = 16;
// A slot larger than twice what an epoch needs plus this is shrunk.
constexpr uint64_t kSlack = uint64_t{64} << 20;

std::string EncodeInfo(const protocol::ParityReport& p, uint64_t length) {
  protocol::Writer w;
  protocol::PutParity(w, p);
  w.U64(length);
  return w.Take();
}

Status DecodeInfo(std::string_view body, protocol::ParityReport* p, uint64_t* length) {
  protocol::Reader r(body, "parity header");
  DLCKPT_RETURN_IF_ERROR(protocol::GetParity(r, p));
  DLCKPT_RETURN_IF_ERROR(r.U64(length));
  return r.End();
}

uint64_t HeaderBytesFor(size_t body) { return (kPrefix + body + kPage - 1) / kPage * kPage; }

}  // namespace

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
  uint64_t length = 0;
  protocol::ParityReport info;
  DLCKPT_RETURN_IF_ERROR(
      DecodeInfo(std::string_view(reinterpret_cast<const char*>(p + kPrefix), body_len), &info, &length)
          .Prefixed(SlotName(slot)));
  m->header_bytes = HeaderBytesFor(body_len);
  m->length = length;
  if (m->header_bytes + length > size) {
    return Status::Corruption(SlotName(slot) + ": parity length beyond the object");
  }
  info.name = SlotName(slot);
  m->info = info;
  m->valid = true;
  return Status::OK();
}

std::vector<protocol::ParityReport> ParitySlots::Scan(std::vector<std::string>* warn) {
  std::vector<protocol::ParityReport> out;
  for (int s = 0; s < 2; ++s) {
    // The mapping stays: only this process writes its node's slots.
    Status st = Load(s, &slots_[s]);
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
  std::string body = EncodeInfo(m->info, m->length);
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
  int target = keep == 0 ? 1 : 0;
  Mapped& m = slots_[target];
  last_fresh_ = false;
  protocol::ParityReport want = info;
  want.complete = false;
  want.name = SlotName(target);
  uint64_t header = HeaderBytesFor(EncodeInfo(want, length).size());
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
    Status removed = env_->UnlinkShm(SlotName(target));
    auto made = env_->CreateShm(SlotName(target), header + room, true);
    if (!made.ok()) {
      // An object this uid may not remove holds the name (another user's, in
      // the sticky /dev/shm): say whose, rather than just EEXIST.
      Status theirs = made.status().code() == EEXIST && !removed.ok()
                          ? env_->OpenShm(SlotName(target), false).status()
                          : Status::OK();
      return theirs.ok() ? made.status() : theirs;
    }
    m.shm = std::move(made).value();
    last_fresh_ = true;
    // Pre-touch (dlckpt/memfs/memfs.h): the fresh object holds no parity yet,
    // so one word per page of its data area is written now rather than the
    // encode paying the slow first write of each page. Never done to a slot
    // that is reused: it may hold the newest complete parity's bytes.
    if (memfs::PretouchEnabled()) {
      memfs::PretouchPages(m.shm->data() + header, m.shm->size() - header);
    }
  }
  m.info = want;
  m.header_bytes = header;
  m.length = length;
  DLCKPT_RETURN_IF_ERROR(WriteHeader(&m));
  m.valid = true;
  prepared_ = target;
  return m.shm->data() + header;
}

Status ParitySlots::Reserve(const protocol::ParityReport& shape, uint64_t length) {
  protocol::ParityReport want = shape;
  want.epoch = 0;
  want.complete = false;
  for (int s = 0; s < 2; ++s) {
    Mapped& m = slots_[s];
    (void)Load(s, &m);
    want.name = SlotName(s);
    const uint64_t header = HeaderBytesFor(EncodeInfo(want, length).size());
    const uint64_t size = header + std::max((length + kPage - 1) / kPage * kPage, kPage);
    if (m.valid && m.info.complete) continue;  // may be the parity a recovery needs
    if (m.shm && m.shm->size() >= size) continue;
    m.shm.reset();
    m.valid = false;
    Status removed = env_->UnlinkShm(SlotName(s));
    auto made = env_->CreateShm(SlotName(s), size, true);
    if (!made.ok()) {
      return made.status().code() == EEXIST && !removed.ok() ? removed : made.status();
    }
    m.shm = std::move(made).value();
    if (memfs::PretouchEnabled()) memfs::PretouchPages(m.shm->data() + header, m.shm->size() - header);
    // A valid, incomplete header: survey and rebuild ignore the slot, Prepare writes it.
    m.info = want;
    m.header_bytes = header;
    m.length = 0;
    DLCKPT_RETURN_IF_ERROR(WriteHeader(&m));
    m.valid = true;
  }
  return Status::OK();
}

Status ParitySlots::Complete() {
  if (prepared_ < 0) return Status::InvalidArgument("parity: Complete without Prepare");
  Mapped& m = slots_[prepared_];
  m.info.complete = true;
  prepared_ = -1;
  return WriteHeader(&m);
}

Result<Extent> ParitySlots::Find(uint32_t group, uint32_t index, uint64_t epoch, uint64_t generation) {
  for (int s = 0; s < 2; ++s) {
    if (!Load(s, &slots_[s]).ok()) continue;
    const auto& i = slots_[s].info;
    if (i.complete && i.group == group && i.index == index && i.epoch == epoch &&
        i.generation == generation) {
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
    if (!Load(s, &slots_[s]).ok()) continue;
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
    (void)env_->UnlinkShm(SlotName(s));
  }
  prepared_ = -1;
}

}  // namespace dlckpt::codec

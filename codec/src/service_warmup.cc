// Warm-up of the dlckpt-codec service (Service, service_impl.h): after a
// HELLO, while the application runs up to its first checkpoint, each data
// node attaches its stores (the read-all mapping faults in every page table
// entry) and each spare creates and pre-touches the parity slot the first
// encode takes; the other one after that encode, while the application
// computes to its second checkpoint. Slots are sized for half the data
// capacity of the largest member (an epoch written while the previous one
// stays acknowledged fits in it; a larger one makes the encode create a
// larger slot, as without warm-up). Done on a thread, so the HELLO (or the
// encode's DONE) is answered at once; the next command joins it first. The
// encodes of epochs 1 and 2 then find everything in place, as the tenth does.
//
// Thread safety: between StartWarmup and FinishWarmup the thread alone uses
// parity_ and warmup_; the service thread touches neither (every command
// calls FinishWarmup before anything else). Failures: a store that cannot be
// attached, or a slot that cannot be created (ENOSPC), is only logged: the
// encode attaches or creates it when it needs it, as without warm-up.
#include <algorithm>
#include <string>

#include "dlckpt/base/env.h"
#include "dlckpt/base/events.h"
#include "dlckpt/base/names.h"
#include "dlckpt/base/units.h"
#include "service_impl.h"

namespace dlckpt::codec {

namespace protocol = control::protocol;

using internal::Fixed;
using internal::Now;


uint64_t Service::LocalStoreBytes() const {
  uint64_t total = 0;
  for (int32_t r : my_app_ranks_) {
    auto name = StoreName(cfg_.job, cfg_.node, r);
    if (!name.ok()) continue;
    // Attached without populating: cheap. While epoch E stays acknowledged
    // the next one is written beside it, so an epoch's data takes at most
    // half the data area; its metadata fits in what lies outside it.
    auto s = memfs::Store::Attach(*name, memfs::AttachMode::kReadOnly);
    if (!s.ok()) continue;
    const memfs::StoreStats st = (*s)->stats();
    total += st.shm_bytes - std::min(st.capacity, st.shm_bytes) + st.capacity / 2;
  }
  return total;
}

Result<uint64_t> Service::GroupBound() {
  protocol::Writer w;
  w.U64(role_.kind == RoleKind::kData ? LocalStoreBytes() : 0);
  DLCKPT_ASSIGN_OR_RETURN(auto all, c_->Allgather(w.data()));
  if (role_.kind != RoleKind::kSpare) return uint64_t{0};
  uint64_t bound = 0;
  for (const auto& d : layout_.groups[static_cast<size_t>(role_.group)].data) {
    protocol::Reader rd(all[static_cast<size_t>(d.codec_rank)], "store bytes");
    uint64_t b = 0;
    DLCKPT_RETURN_IF_ERROR(rd.U64(&b));
    bound = std::max(bound, b);
  }
  return bound;
}

void Service::StartWarmup(uint64_t slot_bytes, int slots, bool stores) {
  FinishWarmup();
  if (!EnvSwitchOn("DLCKPT_CODEC_WARMUP")) return;
  std::vector<int32_t> ranks;
  protocol::ParityReport shape;
  if (role_.kind == RoleKind::kData) {
    if (!stores) return;
    ranks = my_app_ranks_;
  } else if (role_.kind == RoleKind::kSpare && slot_bytes > 0) {
    const Group& g = layout_.groups[static_cast<size_t>(role_.group)];
    shape.group = static_cast<uint32_t>(g.id);
    shape.k = static_cast<uint32_t>(g.k());
    shape.ngroups = static_cast<uint32_t>(layout_.groups.size());
    shape.scheme = SchemeByte(g.scheme());
    shape.generation = cfg_.generation;
    for (const auto& d : g.data) {
      protocol::MemberRecord m{d.node, {}, {}};
      m.ranks.assign(d.app_ranks.begin(), d.app_ranks.end());
      m.sizes.assign(m.ranks.size(), 0);
      shape.members.push_back(std::move(m));
    }
  } else {
    return;
  }
  warmup_.active = true;
  warmup_.began = Now();
  warmup_.slots = shape.members.empty() ? 0 : slots;
  warmup_.thread = std::thread([this, ranks, shape, slot_bytes, slots] {
    Status st;
    for (int32_t r : ranks) {
      auto name = StoreName(cfg_.job, cfg_.node, r);
      auto s = name.ok() ? memfs::Store::Attach(*name, memfs::AttachMode::kReadAll) : name.status();
      if (s.ok()) {
        warmup_.stores[r] = std::move(*s);
      } else if (st.ok()) {
        st = s.status().Prefixed("attaching the store of rank " + std::to_string(r));
      }
    }
    if (!shape.members.empty()) {
      st = parity_.Reserve(shape, slot_bytes, slots)
               .Prefixed("reserving parity slots of " + std::to_string(slot_bytes) + " bytes");
    }
    warmup_.status = st;
    warmup_.done = Now();
  });
}

void Service::FinishWarmup() {
  if (!warmup_.active) return;
  const double t = Now();
  warmup_.thread.join();
  warmup_.active = false;
  for (auto& [r, s] : warmup_.stores) stores_[r] = std::move(s);
  warmup_.stores.clear();
  const std::string what = std::string(role_.kind != RoleKind::kSpare ? "stores"
                                       : warmup_.slots == 1           ? "parity slots (the first)"
                                                                      : "parity slots (the second)") +
                           " " +
                           Fixed(warmup_.done - warmup_.began) + " s, waited " + Fixed(Now() - t) + " s";
  events::Emit(events::Warmup(cfg_.node, warmup_.done - warmup_.began, Now() - t));
  if (!warmup_.status.ok()) {
    Log("warm-up: " + warmup_.status.ToString() + " (the encode does it when needed)");
  } else if (getenv("DLCKPT_CODEC_TRACE")) {
    Log("warm-up: " + what);
  }
}

}  // namespace dlckpt::codec

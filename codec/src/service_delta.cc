// Incremental encode in the dlckpt-codec service (Service, service_impl.h;
// the math in dlckpt/codec/delta.h, the transport ends in delta_transport.h).
//
// An ENCODE(E, keep=A) may update the parity of A instead of encoding E in
// full, group by group: every data node of the group reports the ranges of
// its member image that changed since A (memfs Store::Delta over its stores),
// every spare whether it holds the complete parity of A for exactly the
// members, ranks and image sizes the data nodes had at A. All of it travels
// in the encode's one exchange, so every process of the group computes the
// same plan (PlanDelta, a pure function) without another collective. The
// plan is a delta when all of that holds and the packed bytes are at most
// DeltaThreshold() of the new parity length (or $DLCKPT_DELTA=on); otherwise
// the group encodes in full, as before. Either way the new parity goes into
// the slot that does not hold A's, marked complete only at the end: a failure
// leaves A's parity whole, exactly as for a full encode.
//
// Spread layout (control/stripes.h): every member is a data node and holds a
// parity object, so it reports both; PlanSpreadDelta unites the changes in
// segment coordinates and RunSpreadDelta updates each member's object (see
// docs/design.md, "The delta encode in the spread layout").
//
// Layout changes: a store whose file set or sizes changed reports the rest of
// its image (and of the member image after it) as changed (Store::Diff), so
// the delta applies where the layout is stable and the fraction rule turns a
// large shift into a full encode. The result is always the parity a full
// encode gives (codec/src/delta_test.cc, tests/incremental/).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dlckpt/codec/delta.h"
#include "dlckpt/codec/delta_transport.h"
#include "dlckpt/control/stripes.h"
#include "service_impl.h"

namespace dlckpt::codec {

namespace protocol = control::protocol;

namespace internal {

namespace {

// Measured (bench/README.md, "Incremental encode"; bench/ckpt_model.py
// --incremental): the packed fraction up to which a delta encode is faster
// than a full one; the smaller measured value, rounded down, so that "auto"
// never picks the slower of the two.
// - Spares layout, since the delta is read in place (2026-11-29): XOR (4:1)
//   crossover 0.77-0.88, Reed-Solomon (8:2) 0.79-0.81.
// - Spread layout (and both layouts before, with the delta packed first):
//   XOR 0.35-0.43, Reed-Solomon 0.53-0.62. Not measured again: a spread
//   stripe packs the union of its members' changes, so its packed fraction
//   grows faster than the changed one, and the old values stay.
constexpr double kThresholdXor = 0.7;
constexpr double kThresholdRs = 0.7;
constexpr double kThresholdSpreadXor = 0.35;
constexpr double kThresholdSpreadRs = 0.5;
}  // namespace

DeltaMode DeltaModeFromEnv() {
  const char* v = std::getenv("DLCKPT_DELTA");
  if (v == nullptr) return DeltaMode::kAuto;
  if (std::strcmp(v, "on") == 0 || std::strcmp(v, "1") == 0) return DeltaMode::kOn;
  if (std::strcmp(v, "off") == 0 || std::strcmp(v, "0") == 0) return DeltaMode::kOff;
  return DeltaMode::kAuto;
}

double DeltaThreshold(Scheme scheme, bool spread) {
  const double def = spread ? (scheme == Scheme::kXor ? kThresholdSpreadXor : kThresholdSpreadRs)
                            : (scheme == Scheme::kXor ? kThresholdXor : kThresholdRs);
  const char* v = std::getenv("DLCKPT_DELTA_THRESHOLD");
  if (v == nullptr) return def;
  double t = std::strtod(v, nullptr);
  return (t > 0 && t <= 1) ? t : def;
}

void PutDeltaInfo(protocol::Writer& w, const DeltaInfo& d) {
  w.U8(d.have_delta ? 1 : 0);
  w.U32(static_cast<uint32_t>(d.old_sizes.size()));
  for (uint64_t s : d.old_sizes) w.U64(s);
  w.U32(static_cast<uint32_t>(d.ranges.size()));
  for (const auto& r : d.ranges) {
    w.U64(r.offset);
    w.U64(r.len);
  }
  w.U8(d.have_kept ? 1 : 0);
  w.U8(d.scheme);
  w.U32(d.k);
  w.U32(static_cast<uint32_t>(d.kept_members.size()));
  for (const auto& m : d.kept_members) protocol::PutMember(w, m);
}

Status GetDeltaInfo(protocol::Reader& r, DeltaInfo* d) {
  uint8_t flag = 0;
  uint32_t n = 0;
  DLCKPT_RETURN_IF_ERROR(r.U8(&flag));
  d->have_delta = flag != 0;
  DLCKPT_RETURN_IF_ERROR(r.U32(&n));
  if (n > (1u << 20)) return Status::Corruption("delta info: too many stores");
  d->old_sizes.resize(n);
  for (auto& s : d->old_sizes) DLCKPT_RETURN_IF_ERROR(r.U64(&s));
  DLCKPT_RETURN_IF_ERROR(r.U32(&n));
  if (n > kMaxDeltaRanges) return Status::Corruption("delta info: too many ranges");
  d->ranges.resize(n);
  for (auto& x : d->ranges) {
    DLCKPT_RETURN_IF_ERROR(r.U64(&x.offset));
    DLCKPT_RETURN_IF_ERROR(r.U64(&x.len));
  }
  DLCKPT_RETURN_IF_ERROR(r.U8(&flag));
  d->have_kept = flag != 0;
  DLCKPT_RETURN_IF_ERROR(r.U8(&d->scheme));
  DLCKPT_RETURN_IF_ERROR(r.U32(&d->k));
  DLCKPT_RETURN_IF_ERROR(r.U32(&n));
  if (n > 256) return Status::Corruption("delta info: too many members");
  d->kept_members.resize(n);
  for (auto& m : d->kept_members) DLCKPT_RETURN_IF_ERROR(protocol::GetMember(r, &m));
  return Status::OK();
}

namespace {

// The changed ranges of every data node of `g` since `keep`, in member
// order. False, with plan->why, when the mode, `keep` or a node that has no
// delta rules a delta out.
bool MemberChanges(const Group& g, uint64_t keep, const std::vector<protocol::MemberRecord>& records,
                   const std::vector<DeltaInfo>& infos, DeltaMode mode, DeltaPlan* plan,
                   std::vector<std::vector<memfs::Store::ByteRange>>* lists) {
  if (mode == DeltaMode::kOff) {
    plan->why = "DLCKPT_DELTA=off";
    return false;
  }
  if (keep == 0) {
    plan->why = "no acknowledged epoch to update";
    return false;
  }
  for (const auto& d : g.data) {
    const DeltaInfo& inf = infos[static_cast<size_t>(d.codec_rank)];
    if (!inf.have_delta) {
      plan->why = "node " + records[static_cast<size_t>(d.codec_rank)].node + " has no delta since epoch " +
                  std::to_string(keep);
      return false;
    }
    lists->push_back(inf.ranges);
  }
  return true;
}

// Whether `holder` (a spare's or a spread member's DeltaInfo) holds the
// complete parity of the kept epoch for exactly g's scheme, members, ranks
// and the members' sizes then.
bool HoldsKept(const Group& g, const DeltaInfo& holder, const std::vector<protocol::MemberRecord>& records,
               const std::vector<DeltaInfo>& infos) {
  bool same = holder.have_kept && holder.scheme == SchemeByte(g.scheme()) &&
              holder.k == static_cast<uint32_t>(g.k()) && holder.kept_members.size() == g.data.size();
  for (size_t i = 0; same && i < g.data.size(); ++i) {
    const auto& km = holder.kept_members[i];
    const auto& now = records[static_cast<size_t>(g.data[i].codec_rank)];
    const auto& old = infos[static_cast<size_t>(g.data[i].codec_rank)].old_sizes;
    same = km.node == now.node && km.ranks == now.ranks && km.sizes == old;
  }
  return same;
}

// The choice, once the delta is possible: `packed` of plan->whole bytes.
void Choose(DeltaPlan* plan, uint64_t packed, DeltaMode mode, double threshold) {
  plan->packed = packed;
  plan->fraction = plan->whole == 0 ? 0 : static_cast<double>(packed) / static_cast<double>(plan->whole);
  plan->use = mode == DeltaMode::kOn || plan->fraction <= threshold;
  if (!plan->use) plan->why = "changed fraction above the threshold";
}

}  // namespace

DeltaPlan PlanDelta(const Group& g, uint64_t keep, const std::vector<protocol::MemberRecord>& records,
                    const std::vector<DeltaInfo>& infos, DeltaMode mode, double threshold) {
  DeltaPlan plan;
  for (const auto& d : g.data) {
    uint64_t size = 0;
    for (uint64_t s : records[static_cast<size_t>(d.codec_rank)].sizes) size += s;
    plan.length = std::max(plan.length, size);
  }
  plan.whole = plan.length;
  std::vector<std::vector<memfs::Store::ByteRange>> lists;
  if (!MemberChanges(g, keep, records, infos, mode, &plan, &lists)) return plan;
  for (const auto& s : g.spares) {
    if (!HoldsKept(g, infos[static_cast<size_t>(s.codec_rank)], records, infos)) {
      plan.why = "spare " + s.node + " holds no parity of epoch " + std::to_string(keep) + " for these members";
      return plan;
    }
  }
  plan.ranges = UnionRanges(lists, plan.length);
  Choose(&plan, RangeBytes(plan.ranges), mode, threshold);
  return plan;
}

DeltaPlan PlanSpreadDelta(const Group& g, uint64_t keep, const std::vector<protocol::MemberRecord>& records,
                          const std::vector<DeltaInfo>& infos, DeltaMode mode, double threshold) {
  DeltaPlan plan;
  const auto n = static_cast<uint32_t>(g.n()), k = static_cast<uint32_t>(g.k());
  std::vector<protocol::MemberRecord> members;
  for (const auto& d : g.data) members.push_back(records[static_cast<size_t>(d.codec_rank)]);
  plan.length = SpreadSegmentOf(members, n, k);
  plan.whole = uint64_t{n} * plan.length;
  std::vector<std::vector<memfs::Store::ByteRange>> lists;
  if (!MemberChanges(g, keep, records, infos, mode, &plan, &lists)) return plan;
  if (plan.length == 0) {
    plan.why = "empty member images";
    return plan;
  }
  for (const auto& d : g.data) {
    if (!HoldsKept(g, infos[static_cast<size_t>(d.codec_rank)], records, infos)) {
      plan.why = "member " + d.node + " holds no spread parity of epoch " + std::to_string(keep) +
                 " for these members";
      return plan;
    }
  }
  // Every member's kept parity was cut with the segment of the kept sizes.
  if (SpreadSegmentOf(infos[static_cast<size_t>(g.data[0].codec_rank)].kept_members, n, k) != plan.length) {
    plan.why = "the spread segment length changed since epoch " + std::to_string(keep);
    return plan;
  }
  uint64_t packed = 0;
  for (uint32_t s = 0; s < n; ++s) {
    std::vector<std::vector<memfs::Store::ByteRange>> chunks;
    std::vector<uint32_t> segments;
    for (uint32_t m : control::SpreadDataMembers(n, k, s)) {
      chunks.push_back(lists[m]);
      segments.push_back(control::SpreadSegmentOf(n, k, m, s));
    }
    plan.stripes.push_back(StripeUnion(chunks, segments, plan.length, kSpreadDeltaAlign));
    packed += RangeBytes(plan.stripes.back());
  }
  Choose(&plan, packed, mode, threshold);
  return plan;
}

}  // namespace internal

internal::DeltaInfo Service::LocalDelta(uint64_t epoch, uint64_t keep) {
  internal::DeltaInfo d;
  delta_old_.clear();
  delta_own_.clear();
  if (keep == 0 || internal::DeltaModeFromEnv() == internal::DeltaMode::kOff) return d;
  if (role_.kind == RoleKind::kData) {
    std::vector<memfs::Store::ImageDelta> deltas;
    for (int32_t rank : my_app_ranks_) {
      Status err;
      memfs::Store* s = CachedStore(rank, &err);
      if (!s) return d;
      auto delta = s->Delta(keep, epoch);
      auto old = s->GetImage(keep);
      if (!delta.ok() || !old.ok()) {
        delta_old_.clear();
        return d;
      }
      delta_old_.insert(delta_old_.end(), old->extents.begin(), old->extents.end());
      d.old_sizes.push_back(delta->from_size);
      deltas.push_back(std::move(*delta));
    }
    d.ranges = MemberDelta(deltas);
    if (d.ranges.size() > internal::kMaxDeltaRanges) {
      d.ranges.clear();
      return d;
    }
    delta_own_ = d.ranges;
    d.have_delta = true;
  }
  // A spare holds its group's parity j; a member of a spread group its own
  // parity object (index = the member).
  const bool spread_member = role_.kind == RoleKind::kData && layout_.groups[static_cast<size_t>(role_.group)].spread;
  if (role_.kind == RoleKind::kSpare || spread_member) {
    const Group& g = layout_.groups[static_cast<size_t>(role_.group)];
    const auto want = spread_member ? control::ParityLayout::kSpread : control::ParityLayout::kSpares;
    protocol::ParityReport kept;
    if (parity_.Kept(static_cast<uint32_t>(g.id), static_cast<uint32_t>(role_.index), keep, &kept).ok() &&
        kept.layout == static_cast<uint8_t>(want)) {
      d.have_kept = true;
      d.scheme = kept.scheme;
      d.k = kept.k;
      d.kept_members = kept.members;
    }
  }
  return d;
}

Status Service::RunDelta(const Group& g, const ErasureCode& code, const internal::DeltaPlan& plan,
                         const protocol::ParityReport& info, uint64_t keep, const std::string& label,
                         std::span<const Extent> new_image) {
  auto map = std::make_shared<const PackedMap>(plan.ranges);
  // A data node's delta (old xor new over the plan's ranges) goes to the
  // transport as its new and old bytes, read in place (never packed).
  std::vector<Extent> input, input_old;
  if (role_.kind == RoleKind::kData) DeltaInputs(delta_old_, new_image, plan.ranges, delta_own_, &input, &input_old);
  std::vector<std::span<const uint8_t>> kept(static_cast<size_t>(g.k()));
  bool reuse = false;
  std::vector<memfs::Store::ByteRange> stale;
  uint64_t kept_length = 0;
  if (role_.kind == RoleKind::kSpare) {
    // Not found (it was there for the plan): Begin fails inside Run.
    protocol::ParityReport kinfo;
    const auto group = static_cast<uint32_t>(g.id), index = static_cast<uint32_t>(role_.index);
    auto old = parity_.Kept(group, index, keep, &kinfo);
    if (old.ok()) {
      kept[static_cast<size_t>(role_.index)] = std::span<const uint8_t>(old->data, old->len);
      kept_length = old->len;
    }
    // The other slot still holds the parity the kept one was updated from:
    // only what that update changed, and the tail, differ (SlotHistory).
    // The blocks this update changes are copied whole, so that every byte
    // of them comes from the kept parity, whose blocks CompleteDelta checks.
    reuse = old.ok() && history_.valid && history_.epoch == keep && history_.length == old->len &&
            parity_.OtherHolds(group, index, keep, history_.from);
    if (reuse) {
      uint64_t lo = std::min(history_.from_length, history_.length);
      std::vector<std::vector<memfs::Store::ByteRange>> lists{
          history_.ranges, {memfs::Store::ByteRange{lo, plan.length > lo ? plan.length - lo : 0}},
          BlocksMeeting(plan.ranges, plan.length)};
      stale = UnionRanges(lists, plan.length);
    }
  }
  history_.valid = false;
  delta_rewritten_.reset();
  bool reused_slot = false;
  DeltaParitySink sink(
      map, plan.length, std::move(kept),
      [&](int output, uint64_t length, bool* reused) {
        protocol::ParityReport want = info;
        want.index = static_cast<uint32_t>(output);
        auto dst = parity_.Prepare(want, length, keep);
        *reused = reuse && dst.ok() && !parity_.last_prepare_fresh();
        reused_slot = *reused;
        return dst;
      },
      reuse ? &stale : nullptr);
  // The copy of the unchanged parity, before the run. An error here comes
  // back from Begin inside Run, which every rank must enter.
  if (role_.kind == RoleKind::kSpare) (void)sink.PrepareAhead(role_.index);
  DLCKPT_ASSIGN_OR_RETURN(auto stats, group_transport_->Run(EncodeSpec(code, label), input, &sink, input_old));
  (void)stats;
  if (role_.kind == RoleKind::kSpare) {
    history_ = SlotHistory{true, info.epoch, keep, plan.length, kept_length, plan.ranges};
    // Only the stale ranges were copied into the reused slot: the rest of it
    // rests as it was (ParitySlots::CompleteDelta checks a window of it).
    if (reused_slot) delta_rewritten_ = std::move(stale);
  }
  if (getenv("DLCKPT_CODEC_TRACE") && role_.kind == RoleKind::kSpare) {
    Log(label + ": copied " + std::to_string(sink.copied_bytes()) + " unchanged parity bytes in " +
        internal::Fixed(sink.copy_seconds()) + " s" + (reuse ? " (slot reused)" : ""));
  }
  return Status::OK();
}

Status Service::RunSpreadDelta(const Group& g, protocol::ParityReport info, uint64_t keep, const std::string& label,
                               const internal::DeltaPlan& plan, std::span<const Extent> new_image) {
  const auto n = static_cast<uint32_t>(g.n()), k = static_cast<uint32_t>(g.k());
  if (plan.stripes.size() != n) return Status::InvalidArgument(label + ": a spread delta plan of " + std::to_string(plan.stripes.size()) + " stripes");
  DLCKPT_ASSIGN_OR_RETURN(auto code, ErasureCode::Create(g.scheme(), static_cast<int>(n - k), static_cast<int>(k)));
  const uint64_t seg = plan.length;
  const auto me = static_cast<uint32_t>(role_.index);
  info.index = me;
  // This member's delta bytes, stripe by stripe where it holds data: its
  // segment there over U_s, read in place as new and old bytes (below).
  uint64_t total = 0;
  for (uint32_t s = 0; s < n; ++s) {
    if (control::SpreadHoldsData(n, k, me, s)) total += RangeBytes(plan.stripes[s]);
  }
  // The kept parity object: segment j is parity j of stripe (me - j) mod n,
  // output j of that stripe's run, updated over that stripe's U. Not found,
  // or of another length (it was there for the plan): Begin fails inside
  // the run, which every rank must enter.
  protocol::ParityReport kinfo;
  auto old = parity_.Kept(static_cast<uint32_t>(g.id), me, keep, &kinfo);
  const bool have = old.ok() && old->len == uint64_t{k} * seg;
  history_.valid = false;
  uint8_t* base = nullptr;
  auto prepare = [&](int output, uint64_t, bool* reused) -> Result<uint8_t*> {
    *reused = false;
    if (base == nullptr) {
      DLCKPT_ASSIGN_OR_RETURN(base, parity_.Prepare(info, uint64_t{k} * seg, keep));
    }
    return base + static_cast<uint64_t>(output) * seg;
  };
  std::vector<std::unique_ptr<DeltaParitySink>> sinks;
  std::vector<memfs::Store::ByteRange> changed;  // in the parity object
  for (uint32_t j = 0; j < k; ++j) {
    const uint32_t s = control::SpreadStripeOfParity(n, me, j);
    std::vector<std::span<const uint8_t>> kept(k);
    if (have) kept[j] = std::span<const uint8_t>(old->data + uint64_t{j} * seg, seg);
    sinks.push_back(std::make_unique<DeltaParitySink>(std::make_shared<const PackedMap>(plan.stripes[s]), seg,
                                                      std::move(kept), prepare));
    // The unchanged parity is copied before the runs (an error comes back
    // from Begin inside them).
    (void)sinks.back()->PrepareAhead(static_cast<int>(j));
    auto r = InSegment(plan.stripes[s], j, seg);
    changed.insert(changed.end(), r.begin(), r.end());
  }
  double copy_seconds = 0;
  uint64_t copied = 0;
  for (const auto& sk : sinks) {
    copy_seconds += sk->copy_seconds();
    copied += sk->copied_bytes();
  }
  for (uint32_t s = 0; s < n; ++s) {
    const uint64_t u = RangeBytes(plan.stripes[s]);
    // Nothing changed in this stripe: its parity was copied above. Every
    // member skips the same runs (the plan is the same everywhere).
    if (u == 0) continue;
    ReduceSpec spec = internal::SpreadStripeSpec(code->encoder(), n, k, s, label + " (stripe " + std::to_string(s) + " delta)");
    std::vector<Extent> input, input_old;
    if (control::SpreadHoldsData(n, k, me, s)) {
      DeltaInputs(delta_old_, new_image, InSegment(plan.stripes[s], control::SpreadSegmentOf(n, k, me, s), seg),
                  delta_own_, &input, &input_old);
    }
    // The sink of the output this member owns in the stripe, if any.
    const uint32_t j = (me + n - s) % n;
    DeltaParitySink* sink = sinks[j < k ? j : 0].get();
    DLCKPT_ASSIGN_OR_RETURN(auto stats, group_transport_->Run(spec, input, sink, input_old));
    (void)stats;
  }
  if (base == nullptr) return Status::Error(EPROTO, label + ": no spread parity delta reached member " + cfg_.node);
  DLCKPT_RETURN_IF_ERROR(parity_.CompleteDelta(keep, changed));
  if (getenv("DLCKPT_CODEC_TRACE")) {
    Log(label + ": spread delta, " + std::to_string(total) + " packed bytes of " + std::to_string((n - k) * seg) +
        "; copied " + std::to_string(copied) + " unchanged parity bytes in " + internal::Fixed(copy_seconds) + " s");
  }
  return Status::OK();
}

}  // namespace dlckpt::codec

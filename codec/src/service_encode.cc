// ENCODE of the dlckpt-codec service (Service, service_impl.h): every data
// node contributes the images of its stores' epoch (read in place) to the
// parity of its group, which the group's spare nodes write double-buffered
// into their parity slots; and the one-shot encode (RunEncodeOnce), which
// takes the layout from the stores the nodes hold.
// Thread safety: none; collective over the world communicator (every codec
// process calls Encode for the same epoch). Failures: a node's error (a
// missing image, the transport, a parity slot) is agreed on by all and
// returned as a Done naming the node, group and epoch; the previous parity
// stays the committed one.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dlckpt/base/events.h"
#include "dlckpt/base/names.h"
#include "dlckpt/codec/delta.h"
#include "dlckpt/codec/erasure.h"
#include "dlckpt/codec/groups.h"
#include "dlckpt/control/protocol.h"
#include "dlckpt/control/stripes.h"
#include "dlckpt/memfs/memfs.h"
#include "parity.h"
#include "service_impl.h"

namespace dlckpt::codec {

namespace protocol = control::protocol;

using internal::EncodeHold;
using internal::Fixed;
using internal::Now;
using internal::RankOfStore;
using internal::Sleep;

// ---- ENCODE ---------------------------------------------------------------------------

protocol::Done Service::Encode(uint64_t epoch, uint64_t keep) {
  double t0 = Now();
  protocol::Done done;
  done.epoch = epoch;
  if (rank_ == 0) events::Emit(events::EncodeBegin(epoch));
  if (double hold = EncodeHold(epoch); hold > 0) Sleep(hold);
  // Rank 0 (data node 0, in group 0) reports a long encode.
  if (rank_ == 0 && group_transport_) group_transport_->set_progress(internal::ProgressEvents(events::EncodeProgress(epoch, 0, 0, 0)));
  auto finish = [&](const Status& s) {
    if (rank_ == 0 && group_transport_) group_transport_->set_progress(nullptr);
    done.code = s.code();
    done.message = s.ok() ? "" : s.message();
    done.seconds = Now() - t0;
    if (rank_ == 0) {
      events::Emit(events::EncodeEnd(epoch, s.code()));
    }
    return done;
  };
  if (!have_layout_) return finish(Status::InvalidArgument("ENCODE before the application's HELLO"));

  // Every data node's image: its stores' images in rank order, read in place.
  std::vector<Extent> extents;
  std::vector<uint64_t> sizes;
  Status mine;
  if (role_.kind == RoleKind::kData) {
    mine = LocalImage(epoch, my_app_ranks_, &extents, &sizes, nullptr);
    if (!mine.ok()) stores_.clear();  // re-attach next time (a relaunched rank may have new stores)
  }
  // One exchange carries both every node's readiness and its member record
  // (node, ranks, image sizes) for the parity headers: fewer collectives,
  // fewer wake-ups of sleeping processes.
  protocol::MemberRecord mine_record{cfg_.node, {}, sizes};
  if (!sizes.empty()) mine_record.ranks.assign(my_app_ranks_.begin(), my_app_ranks_.end());
  protocol::Writer w;
  w.I32(mine.code());
  w.Str(mine.message());
  protocol::PutMember(w, mine_record);
  // Incremental encode: this node's changes since `keep` (data) or the kept
  // parity it holds (spare), for every process's PlanDelta.
  internal::PutDeltaInfo(w, mine.ok() ? LocalDelta(epoch, keep) : internal::DeltaInfo{});
  auto gathered = c_->Allgather(w.data());
  if (!gathered.ok()) return finish(gathered.status());
  std::vector<protocol::MemberRecord> records(gathered->size());
  std::vector<internal::DeltaInfo> delta_infos(gathered->size());
  const std::string what = "encode of epoch " + std::to_string(epoch);
  for (size_t i = 0; i < records.size(); ++i) {
    protocol::Reader rd((*gathered)[i], "member record");
    int32_t code = 0;
    std::string msg;
    Status st = rd.I32(&code);
    if (st.ok()) st = rd.Str(&msg);
    if (st.ok()) st = protocol::GetMember(rd, &records[i]);
    if (st.ok()) st = internal::GetDeltaInfo(rd, &delta_infos[i]);
    if (!st.ok()) return finish(st);
    if (code != 0) return finish(Status::Error(code, what + ": node " + nodes_[i] + ": " + msg));
    for (uint64_t size : records[i].sizes) done.bytes += size;
  }

  const internal::DeltaMode delta_mode = internal::DeltaModeFromEnv();
  // Each group's delta plan, made once: rank 0 (of group 0) plans every
  // group to report which update their parity from deltas
  // (events::EncodeDelta); the others only their own.
  std::vector<internal::DeltaPlan> plans(layout_.groups.size());
  for (size_t i = 0; i < layout_.groups.size(); ++i) {
    const Group& g = layout_.groups[i];
    const bool mine = role_.kind != RoleKind::kStandby && static_cast<size_t>(role_.group) == i;
    if (rank_ != 0 && !mine) continue;
    plans[i] = g.spread ? internal::PlanSpreadDelta(g, keep, records, delta_infos, delta_mode, internal::DeltaThreshold(g.scheme(), true))
                        : internal::PlanDelta(g, keep, records, delta_infos, delta_mode, internal::DeltaThreshold(g.scheme(), false));
  }
  if (rank_ == 0) {
    int use = 0;
    uint64_t packed = 0, length = 0;
    for (const internal::DeltaPlan& p : plans) {
      use += p.use ? 1 : 0;
      packed += p.use ? p.packed : p.whole;
      length += p.whole;
    }
    events::Emit(events::EncodeDelta(epoch, static_cast<uint32_t>(use), static_cast<uint32_t>(layout_.groups.size()), packed, length));
  }
  Status run_status;
  if (role_.kind != RoleKind::kStandby) {
    const Group& g = layout_.groups[static_cast<size_t>(role_.group)];
    auto code = ErasureCode::Create(g.scheme(), g.n(), g.k());
    if (!code.ok()) {
      run_status = code.status();
    } else {
      protocol::ParityReport info;
      info.epoch = epoch;
      info.generation = cfg_.generation;
      info.group = static_cast<uint32_t>(g.id);
      info.k = static_cast<uint32_t>(g.k());
      info.ngroups = static_cast<uint32_t>(layout_.groups.size());
      info.scheme = SchemeByte(g.scheme());
      info.layout = static_cast<uint8_t>(g.spread ? control::ParityLayout::kSpread : control::ParityLayout::kSpares);
      for (const auto& d : g.data) info.members.push_back(records[static_cast<size_t>(d.codec_rank)]);
      struct ParitySink final : OutputSink {
        ParitySlots* slots;
        protocol::ParityReport info;
        uint64_t keep;
        Result<uint8_t*> Begin(int output, uint64_t length) override {
          info.index = static_cast<uint32_t>(output);
          return slots->Prepare(info, length, keep);
        }
      } sink;
      sink.slots = &parity_;
      sink.info = info;
      sink.keep = keep;
      std::string label = "group " + std::to_string(g.id) + " encode of epoch " + std::to_string(epoch);
      double t_run = Now();
      const internal::DeltaPlan& plan = plans[static_cast<size_t>(role_.group)];
      if (g.spread) {
        history_.valid = false;
        run_status = plan.use ? RunSpreadDelta(g, info, keep, label, plan, extents)
                              : EncodeSpread(g, info, keep, label, extents);
      } else if (plan.use) {
        run_status = RunDelta(g, **code, plan, info, keep, label, extents);
      } else {
        history_.valid = false;  // the other slot is written in full
        auto stats = group_transport_->Run(EncodeSpec(**code, label), extents, &sink);
        run_status = stats.status();
      }
      const double t_complete = Now();
      const bool spare = role_.kind == RoleKind::kSpare;  // spread members completed theirs
      if (run_status.ok() && spare) {
        run_status = plan.use ? parity_.CompleteDelta(keep, plan.ranges, delta_rewritten_ ? &*delta_rewritten_ : nullptr)
                              : parity_.Complete();
      }
      if (getenv("DLCKPT_CODEC_TRACE")) {
        // The start (CLOCK_MONOTONIC) shows how late each process began.
        Log(label + (spare ? " (parity)" : "") + ": started " + Fixed(t0, 6) + " (monotonic s), prepare " +
            Fixed(t_run - t0) + " s, transport " +
            Fixed(t_complete - t_run) + " s, " + (spare ? "block checksums " + Fixed(Now() - t_complete) + " s, " : "") +
            (plan.use ? "delta of " + Fixed(plan.fraction) : "full (" + plan.why + ")") +
            (spare && parity_.last_prepare_fresh() ? ", new parity slot" : ""));
      }
    }
  }
  Status all = c_->Agree(internal::OwnError(run_status), what);
  if (all.ok()) {
    last_encoded_ = epoch;
    ++encodes_;
    if (drop_old_parity_) {
      parity_.RemoveAll();
      drop_old_parity_ = false;
    }
  }
  return finish(all);
}

Status Service::EncodeSpread(const Group& g, protocol::ParityReport info, uint64_t keep, const std::string& label,
                             std::span<const Extent> image) {
  const uint32_t n = static_cast<uint32_t>(g.n()), k = static_cast<uint32_t>(g.k());
  DLCKPT_ASSIGN_OR_RETURN(auto code, ErasureCode::Create(g.scheme(), static_cast<int>(n - k), static_cast<int>(k)));
  const uint64_t seg = internal::SpreadSegmentOf(info.members, n, k);
  const uint32_t me = static_cast<uint32_t>(role_.index);
  info.index = me;
  // This member's parity object: segment j is parity j of stripe (me - j) mod
  // n, prepared at the first segment that arrives; the tail of a segment past
  // its stripe's length is zeros.
  struct SpreadSink final : OutputSink {
    ParitySlots* slots = nullptr;
    protocol::ParityReport info;
    uint64_t keep = 0, seg = 0;
    uint32_t k = 0;
    uint8_t* base = nullptr;
    Result<uint8_t*> Begin(int output, uint64_t length) override {
      if (length > seg || output < 0 || static_cast<uint32_t>(output) >= k) {
        return Status::Error(EPROTO, "spread parity " + std::to_string(output) + " of " + std::to_string(length) +
                                " bytes does not fit a segment of " + std::to_string(seg));
      }
      if (base == nullptr) {
        DLCKPT_ASSIGN_OR_RETURN(base, slots->Prepare(info, k * seg, keep));
      }
      uint8_t* at = base + static_cast<uint64_t>(output) * seg;
      std::memset(at + length, 0, seg - length);
      return at;
    }
  } sink;
  sink.slots = &parity_;
  sink.info = info;
  sink.keep = keep;
  sink.seg = seg;
  sink.k = k;
  if (k == 1 && code->encoder()->is_xor()) {
    // XOR: one reduce-scatter of every stripe at once. Member i's input puts
    // its segment of stripe s at s·seg (a hole for its own stripe and past the
    // end of its image), and it owns segment i of the sum: its parity.
    std::vector<Extent> input;
    for (uint32_t s = 0; s < n; ++s) {
      uint64_t len = 0;
      if (s != me) {
        for (const Extent& e : internal::SliceExtents(image, uint64_t{control::SpreadSegmentOf(n, k, me, s)} * seg, seg)) {
          input.push_back(e);
          len += e.len;
        }
      }
      if (len < seg) input.push_back({nullptr, static_cast<size_t>(seg - len)});
    }
    ReduceSpec spec;
    spec.label = label + " (spread)";
    DLCKPT_ASSIGN_OR_RETURN(spec.combination, Combination::Create(1, static_cast<int>(n), std::vector<uint8_t>(n, 1)));
    for (uint32_t m = 0; m < n; ++m) spec.source_ranks.push_back(static_cast<int>(m));
    spec.scatter = true;
    auto stats = group_transport_->Run(spec, input, &sink);
    if (!stats.ok()) return stats.status();
    if (sink.base == nullptr) return Status::Error(EPROTO, label + ": no spread parity reached member " + cfg_.node);
    return parity_.Complete();
  }
  // Reed-Solomon: one run per stripe (member i's coefficient differs per
  // stripe); rank 0 reports the progress of all of them as one.
  auto stripe = std::make_shared<uint32_t>(0);
  if (rank_ == 0) {
    auto report = std::make_shared<ReduceTransport::ProgressFn>(
        internal::ProgressEvents(events::EncodeProgress(info.epoch, 0, 0, 0)));
    group_transport_->set_progress([report, stripe, n](uint64_t done, uint64_t total) {
      (*report)(*stripe * total + done, n * total);
    });
  }
  for (uint32_t s = 0; s < n; ++s) {
    *stripe = s;
    ReduceSpec spec = internal::SpreadStripeSpec(code->encoder(), n, k, s, label + " (stripe " + std::to_string(s) + ")");
    std::vector<Extent> input;
    if (control::SpreadHoldsData(n, k, me, s)) {
      input = internal::SliceExtents(image, uint64_t{control::SpreadSegmentOf(n, k, me, s)} * seg, seg);
    }
    auto stats = group_transport_->Run(spec, input, &sink);
    if (!stats.ok()) return stats.status();
    if (getenv("DLCKPT_CODEC_TRACE")) {
      Log(spec.label + ": " + Fixed(stats->seconds) + " s, kernels " + Fixed(stats->compute_seconds) + " s, " +
          std::to_string(stats->bytes_received >> 10) + " KiB received");
    }
  }
  if (sink.base == nullptr) return Status::Error(EPROTO, label + ": no spread parity segment reached member " + cfg_.node);
  return parity_.Complete();
}

Status Service::EncodeOnce(uint64_t epoch) {
  // The layout is what the nodes hold: every store of the job on each node.
  protocol::Writer w;
  auto names = Env::Default()->ListShm(StorePrefix(cfg_.job, cfg_.node));
  std::vector<int32_t> ranks;
  if (names.ok()) {
    for (const auto& n : *names) {
      if (RankOfStore(n, cfg_.job, cfg_.node) >= 0) ranks.push_back(RankOfStore(n, cfg_.job, cfg_.node));
    }
  }
  w.U32(static_cast<uint32_t>(ranks.size()));
  for (int32_t r : ranks) w.I32(r);
  DLCKPT_ASSIGN_OR_RETURN(auto all, c_->Allgather(w.data()));
  protocol::Hello h;
  h.job = cfg_.job;
  for (size_t i = 0; i < all.size(); ++i) {
    protocol::Reader rd(all[i], "store list");
    uint32_t n = 0;
    (void)rd.U32(&n);
    for (uint32_t j = 0; j < n; ++j) {
      int32_t r;
      (void)rd.I32(&r);
      auto name = StoreName(cfg_.job, nodes_[i], r);
      h.layout.push_back({r, nodes_[i], name.ok() ? *name : ""});
    }
  }
  if (h.layout.empty()) return Status::NotFound("no store of job " + cfg_.job + " on any node");
  DLCKPT_RETURN_IF_ERROR(Hello(h));
  protocol::Done d = Encode(epoch, 0);
  if (d.code != 0) return Status::Error(d.code, d.message);
  if (rank_ == 0) {
    std::printf("encoded epoch %llu: %llu bytes in %.3f s; %s\n", static_cast<unsigned long long>(epoch),
                static_cast<unsigned long long>(d.bytes), d.seconds, StatusText().c_str());
  }
  return Status::OK();
}

}  // namespace dlckpt::codec

// SURVEY and RECOVER of the dlckpt-codec service (Service, service_impl.h):
// every node reports its stores and parity objects (verifying their CRCs); a
// recovery executes the plan dlckpt-run decided from that survey: it
// restores every surviving store to the chosen epoch (re-verifying only a
// store whose epochs changed since the survey) and rebuilds each lost member
// on its target node from the chunk sources the plan names (stores created
// there, CRC-checked), one group at a time over all codec processes. Also the
// one-shot recovery (RunRecoverOnce): survey, decide like dlckpt-run, rebuild.
// Thread safety: none; collective over the world communicator. Failures: a
// node's error is agreed on by all and returned as a Done (or Status) naming
// the node, group and epoch; half-built stores are removed, stale copies of
// rebuilt ranks are destroyed before the rebuild starts.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "dlckpt/base/events.h"
#include "dlckpt/base/names.h"
#include "dlckpt/codec/erasure.h"
#include "dlckpt/control/protocol.h"
#include "dlckpt/control/recovery.h"
#include "dlckpt/control/stripes.h"
#include "dlckpt/memfs/memfs.h"
#include "parity.h"
#include "service_impl.h"

namespace dlckpt::codec {

namespace protocol = control::protocol;
namespace recovery = control::recovery;

using internal::Fixed;
using internal::Hold;
using internal::kCmdRecover;
using internal::Now;
using internal::RankOfStore;
using internal::Sleep;

// ---- SURVEY ---------------------------------------------------------------------------

Result<protocol::SurveyReply> Service::Survey() {
  protocol::SurveyReply mine;
  mine.nodes.push_back(LocalReport());
  DLCKPT_ASSIGN_OR_RETURN(auto all, c_->Allgather(protocol::EncodeSurveyReply(mine)));
  protocol::SurveyReply out;
  for (const auto& s : all) {
    DLCKPT_ASSIGN_OR_RETURN(protocol::SurveyReply one, protocol::DecodeSurveyReply(s));
    for (auto& n : one.nodes) out.nodes.push_back(std::move(n));
  }
  return out;
}

// ---- RECOVER --------------------------------------------------------------------------

protocol::Done Service::Recover(const protocol::Recover& req) {
  double t0 = Now();
  protocol::Done done;
  done.epoch = req.epoch;
  const uint64_t e = req.epoch;
  if (rank_ == 0) events::Emit(events::RecoverBegin(e));
  auto finish = [&](const Status& s) {
    done.code = s.code();
    done.message = s.ok() ? "" : s.message();
    done.seconds = Now() - t0;
    if (rank_ == 0) events::Emit(events::RecoverEnd(e, s.code()));
    return done;
  };
  stores_.clear();

  // The plan is dlckpt-run's decision from its survey: it names the epoch,
  // every group to rebuild with the node giving each chunk, and the targets.
  std::set<int32_t> rebuilt_ranks;
  Status all = c_->Agree(CheckPlan(req, &rebuilt_ranks), "recover");
  if (!all.ok()) return finish(all);

  // 1. Every surviving store goes to epoch e; stale copies of rebuilt ranks go.
  all = c_->Agree(RestoreSurvivors(e, rebuilt_ranks), "recover");
  if (!all.ok()) return finish(all);
  if (rank_ == 0) events::Emit(events::RebuildBegin(e));
  if (double hold = Hold("DLCKPT_CODEC_HOLD_REBUILD"); hold > 0) Sleep(hold);

  // 2. Rebuild, one group at a time, over all codec processes.
  uint64_t rebuilt_bytes = 0;
  for (const protocol::RebuildGroup& g : req.groups) {
    std::vector<protocol::RebuildTask> tasks;
    for (const auto& t : req.rebuilds) {
      if (t.group == g.group) tasks.push_back(t);
    }
    all = RebuildGroup(req, g, tasks, &rebuilt_bytes);
    if (!all.ok()) return finish(all);
  }
  // Everyone's byte count (only targets know theirs).
  uint64_t sum = 0;
  MPI_Request r;
  MPI_Iallreduce(&rebuilt_bytes, &sum, 1, MPI_UINT64_T, MPI_SUM, world_, &r);
  (void)Wait(&r);
  done.bytes = sum;
  return finish(Status::OK());
}

Status Service::CheckPlan(const protocol::Recover& req, std::set<int32_t>* rebuilt_ranks) const {
  auto known = [&](const std::string& node, const char* what) {
    return rank_of_node_.count(node) ? Status::OK()
                                     : Status::NotFound(std::string(what) + " node " + node + " has no codec process");
  };
  std::map<uint32_t, const protocol::RebuildGroup*> groups;
  for (const auto& g : req.groups) {
    groups[g.group] = &g;
    for (const auto& src : g.sources) {
      if (!src.empty()) DLCKPT_RETURN_IF_ERROR(known(src, "rebuild source"));
    }
  }
  // A rebuilt member's data chunks are lost: no source gives them.
  auto described = [](const protocol::RebuildGroup& g, uint32_t member) {
    const uint32_t n = static_cast<uint32_t>(g.members.size());
    if (member >= n) return false;
    if (g.layout != static_cast<uint8_t>(control::ParityLayout::kSpread)) return g.sources[member].empty();
    for (uint32_t s = 0; s < n; ++s) {
      if (!control::SpreadHoldsData(n, g.k, member, s)) continue;
      const auto dm = control::SpreadDataMembers(n, g.k, s);
      const size_t c = static_cast<size_t>(std::find(dm.begin(), dm.end(), member) - dm.begin());
      if (!g.sources[s * n + c].empty()) return false;
    }
    return true;
  };
  for (const auto& t : req.rebuilds) {
    auto gi = groups.find(t.group);
    if (gi == groups.end() || !described(*gi->second, t.member)) {
      return Status::InvalidArgument("RECOVER: the plan rebuilds member " + std::to_string(t.member) +
                                     " of group " + std::to_string(t.group) +
                                     " but does not describe that group's stripe without it");
    }
    DLCKPT_RETURN_IF_ERROR(known(t.target_node, "rebuild target"));
    for (int32_t r : gi->second->members[t.member].ranks) rebuilt_ranks->insert(r);
  }
  return Status::OK();
}

Status Service::RestoreSurvivors(uint64_t e, const std::set<int32_t>& rebuilt_ranks) {
  Status mine;
  auto names = Env::Default()->ListShm(StorePrefix(cfg_.job, cfg_.node));
  if (!names.ok()) return Status::OK();
  for (const auto& n : *names) {
    int32_t r = RankOfStore(n, cfg_.job, cfg_.node);
    if (r < 0) continue;
    if (e == 0 || rebuilt_ranks.count(r)) {
      (void)memfs::Store::Destroy(n);
      continue;
    }
    auto s = memfs::Store::Attach(n, memfs::AttachMode::kOwner);
    if (!s.ok()) {
      if (mine.ok()) mine = s.status().Prefixed("restore " + n + " to epoch " + std::to_string(e));
      continue;
    }
    // No silent corruption: a restored checkpoint is checked like a rebuilt
    // one. The survey checked it; it is checked again only if the store's
    // epochs changed since (or this process did not survey it).
    const memfs::EpochState now = (*s)->epochs();
    auto seen = surveyed_.find(n);
    const bool checked = seen != surveyed_.end() && seen->second.error.empty() &&
                         seen->second.acked == now.acknowledged && seen->second.pending == now.pending &&
                         ((now.acknowledged == e && seen->second.acked_ok) || (now.pending == e && seen->second.pending_ok));
    Status st = (*s)->Restore(e);
    if (st.ok() && !checked) st = (*s)->Verify(e);
    if (!st.ok() && mine.ok()) mine = st.Prefixed("restore " + n + " to epoch " + std::to_string(e));
  }
  if (e == 0) parity_.RemoveAll();
  return mine;
}

Status Service::RebuildGroup(const protocol::Recover& req, const protocol::RebuildGroup& info,
                             const std::vector<protocol::RebuildTask>& tasks, uint64_t* rebuilt_bytes) {
  const uint64_t e = req.epoch;
  const uint32_t g = info.group;
  const uint32_t n = static_cast<uint32_t>(info.members.size());
  const uint32_t k = info.k;
  const bool spread = info.layout == static_cast<uint8_t>(control::ParityLayout::kSpread);
  const std::string label = "group " + std::to_string(g) + " rebuild of epoch " + std::to_string(e);
  auto scheme = SchemeFromByte(info.scheme);
  if (!scheme.ok()) return c_->Agree(scheme.status(), label);
  // One stripe (spares layout: whole images and parity objects), or n
  // (spread: segments of them; dlckpt/control/stripes.h).
  auto code = ErasureCode::Create(*scheme, static_cast<int>(spread ? n - k : n), static_cast<int>(k));
  if (!code.ok()) return c_->Agree(code.status(), label);
  const uint64_t seg = spread ? internal::SpreadSegmentOf(info.members, n, k) : 0;  // spread: segment bytes
  // My outputs: lost members rebuilt here, split back into their stores.
  struct Target {
    const protocol::MemberRecord* member;
    std::vector<std::unique_ptr<memfs::ImageBuilder>> builders;
    uint64_t offset = 0;
  };
  std::map<uint32_t, Target> outs;  // by member
  Status local;
  for (const auto& t : tasks) {
    if (rank_of_node_.at(t.target_node) != rank_ || !local.ok()) continue;
    Target& tg = outs[t.member];
    tg.member = &info.members[t.member];
    for (int32_t r : tg.member->ranks) {
      auto name = StoreName(cfg_.job, cfg_.node, r);
      if (!name.ok()) {
        local = name.status();
        break;
      }
      (void)memfs::Store::Destroy(*name);
      auto b = memfs::ImageBuilder::Begin(*name, cfg_.node);
      if (!b.ok()) {
        local = b.status();
        break;
      }
      tg.builders.push_back(std::move(*b));
    }
  }
  // My inputs, read in place: the images of the members I give, the parity
  // objects I hold.
  std::map<uint32_t, std::vector<Extent>> images;  // by member
  std::map<uint32_t, Extent> parities;             // by object index
  const uint32_t width = spread ? n : n + k;       // chunks per stripe
  const uint32_t nstripes = spread ? n : 1;
  for (uint32_t s = 0; s < nstripes && local.ok(); ++s) {
    const std::vector<uint32_t> dm = spread ? control::SpreadDataMembers(n, k, s) : std::vector<uint32_t>{};
    for (uint32_t c = 0; c < width && local.ok(); ++c) {
      const std::string& src = info.sources[s * width + c];
      if (src.empty() || rank_of_node_.at(src) != rank_) continue;
      const uint32_t data_chunks = width - k;
      if (c < data_chunks) {
        const uint32_t m = spread ? dm[c] : c;
        if (images.count(m)) continue;
        const auto& rec = info.members[m];
        local = LocalImage(e, rec.ranks, &images[m], nullptr, &rec.sizes);
      } else {
        const uint32_t index = spread ? control::SpreadParityHolder(n, s, c - data_chunks) : c - data_chunks;
        if (parities.count(index)) continue;
        auto ext = parity_.Find(g, index, e, req.generation);
        if (ext.ok()) {
          parities[index] = *ext;
        } else {
          local = ext.status();
        }
      }
    }
  }
  DLCKPT_RETURN_IF_ERROR(c_->Agree(local, label));

  // Each node that rebuilds reports a long rebuild.
  if (!outs.empty()) {
    world_transport_->set_progress(internal::ProgressEvents(events::RebuildProgress(e, cfg_.node, 0, 0, 0)));
  }
  std::vector<uint32_t> wanted_member;  // of the current stripe's outputs
  OrderedSink sink([&](int output, const uint8_t* data, size_t len) -> Status {
    Target& t = outs.at(wanted_member[static_cast<size_t>(output)]);
    // Route the member image to its stores by the recorded sizes.
    uint64_t base = 0;
    for (size_t i = 0; i < t.builders.size() && len > 0; ++i) {
      uint64_t size = t.member->sizes[i];
      if (t.offset < base + size) {
        size_t take = static_cast<size_t>(std::min<uint64_t>(len, base + size - t.offset));
        DLCKPT_RETURN_IF_ERROR(t.builders[i]->Append(data, take));
        data += take;
        len -= take;
        t.offset += take;
      }
      base += size;
    }
    t.offset += len;  // zero padding past the member's image
    return Status::OK();
  });
  Status result;
  double seconds = 0;
  size_t folds = 0;  // sources that gave a combination of their chunks
  for (uint32_t s = 0; s < nstripes && result.ok(); ++s) {
    const std::vector<uint32_t> dm = spread ? control::SpreadDataMembers(n, k, s) : std::vector<uint32_t>{};
    const uint32_t data_chunks = width - k;
    std::vector<int> chunk_ranks(width, -1);
    std::map<int, std::vector<Extent>> my_chunks;  // chunk id -> its extents, for the chunks I hold
    for (uint32_t c = 0; c < width; ++c) {
      const std::string& src = info.sources[s * width + c];
      if (src.empty()) continue;
      chunk_ranks[c] = rank_of_node_.at(src);
      if (chunk_ranks[c] != rank_) continue;
      std::vector<Extent>& input = my_chunks[static_cast<int>(c)];
      if (c < data_chunks) {
        const uint32_t m = spread ? dm[c] : c;
        const auto& img = images.at(m);
        input = spread ? internal::SliceExtents(img, uint64_t{control::SpreadSegmentOf(n, k, m, s)} * seg, seg) : img;
      } else {
        const uint32_t j = c - data_chunks;
        const Extent p = parities.at(spread ? control::SpreadParityHolder(n, s, j) : j);
        input = spread ? internal::SliceExtents(std::span<const Extent>(&p, 1), uint64_t{j} * seg, seg)
                       : std::vector<Extent>{p};
      }
    }
    // The chunks of this stripe to rebuild: the lost members' data chunks.
    std::vector<int> wanted, targets;
    wanted_member.clear();
    for (const auto& t : tasks) {
      if (spread && !control::SpreadHoldsData(n, k, t.member, s)) continue;
      const uint32_t c = spread ? static_cast<uint32_t>(std::find(dm.begin(), dm.end(), t.member) - dm.begin())
                                : t.member;
      wanted.push_back(static_cast<int>(c));
      targets.push_back(rank_of_node_.at(t.target_node));
      wanted_member.push_back(t.member);
    }
    if (wanted.empty()) continue;  // the same on every process: the plan is
    const std::string stripe_label = spread ? label + " (stripe " + std::to_string(s) + ")" : label;
    std::vector<RebuildSource> given;
    auto spec = RebuildSpec(**code, chunk_ranks, wanted, targets, stripe_label, &given);
    if (!spec.ok()) {
      result = spec.status();
      break;
    }
    // My input: the one chunk I give, or the combination of the several I
    // give (a stripe rebuilding one chunk from fewer than n nodes), computed
    // here into a buffer of the chunk's size that lives until Run returns.
    std::vector<Extent> input;
    FoldedChunk folded;
    Status fold;
    bool any_fold = false;
    for (size_t i = 0; i < given.size(); ++i) {
      any_fold |= !given[i].coefficients.empty();
      folds += given[i].coefficients.empty() ? 0 : 1;
      if (spec->source_ranks[i] != rank_) continue;
      if (given[i].coefficients.empty()) {
        input = my_chunks.at(given[i].chunks[0]);
        continue;
      }
      std::vector<std::vector<Extent>> parts;
      for (int c : given[i].chunks) parts.push_back(my_chunks.at(c));
      auto f = FoldChunks(given[i].coefficients, parts);
      if (f.ok()) {
        folded = std::move(*f);
        input = {folded.extent()};
      } else {
        fold = f.status();
      }
    }
    // Every rank knows from the spec whether someone folds; only then can a
    // rank fail before the Run, and all must learn it.
    if (any_fold) {
      result = c_->Agree(fold, stripe_label);
      if (!result.ok()) break;
    }
    bool mine = false;
    for (int r : targets) mine |= r == rank_;
    auto stats = world_transport_->Run(*spec, input, mine ? &sink : nullptr);
    result = stats.status();
    if (stats.ok()) seconds += stats->seconds;
    if (spread && result.ok()) {
      // The next stripe continues each rebuilt member at its next segment.
      for (uint32_t m : wanted_member) {
        auto it = outs.find(m);
        if (it != outs.end()) it->second.offset = (uint64_t{control::SpreadSegmentOf(n, k, m, s)} + 1) * seg;
      }
    }
  }
  world_transport_->set_progress(nullptr);
  if (result.ok()) {
    for (auto& [m, t] : outs) {
      for (size_t i = 0; i < t.builders.size() && result.ok(); ++i) {
        result = t.builders[i]->Finish().status();
        *rebuilt_bytes += t.member->sizes[i];
      }
    }
  }
  outs.clear();  // unfinished builders remove their half-built stores
  DLCKPT_RETURN_IF_ERROR(c_->Agree(internal::OwnError(result), label));
  if (rank_ == 0) {
    Log(label + ": rebuilt " + std::to_string(tasks.size()) + " member(s) in " + Fixed(seconds) + " s" +
        (spread ? " from spread parity" : "") +
        (folds ? "; " + std::to_string(folds) + " source(s) gave the combination of their chunks" : ""));
  }
  return Status::OK();
}

Status Service::RecoverOnce(const std::vector<std::string>& lost, uint64_t epoch) {
  DLCKPT_ASSIGN_OR_RETURN(protocol::SurveyReply survey, Survey());
  // Rank 0 decides, as dlckpt-run would, and tells everyone.
  std::string plan_bytes;
  Status decided;
  if (rank_ == 0) {
    recovery::Input in;
    in.survey = survey;
    in.dead_nodes.insert(lost.begin(), lost.end());
    std::set<std::string> used;
    for (const auto& n : survey.nodes) {
      for (const auto& st : n.stores) {
        if (st.rank >= 0) {
          in.placement[st.rank] = n.node;
          used.insert(n.node);
        }
      }
      for (const auto& p : n.parities) {
        for (const auto& m : p.members) {
          if (!in.dead_nodes.count(m.node)) continue;
          for (int32_t r : m.ranks) in.placement.emplace(r, m.node);
        }
      }
    }
    for (const auto& n : nodes_) {
      if (!used.count(n)) in.free_nodes.push_back(n);
    }
    auto plan = in.placement.empty() ? Result<recovery::Plan>(Status::NotFound("no store of job " + cfg_.job))
                                     : recovery::Decide(in);
    if (plan.ok() && epoch != 0 && plan->epoch != epoch) {
      plan = Status::Error(ENOTRECOVERABLE, "epoch " + std::to_string(epoch) +
                                                " was asked for, but the newest recoverable epoch is " +
                                                std::to_string(plan->epoch));
    }
    if (plan.ok()) {
      std::printf("recovery plan: %s\n", plan->summary.c_str());
      for (const auto& [r, node] : plan->placement) std::printf("  rank %d -> %s\n", r, node.c_str());
      std::fflush(stdout);
      plan_bytes = protocol::EncodeRecover(recovery::ToRecoverMessage(*plan));
    } else {
      decided = plan.status();
    }
  }
  DLCKPT_RETURN_IF_ERROR(c_->Agree(decided, "recovery decision"));
  uint32_t cmd = kCmdRecover;
  DLCKPT_RETURN_IF_ERROR(BroadcastCommand(&cmd, &plan_bytes));
  DLCKPT_ASSIGN_OR_RETURN(protocol::Recover req, protocol::DecodeRecover(plan_bytes));
  protocol::Done d = Recover(req);
  if (d.code != 0) return Status::Error(d.code, d.message);
  if (rank_ == 0) {
    std::printf("recovered epoch %llu: %llu bytes rebuilt in %.3f s\n", static_cast<unsigned long long>(d.epoch),
                static_cast<unsigned long long>(d.bytes), d.seconds);
  }
  return Status::OK();
}

}  // namespace dlckpt::codec

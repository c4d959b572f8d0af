// SURVEY and RECOVER of the dlckpt-codec service (Service, service_impl.h):
// every node reports its stores and parity objects; a recovery restores
// every surviving store to the chosen epoch and rebuilds each lost member on
// its target node from the survivors and the parity (stores created there,
// CRC-checked), one group at a time over all codec processes. Also the
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
  auto survey = Survey();
  if (!survey.ok()) return finish(survey.status());

  // The encoding the rebuilds use: complete parity of (group, e, generation).
  std::map<uint32_t, std::vector<std::pair<uint32_t, std::string>>> parity_at;  // group -> (index, node)
  std::map<uint32_t, protocol::ParityReport> group_info;
  std::map<int32_t, std::string> store_node;  // rank -> node holding it at epoch e
  for (const auto& n : survey->nodes) {
    for (const auto& p : n.parities) {
      if (p.complete && p.epoch == e && p.generation == req.generation) {
        parity_at[p.group].push_back({p.index, n.node});
        group_info[p.group] = p;
      }
    }
    for (const auto& s : n.stores) {
      bool verified = (s.acked == e && s.acked_ok) || (s.pending == e && s.pending_ok);
      if (s.error.empty() && verified) store_node[s.rank] = n.node;
    }
  }
  std::set<int32_t> rebuilt_ranks;
  Status plan_error;
  for (const auto& t : req.rebuilds) {
    auto gi = group_info.find(t.group);
    if (gi == group_info.end() || t.member >= gi->second.members.size()) {
      plan_error = Status::NotFound("no complete parity of group " + std::to_string(t.group) +
                                    " for epoch " + std::to_string(e) + " survives");
      break;
    }
    if (!rank_of_node_.count(t.target_node)) {
      plan_error = Status::NotFound("rebuild target node " + t.target_node + " has no codec process");
      break;
    }
    for (int32_t r : gi->second.members[t.member].ranks) rebuilt_ranks.insert(r);
  }
  Status all = c_->Agree(plan_error, "recover");
  if (!all.ok()) return finish(all);

  // 1. Every surviving store goes to epoch e; stale copies of rebuilt ranks go.
  Status mine;
  auto names = Env::Default()->ListShm(StorePrefix(cfg_.job, cfg_.node));
  if (names.ok()) {
    for (const auto& n : *names) {
      int32_t r = RankOfStore(n, cfg_.job, cfg_.node);
      if (r < 0) continue;
      if (e == 0 || rebuilt_ranks.count(r)) {
        (void)memfs::Store::Destroy(n);
        continue;
      }
      auto s = memfs::Store::Attach(n, memfs::AttachMode::kOwner);
      Status st = s.ok() ? (*s)->Restore(e) : s.status();
      // No silent corruption: a restored checkpoint is checked like a rebuilt one.
      if (st.ok()) st = (*s)->Verify(e);
      if (!st.ok() && mine.ok()) mine = st.Prefixed("restore " + n + " to epoch " + std::to_string(e));
    }
  }
  if (e == 0) parity_.RemoveAll();
  all = c_->Agree(mine, "recover");
  if (!all.ok()) return finish(all);
  if (rank_ == 0) events::Emit(events::RebuildBegin(e));
  if (double hold = Hold("DLCKPT_CODEC_HOLD_REBUILD"); hold > 0) Sleep(hold);

  // 2. Rebuild, one group at a time, over all codec processes.
  std::map<uint32_t, std::vector<protocol::RebuildTask>> by_group;
  for (const auto& t : req.rebuilds) by_group[t.group].push_back(t);
  uint64_t rebuilt_bytes = 0;
  for (const auto& [g, tasks] : by_group) {
    const protocol::ParityReport& info = group_info.at(g);
    int n = static_cast<int>(info.members.size());
    int k = static_cast<int>(info.k);
    Status local;
    std::vector<int> chunk_ranks(static_cast<size_t>(n + k), -1);
    std::set<uint32_t> lost;
    for (const auto& t : tasks) lost.insert(t.member);
    for (int i = 0; i < n; ++i) {
      if (lost.count(static_cast<uint32_t>(i))) continue;
      const auto& m = info.members[static_cast<size_t>(i)];
      std::string holder;
      for (int32_t r : m.ranks) {
        auto it = store_node.find(r);
        if (it == store_node.end() || (!holder.empty() && holder != it->second)) {
          holder.clear();
          break;
        }
        holder = it->second;
      }
      if (!holder.empty()) chunk_ranks[static_cast<size_t>(i)] = rank_of_node_.at(holder);
    }
    for (const auto& [index, node] : parity_at[g]) {
      if (index < static_cast<uint32_t>(k)) chunk_ranks[static_cast<size_t>(n) + index] = rank_of_node_.at(node);
    }
    // The transport takes one input per process: a node holding two chunks
    // (a spare that rebuilt a member and holds a parity) gives its first.
    std::set<int> giving;
    for (int& holder : chunk_ranks) {
      if (holder >= 0 && !giving.insert(holder).second) holder = -1;
    }
    std::vector<int> wanted, targets;
    for (const auto& t : tasks) {
      wanted.push_back(static_cast<int>(t.member));
      targets.push_back(rank_of_node_.at(t.target_node));
    }
    std::string label = "group " + std::to_string(g) + " rebuild of epoch " + std::to_string(e);
    auto code = ErasureCode::Create(info.scheme == 0 ? Scheme::kXor : Scheme::kReedSolomon, n, k);
    if (!code.ok()) {
      all = c_->Agree(code.status(), label);
      return finish(all);
    }
    auto spec = RebuildSpec(**code, chunk_ranks, wanted, targets, label);
    if (!spec.ok()) {
      all = c_->Agree(spec.status(), label);
      return finish(all);
    }
    // My input: a surviving data member's stores, or a parity.
    std::vector<Extent> input;
    for (int c = 0; c < n + k && local.ok(); ++c) {
      if (chunk_ranks[static_cast<size_t>(c)] != rank_) continue;
      if (c < n) {
        const auto& m = info.members[static_cast<size_t>(c)];
        local = LocalImage(e, m.ranks, &input, nullptr, &m.sizes);
      } else {
        auto ext = parity_.Find(g, static_cast<uint32_t>(c - n), e, req.generation);
        if (ext.ok()) {
          input.push_back(*ext);
        } else {
          local = ext.status();
        }
      }
    }
    // My outputs: lost members rebuilt here, split back into their stores.
    struct Target {
      const protocol::MemberRecord* member;
      std::vector<std::unique_ptr<memfs::ImageBuilder>> builders;
      uint64_t offset = 0;
    };
    std::map<int, Target> outs;
    for (size_t w = 0; w < wanted.size() && local.ok(); ++w) {
      if (targets[w] != rank_) continue;
      Target& t = outs[static_cast<int>(w)];
      t.member = &info.members[static_cast<size_t>(wanted[w])];
      for (int32_t r : t.member->ranks) {
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
        t.builders.push_back(std::move(*b));
      }
    }
    all = c_->Agree(local, label);
    if (!all.ok()) return finish(all);
    OrderedSink sink([&](int output, const uint8_t* data, size_t len) -> Status {
      Target& t = outs.at(output);
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
    // Each node that rebuilds reports a long rebuild.
    if (!outs.empty()) {
      world_transport_->set_progress(internal::ProgressEvents(events::RebuildProgress(e, cfg_.node, 0, 0, 0)));
    }
    auto stats = world_transport_->Run(*spec, input, outs.empty() ? nullptr : &sink);
    world_transport_->set_progress(nullptr);
    Status result = stats.status();
    if (result.ok()) {
      for (auto& [w, t] : outs) {
        for (size_t i = 0; i < t.builders.size() && result.ok(); ++i) {
          result = t.builders[i]->Finish().status();
          rebuilt_bytes += t.member->sizes[i];
        }
      }
    }
    outs.clear();  // unfinished builders remove their half-built stores
    all = c_->Agree(internal::OwnError(result), label);
    if (!all.ok()) return finish(all);
    if (rank_ == 0) {
      Log(label + ": rebuilt " + std::to_string(tasks.size()) + " member(s) in " +
          Fixed(stats.ok() ? stats->seconds : 0) + " s");
    }
  }
  // Everyone's byte count (only targets know theirs).
  uint64_t sum = 0;
  MPI_Request r;
  MPI_Iallreduce(&rebuilt_bytes, &sum, 1, MPI_UINT64_T, MPI_SUM, world_, &r);
  (void)Wait(&r);
  done.bytes = sum;
  return finish(Status::OK());
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

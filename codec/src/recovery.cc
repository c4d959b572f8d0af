#include "dlckpt/codec/recovery.h"

#include <algorithm>
#include <sstream>

namespace dlckpt::recovery {

namespace {

struct GroupInfo {
  std::vector<protocol::MemberRecord> members;
  std::set<uint32_t> complete;          // parity indices that survive complete
  std::set<std::string> parity_nodes;   // nodes holding its parity
  uint32_t k = 0;
};

struct Encoding {
  uint64_t epoch = 0;
  uint64_t generation = 0;
  uint32_t ngroups = 0;
  std::map<uint32_t, GroupInfo> groups;
};

std::string RankList(const std::vector<int32_t>& ranks) {
  std::ostringstream os;
  for (size_t i = 0; i < ranks.size(); ++i) os << (i ? "," : "") << ranks[i];
  return os.str();
}

std::string DescribeGroup(uint32_t g, const GroupInfo& gi) {
  std::ostringstream os;
  os << "group " << g << " (members";
  for (const auto& m : gi.members) os << " " << m.node << "[ranks " << RankList(m.ranks) << "]";
  os << "; parity on";
  if (gi.parity_nodes.empty()) os << " no surviving node";
  for (const auto& n : gi.parity_nodes) os << " " << n;
  os << ")";
  return os.str();
}

}  // namespace

Result<Plan> Decide(const Input& in) {
  if (in.placement.empty()) return Status::InvalidArgument("recovery: no ranks in the placement");

  // What survives of every rank's store.
  std::map<int32_t, std::set<uint64_t>> avail;
  std::map<int32_t, std::string> found;
  std::map<int32_t, std::string> damaged;
  uint64_t newest_acked = 0;
  std::set<uint64_t> acked_epochs;
  std::map<std::pair<uint64_t, uint64_t>, Encoding> encodings;
  for (const auto& node : in.survey.nodes) {
    if (in.dead_nodes.count(node.node)) continue;
    for (const auto& s : node.stores) {
      if (!in.placement.count(s.rank)) continue;  // not a rank of this job
      if (!s.error.empty()) {
        damaged[s.rank] = node.node + ": " + s.error;
        continue;
      }
      // Prefer the copy on the node the rank was placed on.
      auto pl = in.placement.find(s.rank);
      if (found.count(s.rank) && pl->second != node.node) continue;
      found[s.rank] = node.node;
      std::set<uint64_t>& e = avail[s.rank];
      e.clear();
      if (s.acked) e.insert(s.acked);
      if (s.pending) e.insert(s.pending);
      if (s.acked) {
        acked_epochs.insert(s.acked);
        newest_acked = std::max(newest_acked, s.acked);
      }
    }
    for (const auto& p : node.parities) {
      Encoding& enc = encodings[{p.epoch, p.generation}];
      enc.epoch = p.epoch;
      enc.generation = p.generation;
      enc.ngroups = std::max(enc.ngroups, p.ngroups);
      GroupInfo& gi = enc.groups[p.group];
      if (gi.members.empty()) gi.members = p.members;
      gi.k = std::max(gi.k, p.k);
      if (p.complete) {
        gi.complete.insert(p.index);
        gi.parity_nodes.insert(node.node);
      }
    }
  }

  std::set<uint64_t> candidates;
  for (const auto& [r, es] : avail) candidates.insert(es.begin(), es.end());
  for (const auto& [key, enc] : encodings) candidates.insert(key.first);

  auto has = [&](int32_t r, uint64_t e) {
    auto it = avail.find(r);
    return it != avail.end() && it->second.count(e);
  };

  std::string blocker;  // why the newest acknowledged epoch cannot be used
  auto note_blocker = [&](uint64_t e, const std::string& why) {
    if (e == newest_acked && blocker.empty()) blocker = why;
  };

  Plan plan;
  bool chosen = false;
  const Encoding* used = nullptr;
  std::vector<std::pair<uint32_t, uint32_t>> lost_members;  // (group, member)

  for (auto it = candidates.rbegin(); it != candidates.rend() && !chosen; ++it) {
    uint64_t e = *it;
    std::vector<int32_t> missing;
    for (const auto& [r, node] : in.placement) {
      if (!has(r, e)) missing.push_back(r);
    }
    bool acked_here = acked_epochs.count(e) > 0;
    if (missing.empty() && acked_here) {
      plan.epoch = e;
      chosen = true;
      break;
    }
    // Try the encodings of e, newest generation first.
    for (auto enc_it = encodings.rbegin(); enc_it != encodings.rend(); ++enc_it) {
      const Encoding& enc = enc_it->second;
      if (enc.epoch != e) continue;
      bool committed = acked_here;
      if (!committed && enc.ngroups > 0) {
        committed = true;
        for (uint32_t g = 0; g < enc.ngroups; ++g) {
          auto gi = enc.groups.find(g);
          if (gi == enc.groups.end() || gi->second.complete.empty()) committed = false;
        }
      }
      if (!committed) {
        note_blocker(e, "the encoding of epoch " + std::to_string(e) + " did not complete");
        continue;
      }
      std::set<int32_t> covered;
      std::vector<std::pair<uint32_t, uint32_t>> lost;
      bool ok = true;
      for (const auto& [g, gi] : enc.groups) {
        std::vector<uint32_t> lost_here;
        for (uint32_t m = 0; m < gi.members.size(); ++m) {
          bool member_ok = true;
          for (int32_t r : gi.members[m].ranks) member_ok &= has(r, e);
          if (!member_ok) lost_here.push_back(m);
        }
        if (lost_here.size() > gi.complete.size()) {
          std::ostringstream os;
          os << DescribeGroup(g, gi) << " lost " << lost_here.size() << " member(s) (";
          for (size_t i = 0; i < lost_here.size(); ++i) {
            os << (i ? ", " : "") << gi.members[lost_here[i]].node;
          }
          os << ") but has " << gi.complete.size() << " surviving parity";
          note_blocker(e, os.str());
          ok = false;
          break;
        }
        for (uint32_t m : lost_here) {
          lost.push_back({g, m});
          for (int32_t r : gi.members[m].ranks) covered.insert(r);
        }
      }
      if (!ok) continue;
      for (int32_t r : missing) {
        if (!covered.count(r)) {
          note_blocker(e, "rank " + std::to_string(r) + " is in no group of epoch " +
                              std::to_string(e) + "'s encoding");
          ok = false;
          break;
        }
      }
      if (!ok) continue;
      plan.epoch = e;
      plan.generation = enc.generation;
      used = &enc;
      lost_members = std::move(lost);
      chosen = true;
      break;
    }
    if (!chosen && missing.size() > 0) {
      std::ostringstream os;
      os << "ranks " << RankList(missing) << " have no copy of epoch " << e
         << " and no parity of it can rebuild them";
      note_blocker(e, os.str());
    }
  }

  if (!chosen) {
    if (newest_acked != 0) {
      size_t holders = 0;
      for (const auto& [r, es] : avail) holders += es.count(newest_acked);
      std::ostringstream os;
      os << "unrecoverable: " << (blocker.empty() ? "too many failures" : blocker)
         << "; the newest checkpoint that still exists is epoch " << newest_acked << " on "
         << holders << " of " << in.placement.size() << " ranks";
      if (!damaged.empty()) {
        os << "; damaged stores:";
        for (const auto& [r, why] : damaged) os << " rank " << r << " (" << why << ")";
      }
      return Status::Error(ENOTRECOVERABLE, os.str());
    }
    plan.epoch = 0;  // nothing was ever acknowledged: start from scratch
  }

  // Placement: surviving ranks stay where they were found; every lost member
  // (or, from scratch, every rank of a dead node) moves to a free node.
  std::vector<std::string> pool;
  for (const auto& n : in.free_nodes) {
    if (!in.dead_nodes.count(n)) pool.push_back(n);
  }
  std::set<std::string> parity_holders;
  if (used) {
    for (const auto& [g, gi] : used->groups) parity_holders.insert(gi.parity_nodes.begin(), gi.parity_nodes.end());
  }
  std::set<std::string> taken;
  auto take_target = [&](const std::set<std::string>& own_parity) -> std::string {
    for (int pass = 0; pass < 3; ++pass) {
      for (const auto& n : pool) {
        if (taken.count(n)) continue;
        bool standby = !parity_holders.count(n);
        bool own = own_parity.count(n) > 0;
        if ((pass == 0 && standby) || (pass == 1 && own) || pass == 2) {
          taken.insert(n);
          return n;
        }
      }
    }
    return "";
  };

  plan.placement = in.placement;
  for (const auto& [r, node] : in.placement) {
    if (found.count(r)) plan.placement[r] = found[r];
  }
  if (used) {
    for (auto [g, m] : lost_members) {
      const GroupInfo& gi = used->groups.at(g);
      std::string target = take_target(gi.parity_nodes);
      if (target.empty()) {
        return Status::Error(ENOTRECOVERABLE,
                             "unrecoverable: no spare node left to rebuild " + gi.members[m].node +
                                 " (ranks " + RankList(gi.members[m].ranks) + ") of " +
                                 DescribeGroup(g, gi));
      }
      plan.rebuilds.push_back({g, m, target});
      for (int32_t r : gi.members[m].ranks) plan.placement[r] = target;
    }
  } else {
    // No rebuild: ranks whose store is missing (a dead node, or nothing to
    // restore from scratch) move off dead nodes.
    std::map<std::string, std::string> moved;
    for (auto& [r, node] : plan.placement) {
      if (!in.dead_nodes.count(node)) continue;
      auto mv = moved.find(node);
      if (mv == moved.end()) {
        std::string target = take_target({});
        if (target.empty()) {
          return Status::Error(ENOTRECOVERABLE, "unrecoverable: no spare node left to host the ranks of " + node);
        }
        mv = moved.emplace(node, target).first;
      }
      node = mv->second;
    }
  }

  std::set<std::string> lost(in.dead_nodes.begin(), in.dead_nodes.end());
  for (const auto& [r, node] : in.placement) {
    if (plan.placement[r] != node) lost.insert(node);
  }
  for (const auto& n : lost) {
    bool used_node = false;
    for (const auto& [r, node] : in.placement) used_node |= node == n;
    if (used_node) plan.lost_nodes.push_back(n);
  }

  std::ostringstream os;
  if (plan.epoch == 0) {
    os << "no checkpoint was acknowledged: restart from scratch";
  } else {
    os << "restore epoch " << plan.epoch;
  }
  if (!plan.lost_nodes.empty()) {
    os << "; lost node(s)";
    for (const auto& n : plan.lost_nodes) os << " " << n;
  }
  for (const auto& t : plan.rebuilds) {
    os << "; rebuild group " << t.group << " member " << used->groups.at(t.group).members[t.member].node
       << " on " << t.target_node;
  }
  plan.summary = os.str();
  return plan;
}

protocol::Recover ToRecoverMessage(const Plan& plan) {
  return protocol::Recover{plan.epoch, plan.generation, plan.rebuilds, plan.lost_nodes};
}

}  // namespace dlckpt::recovery

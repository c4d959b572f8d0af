#include "dlckpt/control/recovery.h"

#include <algorithm>
#include <sstream>

namespace dlckpt::control::recovery {

namespace {

// One group of one encoding, as the surviving parity objects describe it.
struct GroupInfo {
  std::vector<protocol::MemberRecord> members;
  std::map<uint32_t, std::string> parity_at;  // complete parity index -> node holding it
  uint32_t k = 0;
};

struct Encoding {
  uint64_t epoch = 0;
  uint64_t generation = 0;
  uint32_t ngroups = 0;
  std::map<uint32_t, GroupInfo> groups;
};

// Where every chunk of a group's stripe lives at the epoch considered:
// holder[i] for data member i (0..n-1), holder[n + j] for parity j; "" when
// the chunk is lost. The rebuild transport takes one input per node, so a
// node that holds two chunks contributes only one of them.
struct Stripe {
  std::vector<std::string> holder;
  size_t n = 0;
  size_t DistinctHolders() const {
    std::set<std::string> nodes;
    for (const auto& h : holder) {
      if (!h.empty()) nodes.insert(h);
    }
    return nodes.size();
  }
  std::vector<uint32_t> LostData() const {
    std::vector<uint32_t> lost;
    for (size_t i = 0; i < n; ++i) {
      if (holder[i].empty()) lost.push_back(static_cast<uint32_t>(i));
    }
    return lost;
  }
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
  if (gi.parity_at.empty()) os << " no surviving node";
  for (const auto& [j, n] : gi.parity_at) os << " " << n << "[p" << j << "]";
  os << ")";
  return os.str();
}

// "d1@vn1 d2,p0@vn4 p1@vn5": the surviving chunks by node.
std::string DescribeChunks(const Stripe& s) {
  std::map<std::string, std::vector<std::string>> by_node;
  for (size_t c = 0; c < s.holder.size(); ++c) {
    if (s.holder[c].empty()) continue;
    by_node[s.holder[c]].push_back(c < s.n ? "d" + std::to_string(c) : "p" + std::to_string(c - s.n));
  }
  std::ostringstream os;
  bool first = true;
  for (const auto& [node, chunks] : by_node) {
    os << (first ? "" : " ");
    first = false;
    for (size_t i = 0; i < chunks.size(); ++i) os << (i ? "," : "") << chunks[i];
    os << "@" << node;
  }
  return first ? "none" : os.str();
}

}  // namespace

Result<Plan> Decide(const Input& in) {
  if (in.placement.empty()) return Status::InvalidArgument("recovery: no ranks in the placement");

  // What survives of every rank's store.
  std::map<int32_t, std::set<uint64_t>> avail;
  std::map<int32_t, std::string> found;
  std::map<int32_t, std::string> damaged;
  std::vector<std::string> damaged_parity;  // "node: why", erasures like damaged stores
  uint64_t newest_acked = 0;
  std::set<uint64_t> acked_epochs;
  std::map<std::pair<uint64_t, uint64_t>, Encoding> encodings;
  for (const auto& node : in.survey.nodes) {
    if (in.dead_nodes.count(node.node)) continue;
    for (const auto& why : node.parity_damage) damaged_parity.push_back(node.node + ": " + why);
    for (const auto& s : node.stores) {
      if (!in.placement.count(s.rank)) continue;  // not a rank of this job
      if (!s.error.empty()) {
        damaged[s.rank] = node.node + ": " + s.error;
        continue;
      }
      if (!s.damage.empty()) damaged[s.rank] = node.node + ": " + s.damage;  // some epoch failed verification
      // Prefer the copy on the node the rank was placed on.
      auto pl = in.placement.find(s.rank);
      if (found.count(s.rank) && pl->second != node.node) continue;
      found[s.rank] = node.node;
      std::set<uint64_t>& e = avail[s.rank];
      e.clear();
      if (s.acked && s.acked_ok) e.insert(s.acked);
      if (s.pending && s.pending_ok) e.insert(s.pending);
      // An acknowledged epoch proves the codec's DONE even where this copy
      // failed verification: it is then committed, and this copy an erasure.
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
      if (p.complete) gi.parity_at.emplace(p.index, node.node);
    }
  }

  std::set<uint64_t> candidates;
  for (const auto& [r, es] : avail) candidates.insert(es.begin(), es.end());
  for (const auto& [key, enc] : encodings) candidates.insert(key.first);

  auto has = [&](int32_t r, uint64_t e) {
    auto it = avail.find(r);
    return it != avail.end() && it->second.count(e);
  };
  // The stripe of group `gi` at epoch e: a data member survives when every
  // one of its ranks has e on one live node.
  auto stripe_of = [&](const GroupInfo& gi, uint64_t e) {
    Stripe s;
    s.n = gi.members.size();
    s.holder.assign(s.n + gi.k, "");
    for (size_t i = 0; i < s.n; ++i) {
      std::string holder;
      for (int32_t r : gi.members[i].ranks) {
        if (!has(r, e) || (!holder.empty() && holder != found[r])) {
          holder.clear();
          break;
        }
        holder = found[r];
      }
      s.holder[i] = holder;
    }
    for (const auto& [j, node] : gi.parity_at) {
      if (j < gi.k) s.holder[s.n + j] = node;
    }
    return s;
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
          if (gi == enc.groups.end() || gi->second.parity_at.empty()) committed = false;
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
        Stripe s = stripe_of(gi, e);
        std::vector<uint32_t> lost_here = s.LostData();
        if (!lost_here.empty() && s.DistinctHolders() < s.n) {
          std::ostringstream os;
          os << DescribeGroup(g, gi) << " lost " << lost_here.size() << " member(s) (";
          for (size_t i = 0; i < lost_here.size(); ++i) {
            os << (i ? ", " : "") << gi.members[lost_here[i]].node;
          }
          os << "); its surviving chunks " << DescribeChunks(s) << " lie on " << s.DistinctHolders()
             << " node(s), and a rebuild needs " << s.n << " on distinct nodes";
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
        if (covered.count(r)) continue;
        std::vector<uint32_t> without;
        for (uint32_t g = 0; g < enc.ngroups; ++g) {
          if (!enc.groups.count(g)) without.push_back(g);
        }
        std::ostringstream os;
        os << "rank " << r << " has no copy of epoch " << e;
        if (!without.empty()) {
          os << ", and no parity of group(s)";
          for (uint32_t g : without) os << " " << g;
          os << " of epoch " << e << "'s encoding survives (only there can rank " << r << " be)";
        } else {
          os << ", and no group of epoch " << e << "'s encoding lists it";
        }
        note_blocker(e, os.str());
        ok = false;
        break;
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
      if (!damaged_parity.empty()) {
        os << "; damaged parity:";
        for (const auto& why : damaged_parity) os << " (" << why << ")";
      }
      return Status::Error(ENOTRECOVERABLE, os.str());
    }
    plan.epoch = 0;  // nothing was ever acknowledged: start from scratch
  }

  // Placement: surviving ranks stay where they were found. A lost member is
  // rebuilt in place when its node is alive (a damaged store), otherwise on a
  // free node: first one holding no chunk of the chosen encoding, then one
  // holding no chunk of the member's group, then the group's own parity
  // nodes (two chunks on one node lower the group's tolerance until the next
  // encode; the summary says so).
  std::vector<std::string> pool;
  for (const auto& n : in.free_nodes) {
    if (!in.dead_nodes.count(n)) pool.push_back(n);
  }
  std::set<std::string> parity_holders;
  if (used) {
    for (const auto& [g, gi] : used->groups) {
      for (const auto& [j, node] : gi.parity_at) parity_holders.insert(node);
    }
  }
  std::set<std::string> taken;
  auto take_target = [&](const std::set<std::string>& own_chunks) -> std::string {
    for (int pass = 0; pass < 3; ++pass) {
      for (const auto& n : pool) {
        if (taken.count(n)) continue;
        bool standby = !parity_holders.count(n);
        bool foreign = !own_chunks.count(n);
        if ((pass == 0 && standby) || (pass == 1 && foreign) || pass == 2) {
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
      const auto& ranks = gi.members[m].ranks;
      // In place: every rank of the member placed on one live node.
      std::string home = ranks.empty() ? "" : in.placement.at(ranks[0]);
      for (int32_t r : ranks) {
        if (in.placement.at(r) != home) home.clear();
      }
      std::string target;
      if (!home.empty() && !in.dead_nodes.count(home) && !taken.count(home)) {
        target = home;
      } else {
        std::set<std::string> own;
        for (const auto& h : stripe_of(gi, plan.epoch).holder) {
          if (!h.empty()) own.insert(h);
        }
        target = take_target(own);
      }
      if (target.empty()) {
        return Status::Error(ENOTRECOVERABLE,
                             "unrecoverable: no spare node left to rebuild " + gi.members[m].node +
                                 " (ranks " + RankList(ranks) + ") of " + DescribeGroup(g, gi));
      }
      plan.rebuilds.push_back({g, m, target});
      for (int32_t r : ranks) plan.placement[r] = target;
    }
    // What each group tolerates until the next encode: the rebuild needs its
    // n chunks on distinct nodes, so losing t more nodes is survived while
    // n <= (nodes holding a chunk) - t.
    for (const auto& [g, gi] : used->groups) {
      Stripe s = stripe_of(gi, plan.epoch);
      for (const auto& t : plan.rebuilds) {
        if (t.group == g) s.holder[t.member] = t.target_node;
      }
      int tolerance = static_cast<int>(s.DistinctHolders()) - static_cast<int>(s.n);
      if (tolerance < static_cast<int>(gi.k)) {
        plan.degraded.push_back(Plan::Degraded{g, std::max(tolerance, 0), gi.k, DescribeChunks(s)});
      }
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
    const auto& member = used->groups.at(t.group).members[t.member];
    os << "; rebuild group " << t.group << " member " << member.node << " on " << t.target_node;
    bool in_place = !in.dead_nodes.count(t.target_node) && !member.ranks.empty() &&
                    in.placement.at(member.ranks[0]) == t.target_node;
    if (in_place) os << " (damaged store)";
  }
  if (!plan.degraded.empty()) os << "; " << DescribeDegraded(plan);
  plan.summary = os.str();
  if (!damaged.empty() || !damaged_parity.empty()) {
    std::ostringstream d;
    for (const auto& [r, why] : damaged) d << (d.tellp() ? "; " : "") << "rank " << r << ": " << why;
    for (const auto& why : damaged_parity) d << (d.tellp() ? "; " : "") << "parity on " << why;
    plan.damage = d.str();
  }
  return plan;
}

std::string DescribeDegraded(const Plan& plan) {
  std::ostringstream os;
  for (const auto& d : plan.degraded) {
    os << (os.tellp() ? "; " : "") << "group " << d.group << " survives " << d.tolerance
       << " more node loss(es) until the next encode (chunks " << d.chunks << ", " << d.k << " parity)";
  }
  return os.str();
}

protocol::Recover ToRecoverMessage(const Plan& plan) {
  return protocol::Recover{plan.epoch, plan.generation, plan.rebuilds, plan.lost_nodes};
}

}  // namespace dlckpt::control::recovery

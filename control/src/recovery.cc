#include "dlckpt/control/recovery.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "dlckpt/control/stripes.h"
#include "recovery_internal.h"

namespace dlckpt::control::recovery {

namespace internal {

bool Inventory::Has(int32_t rank, uint64_t epoch) const {
  auto it = avail.find(rank);
  return it != avail.end() && it->second.count(epoch);
}

size_t Stripe::DistinctHolders() const {
  std::set<std::string> nodes;
  for (const auto& h : holder) {
    if (!h.empty()) nodes.insert(h);
  }
  return nodes.size();
}

size_t Stripe::Surviving() const {
  size_t count = 0;
  for (const auto& h : holder) count += h.empty() ? 0 : 1;
  return count;
}

bool Stripe::Rebuildable() const {
  const size_t lost = LostData().size();
  if (lost == 0) return true;
  if (Surviving() < n) return false;
  return DistinctHolders() >= n || lost == 1;
}

std::vector<uint32_t> Stripe::LostData() const {
  std::vector<uint32_t> lost;
  for (size_t i = 0; i < n; ++i) {
    if (holder[i].empty()) lost.push_back(static_cast<uint32_t>(i));
  }
  return lost;
}

std::vector<std::string> Stripe::Sources() const {
  std::vector<std::string> out = holder;
  std::set<std::string> giving;
  for (auto& h : out) {
    if (!h.empty() && !giving.insert(h).second) h.clear();
  }
  // Too few nodes for one chunk each: with a single chunk to rebuild, a
  // node may give several (their combination, computed where they live).
  size_t given = giving.size();
  if (given < n && LostData().size() == 1) {
    for (size_t c = 0; c < holder.size() && given < n; ++c) {
      if (!holder[c].empty() && out[c].empty()) {
        out[c] = holder[c];
        ++given;
      }
    }
  }
  return out;
}

}  // namespace internal

namespace {

using internal::Choice;
using internal::Encoding;
using internal::GroupInfo;
using internal::Inventory;
using internal::Stripe;

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

// Spread layout: "d0@vn0 d1,d2@vn2; parity p0@vn0 p2@vn2" (members' data and
// the members' parity objects, by node).
std::string DescribeSpread(const std::vector<std::string>& members, const std::map<uint32_t, std::string>& parity) {
  auto by_node = [](const std::map<uint32_t, std::string>& at, const char* tag) {
    std::map<std::string, std::vector<uint32_t>> nodes;
    for (const auto& [i, node] : at) {
      if (!node.empty()) nodes[node].push_back(i);
    }
    std::ostringstream os;
    for (const auto& [node, is] : nodes) {
      os << (os.tellp() ? " " : "");
      for (size_t i = 0; i < is.size(); ++i) os << (i ? "," : "") << tag << is[i];
      os << "@" << node;
    }
    return nodes.empty() ? std::string("none") : os.str();
  };
  std::map<uint32_t, std::string> data;
  for (size_t m = 0; m < members.size(); ++m) data[static_cast<uint32_t>(m)] = members[m];
  return "spread: " + by_node(data, "d") + "; parity " + by_node(parity, "p");
}

}  // namespace

namespace internal {

Inventory TakeInventory(const Input& in) {
  Inventory inv;
  for (const auto& node : in.survey.nodes) {
    if (in.dead_nodes.count(node.node)) continue;
    for (const auto& why : node.parity_damage) inv.damaged_parity.push_back(node.node + ": " + why);
    for (const auto& s : node.stores) {
      if (!in.placement.count(s.rank)) continue;  // not a rank of this job
      if (!s.error.empty()) {
        inv.damaged[s.rank] = node.node + ": " + s.error;
        continue;
      }
      if (!s.damage.empty()) inv.damaged[s.rank] = node.node + ": " + s.damage;  // some epoch failed verification
      // Prefer the copy on the node the rank was placed on.
      auto pl = in.placement.find(s.rank);
      if (inv.found.count(s.rank) && pl->second != node.node) continue;
      inv.found[s.rank] = node.node;
      std::set<uint64_t>& e = inv.avail[s.rank];
      e.clear();
      if (s.acked && s.acked_ok) e.insert(s.acked);
      if (s.pending && s.pending_ok) e.insert(s.pending);
      // An acknowledged epoch proves the codec's DONE even where this copy
      // failed verification: it is then committed, and this copy an erasure.
      if (s.acked) {
        inv.acked_epochs.insert(s.acked);
        inv.newest_acked = std::max(inv.newest_acked, s.acked);
      }
    }
    for (const auto& p : node.parities) {
      Encoding& enc = inv.encodings[{p.epoch, p.generation}];
      enc.epoch = p.epoch;
      enc.generation = p.generation;
      enc.ngroups = std::max(enc.ngroups, p.ngroups);
      GroupInfo& gi = enc.groups[p.group];
      if (gi.members.empty()) gi.members = p.members;
      gi.k = std::max(gi.k, p.k);
      gi.scheme = p.scheme;
      gi.layout = p.layout;
      if (p.complete) gi.parity_at.emplace(p.index, node.node);
    }
  }
  return inv;
}

std::vector<std::string> MemberHolders(const Inventory& inv, const GroupInfo& gi, uint64_t e) {
  std::vector<std::string> out(gi.members.size());
  for (size_t i = 0; i < gi.members.size(); ++i) {
    std::string holder;
    for (int32_t r : gi.members[i].ranks) {
      if (!inv.Has(r, e) || (!holder.empty() && holder != inv.found.at(r))) {
        holder.clear();
        break;
      }
      holder = inv.found.at(r);
    }
    out[i] = holder;
  }
  return out;
}

std::vector<Stripe> StripesOf(const Inventory& inv, const GroupInfo& gi, uint64_t e) {
  const std::vector<std::string> mh = MemberHolders(inv, gi, e);
  const uint32_t n = static_cast<uint32_t>(gi.members.size());
  if (!gi.spread()) {
    Stripe s;
    s.n = n;
    s.holder = mh;
    s.holder.resize(n + gi.k);
    for (uint32_t i = 0; i < n; ++i) s.member.push_back(i);
    for (const auto& [j, node] : gi.parity_at) {
      if (j < gi.k) s.holder[n + j] = node;
    }
    return {s};
  }
  std::vector<Stripe> out;
  if (gi.k == 0 || gi.k >= n) return out;  // not a spread group (a damaged record)
  for (uint32_t st = 0; st < n; ++st) {
    Stripe s;
    s.member = SpreadDataMembers(n, gi.k, st);
    s.n = s.member.size();
    for (uint32_t m : s.member) s.holder.push_back(mh[m]);
    for (uint32_t j = 0; j < gi.k; ++j) {
      auto it = gi.parity_at.find(SpreadParityHolder(n, st, j));
      s.holder.push_back(it == gi.parity_at.end() ? "" : it->second);
    }
    out.push_back(std::move(s));
  }
  return out;
}

Stripe StripeOf(const Inventory& inv, const GroupInfo& gi, uint64_t e) {
  std::vector<Stripe> all = StripesOf(inv, gi, e);
  return all.empty() ? Stripe{} : all[0];
}

namespace {

// The losses one stripe survives (Tolerance). Losing d - n of its d holder
// nodes leaves n distinct ones, so that much always holds; more is checked
// by losing every set of one node more, as long as each is survived.
// Checks at most kMaxLossSets sets per stripe; past that the count proven so
// far is returned (an underestimate, never an overestimate).
int StripeTolerance(const Stripe& s) {
  constexpr uint64_t kMaxLossSets = uint64_t{1} << 18;
  if (!s.Rebuildable()) return -1;
  std::vector<std::string> nodes;
  for (const auto& h : s.holder) {
    if (!h.empty() && std::find(nodes.begin(), nodes.end(), h) == nodes.end()) nodes.push_back(h);
  }
  const size_t d = nodes.size();
  size_t t = d > s.n ? d - s.n : 0;
  uint64_t checked = 0;
  // Every set of `size` of the nodes lost at once: idx walks the
  // combinations in lexicographic order.
  auto all_survived = [&](size_t size, bool* cut) {
    std::vector<size_t> idx(size);
    for (size_t i = 0; i < size; ++i) idx[i] = i;
    while (true) {
      if (++checked > kMaxLossSets) {
        *cut = true;
        return false;
      }
      Stripe after = s;
      for (auto& h : after.holder) {
        for (size_t i : idx) {
          if (h == nodes[i]) h.clear();
        }
      }
      if (!after.Rebuildable()) return false;
      size_t i = size;
      while (i > 0 && idx[i - 1] == d - size + (i - 1)) --i;
      if (i == 0) return true;
      ++idx[i - 1];
      for (size_t j = i; j < size; ++j) idx[j] = idx[j - 1] + 1;
    }
  };
  bool cut = false;
  while (t < d && all_survived(t + 1, &cut)) ++t;
  return static_cast<int>(t);
}

}  // namespace

int Tolerance(const std::vector<Stripe>& stripes) {
  int t = stripes.empty() ? 0 : std::numeric_limits<int>::max();
  for (const Stripe& s : stripes) t = std::min(t, StripeTolerance(s));
  return t;
}

namespace {

// Whether encoding `enc` of epoch e can restore every rank: each group's
// lost members rebuildable (Stripe::Rebuildable in every stripe), each rank missing
// at e covered by a rebuild. On success the members to rebuild; otherwise
// *why says what blocks it.
bool RecoverableBy(const Inventory& inv, const Encoding& enc, uint64_t e, const std::vector<int32_t>& missing,
                   std::vector<std::pair<uint32_t, uint32_t>>* lost, std::string* why) {
  std::set<int32_t> covered;
  for (const auto& [g, gi] : enc.groups) {
    const std::vector<std::string> mh = MemberHolders(inv, gi, e);
    std::vector<uint32_t> lost_here;
    for (uint32_t m = 0; m < mh.size(); ++m) {
      if (mh[m].empty()) lost_here.push_back(m);
    }
    const std::vector<Stripe> stripes = StripesOf(inv, gi, e);
    for (size_t si = 0; si < stripes.size() && !lost_here.empty(); ++si) {
      const Stripe& s = stripes[si];
      if (s.Rebuildable()) continue;
      std::ostringstream os;
      os << DescribeGroup(g, gi) << " lost " << lost_here.size() << " member(s) (";
      for (size_t i = 0; i < lost_here.size(); ++i) os << (i ? ", " : "") << gi.members[lost_here[i]].node;
      os << "); ";
      if (gi.spread()) os << "stripe " << si << " of its spread parity keeps chunks ";
      else os << "its surviving chunks ";
      os << DescribeChunks(s) << " on " << s.DistinctHolders() << " node(s)";
      if (s.Surviving() < s.n) {
        os << ": " << s.Surviving() << " chunk(s), and a rebuild needs " << s.n;
      } else {
        os << ": " << s.LostData().size() << " lost chunks of one stripe need their " << s.n
           << " sources on distinct nodes (a node giving two chunks can only fold them into one output)";
      }
      *why = os.str();
      return false;
    }
    if (stripes.empty() && !lost_here.empty()) {
      *why = DescribeGroup(g, gi) + " records a spread layout with " + std::to_string(gi.k) + " parity over " +
             std::to_string(gi.members.size()) + " members";
      return false;
    }
    for (uint32_t m : lost_here) {
      lost->push_back({g, m});
      for (int32_t r : gi.members[m].ranks) covered.insert(r);
    }
  }
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
    *why = os.str();
    return false;
  }
  return true;
}

// Every group of `enc` has a complete surviving parity.
bool Complete(const Encoding& enc) {
  if (enc.ngroups == 0) return false;
  for (uint32_t g = 0; g < enc.ngroups; ++g) {
    auto gi = enc.groups.find(g);
    if (gi == enc.groups.end() || gi->second.parity_at.empty()) return false;
  }
  return true;
}

}  // namespace

Result<Choice> ChooseEpoch(const Inventory& inv, const Input& in) {
  std::set<uint64_t> candidates;
  for (const auto& [r, es] : inv.avail) candidates.insert(es.begin(), es.end());
  for (const auto& [key, enc] : inv.encodings) candidates.insert(key.first);

  std::string blocker;  // why the newest acknowledged epoch cannot be used
  auto note_blocker = [&](uint64_t e, const std::string& why) {
    if (e == inv.newest_acked && blocker.empty()) blocker = why;
  };
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    const uint64_t e = *it;
    std::vector<int32_t> missing;
    for (const auto& [r, node] : in.placement) {
      if (!inv.Has(r, e)) missing.push_back(r);
    }
    const bool acked_here = inv.acked_epochs.count(e) > 0;
    if (missing.empty() && acked_here) return Choice{e, nullptr, {}};
    // The encodings of e, newest generation first.
    for (auto enc_it = inv.encodings.rbegin(); enc_it != inv.encodings.rend(); ++enc_it) {
      const Encoding& enc = enc_it->second;
      if (enc.epoch != e) continue;
      if (!acked_here && !Complete(enc)) {
        note_blocker(e, "the encoding of epoch " + std::to_string(e) + " did not complete");
        continue;
      }
      Choice c{e, &enc, {}};
      std::string why;
      if (RecoverableBy(inv, enc, e, missing, &c.lost, &why)) return c;
      note_blocker(e, why);
    }
    if (!missing.empty()) {
      note_blocker(e, "ranks " + RankList(missing) + " have no copy of epoch " + std::to_string(e) +
                          " and no parity of it can rebuild them");
    }
  }
  if (inv.newest_acked == 0) return Choice{};  // nothing was ever acknowledged: start from scratch
  size_t holders = 0;
  for (const auto& [r, es] : inv.avail) holders += es.count(inv.newest_acked);
  std::ostringstream os;
  os << "unrecoverable: " << (blocker.empty() ? "too many failures" : blocker)
     << "; the newest checkpoint that still exists is epoch " << inv.newest_acked << " on " << holders << " of "
     << in.placement.size() << " ranks";
  if (!inv.damaged.empty()) {
    os << "; damaged stores:";
    for (const auto& [r, why] : inv.damaged) os << " rank " << r << " (" << why << ")";
  }
  if (!inv.damaged_parity.empty()) {
    os << "; damaged parity:";
    for (const auto& why : inv.damaged_parity) os << " (" << why << ")";
  }
  return Status::Error(ENOTRECOVERABLE, os.str());
}

Status Place(const Inventory& inv, const Choice& choice, const Input& in, Plan* plan) {
  plan->epoch = choice.epoch;
  plan->generation = choice.encoding ? choice.encoding->generation : 0;
  // Surviving ranks stay where they were found. A lost member is rebuilt in
  // place when its node is alive (a damaged store), otherwise on a free
  // node: first one holding no chunk of the chosen encoding, then one
  // holding no chunk of the member's group, then the group's own parity
  // nodes (two chunks on one node lower the group's tolerance until the
  // next encode; the summary says so). With no free node left, a surviving
  // node that runs ranks hosts them too (oversubscribed), unless
  // in.oversubscribe is false: first one holding no chunk of the member's
  // group, then the one running the fewest ranks.
  std::vector<std::string> pool;
  for (const auto& n : in.free_nodes) {
    if (!in.dead_nodes.count(n)) pool.push_back(n);
  }
  std::map<std::string, size_t> ranks_on;  // live nodes running ranks
  for (const auto& [r, node] : in.placement) {
    if (!in.dead_nodes.count(node)) ++ranks_on[node];
  }
  std::set<std::string> parity_holders;
  if (choice.encoding) {
    for (const auto& [g, gi] : choice.encoding->groups) {
      for (const auto& [j, node] : gi.parity_at) parity_holders.insert(node);
    }
  }
  std::set<std::string> taken;
  auto take_target = [&](const std::set<std::string>& own_chunks, size_t moving) -> std::string {
    for (int pass = 0; pass < 3; ++pass) {
      for (const auto& n : pool) {
        if (taken.count(n)) continue;
        const bool standby = !parity_holders.count(n);
        const bool foreign = !own_chunks.count(n);
        if ((pass == 0 && standby) || (pass == 1 && foreign) || pass == 2) {
          taken.insert(n);
          return n;
        }
      }
    }
    if (!in.oversubscribe) return "";
    std::string best;
    auto better = [&](const std::string& a, const std::string& b) {
      const bool fa = !own_chunks.count(a), fb = !own_chunks.count(b);
      if (fa != fb) return fa;
      return ranks_on[a] < ranks_on[b];
    };
    for (const auto& [n, count] : ranks_on) {
      if (best.empty() || better(n, best)) best = n;
    }
    if (!best.empty()) {
      ranks_on[best] += moving;
      if (std::find(plan->oversubscribed.begin(), plan->oversubscribed.end(), best) == plan->oversubscribed.end()) {
        plan->oversubscribed.push_back(best);
      }
    }
    return best;
  };

  plan->placement = in.placement;
  for (const auto& [r, node] : in.placement) {
    auto f = inv.found.find(r);
    if (f != inv.found.end()) plan->placement[r] = f->second;
  }
  if (choice.encoding) {
    const Encoding& enc = *choice.encoding;
    for (auto [g, m] : choice.lost) {
      const GroupInfo& gi = enc.groups.at(g);
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
        for (const Stripe& st : StripesOf(inv, gi, choice.epoch)) {
          for (const auto& h : st.holder) {
            if (!h.empty()) own.insert(h);
          }
        }
        target = take_target(own, ranks.size());
      }
      if (target.empty()) {
        return Status::Error(ENOTRECOVERABLE, "unrecoverable: no spare node left to rebuild " + gi.members[m].node +
                                                  " (ranks " + RankList(ranks) + ") of " + DescribeGroup(g, gi) +
                                                  (in.oversubscribe ? "" : ", and --on-spares-exhausted halt"));
      }
      plan->rebuilds.push_back({g, m, target});
      for (int32_t r : ranks) plan->placement[r] = target;
    }
    for (const auto& [g, gi] : enc.groups) {
      std::vector<Stripe> stripes = StripesOf(inv, gi, choice.epoch);
      bool rebuilt = false;
      for (const auto& t : plan->rebuilds) rebuilt |= t.group == g;
      // The chunks the rebuild reads: the survivors', one per node and stripe
      // where that makes n (Stripe::Sources).
      if (rebuilt) {
        protocol::RebuildGroup rg{g, gi.scheme, gi.k, gi.layout, gi.members, {}};
        for (const Stripe& st : stripes) {
          std::vector<std::string> src = st.Sources();
          rg.sources.insert(rg.sources.end(), src.begin(), src.end());
        }
        plan->groups.push_back(std::move(rg));
      }
      // What the group tolerates until the next encode: the losses after
      // which every stripe is still Rebuildable, whichever nodes go (one
      // holding two chunks loses both).
      std::vector<std::string> mh = MemberHolders(inv, gi, choice.epoch);
      for (const auto& t : plan->rebuilds) {
        if (t.group != g) continue;
        mh[t.member] = t.target_node;
        for (Stripe& st : stripes) {
          for (size_t i = 0; i < st.n; ++i) {
            if (st.member[i] == t.member) st.holder[i] = t.target_node;
          }
        }
      }
      const int tolerance = Tolerance(stripes);
      if (tolerance < static_cast<int>(gi.k)) {
        plan->degraded.push_back(Plan::Degraded{g, std::max(tolerance, 0), gi.k,
                                                gi.spread() ? DescribeSpread(mh, gi.parity_at)
                                                            : DescribeChunks(stripes.at(0))});
      }
    }
  } else {
    // No rebuild: ranks whose store is missing (a dead node, or nothing to
    // restore from scratch) move off dead nodes.
    std::map<std::string, std::string> moved;
    for (auto& [r, node] : plan->placement) {
      if (!in.dead_nodes.count(node)) continue;
      auto mv = moved.find(node);
      if (mv == moved.end()) {
        size_t moving = 0;
        for (const auto& [r2, n2] : in.placement) moving += n2 == node ? 1 : 0;
        std::string target = take_target({}, moving);
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
    if (plan->placement[r] != node) lost.insert(node);
  }
  for (const auto& n : lost) {
    bool used_node = false;
    for (const auto& [r, node] : in.placement) used_node |= node == n;
    if (used_node) plan->lost_nodes.push_back(n);
  }
  return Status::OK();
}

}  // namespace internal

Result<Plan> Decide(const Input& in) {
  if (in.placement.empty()) return Status::InvalidArgument("recovery: no ranks in the placement");
  const Inventory inv = internal::TakeInventory(in);
  DLCKPT_ASSIGN_OR_RETURN(Choice choice, internal::ChooseEpoch(inv, in));
  Plan plan;
  DLCKPT_RETURN_IF_ERROR(internal::Place(inv, choice, in, &plan));

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
    const auto& member = choice.encoding->groups.at(t.group).members[t.member];
    os << "; rebuild group " << t.group << " member " << member.node << " on " << t.target_node;
    const bool in_place = !in.dead_nodes.count(t.target_node) && !member.ranks.empty() &&
                          in.placement.at(member.ranks[0]) == t.target_node;
    if (in_place) os << " (damaged store)";
  }
  for (const auto& n : plan.oversubscribed) {
    std::vector<int32_t> ranks;
    for (const auto& [r, node] : plan.placement) {
      if (node == n) ranks.push_back(r);
    }
    os << "; no spare node left: " << n << " now runs ranks " << RankList(ranks) << " (oversubscribed)";
  }
  if (!plan.degraded.empty()) os << "; " << DescribeDegraded(plan);
  plan.summary = os.str();
  if (!inv.damaged.empty() || !inv.damaged_parity.empty()) {
    std::ostringstream d;
    for (const auto& [r, why] : inv.damaged) d << (d.tellp() ? "; " : "") << "rank " << r << ": " << why;
    for (const auto& why : inv.damaged_parity) d << (d.tellp() ? "; " : "") << "parity on " << why;
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
  return protocol::Recover{plan.epoch, plan.generation, plan.rebuilds, plan.lost_nodes, plan.groups};
}

}  // namespace dlckpt::control::recovery

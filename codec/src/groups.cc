#include "dlckpt/codec/groups.h"

#include <algorithm>
#include <map>

namespace dlckpt::codec {

namespace {

std::string Plural(long count, const char* word) {
  return std::to_string(count) + " " + word + (count == 1 ? "" : "s");
}

}  // namespace

Result<ParityMode> ParseParityMode(std::string_view text) {
  if (text == "spares") return ParityMode::kSpares;
  if (text == "spread") return ParityMode::kSpread;
  if (text == "auto") return ParityMode::kAuto;
  return Status::InvalidArgument("parity layout '" + std::string(text) + "': want spares, spread or auto");
}

const char* ParityModeName(ParityMode mode) {
  switch (mode) {
    case ParityMode::kSpares: return "spares";
    case ParityMode::kSpread: return "spread";
    case ParityMode::kAuto: return "auto";
  }
  return "?";
}

std::vector<int> Group::codec_ranks() const {
  std::vector<int> ranks;
  for (const auto& m : data) ranks.push_back(m.codec_rank);
  for (const auto& m : spares) ranks.push_back(m.codec_rank);
  return ranks;
}

Result<GroupLayout> FormGroups(std::span<const NodeInfo> nodes, const GroupOptions& options) {
  if (options.group_size < 1) {
    return Status::InvalidArgument("--group-size " + std::to_string(options.group_size) +
                                   ": must be at least 1");
  }
  if (options.spares_per_group < 1) {
    return Status::InvalidArgument("--spares-per-group " +
                                   std::to_string(options.spares_per_group) +
                                   ": must be at least 1");
  }
  if (nodes.empty()) return Status::InvalidArgument("no codec process: cannot form groups");

  std::map<std::string, int> rank_of_node;
  std::map<int, std::string> node_of_rank;
  std::map<int, std::string> node_of_app_rank;
  std::vector<NodeInfo> data, spares;
  for (const NodeInfo& info : nodes) {
    if (info.codec_rank < 0) {
      return Status::InvalidArgument("node '" + info.node + "': invalid codec rank " +
                                     std::to_string(info.codec_rank));
    }
    if (info.node.empty()) {
      return Status::InvalidArgument("codec rank " + std::to_string(info.codec_rank) +
                                     " reports an empty node name");
    }
    if (auto [it, fresh] = node_of_rank.emplace(info.codec_rank, info.node); !fresh) {
      return Status::InvalidArgument("codec rank " + std::to_string(info.codec_rank) +
                                     " listed twice (nodes '" + it->second + "' and '" +
                                     info.node + "')");
    }
    if (auto [it, fresh] = rank_of_node.emplace(info.node, info.codec_rank); !fresh) {
      return Status::InvalidArgument(
          "node '" + info.node + "' runs two codec processes (ranks " +
          std::to_string(it->second) + " and " + std::to_string(info.codec_rank) +
          "): start exactly one codec process per node, since a group may hold only one "
          "member per node");
    }
    for (int app : info.app_ranks) {
      if (app < 0) {
        return Status::InvalidArgument("node '" + info.node + "': invalid application rank " +
                                       std::to_string(app));
      }
      if (auto [it, fresh] = node_of_app_rank.emplace(app, info.node); !fresh) {
        return Status::InvalidArgument("application rank " + std::to_string(app) +
                                       " reported on two nodes: '" + it->second + "' and '" +
                                       info.node + "'");
      }
    }
    NodeInfo copy = info;
    std::sort(copy.app_ranks.begin(), copy.app_ranks.end());
    (copy.app_ranks.empty() ? spares : data).push_back(std::move(copy));
  }
  if (data.empty()) {
    return Status::InvalidArgument("none of the " + Plural(static_cast<long>(nodes.size()), "node") +
                                   " runs application ranks: nothing to protect");
  }
  std::sort(data.begin(), data.end(),
            [](const NodeInfo& a, const NodeInfo& b) { return a.app_ranks[0] < b.app_ranks[0]; });
  std::sort(spares.begin(), spares.end(),
            [](const NodeInfo& a, const NodeInfo& b) { return a.codec_rank < b.codec_rank; });

  const long d = static_cast<long>(data.size());
  const long k = options.spares_per_group;
  const long groups = (d + options.group_size - 1) / options.group_size;
  const long needed = groups * k;
  const long available = static_cast<long>(spares.size());
  const long base = d / groups, rem = d % groups;
  // Groups with spares: all (spares), none (spread), as many as k spares
  // each allow (auto); the others spread their parity over their members.
  const long with_spares = options.parity == ParityMode::kSpares   ? groups
                           : options.parity == ParityMode::kSpread ? 0
                                                                   : std::min(groups, available / k);
  if (with_spares < groups && base <= k) {
    return Status::InvalidArgument(
        "parity spread over a group's members needs more than " + Plural(k, "data node") + " per group (k = " +
        std::to_string(k) + "), but " + std::to_string(d) + " data nodes in " + Plural(groups, "group") +
        " leave " + std::to_string(base) + (rem ? " or " + std::to_string(base + 1) : std::string()) +
        ": use a larger --group-size, fewer parity per group (--spares-per-group), or spare nodes (--parity spares)");
  }
  if (options.parity == ParityMode::kSpares && needed > available) {
    // The smallest k-spare configuration that fits, if any, helps the user.
    std::string hint;
    long max_groups = available / k;
    if (max_groups >= 1) {
      long size = (d + max_groups - 1) / max_groups;
      hint = "; use --group-size " + std::to_string(size) + " or more, or start " +
             Plural(needed - available, "more spare node");
    } else {
      hint = "; start " + Plural(needed - available, "more spare node") +
             " or lower --spares-per-group";
    }
    return Status::InvalidArgument(
        Plural(available, "spare node") + " cannot give " + Plural(groups, "group") + " " +
        Plural(k, "spare") + " each (" + std::to_string(d) + " data nodes, --group-size " +
        std::to_string(options.group_size) + " make " + Plural(groups, "group") + ", needing " +
        Plural(needed, "spare node") + ")" + hint);
  }
  if (base + (rem ? 1 : 0) + k > ErasureCode::kMaxChunks) {
    return Status::InvalidArgument(
        "a group of " + std::to_string(base + (rem ? 1 : 0)) + " data nodes and " +
        Plural(k, "spare") + " exceeds the 256 chunks of a GF(2^8) code: lower --group-size");
  }

  GroupLayout layout;
  size_t next_data = 0, next_spare = 0;
  for (long g = 0; g < groups; ++g) {
    Group group;
    group.id = static_cast<int>(g);
    long size = base + (g < rem ? 1 : 0);
    for (long i = 0; i < size; ++i) group.data.push_back(std::move(data[next_data++]));
    if (g < with_spares) {
      for (long j = 0; j < k; ++j) group.spares.push_back(std::move(spares[next_spare++]));
    } else {
      group.spread = true;
      group.spread_k = static_cast<int>(k);
    }
    layout.groups.push_back(std::move(group));
  }
  for (; next_spare < spares.size(); ++next_spare)
    layout.standby.push_back(std::move(spares[next_spare]));
  return layout;
}

Result<Role> FindRole(const GroupLayout& layout, int codec_rank) {
  for (const Group& g : layout.groups) {
    for (size_t i = 0; i < g.data.size(); ++i) {
      if (g.data[i].codec_rank == codec_rank)
        return Role{RoleKind::kData, g.id, static_cast<int>(i), static_cast<int>(i)};
    }
    for (size_t j = 0; j < g.spares.size(); ++j) {
      if (g.spares[j].codec_rank == codec_rank)
        return Role{RoleKind::kSpare, g.id, static_cast<int>(j), g.n() + static_cast<int>(j)};
    }
  }
  for (size_t s = 0; s < layout.standby.size(); ++s) {
    if (layout.standby[s].codec_rank == codec_rank)
      return Role{RoleKind::kStandby, -1, static_cast<int>(s), -1};
  }
  return Status::NotFound("codec rank " + std::to_string(codec_rank) + " is in no group");
}

std::string DescribeLayout(const GroupLayout& layout) {
  std::string out;
  for (const Group& g : layout.groups) {
    out += "group " + std::to_string(g.id) + " (" + SchemeName(g.scheme()) + ", " +
           std::to_string(g.n()) + "+" + std::to_string(g.k()) + (g.spread ? " spread" : "") + "): data";
    for (const auto& m : g.data) out += " " + m.node;
    if (g.spread) {
      out += "; parity spread over the members (each keeps " + std::to_string(g.k()) + "/" +
             std::to_string(g.n() - g.k()) + " of the largest member's size)";
    } else {
      out += "; spares";
      for (const auto& m : g.spares) out += " " + m.node;
    }
    out += "\n";
  }
  if (!layout.standby.empty()) {
    out += "standby spares:";
    for (const auto& m : layout.standby) out += " " + m.node;
    out += "\n";
  }
  return out;
}

}  // namespace dlckpt::codec

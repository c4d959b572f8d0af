// dlckpt/codec/groups.h — how dlckpt-codec partitions nodes into encoding groups.
//
// A pure function (no MPI, no I/O): every codec process computes the same
// layout from the same allgathered list of nodes.
//
// Contracts.
// - Members are nodes. Exactly one codec process runs per node; a node is
//   named by its hostname on a cluster or by its virtual node name on one
//   machine. All application ranks of a node form ONE member: its image, the
//   unit the erasure code works on, is the concatenation of the images of the
//   node's stores in ascending application-rank order. Nodes without
//   application ranks are spares.
// - A group has n data members (at most --group-size, see GroupOptions) and
//   k = --spares-per-group spare members holding its parity; chunk i of the
//   group's code is data[i] (i < n), chunk n + j is spares[j]. Since each
//   node appears once, no group holds two members of one node (the failure
//   domain rule), and spares are whole nodes.
// - Group count = ceil(data nodes / group_size); the remainder is spread so
//   group sizes differ by at most one. Data nodes are taken in order of their
//   lowest application rank, spares in codec-rank order; spare nodes left over
//   are standby spares (used to rebuild when a group's own spare is gone).
// - Parity layout (GroupOptions::parity, dlckpt/control/stripes.h): kSpares
//   gives every group k spare nodes and fails when there are too few;
//   kSpread gives no group a spare (every spare node is standby) and spreads
//   each group's parity over its n data members, which needs n > k; kAuto
//   gives spares to groups in order while k are left and spreads the parity
//   of the groups after them. Group::spread says which.
// - XOR when k == 1, Reed-Solomon otherwise (see Group::scheme()).
// - A configuration that cannot be met is an EINVAL Status whose message says
//   why and what to change; nothing aborts.
#ifndef DLCKPT_CODEC_GROUPS_H_
#define DLCKPT_CODEC_GROUPS_H_

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dlckpt/codec/erasure.h"
#include "dlckpt/base/status.h"

namespace dlckpt::codec {

struct NodeInfo {
  int codec_rank = -1;         // the node's codec process, in the codec job
  std::string node;            // hostname or virtual node name
  std::vector<int> app_ranks;  // application ranks (= stores) on the node; empty: spare
};

enum class ParityMode { kSpares, kSpread, kAuto };
// "spares", "spread", "auto"; EINVAL naming the value otherwise.
Result<ParityMode> ParseParityMode(std::string_view text);
const char* ParityModeName(ParityMode mode);

struct GroupOptions {
  int group_size = 0;        // at most this many data nodes per group (>= 1)
  int spares_per_group = 1;  // k (>= 1): parity chunks per stripe
  ParityMode parity = ParityMode::kSpares;
};

struct Group {
  int id = 0;
  std::vector<NodeInfo> data;    // chunk i (spares layout); member i (spread)
  std::vector<NodeInfo> spares;  // chunk n + j; empty when spread
  bool spread = false;           // parity spread over the data members
  int spread_k = 0;              // k when spread
  int n() const { return static_cast<int>(data.size()); }
  int k() const { return spread ? spread_k : static_cast<int>(spares.size()); }
  Scheme scheme() const { return k() == 1 ? Scheme::kXor : Scheme::kReedSolomon; }

  // The group's codec ranks in chunk order (data, then spares).
  std::vector<int> codec_ranks() const;
};

struct GroupLayout {
  std::vector<Group> groups;
  std::vector<NodeInfo> standby;  // spare nodes outside every group
};

enum class RoleKind { kData, kSpare, kStandby };

struct Role {
  RoleKind kind = RoleKind::kStandby;
  int group = -1;  // -1 for standby
  int index = -1;  // data index (kData), spare index (kSpare), standby index (kStandby)
  // Chunk id of this member in its group's code (data i -> i, spare j -> n + j),
  // also its rank in a group communicator split with this key; -1 for standby.
  int chunk = -1;
};

Result<GroupLayout> FormGroups(std::span<const NodeInfo> nodes, const GroupOptions& options);

// The role of codec process `codec_rank`; ENOENT if the layout does not hold it.
Result<Role> FindRole(const GroupLayout& layout, int codec_rank);

// One line per group, e.g. "group 0 (xor, 3+1): data n01 n02 n03; spares s01".
std::string DescribeLayout(const GroupLayout& layout);

}  // namespace dlckpt::codec

#endif  // DLCKPT_CODEC_GROUPS_H_

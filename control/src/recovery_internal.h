// recovery_internal.h — the three stages of recovery::Decide, apart so that
// each has its own tests (recovery_test.cc):
//   1. the stripe model: what survives (TakeInventory) and where each chunk
//      of a group's stripes lives at an epoch (StripesOf; stripes.h gives
//      the layouts);
//   2. the choice of epoch (ChooseEpoch): the newest epoch that every group
//      can recover, and the members to rebuild;
//   3. the placement (Place): the node that rebuilds each lost member, the
//      nodes that give the rebuild its chunks, where every rank runs after,
//      and what each group tolerates until the next encode.
// Pure functions of their arguments; not thread-safe only in the sense that
// the returned pointers (Choice::encoding) point into the Inventory.
#ifndef DLCKPT_CONTROL_RECOVERY_INTERNAL_H_
#define DLCKPT_CONTROL_RECOVERY_INTERNAL_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "dlckpt/base/status.h"
#include "dlckpt/control/recovery.h"

namespace dlckpt::control::recovery::internal {

// One group of one encoding, as the surviving parity objects describe it.
struct GroupInfo {
  std::vector<protocol::MemberRecord> members;
  std::map<uint32_t, std::string> parity_at;  // complete parity object index -> node holding it
  uint32_t k = 0;
  uint8_t scheme = 0;
  uint8_t layout = 0;  // ParityLayout
  bool spread() const { return layout == 1; }
};

// The parity objects of one encoding: its groups by number, how many groups
// it has (all of them complete = the codec's DONE), and its (epoch,
// generation).
struct Encoding {
  std::map<uint32_t, GroupInfo> groups;
  uint32_t ngroups = 0;
  uint64_t epoch = 0, generation = 0;
};

// What the survey found alive, over every live node.
struct Inventory {
  std::map<int32_t, std::set<uint64_t>> avail;  // rank -> verified epochs of its copy
  std::map<int32_t, std::string> found;         // rank -> the node of the copy used
  std::map<int32_t, std::string> damaged;       // rank -> "node: why"
  std::vector<std::string> damaged_parity;      // "node: why"
  std::set<uint64_t> acked_epochs;              // acknowledged by some live store
  uint64_t newest_acked = 0;
  std::map<std::pair<uint64_t, uint64_t>, Encoding> encodings;  // (epoch, generation)

  bool Has(int32_t rank, uint64_t epoch) const;
};

Inventory TakeInventory(const Input& in);

// Where every chunk of one stripe of a group lives at one epoch: holder[i]
// for data chunk i (0..n-1, a segment of member member[i]), holder[n + j] for
// parity j; "" when the chunk is lost. A member survives when every one of
// its ranks has the epoch on one live node.
struct Stripe {
  std::vector<std::string> holder;
  std::vector<uint32_t> member;  // the member of each data chunk
  size_t n = 0;                  // data chunks
  size_t DistinctHolders() const;
  size_t Surviving() const;  // chunks with a holder
  std::vector<uint32_t> LostData() const;
  // Whether the stripe can be made whole: nothing of its data is lost, or at
  // least n chunks survive and either they lie on n distinct nodes or only
  // one data chunk is lost (a node giving several chunks of a single-output
  // rebuild sends their combination, computed locally, as one source; two
  // outputs would need two different combinations from it).
  bool Rebuildable() const;
  // The chunks a rebuild reads: holder with each node's second and later
  // chunks blanked, so that no node gives two; when that leaves fewer than n
  // and one data chunk is lost, the blanked chunks are given back in chunk
  // order until n are (their nodes then give their combination).
  std::vector<std::string> Sources() const;
};

// The node holding each member of the group at `epoch` ("" when lost).
std::vector<std::string> MemberHolders(const Inventory& inv, const GroupInfo& gi, uint64_t epoch);
// The group's stripes: one (spares layout) or one per member (spread).
std::vector<Stripe> StripesOf(const Inventory& inv, const GroupInfo& gi, uint64_t epoch);
// The spares layout's single stripe (StripesOf(...)[0] there).
Stripe StripeOf(const Inventory& inv, const GroupInfo& gi, uint64_t epoch);
// Further node losses the stripes survive, in the worst case over which
// nodes are lost (a node holding several chunks loses them all): the largest
// t such that every stripe stays Rebuildable after any t of its holders are
// lost, min over stripes; -1 when some stripe is not Rebuildable now.
// Conservative: at least distinct holders - data chunks in every stripe,
// even where the exhaustive check is cut short (very large stripes).
int Tolerance(const std::vector<Stripe>& stripes);

// The epoch chosen, the encoding its rebuilds use (nullptr: no rebuild) and
// the (group, member) pairs to rebuild.
struct Choice {
  uint64_t epoch = 0;
  const Encoding* encoding = nullptr;
  std::vector<std::pair<uint32_t, uint32_t>> lost;
};

// ENOTRECOVERABLE, naming why the newest acknowledged epoch cannot be used,
// when no epoch is recoverable and some epoch was acknowledged.
Result<Choice> ChooseEpoch(const Inventory& inv, const Input& in);

// Fills plan->epoch, generation, rebuilds, groups, placement, lost_nodes and
// degraded. ENOTRECOVERABLE when no node is left to host a lost member.
Status Place(const Inventory& inv, const Choice& choice, const Input& in, Plan* plan);

}  // namespace dlckpt::control::recovery::internal

#endif  // DLCKPT_CONTROL_RECOVERY_INTERNAL_H_

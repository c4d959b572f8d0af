// dlckpt/control/recovery.h — the recovery decision of dlckpt-run, as a pure function.
//
// Input: what a survey found on the live nodes (stores with their epochs,
// parity objects with the group they encode), the nodes known to be dead,
// where every rank was placed, and the nodes free to host lost ranks.
// Output: the newest epoch that every group can recover, the rebuilds that
// recovery needs (lost member -> target spare node, and the node that gives
// each chunk of the group's stripe) and the new placement of every rank; or, when a group lost more members than it has parity, an error
// (ENOTRECOVERABLE) naming the group and the newest checkpoint that still
// exists.
//
// Rules (docs/design.md invariant 1):
//  - A rank's store is *available* at epoch e when a live node holds it
//    with e acknowledged or pending and e passed the survey's verification
//    (a copy that failed is an erasure, rebuilt in place on its live node).
//  - A parity object the survey left out (NodeReport::parity_damage: its
//    bytes failed their checksums, ...) is an erasure, as a damaged store is;
//    the message of ENOTRECOVERABLE names it.
//  - An encoding of epoch e is a set of parity objects with one (epoch,
//    generation). Its group g is a stripe of chunks: data member i (a node
//    at encode time, a list of ranks) and parity j, each living on some node
//    or lost. g is recoverable when at least n of its chunks survive and
//    either they lie on n distinct nodes or only one data chunk of the stripe
//    is lost (a spare that rebuilt a member may hold that member and a
//    parity of the same group: for a single lost chunk it gives their
//    combination, computed locally, as one source of the rebuild; two lost
//    chunks need a different combination each, so their sources must lie on
//    n distinct nodes).
//  - Epoch e is *committed everywhere* when some live store acknowledged it
//    (the application only acknowledges after the codec's DONE), or when every
//    group of its encoding has a complete surviving parity object.
//  - e is chosen when it is committed everywhere and every rank is available
//    or lies in a recoverable group of e's encoding; the newest such e wins.
//    Epoch 0 (start from scratch) is chosen only when no checkpoint was ever
//    acknowledged.
//  - Targets: the member's own node when it is alive (a damaged store);
//    otherwise live nodes without ranks: first those holding no parity of
//    the chosen encoding, then those holding no chunk of the lost member's
//    group, then the rest. When none is left (and Input::oversubscribe), a
//    live node running ranks: one holding no chunk of the member's group
//    first, then the one running the fewest ranks (Plan::oversubscribed).
//    After the plan a group tolerates, in its worst stripe and whichever
//    nodes are lost (one holding two chunks loses both), the most further
//    node losses that leave every stripe recoverable by the rule above, until
//    the next encode (at least (nodes holding one of its chunks) - n); groups
//    below their k are listed in Plan::degraded and in the summary.
//  - Layouts (dlckpt/control/stripes.h): a spares group is one stripe; a
//    spread group is n stripes whose parity lives on the members, each
//    recoverable on its own. A lost node may take a data chunk of one group
//    and parity chunks of others at once.
#ifndef DLCKPT_CONTROL_RECOVERY_H_
#define DLCKPT_CONTROL_RECOVERY_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "dlckpt/control/protocol.h"
#include "dlckpt/base/status.h"

namespace dlckpt::control::recovery {

struct Input {
  protocol::SurveyReply survey;           // from the live nodes
  std::set<std::string> dead_nodes;       // known lost
  std::map<int32_t, std::string> placement;  // rank -> node before the failure
  std::vector<std::string> free_nodes;    // live nodes without ranks, in preference order
  // With no free node left, a live node running ranks may host lost ones
  // too (oversubscribed); false: such a recovery is ENOTRECOVERABLE.
  bool oversubscribe = true;
};

struct Plan {
  uint64_t epoch = 0;        // 0: start from scratch
  uint64_t generation = 0;   // of the encoding used for rebuilds
  std::vector<protocol::RebuildTask> rebuilds;
  // Each group with rebuilds: its members and the node giving each chunk
  // (protocol::RebuildGroup), so that the codec executes the plan without
  // surveying again.
  std::vector<protocol::RebuildGroup> groups;
  std::vector<std::string> lost_nodes;            // nodes whose ranks moved
  std::map<int32_t, std::string> placement;       // rank -> node after recovery
  struct Degraded {
    uint32_t group = 0;
    int tolerance = 0;    // further node losses survived until the next encode
    uint32_t k = 0;       // parity of the group's encoding
    std::string chunks;   // where its chunks live after the plan, e.g. "d0@vn0 d2,p0@vn4"
  };
  std::vector<Degraded> degraded;                 // groups below their k after the plan
  std::vector<std::string> oversubscribed;        // running ranks they did not run before
  std::string damage;  // stores whose epochs failed verification; parity the survey left out
  std::string summary;                            // one line for humans
};

Result<Plan> Decide(const Input& in);

// "group 0 survives 1 more node loss(es) until the next encode (...)"; empty
// when no group is degraded.
std::string DescribeDegraded(const Plan& plan);

// The RECOVER message for a plan.
protocol::Recover ToRecoverMessage(const Plan& plan);

}  // namespace dlckpt::control::recovery

#endif  // DLCKPT_CONTROL_RECOVERY_H_

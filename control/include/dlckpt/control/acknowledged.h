// dlckpt/control/acknowledged.h — the rule that a job's stores hold one
// checkpoint: every store has the same acknowledged epoch (docs/design.md,
// "One checkpoint: the CheckpointRound"). It is checked here only, so that
// the application API, the checkpoint round, dlckpt-ctl and dlckpt-store
// refuse stores that break it with the same words and the same errno.
// A pure function: no I/O, no MPI (callers gather the epochs; a collective
// form for MPI jobs is AgreeOneAcknowledgedEpoch in checkpoint_round.h).
// Thread safety: none needed (no shared state).
#ifndef DLCKPT_CONTROL_ACKNOWLEDGED_H_
#define DLCKPT_CONTROL_ACKNOWLEDGED_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dlckpt/base/status.h"

namespace dlckpt::control {

// OK when every entry of `acknowledged` (store i's acknowledged epoch, 0 for
// none) is the same, or there is none. Otherwise EPROTO with the message
//   "the stores hold different checkpoints (acknowledged epochs LO to HI:
//    NAME epoch E[ and N more], ...)[: REMEDY]"
// which names, for each distinct epoch in ascending order (at most 16), the
// first store that holds it, names[i] naming store i; `remedy` (empty: none)
// tells the caller's user what to do. EINVAL when names and epochs differ in
// number.
Status CheckOneAcknowledgedEpoch(const std::vector<uint64_t>& acknowledged, const std::vector<std::string>& names,
                                 std::string_view remedy);

}  // namespace dlckpt::control

#endif  // DLCKPT_CONTROL_ACKNOWLEDGED_H_

// The acknowledged epoch every store of an MPI job holds: see
// AgreeOneAcknowledgedEpoch in dlckpt/control/checkpoint_round.h.
#include <cerrno>
#include <cstring>

#include "dlckpt/control/acknowledged.h"
#include "dlckpt/control/checkpoint_round.h"

namespace dlckpt::control {

Result<uint64_t> AgreeOneAcknowledgedEpoch(mpi::Collective* c, uint64_t acknowledged, const std::string& name,
                                           std::string_view remedy) {
  DLCKPT_ASSIGN_OR_RETURN(uint64_t lo, c->Min(acknowledged));
  DLCKPT_ASSIGN_OR_RETURN(uint64_t hi, c->Max(acknowledged));
  if (lo == hi) return lo;
  // Only a mismatch gathers every store's epoch and name, for the message.
  std::string mine(sizeof acknowledged, '\0');
  std::memcpy(mine.data(), &acknowledged, sizeof acknowledged);
  mine += name;
  DLCKPT_ASSIGN_OR_RETURN(std::vector<std::string> all, c->Allgather(mine));
  std::vector<uint64_t> epochs;
  std::vector<std::string> names;
  for (const std::string& one : all) {
    uint64_t e = 0;
    if (one.size() < sizeof e) return Status::Error(EPROTO, "acknowledged epochs: malformed message");
    std::memcpy(&e, one.data(), sizeof e);
    epochs.push_back(e);
    names.push_back(one.substr(sizeof e));
  }
  DLCKPT_RETURN_IF_ERROR(CheckOneAcknowledgedEpoch(epochs, names, remedy));
  return Status::Error(EPROTO, "acknowledged epochs " + std::to_string(lo) + " to " + std::to_string(hi) +
                                   " reduced, but gathered alike");  // unreachable: MPI returned one set of values
}

}  // namespace dlckpt::control

// One acknowledged epoch on every store: see dlckpt/control/acknowledged.h.
#include "dlckpt/control/acknowledged.h"

#include <cerrno>
#include <map>

namespace dlckpt::control {

Status CheckOneAcknowledgedEpoch(const std::vector<uint64_t>& acknowledged, const std::vector<std::string>& names,
                                 std::string_view remedy) {
  if (names.size() != acknowledged.size()) {
    return Status::InvalidArgument("checking the stores' acknowledged epochs: " + std::to_string(names.size()) +
                                   " names for " + std::to_string(acknowledged.size()) + " stores");
  }
  // Distinct epoch -> (the first store that holds it, how many do).
  std::map<uint64_t, std::pair<size_t, size_t>> held;
  for (size_t i = 0; i < acknowledged.size(); ++i) {
    auto it = held.try_emplace(acknowledged[i], i, 0).first;
    ++it->second.second;
  }
  if (held.size() <= 1) return Status::OK();
  constexpr size_t kMaxListed = 16;
  std::string list;
  size_t listed = 0;
  for (const auto& [epoch, stores] : held) {
    if (listed == kMaxListed) {
      list += ", ...";
      break;
    }
    list += (listed++ ? ", " : "") + names[stores.first] + " epoch " + std::to_string(epoch);
    if (stores.second > 1) list += " and " + std::to_string(stores.second - 1) + " more";
  }
  std::string message = "the stores hold different checkpoints (acknowledged epochs " +
                        std::to_string(held.begin()->first) + " to " + std::to_string(held.rbegin()->first) +
                        ": " + list + ")";
  if (!remedy.empty()) message += ": " + std::string(remedy);
  return Status::Error(EPROTO, std::move(message));
}

}  // namespace dlckpt::control

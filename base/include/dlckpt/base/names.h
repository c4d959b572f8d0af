// dlckpt/base/names.h — the names of a job's shared-memory objects, in one
// place. Every object of job J on node N is "/dlckpt.J.N.<kind>":
//   "/dlckpt.J.N.r<R>"        the memfs store of application rank R
//   "/dlckpt.J.N.parity<S>"   parity slot S (0 or 1) of the codec on spare N
// A job id is 1-63 of [A-Za-z0-9_-] (no '.', so the job ends at the second
// dot); a node name is 1-63 of [A-Za-z0-9._-] (see dlckpt/base/node.h for how
// a node's name is chosen). Listing a prefix (JobPrefix, NodePrefix,
// StorePrefix) with Env::ListShm finds the objects of one job or node.
// Thread safety: pure functions.
#ifndef DLCKPT_BASE_NAMES_H_
#define DLCKPT_BASE_NAMES_H_

#include <string>
#include <string_view>

#include "dlckpt/base/status.h"

namespace dlckpt {

// What every name starts with: listing it finds every job's objects.
inline constexpr std::string_view kNameRoot = "/dlckpt.";

bool ValidJobName(std::string_view job);
bool ValidNodeName(std::string_view node);

// "/dlckpt.J.N.rR". EINVAL naming the part when job, node or rank is invalid.
Result<std::string> StoreName(std::string_view job, std::string_view node, int rank);
// "/dlckpt.J.N.paritySLOT" (the caller's job and node are already valid).
std::string ParityName(std::string_view job, std::string_view node, int slot);

// "/dlckpt.J.": every object of job J.
std::string JobPrefix(std::string_view job);
// "/dlckpt.J.N.": every object of job J on node N.
std::string NodePrefix(std::string_view job, std::string_view node);
// "/dlckpt.J.N.r": every store of job J on node N.
std::string StorePrefix(std::string_view job, std::string_view node);

// The parts of a store name.
struct StoreId {
  std::string job;
  std::string node;
  int rank = -1;
};
// EINVAL unless `name` is a store name as StoreName makes them.
Result<StoreId> ParseStoreName(std::string_view name);

}  // namespace dlckpt

#endif  // DLCKPT_BASE_NAMES_H_

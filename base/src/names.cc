// Shared-memory object names: see dlckpt/base/names.h.
#include "dlckpt/base/names.h"

#include <algorithm>
#include <cerrno>

namespace dlckpt {
namespace {

constexpr size_t kMaxPart = 63;

bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

}  // namespace

bool ValidNodeName(std::string_view node) {
  return !node.empty() && node.size() <= kMaxPart && std::all_of(node.begin(), node.end(), NameChar);
}

bool ValidJobName(std::string_view job) {
  return ValidNodeName(job) && job.find('.') == std::string_view::npos;
}

Result<std::string> StoreName(std::string_view job, std::string_view node, int rank) {
  if (!ValidJobName(job)) {
    return Status::InvalidArgument("invalid job id '" + std::string(job) +
                                   "' (want 1-63 of [A-Za-z0-9_-])");
  }
  if (!ValidNodeName(node)) {
    return Status::InvalidArgument("invalid node name '" + std::string(node) +
                                   "' (want 1-63 of [A-Za-z0-9._-])");
  }
  if (rank < 0) return Status::InvalidArgument("negative rank " + std::to_string(rank));
  return StorePrefix(job, node) + std::to_string(rank);
}

std::string ParityName(std::string_view job, std::string_view node, int slot) {
  return NodePrefix(job, node) + "parity" + std::to_string(slot);
}

std::string JobPrefix(std::string_view job) { return std::string(kNameRoot) + std::string(job) + "."; }

std::string NodePrefix(std::string_view job, std::string_view node) {
  return JobPrefix(job) + std::string(node) + ".";
}

std::string StorePrefix(std::string_view job, std::string_view node) {
  return NodePrefix(job, node) + "r";
}

Result<StoreId> ParseStoreName(std::string_view name) {
  auto bad = [&] {
    return Status::InvalidArgument("'" + std::string(name) +
                                   "' is not a store name (/dlckpt.<job>.<node>.r<rank>)");
  };
  if (name.substr(0, kNameRoot.size()) != kNameRoot) return bad();
  std::string_view rest = name.substr(kNameRoot.size());
  size_t job_end = rest.find('.');
  size_t rank_at = rest.rfind(".r");
  if (job_end == std::string_view::npos || rank_at == std::string_view::npos || rank_at <= job_end) {
    return bad();
  }
  StoreId id;
  id.job = std::string(rest.substr(0, job_end));
  id.node = std::string(rest.substr(job_end + 1, rank_at - job_end - 1));
  std::string_view digits = rest.substr(rank_at + 2);
  if (digits.empty() || digits.size() > 9 || !ValidJobName(id.job) || !ValidNodeName(id.node)) return bad();
  int rank = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return bad();
    rank = rank * 10 + (c - '0');
  }
  id.rank = rank;
  return id;
}

}  // namespace dlckpt

#include "paths.h"

#include "dlckpt/base/strings.h"

namespace dlckpt::intercept {

namespace {

bool Below(std::string_view path, std::string_view prefix) {
  if (path.size() < prefix.size() || path.compare(0, prefix.size(), prefix) != 0) return false;
  return path.size() == prefix.size() || path[prefix.size()] == '/';
}

// Walks absolute `path` lexically, component by component: "" and "." are
// skipped, ".." drops the last component of `cur`, any other is appended to
// `cur` (which reads "/a/b", or "" at the root) and then `stop(cur)` is asked.
// Returns true as soon as stop does.
template <class Stop>
bool Walk(std::string_view path, std::string& cur, Stop&& stop) {
  size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/') ++i;
    size_t j = i;
    while (j < path.size() && path[j] != '/') ++j;
    std::string_view comp = path.substr(i, j - i);
    i = j;
    if (comp.empty() || comp == ".") continue;
    if (comp == "..") {
      size_t slash = cur.rfind('/');
      cur.resize(slash == std::string::npos ? 0 : slash);
      continue;
    }
    cur += '/';
    cur += comp;
    if (stop(cur)) return true;
  }
  return false;
}

}  // namespace

std::string NormalizeAbsolute(std::string_view path) {
  std::string out;
  out.reserve(path.size());
  Walk(path, out, [](const std::string&) { return false; });
  if (out.empty()) out.push_back('/');
  return out;
}

bool IsNormalizedAbsolute(std::string_view path) {
  if (path.empty() || path[0] != '/') return false;
  if (path.size() == 1) return true;
  if (path.back() == '/') return false;
  size_t i = 1;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    std::string_view comp = path.substr(i, j - i);
    if (comp.empty() || comp == "." || comp == "..") return false;
    i = j + 1;
  }
  return true;
}

std::string JoinAndNormalize(std::string_view base, std::string_view rel) {
  std::string joined(base);
  joined += '/';
  joined += rel;
  return NormalizeAbsolute(joined);
}

bool HasDotDot(std::string_view rel) {
  size_t i = 0;
  while (i <= rel.size()) {
    size_t j = rel.find('/', i);
    if (j == std::string_view::npos) j = rel.size();
    if (rel.substr(i, j - i) == "..") return true;
    i = j + 1;
  }
  return false;
}

std::string_view ParentOf(std::string_view normalized) {
  size_t slash = normalized.rfind('/');
  if (slash == 0 || slash == std::string_view::npos) return "/";
  return normalized.substr(0, slash);
}

bool IsPseudoFs(std::string_view normalized) {
  return Below(normalized, "/proc") || Below(normalized, "/sys") || Below(normalized, "/dev");
}

PrefixSet PrefixSet::Parse(std::string_view spec, std::vector<std::string>* rejected) {
  PrefixSet set;
  set.prefixes_.clear();
  for (std::string_view entry : Split(spec, ':')) {
    if (entry.empty()) continue;
    std::string norm = entry[0] == '/' ? NormalizeAbsolute(entry) : std::string();
    if (norm.empty() || norm == "/") {
      if (rejected) rejected->emplace_back(entry);
      continue;
    }
    bool dup = false;
    for (const auto& p : set.prefixes_) dup = dup || p == norm;
    if (!dup) set.prefixes_.push_back(std::move(norm));
  }
  if (set.prefixes_.empty()) set.prefixes_.emplace_back(kDefault);
  return set;
}

bool PrefixSet::Contains(std::string_view path) const {
  for (const auto& p : prefixes_) {
    if (Below(path, p)) return true;
  }
  return false;
}

bool PrefixSet::IsRoot(std::string_view path) const {
  for (const auto& p : prefixes_) {
    if (path == p) return true;
  }
  return false;
}

bool PrefixSet::IsAncestor(std::string_view path) const {
  if (path == "/") return true;
  for (const auto& p : prefixes_) {
    if (p.size() > path.size() && Below(p, path)) return true;
  }
  return false;
}

bool PrefixSet::WalksThrough(std::string_view path) const {
  std::string cur;
  return Walk(path, cur, [this](const std::string& p) { return Contains(p); });
}

bool PrefixSet::MaybeContains(std::string_view raw_absolute) const {
  if (!IsNormalizedAbsolute(raw_absolute)) return true;
  return Contains(raw_absolute);
}

}  // namespace dlckpt::intercept

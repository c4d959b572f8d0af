// paths.h — lexical path normalisation and the prefix set that decides which
// paths libintercept routes into memfs. Pure functions and a value type: no
// OS access, thread-safe as values.
#ifndef DLCKPT_LIBINTERCEPT_PATHS_H_
#define DLCKPT_LIBINTERCEPT_PATHS_H_

#include <string>
#include <string_view>
#include <vector>

namespace dlckpt::intercept {

// Normalises an absolute path lexically: collapses "//" and "/./", resolves
// "/../" against the preceding component ("/.." stays "/"), drops a trailing
// '/'. "/" stays "/". `path` must start with '/'.
std::string NormalizeAbsolute(std::string_view path);

// True if `path` (which starts with '/') is already in the form
// NormalizeAbsolute returns, so callers can skip the copy.
bool IsNormalizedAbsolute(std::string_view path);

// `base` (absolute) joined with `rel` (relative), normalised.
std::string JoinAndNormalize(std::string_view base, std::string_view rel);

// True if `rel` has a ".." component.
bool HasDotDot(std::string_view rel);

// The directory part of a normalised absolute path ("/a/b" -> "/a", "/a" -> "/").
std::string_view ParentOf(std::string_view normalized);

// Paths of pseudo file systems (/proc, /sys, /dev and below): never routed into
// memfs by dlckpt_enabled, since they can never hold a checkpoint.
bool IsPseudoFs(std::string_view normalized);

// The set of path prefixes under which every file lives in memfs.
class PrefixSet {
 public:
  static constexpr std::string_view kDefault = "/dlckpt";

  // Parses a colon-separated list such as "/dlckpt:/scratch/ckpt". Each entry
  // is normalised; empty entries are skipped; relative entries and "/" are
  // rejected and reported in `rejected` (never silently widened). If nothing
  // valid remains, the set is {kDefault}.
  static PrefixSet Parse(std::string_view spec, std::vector<std::string>* rejected);
  PrefixSet() : prefixes_{std::string(kDefault)} {}

  // True if normalised absolute `path` equals a prefix or lies below one.
  bool Contains(std::string_view path) const;
  // True if `path` equals one of the prefixes (a directory that always exists).
  bool IsRoot(std::string_view path) const;
  // True if `path` is "/" or an ancestor directory of a prefix ("/" for "/dlckpt").
  bool IsAncestor(std::string_view path) const;
  // Cheap pre-filter on a raw absolute path: false means the path cannot lie
  // under any prefix, whatever its ".", ".." or "//" components.
  bool MaybeContains(std::string_view raw_absolute) const;

  // True if the kernel, walking raw absolute `path` component by component
  // (".." included), would pass through a path this set contains — as
  // "/dlckpt/../x" passes through "/dlckpt" although it ends outside.
  bool WalksThrough(std::string_view raw_absolute) const;

  const std::vector<std::string>& prefixes() const { return prefixes_; }

 private:
  std::vector<std::string> prefixes_;
};

}  // namespace dlckpt::intercept

#endif  // DLCKPT_LIBINTERCEPT_PATHS_H_

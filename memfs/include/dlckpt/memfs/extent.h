// dlckpt/memfs/extent.h — a read-only piece of a byte image.
//
// A store's encoding view (memfs Image) is a list of extents whose
// concatenation is the image; the codec reads them in place, never copying a
// store to pad or linearise it.
#ifndef DLCKPT_MEMFS_EXTENT_H_
#define DLCKPT_MEMFS_EXTENT_H_

#include <cstddef>
#include <cstdint>
#include <span>

namespace dlckpt {

struct Extent {
  const uint8_t* data;  // not owned; valid as long as the owner of the image says
  size_t len;
};

// Walks an extent list by increasing image offset. Holds a view of the list:
// the list must outlive the cursor. Not thread-safe.
class ExtentCursor {
 public:
  explicit ExtentCursor(std::span<const Extent> extents) : ex_(extents) {}
  // The address of image byte `x` and, in *run, how many bytes follow it
  // contiguously. Past the end: null, and *run unbounded (~0). `x` never
  // decreases between calls.
  const uint8_t* At(uint64_t x, uint64_t* run) {
    while (i_ < ex_.size() && start_ + ex_[i_].len <= x) {
      start_ += ex_[i_].len;
      ++i_;
    }
    if (i_ == ex_.size()) {
      *run = ~uint64_t{0};
      return nullptr;
    }
    *run = start_ + ex_[i_].len - x;
    return ex_[i_].data + (x - start_);
  }

 private:
  std::span<const Extent> ex_;
  size_t i_ = 0;
  uint64_t start_ = 0;
};

}  // namespace dlckpt

#endif  // DLCKPT_MEMFS_EXTENT_H_

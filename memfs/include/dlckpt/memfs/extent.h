// dlckpt/memfs/extent.h — a read-only piece of a byte image.
//
// A store's encoding view (memfs Image) is a list of extents whose
// concatenation is the image; the codec reads them in place, never copying a
// store to pad or linearise it.
#ifndef DLCKPT_MEMFS_EXTENT_H_
#define DLCKPT_MEMFS_EXTENT_H_

#include <cstddef>
#include <cstdint>

namespace dlckpt {

struct Extent {
  const uint8_t* data;  // not owned; valid as long as the owner of the image says
  size_t len;
};

}  // namespace dlckpt

#endif  // DLCKPT_MEMFS_EXTENT_H_

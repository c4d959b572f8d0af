#include "dlckpt/crc32c.h"

#include <isa-l/crc.h>

namespace dlckpt {

uint32_t Crc32c(const void* data, size_t len, uint32_t crc) noexcept {
  // ISA-L works on the inverted register and takes an int length.
  unsigned int reg = ~crc;
  auto* p = static_cast<unsigned char*>(const_cast<void*>(data));
  constexpr size_t kMaxPiece = size_t{1} << 30;
  while (len > 0) {
    size_t n = len < kMaxPiece ? len : kMaxPiece;
    reg = crc32_iscsi(p, static_cast<int>(n), reg);
    p += n;
    len -= n;
  }
  return ~reg;
}

}  // namespace dlckpt

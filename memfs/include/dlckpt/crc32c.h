// dlckpt/crc32c.h — CRC32C (Castagnoli, as iSCSI) over ISA-L.
#ifndef DLCKPT_CRC32C_H_
#define DLCKPT_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace dlckpt {

// The standard CRC32C of `len` bytes, continuing from `crc` (the CRC of the
// preceding bytes; 0 to start). Crc32c("123456789") == 0xE3069283.
uint32_t Crc32c(const void* data, size_t len, uint32_t crc = 0) noexcept;

}  // namespace dlckpt

#endif  // DLCKPT_CRC32C_H_

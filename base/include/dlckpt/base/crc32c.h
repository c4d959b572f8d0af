// dlckpt/base/crc32c.h — CRC32C (Castagnoli, as iSCSI) over ISA-L.
#ifndef DLCKPT_BASE_CRC32C_H_
#define DLCKPT_BASE_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace dlckpt {

// The standard CRC32C of `len` bytes, continuing from `crc` (the CRC of the
// preceding bytes; 0 to start). Crc32c("123456789") == 0xE3069283.
uint32_t Crc32c(const void* data, size_t len, uint32_t crc = 0) noexcept;

// Copies `len` bytes from `src` to `dst` (not overlapping) and returns their
// CRC32C continuing from `crc`, as Crc32c(dst, len, crc). Copies and checks
// in pieces small enough to stay in the L1 cache, so that the checksum of
// one piece overlaps the memory traffic of the next: on this platform about
// the speed of the copy alone (bench/README.md, "CRC while writing").
uint32_t Crc32cCopy(void* dst, const void* src, size_t len, uint32_t crc = 0) noexcept;

// The CRC32C of A followed by B, from crc_a = Crc32c(A), crc_b = Crc32c(B)
// and len_b = |B|, without the bytes: Crc32cCombine(Crc32c(A), Crc32c(B), |B|)
// == Crc32c(B, |B|, Crc32c(A)). O(log len_b).
uint32_t Crc32cCombine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) noexcept;

}  // namespace dlckpt

#endif  // DLCKPT_BASE_CRC32C_H_

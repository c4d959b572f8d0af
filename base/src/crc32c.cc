#include "dlckpt/base/crc32c.h"

#include <isa-l/crc.h>

#include <cstring>

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

uint32_t Crc32cCopy(void* dst, const void* src, size_t len, uint32_t crc) noexcept {
  // Copy then checksum 64 MiB in 1 MiB records on this platform: 4 KiB
  // pieces 6.0 GB/s, as memcpy alone (6.0); 8 KiB 4.5-5.7; 64 KiB 4.5.
  constexpr size_t kPiece = 4096;
  auto* d = static_cast<unsigned char*>(dst);
  auto* s = static_cast<const unsigned char*>(src);
  unsigned int reg = ~crc;
  while (len > 0) {
    size_t n = len < kPiece ? len : kPiece;
    std::memcpy(d, s, n);
    reg = crc32_iscsi(d, static_cast<int>(n), reg);
    d += n;
    s += n;
    len -= n;
  }
  return ~reg;
}

namespace {

// Polynomials over GF(2) modulo the CRC32C polynomial, bit-reflected as the
// CRC register is (bit 31 is x^0).
constexpr uint32_t kPoly = 0x82F63B78u;

constexpr uint32_t MulModP(uint32_t a, uint32_t b) {
  uint32_t m = 1u << 31, p = 0;
  for (;;) {
    if (a & m) {
      p ^= b;
      if ((a & (m - 1)) == 0) break;
    }
    m >>= 1;
    b = (b & 1) ? (b >> 1) ^ kPoly : b >> 1;
  }
  return p;
}

struct PowerTable {
  uint32_t x2n[32];  // x^(2^k) mod P
  constexpr PowerTable() : x2n() {
    uint32_t p = 1u << 30;  // x^1
    x2n[0] = p;
    for (int k = 1; k < 32; ++k) x2n[k] = p = MulModP(p, p);
  }
};
constexpr PowerTable kPowers;

// x^(n * 2^k) mod P.
uint32_t XPowModP(uint64_t n, unsigned k) {
  uint32_t p = 1u << 31;  // x^0
  while (n) {
    if (n & 1) p = MulModP(kPowers.x2n[k & 31], p);
    n >>= 1;
    ++k;
  }
  return p;
}

}  // namespace

uint32_t Crc32cCombine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) noexcept {
  // Appending len_b bytes multiplies A's register by x^(8 len_b); the pre-
  // and post-inversion of the standard CRC cancel out in the sum.
  return MulModP(XPowModP(len_b, 3), crc_a) ^ crc_b;
}

}  // namespace dlckpt

// bench_mix.h — the benchmarks' deterministic test data, without MPI (the
// dlckpt-ior report library uses it too). Header-only, thread-safe.
#ifndef DLCKPT_BENCH_BENCH_MIX_H_
#define DLCKPT_BENCH_BENCH_MIX_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace dlckpt::bench {

// A 64-bit mixing function (splitmix64's finaliser): deterministic test data.
inline uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

// splitmix64 (Steele, Lea, Flood): a stronger mix of consecutive seeds,
// for buffers that must not share structure (erasure-code benchmarks).
inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Fills [p, p + len) with SplitMix64(seed + offset) words (a short last word).
inline void Fill(uint8_t* p, size_t len, uint64_t seed) {
  for (size_t i = 0; i < len; i += 8) {
    uint64_t w = SplitMix64(seed + i);
    std::memcpy(p + i, &w, std::min<size_t>(8, len - i));
  }
}

}  // namespace dlckpt::bench

#endif  // DLCKPT_BENCH_BENCH_MIX_H_

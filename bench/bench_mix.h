// bench_mix.h — the benchmarks' deterministic test data, without MPI (the
// dlckpt-ior report library uses it too). Header-only, thread-safe.
#ifndef DLCKPT_BENCH_BENCH_MIX_H_
#define DLCKPT_BENCH_BENCH_MIX_H_

#include <cstdint>

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

}  // namespace dlckpt::bench

#endif  // DLCKPT_BENCH_BENCH_MIX_H_

// dlckpt/control/stripes.h — where the chunks of a group's stripes live, in
// each parity layout. Pure arithmetic, shared by the codec (which encodes and
// rebuilds along it) and the recovery decision (which finds what survives).
//
// A group has n members (nodes; a member's image is its stores' images
// concatenated) and k parity chunks per stripe.
// - Spares layout (ParityLayout::kSpares): one stripe. Data chunk i is member
//   i's whole image; parity j lives on the group's j-th spare node. A parity
//   object's index is j.
// - Spread layout (ParityLayout::kSpread): no parity node. There are n
//   stripes; stripe s keeps its k parity chunks on members (s + j) mod n,
//   j = 0..k-1, and its n - k data chunks are one segment of each other
//   member, in ascending member order. A member's image is cut into n - k
//   segments of SpreadSegmentBytes; its segment in stripe s is the number of
//   stripes before s in which it holds data (so going through the stripes in
//   order visits each member's segments in order). Each member keeps one
//   parity object (index = the member) of k segments: segment j is parity j
//   of stripe (m - j) mod n. No node holds two chunks of one stripe, each
//   stripe tolerates k lost members, and every member holds about k/(n-k) of
//   its image in parity, as SCR's XOR and RS sets do.
// Preconditions (unchecked): n > k >= 1 for kSpread; member and stripe
// indices below n.
#ifndef DLCKPT_CONTROL_STRIPES_H_
#define DLCKPT_CONTROL_STRIPES_H_

#include <cstdint>
#include <string>
#include <vector>

namespace dlckpt::control {

enum class ParityLayout : uint8_t { kSpares = 0, kSpread = 1 };

inline const char* LayoutName(ParityLayout l) { return l == ParityLayout::kSpread ? "spread" : "spares"; }

// The member holding parity j of spread stripe s.
inline uint32_t SpreadParityHolder(uint32_t n, uint32_t s, uint32_t j) { return (s + j) % n; }

// Whether member m holds data (not parity) in spread stripe s.
inline bool SpreadHoldsData(uint32_t n, uint32_t k, uint32_t m, uint32_t s) { return (m + n - s) % n >= k; }

// The n - k members holding data in spread stripe s, ascending: data chunk i
// of the stripe is a segment of member SpreadDataMembers(n, k, s)[i].
inline std::vector<uint32_t> SpreadDataMembers(uint32_t n, uint32_t k, uint32_t s) {
  std::vector<uint32_t> out;
  for (uint32_t m = 0; m < n; ++m) {
    if (SpreadHoldsData(n, k, m, s)) out.push_back(m);
  }
  return out;
}

// Which segment of member m's image is its data chunk in spread stripe s
// (requires SpreadHoldsData(n, k, m, s)).
inline uint32_t SpreadSegmentOf(uint32_t n, uint32_t k, uint32_t m, uint32_t s) {
  uint32_t seg = 0;
  for (uint32_t t = 0; t < s; ++t) seg += SpreadHoldsData(n, k, m, t) ? 1 : 0;
  return seg;
}

// The stripe whose parity j member m's parity object holds at segment j.
inline uint32_t SpreadStripeOfParity(uint32_t n, uint32_t m, uint32_t j) { return (m + n - j % n) % n; }

// Bytes of one segment when the longest member image has `longest` bytes:
// ceil(longest / (n - k)), rounded up to 4 KiB. A member's parity object has
// k segments.
inline uint64_t SpreadSegmentBytes(uint64_t longest, uint32_t n, uint32_t k) {
  const uint64_t d = n - k;
  const uint64_t seg = (longest + d - 1) / d;
  return (seg + 4095) / 4096 * 4096;
}

}  // namespace dlckpt::control

#endif  // DLCKPT_CONTROL_STRIPES_H_

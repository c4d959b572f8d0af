// dlckpt/codec/erasure.h — erasure-code math over GF(2^8): XOR parity and
// Reed-Solomon (Cauchy) with k parities, on ISA-L. No MPI, no I/O.
//
// Model. A stripe has n data chunks (ids 0..n-1) and k parity chunks (ids
// n..n+k-1). Chunks may have different lengths; a chunk is implicitly padded
// with zeros up to the stripe length L (the longest data chunk), never copied
// to be padded. Parity chunks are L bytes long.
//
// Every operation is a Combination: m outputs, each the GF(2^8) sum (XOR) of
// c[j][i]·source_i over s sources. Encode: sources = the n data chunks,
// outputs = the k parities, coefficients = the Cauchy rows (XOR: all ones).
// Rebuild: sources = n surviving chunks, outputs = the lost chunks,
// coefficients = rows of the inverted sub-generator (DecodePlan). The same
// kernels therefore serve encode and rebuild, whole-stripe (Apply) or one
// source at a time (Set/Accumulate, used by the MPI transport).
//
// Contracts.
// - ErasureCode::Create builds the encode tables once per (scheme, n, k) and
//   returns a process-wide shared instance; PlanDecode caches one plan per
//   (erasure pattern, wanted chunks). Both are thread-safe; Combination and
//   ErasureCode objects are immutable after creation.
// - Buffers: any alignment, any length (ISA-L's SIMD path is used from 64
//   bytes on, and xor_gen when 32-byte aligned). Sources and outputs must not
//   overlap. Lengths are size_t; ISA-L's int limit is handled internally.
// - More than k erased chunks is refused with ENODATA and a message naming
//   the lost chunks and k; bad arguments are EINVAL. Nothing here aborts.
#ifndef DLCKPT_CODEC_ERASURE_H_
#define DLCKPT_CODEC_ERASURE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "dlckpt/base/status.h"

namespace dlckpt::codec {

enum class Scheme {
  kXor,          // k must be 1: parity = XOR of the data chunks
  kReedSolomon,  // Cauchy generator, 1 <= k, n + k <= 256
};

const char* SchemeName(Scheme scheme);
// The scheme as one byte, in the protocol (ParityReport::scheme,
// RebuildGroup::scheme) and in parity headers: 0 = xor, 1 = Reed-Solomon.
uint8_t SchemeByte(Scheme scheme);
// EBADMSG for a byte that names no scheme.
Result<Scheme> SchemeFromByte(uint8_t byte);

// m linear combinations of s sources over GF(2^8), with ISA-L tables.
class Combination final {
 public:
  // `coefficients` is row-major m x s (row j = output j). m, s >= 1.
  static Result<std::shared_ptr<const Combination>> Create(int outputs, int sources,
                                                           std::vector<uint8_t> coefficients);

  int outputs() const { return m_; }
  int sources() const { return s_; }
  // True when every coefficient is 1: the XOR kernels are used.
  bool is_xor() const { return is_xor_; }
  uint8_t coefficient(int output, int source) const { return coef_[output * s_ + source]; }

  // outs[j][0..len) = c[j][i] · src[0..len) for every output j (outs.size() == m).
  void Set(int i, const uint8_t* src, size_t len, std::span<uint8_t* const> outs) const;
  // outs[j][0..len) ^= c[j][i] · src[0..len).
  void Accumulate(int i, const uint8_t* src, size_t len, std::span<uint8_t* const> outs) const;
  // out[0..len) ^= c[j][i] · src[0..len) for the single output j.
  void AccumulateOne(int j, int i, const uint8_t* src, size_t len, uint8_t* out) const;
  // The same three for source i's bytes given as a xor b (a delta, old xor
  // new, never formed): by linearity c·(a^b) = c·a ^ c·b. XOR reads a and b
  // once, in one pass with the output.
  void Set2(int i, const uint8_t* a, const uint8_t* b, size_t len, std::span<uint8_t* const> outs) const;
  void Accumulate2(int i, const uint8_t* a, const uint8_t* b, size_t len, std::span<uint8_t* const> outs) const;
  void AccumulateOne2(int j, int i, const uint8_t* a, const uint8_t* b, size_t len, uint8_t* out) const;

  // Whole-stripe: outputs[j] = Σ_i c[j][i]·sources[i], each source zero-padded
  // to the outputs' common length. EINVAL if counts differ, outputs differ in
  // length, or a source is longer than the outputs.
  Status Apply(std::span<const std::span<const uint8_t>> sources,
               std::span<const std::span<uint8_t>> outputs) const;

  Combination(int m, int s, std::vector<uint8_t> coef);  // use Create

 private:
  void ApplyRange(const uint8_t* const* srcs, const int* live, int nlive, uint8_t* const* outs,
                  size_t len) const;

  int m_, s_;
  bool is_xor_;
  std::vector<uint8_t> coef_;       // m x s
  std::vector<uint8_t> tables_;     // ec_init_tables(s, m, coef_): 32*m*s bytes
  std::vector<uint8_t> col_tables_; // per source i: ec_init_tables(1, m, column i): 32*m bytes
};

// Which chunks a rebuild reads and how it combines them.
struct DecodePlan {
  std::vector<int> erased;   // sorted chunk ids that are unavailable
  std::vector<int> wanted;   // chunk ids rebuilt, in output order (subset of erased)
  std::vector<int> sources;  // n available chunk ids read, in source order
  std::shared_ptr<const Combination> combination;  // wanted.size() x n
};

class ErasureCode final {
 public:
  static constexpr int kMaxChunks = 256;

  // The shared code for (scheme, n, k). EINVAL: n < 1, k < 1, XOR with k != 1,
  // n + k > 256.
  static Result<std::shared_ptr<const ErasureCode>> Create(Scheme scheme, int n, int k);

  Scheme scheme() const { return scheme_; }
  int n() const { return n_; }
  int k() const { return k_; }
  // The encode combination: k outputs x n sources.
  const std::shared_ptr<const Combination>& encoder() const { return encoder_; }
  // Generator row of chunk `chunk` (identity for data, Cauchy / ones for parity).
  std::span<const uint8_t> generator_row(int chunk) const;

  // Encode: data.size() == n (any lengths), parity.size() == k, each parity
  // exactly max(data lengths) long. Overwrites the parity.
  Status Encode(std::span<const std::span<const uint8_t>> data,
                std::span<const std::span<uint8_t>> parity) const;

  // Plans rebuilding `wanted` (default: every erased chunk) when `erased`
  // chunks are unavailable. ENODATA if more than k are erased; EINVAL on
  // bad ids or a wanted chunk that is not erased. Cached per pattern.
  Result<std::shared_ptr<const DecodePlan>> PlanDecode(std::vector<int> erased,
                                                       std::vector<int> wanted = {}) const;

  // Whole-stripe rebuild: chunks.size() == n + k; erased chunks are ignored as
  // input; the wanted chunks (plan->wanted) are written into outputs[w], each
  // exactly L bytes long (L = the parity length). Data chunks rebuilt are L
  // bytes: the original followed by zeros.
  Status Decode(const DecodePlan& plan, std::span<const std::span<const uint8_t>> chunks,
                std::span<const std::span<uint8_t>> outputs) const;

  ErasureCode(Scheme scheme, int n, int k);  // use Create

 private:
  Scheme scheme_;
  int n_, k_;
  std::vector<uint8_t> generator_;  // (n + k) x n
  std::shared_ptr<const Combination> encoder_;
  mutable std::mutex mu_;  // guards plans_
  mutable std::map<std::vector<int>, std::shared_ptr<const DecodePlan>> plans_;
};

// Human-readable chunk list for messages: "data 0, data 3, parity 1".
std::string DescribeChunks(std::span<const int> chunks, int n);

// out = a xor b over len bytes (any alignment; out may be a or b).
void Xor2(uint8_t* out, const uint8_t* a, const uint8_t* b, uint64_t len);
// dst[0..len) ^= src[0..len) (any alignment): Xor2(dst, dst, src, len).
void XorInto(uint8_t* dst, const uint8_t* src, size_t len);
// dst[0..len) ^= a[0..len) ^ b[0..len) in one pass (any alignment).
void Xor3Into(uint8_t* dst, const uint8_t* a, const uint8_t* b, size_t len);

}  // namespace dlckpt::codec

#endif  // DLCKPT_CODEC_ERASURE_H_

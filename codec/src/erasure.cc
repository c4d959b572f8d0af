#include "dlckpt/codec/erasure.h"

#include <isa-l/erasure_code.h>
#include <isa-l/raid.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <tuple>

namespace dlckpt::codec {

namespace {

// ISA-L takes int lengths; every call is cut into pieces of at most this.
constexpr size_t kMaxIsalLen = size_t{1} << 30;

bool Aligned32(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 31) == 0; }

using V16 = uint8_t __attribute__((vector_size(16)));

// out = a xor b for unaligned buffers (SSE2 baseline, unrolled); out may be a or b.
void XorFallback(uint8_t* out, const uint8_t* a, const uint8_t* b, size_t len) {
  size_t i = 0;
  for (; i + 64 <= len; i += 64) {
    V16 x[4], y[4];
    std::memcpy(x, a + i, 64);
    std::memcpy(y, b + i, 64);
    for (int v = 0; v < 4; ++v) x[v] ^= y[v];
    std::memcpy(out + i, x, 64);
  }
  for (; i + 8 <= len; i += 8) {
    uint64_t x, y;
    std::memcpy(&x, a + i, 8);
    std::memcpy(&y, b + i, 8);
    x ^= y;
    std::memcpy(out + i, &x, 8);
  }
  for (; i < len; ++i) out[i] = a[i] ^ b[i];
}

// out = XOR of srcs[0..n) (n >= 1) over len bytes.
void XorSources(const uint8_t* const* srcs, int n, uint8_t* out, size_t len) {
  bool aligned = Aligned32(out);
  for (int i = 0; i < n && aligned; ++i) aligned = Aligned32(srcs[i]);
  if (n >= 2 && aligned) {
    std::vector<void*> array(n + 1);
    for (size_t off = 0; off < len; off += kMaxIsalLen) {
      size_t piece = std::min(kMaxIsalLen, len - off);
      for (int i = 0; i < n; ++i) array[i] = const_cast<uint8_t*>(srcs[i]) + off;
      array[n] = out + off;
      xor_gen(n + 1, static_cast<int>(piece), array.data());
    }
    return;
  }
  std::memcpy(out, srcs[0], len);
  for (int i = 1; i < n; ++i) XorFallback(out, out, srcs[i], len);
}

std::string ChunkName(int chunk, int n) {
  return chunk < n ? "data " + std::to_string(chunk) : "parity " + std::to_string(chunk - n);
}

}  // namespace

void Xor2(uint8_t* out, const uint8_t* a, const uint8_t* b, uint64_t len) {
  if (len >= 128 && Aligned32(out) && Aligned32(a) && Aligned32(b)) {
    for (uint64_t off = 0; off < len; off += kMaxIsalLen) {
      void* array[3] = {const_cast<uint8_t*>(a) + off, const_cast<uint8_t*>(b) + off, out + off};
      xor_gen(3, static_cast<int>(std::min<uint64_t>(kMaxIsalLen, len - off)), array);
    }
    return;
  }
  XorFallback(out, a, b, len);
}

void XorInto(uint8_t* dst, const uint8_t* src, size_t len) { Xor2(dst, dst, src, len); }

void Xor3Into(uint8_t* dst, const uint8_t* a, const uint8_t* b, size_t len) {
  if (len >= 128 && Aligned32(dst) && Aligned32(a) && Aligned32(b)) {
    for (size_t off = 0; off < len; off += kMaxIsalLen) {
      void* array[4] = {dst + off, const_cast<uint8_t*>(a) + off, const_cast<uint8_t*>(b) + off, dst + off};
      xor_gen(4, static_cast<int>(std::min(kMaxIsalLen, len - off)), array);
    }
    return;
  }
  XorFallback(dst, dst, a, len);
  XorFallback(dst, dst, b, len);
}

const char* SchemeName(Scheme scheme) {
  return scheme == Scheme::kXor ? "xor" : "reed-solomon";
}

uint8_t SchemeByte(Scheme scheme) { return scheme == Scheme::kXor ? 0 : 1; }

Result<Scheme> SchemeFromByte(uint8_t byte) {
  if (byte > 1) return Status::Corruption("erasure scheme " + std::to_string(byte) + " is neither xor (0) nor reed-solomon (1)");
  return byte == 0 ? Scheme::kXor : Scheme::kReedSolomon;
}

std::string DescribeChunks(std::span<const int> chunks, int n) {
  std::string out;
  for (int c : chunks) {
    if (!out.empty()) out += ", ";
    out += ChunkName(c, n);
  }
  return out;
}

// ---------------------------------------------------------------- Combination

Combination::Combination(int m, int s, std::vector<uint8_t> coef)
    : m_(m), s_(s), coef_(std::move(coef)) {
  is_xor_ = std::all_of(coef_.begin(), coef_.end(), [](uint8_t c) { return c == 1; });
  tables_.resize(size_t{32} * m_ * s_);
  ec_init_tables(s_, m_, coef_.data(), tables_.data());
  col_tables_.resize(size_t{32} * m_ * s_);
  std::vector<uint8_t> column(m_);
  for (int i = 0; i < s_; ++i) {
    for (int j = 0; j < m_; ++j) column[j] = coef_[j * s_ + i];
    ec_init_tables(1, m_, column.data(), col_tables_.data() + size_t{32} * m_ * i);
  }
}

Result<std::shared_ptr<const Combination>> Combination::Create(int outputs, int sources,
                                                               std::vector<uint8_t> coefficients) {
  if (outputs < 1 || sources < 1 || outputs > ErasureCode::kMaxChunks ||
      sources > ErasureCode::kMaxChunks) {
    return Status::InvalidArgument("combination of " + std::to_string(outputs) + " outputs x " +
                                   std::to_string(sources) + " sources: each must be in 1..256");
  }
  if (coefficients.size() != static_cast<size_t>(outputs) * sources) {
    return Status::InvalidArgument("combination: " + std::to_string(coefficients.size()) +
                                   " coefficients given for " + std::to_string(outputs) + " x " +
                                   std::to_string(sources));
  }
  return std::shared_ptr<const Combination>(
      std::make_shared<Combination>(outputs, sources, std::move(coefficients)));
}

void Combination::Set(int i, const uint8_t* src, size_t len, std::span<uint8_t* const> outs) const {
  if (len == 0) return;
  if (is_xor_) {
    for (uint8_t* out : outs) std::memcpy(out, src, len);
    return;
  }
  uint8_t* table = const_cast<uint8_t*>(col_tables_.data()) + size_t{32} * m_ * i;
  uint8_t* o[ErasureCode::kMaxChunks];
  for (size_t off = 0; off < len; off += kMaxIsalLen) {
    for (int j = 0; j < m_; ++j) o[j] = outs[j] + off;
    uint8_t* in = const_cast<uint8_t*>(src) + off;
    ec_encode_data(static_cast<int>(std::min(kMaxIsalLen, len - off)), 1, m_, table, &in, o);
  }
}

void Combination::Accumulate(int i, const uint8_t* src, size_t len,
                             std::span<uint8_t* const> outs) const {
  if (len == 0) return;
  if (is_xor_) {
    for (uint8_t* out : outs) XorInto(out, src, len);
    return;
  }
  uint8_t* o[ErasureCode::kMaxChunks];
  for (size_t off = 0; off < len; off += kMaxIsalLen) {
    for (int j = 0; j < m_; ++j) o[j] = outs[j] + off;
    ec_encode_data_update(static_cast<int>(std::min(kMaxIsalLen, len - off)), s_, m_, i,
                          const_cast<uint8_t*>(tables_.data()), const_cast<uint8_t*>(src) + off,
                          o);
  }
}

void Combination::AccumulateOne(int j, int i, const uint8_t* src, size_t len,
                                uint8_t* out) const {
  if (len == 0) return;
  if (is_xor_) {
    XorInto(out, src, len);
    return;
  }
  // Row j's tables start at 32*s*j (ec_init_tables layout); one row of s sources.
  uint8_t* row = const_cast<uint8_t*>(tables_.data()) + size_t{32} * s_ * j;
  for (size_t off = 0; off < len; off += kMaxIsalLen) {
    uint8_t* o = out + off;
    ec_encode_data_update(static_cast<int>(std::min(kMaxIsalLen, len - off)), s_, 1, i, row,
                          const_cast<uint8_t*>(src) + off, &o);
  }
}

void Combination::Set2(int i, const uint8_t* a, const uint8_t* b, size_t len, std::span<uint8_t* const> outs) const {
  if (len == 0) return;
  if (is_xor_) {
    Xor2(outs[0], a, b, len);
    for (size_t j = 1; j < outs.size(); ++j) std::memcpy(outs[j], outs[0], len);
    return;
  }
  Set(i, a, len, outs);
  Accumulate(i, b, len, outs);
}

void Combination::Accumulate2(int i, const uint8_t* a, const uint8_t* b, size_t len,
                              std::span<uint8_t* const> outs) const {
  if (len == 0) return;
  if (is_xor_) {
    for (uint8_t* out : outs) Xor3Into(out, a, b, len);
    return;
  }
  Accumulate(i, a, len, outs);
  Accumulate(i, b, len, outs);
}

void Combination::AccumulateOne2(int j, int i, const uint8_t* a, const uint8_t* b, size_t len, uint8_t* out) const {
  if (len == 0) return;
  if (is_xor_) {
    Xor3Into(out, a, b, len);
    return;
  }
  AccumulateOne(j, i, a, len, out);
  AccumulateOne(j, i, b, len, out);
}

// outs[j][0..len) = Σ over live sources; srcs holds one pointer per live
// source, live[] their source indices (nlive may be < s_: the others are zero).
void Combination::ApplyRange(const uint8_t* const* srcs, const int* live, int nlive,
                             uint8_t* const* outs, size_t len) const {
  if (len == 0) return;
  if (nlive == 0) {
    for (int j = 0; j < m_; ++j) std::memset(outs[j], 0, len);
    return;
  }
  if (is_xor_) {
    XorSources(srcs, nlive, outs[0], len);
    for (int j = 1; j < m_; ++j) std::memcpy(outs[j], outs[0], len);
    return;
  }
  std::vector<uint8_t> sub_tables;
  uint8_t* tables = const_cast<uint8_t*>(tables_.data());
  if (nlive != s_) {
    std::vector<uint8_t> sub(static_cast<size_t>(m_) * nlive);
    for (int j = 0; j < m_; ++j)
      for (int i = 0; i < nlive; ++i) sub[j * nlive + i] = coef_[j * s_ + live[i]];
    sub_tables.resize(size_t{32} * m_ * nlive);
    ec_init_tables(nlive, m_, sub.data(), sub_tables.data());
    tables = sub_tables.data();
  }
  std::vector<uint8_t*> in(nlive), o(m_);
  for (size_t off = 0; off < len; off += kMaxIsalLen) {
    for (int i = 0; i < nlive; ++i) in[i] = const_cast<uint8_t*>(srcs[i]) + off;
    for (int j = 0; j < m_; ++j) o[j] = outs[j] + off;
    ec_encode_data(static_cast<int>(std::min(kMaxIsalLen, len - off)), nlive, m_, tables,
                   in.data(), o.data());
  }
}

Status Combination::Apply(std::span<const std::span<const uint8_t>> sources,
                          std::span<const std::span<uint8_t>> outputs) const {
  if (sources.size() != static_cast<size_t>(s_) || outputs.size() != static_cast<size_t>(m_)) {
    return Status::InvalidArgument("combination " + std::to_string(m_) + "x" +
                                   std::to_string(s_) + " applied to " +
                                   std::to_string(sources.size()) + " sources and " +
                                   std::to_string(outputs.size()) + " outputs");
  }
  const size_t len = outputs[0].size();
  for (const auto& out : outputs) {
    if (out.size() != len) {
      return Status::InvalidArgument("outputs differ in length: " + std::to_string(out.size()) +
                                     " and " + std::to_string(len) + " bytes");
    }
  }
  for (int i = 0; i < s_; ++i) {
    if (sources[i].size() > len) {
      return Status::InvalidArgument("source " + std::to_string(i) + " holds " +
                                     std::to_string(sources[i].size()) +
                                     " bytes, more than the " + std::to_string(len) +
                                     "-byte outputs");
    }
  }
  // Cut [0, len) at every distinct source length; in each range the sources
  // that already ended contribute zeros and are left out of the call.
  std::vector<int> order(s_);
  for (int i = 0; i < s_; ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return sources[a].size() > sources[b].size(); });
  std::vector<size_t> bounds;
  for (int i = 0; i < s_; ++i) bounds.push_back(sources[i].size());
  bounds.push_back(len);
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());

  std::vector<const uint8_t*> srcs(s_);
  std::vector<int> live(s_);
  std::vector<uint8_t*> outs(m_);
  size_t begin = 0;
  for (size_t end : bounds) {
    if (end == begin) continue;
    int nlive = 0;
    for (int idx : order) {  // longest first; stable set of survivors
      if (sources[idx].size() < end) break;
      live[nlive++] = idx;
    }
    std::sort(live.begin(), live.begin() + nlive);
    for (int i = 0; i < nlive; ++i) srcs[i] = sources[live[i]].data() + begin;
    for (int j = 0; j < m_; ++j) outs[j] = outputs[j].data() + begin;
    ApplyRange(srcs.data(), live.data(), nlive, outs.data(), end - begin);
    begin = end;
  }
  return Status::OK();
}

// ---------------------------------------------------------------- ErasureCode

ErasureCode::ErasureCode(Scheme scheme, int n, int k) : scheme_(scheme), n_(n), k_(k) {
  generator_.assign(static_cast<size_t>(n + k) * n, 0);
  if (scheme == Scheme::kXor) {
    for (int i = 0; i < n; ++i) generator_[i * n + i] = 1;
    for (int i = 0; i < n; ++i) generator_[n * n + i] = 1;
  } else {
    gf_gen_cauchy1_matrix(generator_.data(), n + k, n);
  }
  std::vector<uint8_t> rows(generator_.begin() + static_cast<ptrdiff_t>(n) * n, generator_.end());
  encoder_ = std::make_shared<Combination>(k, n, std::move(rows));
}

Result<std::shared_ptr<const ErasureCode>> ErasureCode::Create(Scheme scheme, int n, int k) {
  if (n < 1 || k < 1 || n + k > kMaxChunks) {
    return Status::InvalidArgument(std::string(SchemeName(scheme)) + " code with n=" +
                                   std::to_string(n) + " data and k=" + std::to_string(k) +
                                   " parity chunks: need n >= 1, k >= 1, n + k <= 256");
  }
  if (scheme == Scheme::kXor && k != 1) {
    return Status::InvalidArgument("xor code with k=" + std::to_string(k) +
                                   " parities: xor gives exactly one (use reed-solomon)");
  }
  struct Cache {
    std::mutex mu;
    std::map<std::tuple<int, int, int>, std::shared_ptr<const ErasureCode>> codes;
  };
  static Cache* const cache = new Cache;  // never destroyed
  std::lock_guard<std::mutex> lock(cache->mu);
  auto& slot = cache->codes[{static_cast<int>(scheme), n, k}];
  if (!slot) slot = std::make_shared<ErasureCode>(scheme, n, k);
  return slot;
}

std::span<const uint8_t> ErasureCode::generator_row(int chunk) const {
  return std::span<const uint8_t>(generator_).subspan(static_cast<size_t>(chunk) * n_, n_);
}

Status ErasureCode::Encode(std::span<const std::span<const uint8_t>> data,
                           std::span<const std::span<uint8_t>> parity) const {
  if (data.size() != static_cast<size_t>(n_) || parity.size() != static_cast<size_t>(k_)) {
    return Status::InvalidArgument("encode with n=" + std::to_string(n_) + ", k=" +
                                   std::to_string(k_) + " given " + std::to_string(data.size()) +
                                   " data and " + std::to_string(parity.size()) + " parity chunks");
  }
  size_t len = 0;
  for (const auto& d : data) len = std::max(len, d.size());
  for (const auto& p : parity) {
    if (p.size() != len) {
      return Status::InvalidArgument("parity chunk of " + std::to_string(p.size()) +
                                     " bytes; the longest data chunk has " + std::to_string(len));
    }
  }
  return encoder_->Apply(data, parity);
}

Result<std::shared_ptr<const DecodePlan>> ErasureCode::PlanDecode(std::vector<int> erased,
                                                                  std::vector<int> wanted) const {
  const int total = n_ + k_;
  std::sort(erased.begin(), erased.end());
  erased.erase(std::unique(erased.begin(), erased.end()), erased.end());
  for (int c : erased) {
    if (c < 0 || c >= total) {
      return Status::InvalidArgument("chunk id " + std::to_string(c) + " out of range 0.." +
                                     std::to_string(total - 1));
    }
  }
  if (static_cast<int>(erased.size()) > k_) {
    return Status::Error(ENODATA, std::to_string(erased.size()) + " chunks lost (" +
                                      DescribeChunks(erased, n_) + ") but the " +
                                      SchemeName(scheme_) + " code with " + std::to_string(k_) +
                                      (k_ == 1 ? " parity" : " parities") + " rebuilds at most " +
                                      std::to_string(k_) + ": unrecoverable");
  }
  if (wanted.empty()) wanted = erased;
  if (wanted.empty()) return Status::InvalidArgument("nothing to rebuild: no chunk is erased");
  for (size_t w = 0; w < wanted.size(); ++w) {
    if (!std::binary_search(erased.begin(), erased.end(), wanted[w])) {
      return Status::InvalidArgument("chunk " + std::to_string(wanted[w]) +
                                     " asked to be rebuilt but it is not erased");
    }
    if (std::find(wanted.begin(), wanted.begin() + w, wanted[w]) != wanted.begin() + w) {
      return Status::InvalidArgument("chunk " + std::to_string(wanted[w]) + " wanted twice");
    }
  }

  std::vector<int> key = erased;
  key.push_back(-1);
  key.insert(key.end(), wanted.begin(), wanted.end());
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
  }

  auto plan = std::make_shared<DecodePlan>();
  plan->erased = erased;
  plan->wanted = wanted;
  for (int c = 0; c < total && static_cast<int>(plan->sources.size()) < n_; ++c) {
    if (!std::binary_search(erased.begin(), erased.end(), c)) plan->sources.push_back(c);
  }
  // B = generator rows of the sources; data = B^-1 · sources.
  const int n = n_;
  std::vector<uint8_t> b(static_cast<size_t>(n) * n), binv(static_cast<size_t>(n) * n);
  for (int r = 0; r < n; ++r) {
    auto row = generator_row(plan->sources[r]);
    std::copy(row.begin(), row.end(), b.begin() + static_cast<ptrdiff_t>(r) * n);
  }
  if (gf_invert_matrix(b.data(), binv.data(), n) != 0) {
    // A Cauchy generator with an identity top has no singular n x n subset.
    return Status::Corruption("singular decode matrix for sources " +
                              DescribeChunks(plan->sources, n_));
  }
  std::vector<uint8_t> coef(wanted.size() * n, 0);
  for (size_t w = 0; w < wanted.size(); ++w) {
    uint8_t* out = coef.data() + w * n;
    if (wanted[w] < n) {
      std::copy(binv.begin() + static_cast<ptrdiff_t>(wanted[w]) * n,
                binv.begin() + static_cast<ptrdiff_t>(wanted[w] + 1) * n, out);
    } else {  // parity = G[p] · data = (G[p] · B^-1) · sources
      auto g = generator_row(wanted[w]);
      for (int i = 0; i < n; ++i) {
        uint8_t acc = 0;
        for (int j = 0; j < n; ++j) acc ^= gf_mul(g[j], binv[j * n + i]);
        out[i] = acc;
      }
    }
  }
  plan->combination =
      std::make_shared<Combination>(static_cast<int>(wanted.size()), n, std::move(coef));
  std::shared_ptr<const DecodePlan> result = std::move(plan);
  std::lock_guard<std::mutex> lock(mu_);
  return plans_.emplace(std::move(key), result).first->second;
}

Status ErasureCode::Decode(const DecodePlan& plan, std::span<const std::span<const uint8_t>> chunks,
                           std::span<const std::span<uint8_t>> outputs) const {
  if (chunks.size() != static_cast<size_t>(n_ + k_)) {
    return Status::InvalidArgument("decode given " + std::to_string(chunks.size()) +
                                   " chunks for a stripe of " + std::to_string(n_ + k_));
  }
  if (outputs.size() != plan.wanted.size()) {
    return Status::InvalidArgument("decode given " + std::to_string(outputs.size()) +
                                   " outputs for " + std::to_string(plan.wanted.size()) +
                                   " wanted chunks");
  }
  std::vector<std::span<const uint8_t>> sources;
  sources.reserve(plan.sources.size());
  for (int c : plan.sources) sources.push_back(chunks[c]);
  return plan.combination->Apply(sources, outputs);
}

}  // namespace dlckpt::codec

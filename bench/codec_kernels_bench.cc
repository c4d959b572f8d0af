// dlckpt-bench-codec-kernels: the codec's erasure kernels against the raw
// ISA-L calls they wrap, in the same binary, on the same warm buffers.
//
// Every kernel is registered twice, "ours/<case>" and "raw/<case>". The best
// (least CPU time per iteration) repetition of each is kept; the last line is
//   METRIC codec_kernels_vs_isal_min_ratio <min over cases of raw_time/ours_time> ratio target >= 0.9
// Google Benchmark flags apply (--benchmark_filter, --benchmark_min_time, ...);
// defaults: 5 repetitions, random interleaving, 0.2 s per run.
#include <benchmark/benchmark.h>
#include <isa-l/erasure_code.h>
#include <isa-l/raid.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "dlckpt/base/version.h"
#include "dlckpt/codec/erasure.h"

using dlckpt::codec::Combination;
using dlckpt::codec::DecodePlan;
using dlckpt::codec::ErasureCode;
using dlckpt::codec::Scheme;

namespace {

constexpr size_t kLen = 512 << 10;  // bytes per source: one transport chunk
constexpr int kN = 8;

// 64-byte aligned, pre-touched random buffers.
struct Buffers {
  explicit Buffers(int count, size_t len) {
    std::mt19937_64 rng(count * 7 + len);
    for (int i = 0; i < count; ++i) {
      auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, len));
      for (size_t b = 0; b < len; b += 8) {
        uint64_t v = rng();
        std::memcpy(p + b, &v, std::min<size_t>(8, len - b));
      }
      ptrs.push_back(p);
    }
  }
  ~Buffers() {
    for (auto* p : ptrs) std::free(p);
  }
  std::vector<uint8_t*> ptrs;
};

std::vector<std::span<const uint8_t>> In(const Buffers& b, int from, int count, size_t len) {
  std::vector<std::span<const uint8_t>> v;
  for (int i = from; i < from + count; ++i) v.emplace_back(b.ptrs[i], len);
  return v;
}
std::vector<std::span<uint8_t>> Out(Buffers& b, int from, int count, size_t len) {
  std::vector<std::span<uint8_t>> v;
  for (int i = from; i < from + count; ++i) v.emplace_back(b.ptrs[i], len);
  return v;
}

// Runs body() once per benchmark iteration; each iteration processes `bytes`.
template <typename F>
void Time(benchmark::State& state, size_t bytes, F body) {
  for (auto _ : state) {
    body();
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

std::shared_ptr<const ErasureCode> Code(Scheme scheme, int n, int k) {
  auto code = ErasureCode::Create(scheme, n, k);
  if (!code.ok()) {
    std::fprintf(stderr, "%s\n", code.status().ToString().c_str());
    std::exit(1);
  }
  return *code;
}

// ---- whole-stripe encode: n sources -> k parities

void OursEncode(benchmark::State& state, Scheme scheme, int k) {
  auto code = Code(scheme, kN, k);
  Buffers b(kN + k, kLen);
  auto in = In(b, 0, kN, kLen);
  auto out = Out(b, kN, k, kLen);
  Time(state, kN * kLen, [&] {
    if (!code->Encode(in, out).ok()) state.SkipWithError("encode failed");
  });
}

void RawXorEncode(benchmark::State& state) {
  Buffers b(kN + 1, kLen);
  std::vector<void*> array(b.ptrs.begin(), b.ptrs.end());
  Time(state, kN * kLen, [&] {
    xor_gen(kN + 1, static_cast<int>(kLen), array.data());
  });
}

void RawRsEncode(benchmark::State& state, int k) {
  Buffers b(kN + k, kLen);
  std::vector<uint8_t> matrix((kN + k) * kN), tables(32 * kN * k);
  gf_gen_cauchy1_matrix(matrix.data(), kN + k, kN);
  ec_init_tables(kN, k, matrix.data() + kN * kN, tables.data());
  Time(state, kN * kLen, [&] {
    ec_encode_data(static_cast<int>(kLen), kN, k, tables.data(), b.ptrs.data(),
                   b.ptrs.data() + kN);
  });
}

// ---- whole-stripe decode of k lost data chunks

// A Reed-Solomon stripe whose data chunks 0, 3, 6, ... (k of them) are lost,
// and the codec's plan to rebuild them.
struct LostChunks {
  explicit LostChunks(int k) : code(Code(Scheme::kReedSolomon, kN, k)), b(kN + k + k, kLen) {
    std::vector<int> lost;
    for (int i = 0; i < k; ++i) lost.push_back(i * 3);
    auto p = code->PlanDecode(lost);
    if (!p.ok()) std::exit(1);
    plan = *p;
  }
  std::shared_ptr<const ErasureCode> code;
  Buffers b;
  std::shared_ptr<const DecodePlan> plan;
};

void OursDecode(benchmark::State& state, int k) {
  LostChunks x(k);
  auto chunks = In(x.b, 0, kN + k, kLen);
  auto out = Out(x.b, kN + k, k, kLen);
  Time(state, kN * kLen, [&] {
    if (!x.code->Decode(*x.plan, chunks, out).ok()) state.SkipWithError("decode failed");
  });
}

void RawDecode(benchmark::State& state, int k) {
  LostChunks x(k);  // same coefficients, tables built here
  const Combination& c = *x.plan->combination;
  std::vector<uint8_t> coef, tables(32 * kN * k);
  for (int j = 0; j < k; ++j)
    for (int i = 0; i < kN; ++i) coef.push_back(c.coefficient(j, i));
  ec_init_tables(kN, k, coef.data(), tables.data());
  std::vector<uint8_t*> srcs;
  for (int s : x.plan->sources) srcs.push_back(x.b.ptrs[s]);
  Time(state, kN * kLen, [&] {
    ec_encode_data(static_cast<int>(kLen), kN, k, tables.data(), srcs.data(),
                   x.b.ptrs.data() + kN + k);
  });
}

// ---- one source's contribution (what the transport runs per chunk)

void OursAccumulate(benchmark::State& state, Scheme scheme, int k) {
  auto code = Code(scheme, kN, k);
  Buffers b(1 + k, kLen);
  std::vector<uint8_t*> outs(b.ptrs.begin() + 1, b.ptrs.end());
  Time(state, kLen, [&] {
    code->encoder()->Accumulate(3, b.ptrs[0], kLen, outs);
  });
}

void RawXorAccumulate(benchmark::State& state) {
  Buffers b(2, kLen);
  void* array[3] = {b.ptrs[1], b.ptrs[0], b.ptrs[1]};
  Time(state, kLen, [&] {
    xor_gen(3, static_cast<int>(kLen), array);
  });
}

void RawRsAccumulate(benchmark::State& state, int k) {
  Buffers b(1 + k, kLen);
  std::vector<uint8_t> matrix((kN + k) * kN), tables(32 * kN * k);
  gf_gen_cauchy1_matrix(matrix.data(), kN + k, kN);
  ec_init_tables(kN, k, matrix.data() + kN * kN, tables.data());
  Time(state, kLen, [&] {
    ec_encode_data_update(static_cast<int>(kLen), kN, k, 3, tables.data(), b.ptrs[0],
                          b.ptrs.data() + 1);
  });
}

void OursSet(benchmark::State& state, int k) {
  auto code = Code(Scheme::kReedSolomon, kN, k);
  Buffers b(1 + k, kLen);
  std::vector<uint8_t*> outs(b.ptrs.begin() + 1, b.ptrs.end());
  Time(state, kLen, [&] {
    code->encoder()->Set(3, b.ptrs[0], kLen, outs);
  });
}

void RawSet(benchmark::State& state, int k) {
  Buffers b(1 + k, kLen);
  std::vector<uint8_t> matrix((kN + k) * kN), column(k), tables(32 * k);
  gf_gen_cauchy1_matrix(matrix.data(), kN + k, kN);
  for (int j = 0; j < k; ++j) column[j] = matrix[(kN + j) * kN + 3];
  ec_init_tables(1, k, column.data(), tables.data());
  Time(state, kLen, [&] {
    ec_encode_data(static_cast<int>(kLen), 1, k, tables.data(), b.ptrs.data(), b.ptrs.data() + 1);
  });
}

// Keeps the best time per iteration of every benchmark run.
class BestReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.run_type != Run::RT_Iteration || r.iterations == 0 || r.error_occurred) continue;
      // CPU time: the machine may be shared, and being descheduled must not
      // count against either side.
      double t = r.cpu_accumulated_time / static_cast<double>(r.iterations);
      std::string name = r.run_name.function_name;
      auto it = best.find(name);
      if (it == best.end() || t < it->second) best[name] = t;
    }
    ConsoleReporter::ReportRuns(runs);
  }
  std::map<std::string, double> best;
};

}  // namespace

int main(int argc, char** argv) {
  if (dlckpt_version_requested(argc, argv)) return 0;
  using benchmark::RegisterBenchmark;
  struct Pair {
    std::string name;
    std::function<void(benchmark::State&)> ours, raw;
  };
  std::vector<Pair> pairs = {
      {"xor_encode_n8", [](auto& s) { OursEncode(s, Scheme::kXor, 1); }, RawXorEncode},
      {"rs_encode_n8_k2", [](auto& s) { OursEncode(s, Scheme::kReedSolomon, 2); },
       [](auto& s) { RawRsEncode(s, 2); }},
      {"rs_encode_n8_k3", [](auto& s) { OursEncode(s, Scheme::kReedSolomon, 3); },
       [](auto& s) { RawRsEncode(s, 3); }},
      {"rs_decode_n8_k2", [](auto& s) { OursDecode(s, 2); }, [](auto& s) { RawDecode(s, 2); }},
      {"xor_accumulate", [](auto& s) { OursAccumulate(s, Scheme::kXor, 1); }, RawXorAccumulate},
      {"rs_accumulate_k2", [](auto& s) { OursAccumulate(s, Scheme::kReedSolomon, 2); },
       [](auto& s) { RawRsAccumulate(s, 2); }},
      {"rs_set_k2", [](auto& s) { OursSet(s, 2); }, [](auto& s) { RawSet(s, 2); }},
  };
  for (const Pair& p : pairs) {
    RegisterBenchmark(("ours/" + p.name).c_str(), p.ours);
    RegisterBenchmark(("raw/" + p.name).c_str(), p.raw);
  }

  // Defaults that a command-line flag overrides (later flags win).
  std::vector<char*> args(argv, argv + argc);
  std::string reps = "--benchmark_repetitions=5", inter = "--benchmark_enable_random_interleaving=true",
              min_time = "--benchmark_min_time=0.2";
  args.insert(args.begin() + 1, {reps.data(), inter.data(), min_time.data()});
  int nargs = static_cast<int>(args.size());
  benchmark::Initialize(&nargs, args.data());
  if (benchmark::ReportUnrecognizedArguments(nargs, args.data())) return 2;
  BestReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  double min_ratio = 1e9;
  std::string worst;
  std::printf("\n%-20s %12s %12s %8s\n", "kernel", "ours GB/s", "raw GB/s", "ratio");
  for (const Pair& p : pairs) {
    auto o = reporter.best.find("ours/" + p.name), r = reporter.best.find("raw/" + p.name);
    if (o == reporter.best.end() || r == reporter.best.end()) continue;
    const double bytes = p.name.find("accumulate") != std::string::npos ||
                                 p.name.find("set") != std::string::npos
                             ? kLen
                             : static_cast<double>(kN) * kLen;
    const double ratio = r->second / o->second;
    std::printf("%-20s %12.1f %12.1f %8.3f\n", p.name.c_str(), bytes / o->second / 1e9,
                bytes / r->second / 1e9, ratio);
    if (ratio < min_ratio) min_ratio = ratio, worst = p.name;
  }
  if (worst.empty()) {
    std::fprintf(stderr, "no kernel pair ran (check --benchmark_filter)\n");
    return 1;
  }
  std::printf("worst: %s\n", worst.c_str());
  std::printf("METRIC codec_kernels_vs_isal_min_ratio %.3f ratio target >= 0.9\n", min_ratio);
  return 0;
}

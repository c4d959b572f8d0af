// Parts of the transport that need no running MPI: sinks and spec builders.
#include "dlckpt/codec/reduce_transport.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

namespace dlckpt::codec {
namespace {

TEST(OrderedSink, AppendsContiguousPrefixesInOrder) {
  std::mt19937_64 rng(1);
  std::vector<uint8_t> appended;
  std::vector<size_t> calls;
  OrderedSink sink([&](int output, const uint8_t* data, size_t len) {
    EXPECT_EQ(output, 1);
    appended.insert(appended.end(), data, data + len);
    calls.push_back(len);
    return Status::OK();
  });
  const uint64_t length = 10000;
  auto buf = sink.Begin(1, length);
  ASSERT_TRUE(buf.ok());
  ASSERT_NE(*buf, nullptr);
  // Pieces of [0, length) landing in random order.
  std::vector<std::pair<uint64_t, size_t>> pieces;
  for (uint64_t off = 0; off < length;) {
    size_t len = std::min<uint64_t>(length - off, 1 + rng() % 900);
    pieces.emplace_back(off, len);
    off += len;
  }
  std::shuffle(pieces.begin(), pieces.end(), rng);
  for (auto [off, len] : pieces) {
    for (size_t i = 0; i < len; ++i) (*buf)[off + i] = static_cast<uint8_t>((off + i) * 7);
    ASSERT_TRUE(sink.Landed(1, off, len).ok());
  }
  ASSERT_TRUE(sink.Finish(1).ok());
  ASSERT_EQ(appended.size(), length);
  for (size_t i = 0; i < length; ++i) ASSERT_EQ(appended[i], static_cast<uint8_t>(i * 7));
  EXPECT_GT(calls.size(), 1u);
  EXPECT_LT(calls.size(), pieces.size() + 1);
}

TEST(OrderedSink, IncompleteOutputAndAppendErrorsAreReported) {
  OrderedSink sink([](int, const uint8_t*, size_t len) {
    return len > 100 ? Status::NoSpace("store full") : Status::OK();
  });
  ASSERT_TRUE(sink.Begin(0, 300).ok());
  ASSERT_TRUE(sink.Landed(0, 100, 50).ok());  // not contiguous yet: nothing appended
  EXPECT_EQ(sink.Finish(0).code(), EBADMSG);
  EXPECT_EQ(sink.Landed(0, 0, 100).code(), ENOSPC);  // appends [0, 150)
  ASSERT_TRUE(sink.Begin(0, 0).ok());                // a new Run resets the state
  EXPECT_TRUE(sink.Finish(0).ok());
}

TEST(BufferSink, KeepsOutputsAndReusesMemory) {
  BufferSink sink;
  auto a = sink.Begin(2, 1000);
  ASSERT_TRUE(a.ok());
  std::fill(*a, *a + 1000, 9);
  EXPECT_EQ(sink.output(2).size(), 1000u);
  EXPECT_TRUE(sink.output(0).empty());
  auto b = sink.Begin(2, 10);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(sink.output(2).size(), 10u);
}

TEST(Specs, EncodeAndRebuild) {
  auto code = ErasureCode::Create(Scheme::kReedSolomon, 4, 2);
  ASSERT_TRUE(code.ok());
  ReduceSpec enc = EncodeSpec(**code, "group 3 encode");
  EXPECT_EQ(enc.source_ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(enc.output_ranks, (std::vector<int>{4, 5}));
  EXPECT_EQ(enc.combination.get(), (*code)->encoder().get());

  // Chunks 1 and 4 lost; chunk 1 rebuilt on rank 7, sources on ranks 10+c.
  std::vector<int> ranks = {10, -1, 12, 13, -1, 15};
  std::vector<int> wanted = {1}, targets = {7};
  auto spec = RebuildSpec(**code, ranks, wanted, targets, "group 3 rebuild");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->source_ranks, (std::vector<int>{10, 12, 13, 15}));
  EXPECT_EQ(spec->output_ranks, (std::vector<int>{7}));
  EXPECT_EQ(spec->combination->outputs(), 1);

  std::vector<int> three_lost = {-1, -1, 12, 13, -1, 15};
  auto bad = RebuildSpec(**code, three_lost, wanted, targets, "group 3 rebuild");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ENODATA);
  EXPECT_EQ(bad.status().message().rfind("group 3 rebuild: 3 chunks lost (data 0, data 1, "
                                         "parity 0)",
                                         0),
            0u);
  EXPECT_EQ(RebuildSpec(**code, ranks, {}, {}, "g").status().code(), EINVAL);
  EXPECT_EQ(RebuildSpec(**code, ranks, wanted, {}, "g").status().code(), EINVAL);
  std::vector<int> too_few = {10, 11};
  EXPECT_EQ(RebuildSpec(**code, too_few, wanted, targets, "g").status().code(), EINVAL);
}

// A rank holding several of the chunks a one-output rebuild reads folds them
// into one source (issue 32): the spec's combination over the folded
// sources, fed as Run would feed it, gives the lost chunk, as the reference
// whole-stripe decode does.
class FoldTest : public ::testing::TestWithParam<Scheme> {
 protected:
  // Data chunks of different lengths (chunk 1 the longest), some with a
  // zero run stored as a hole; parity from the whole-stripe encode.
  void Make(int n, int k) {
    auto code = ErasureCode::Create(GetParam(), n, k);
    ASSERT_TRUE(code.ok()) << code.status().ToString();
    code_ = *code;
    std::mt19937_64 rng(static_cast<uint64_t>(n * 10 + k));
    const size_t longest = 70001;
    chunks_.assign(static_cast<size_t>(n + k), {});
    for (int c = 0; c < n; ++c) {
      chunks_[c].resize(c == 1 ? longest : longest - 1000 * static_cast<size_t>(c + 1));
      for (auto& b : chunks_[c]) b = static_cast<uint8_t>(rng());
      std::fill(chunks_[c].begin() + 5000, chunks_[c].begin() + 9000, 0);  // the hole
    }
    std::vector<std::span<const uint8_t>> data;
    for (int c = 0; c < n; ++c) data.emplace_back(chunks_[c]);
    std::vector<std::span<uint8_t>> parity;
    for (int j = 0; j < k; ++j) {
      chunks_[n + j].resize(longest);
      parity.emplace_back(chunks_[n + j]);
    }
    ASSERT_TRUE(code_->Encode(data, parity).ok());
  }

  // Chunk c as extents: three pieces, the zero run of a data chunk a hole.
  std::vector<Extent> Extents(int c) const {
    const auto& b = chunks_[c];
    if (c >= code_->n()) return {Extent{b.data(), 100}, Extent{b.data() + 100, b.size() - 100}};
    return {Extent{b.data(), 5000}, Extent{nullptr, 4000}, Extent{b.data() + 9000, b.size() - 9000}};
  }

  // What Run computes for `lost` from the spec's sources, fed as the codec
  // service feeds them; and the whole-stripe decode of the same pattern.
  void Check(const std::vector<int>& chunk_ranks, int lost, size_t want_sources) {
    std::vector<RebuildSource> given;
    std::vector<int> wanted{lost}, targets{99};
    auto spec = RebuildSpec(*code_, chunk_ranks, wanted, targets, "fold", &given);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    ASSERT_EQ(spec->source_ranks.size(), want_sources);
    ASSERT_EQ(given.size(), want_sources);
    const Combination& comb = *spec->combination;
    if (GetParam() == Scheme::kXor) {
      EXPECT_TRUE(comb.is_xor());
    }
    const size_t len = chunks_[code_->n()].size();
    std::vector<FoldedChunk> folds;
    std::vector<std::vector<uint8_t>> inputs;
    bool folded = false;
    for (size_t i = 0; i < given.size(); ++i) {
      for (int c : given[i].chunks) EXPECT_EQ(chunk_ranks[c], spec->source_ranks[i]);
      std::vector<uint8_t> in(len, 0);
      if (given[i].coefficients.empty()) {
        ASSERT_EQ(given[i].chunks.size(), 1u);
        const auto& b = chunks_[given[i].chunks[0]];
        std::copy(b.begin(), b.end(), in.begin());
      } else {
        folded = true;
        EXPECT_EQ(comb.coefficient(0, static_cast<int>(i)), 1);
        std::vector<std::vector<Extent>> parts;
        for (int c : given[i].chunks) parts.push_back(Extents(c));
        auto f = FoldChunks(given[i].coefficients, parts);
        ASSERT_TRUE(f.ok()) << f.status().ToString();
        ASSERT_LE(f->length, len);
        std::copy(f->data.get(), f->data.get() + f->length, in.begin());
      }
      inputs.push_back(std::move(in));
    }
    EXPECT_TRUE(folded);
    std::vector<std::span<const uint8_t>> srcs(inputs.begin(), inputs.end());
    std::vector<uint8_t> out(len);
    std::vector<std::span<uint8_t>> outs{out};
    ASSERT_TRUE(comb.Apply(srcs, outs).ok());
    std::vector<uint8_t> expect = chunks_[lost];
    expect.resize(len, 0);
    EXPECT_EQ(out, expect);

    // The reference: the whole-stripe decode with only `lost` erased.
    std::vector<int> erased{lost};
    auto plan = code_->PlanDecode(erased);
    ASSERT_TRUE(plan.ok());
    std::vector<std::span<const uint8_t>> all(chunks_.begin(), chunks_.end());
    std::vector<uint8_t> ref(len);
    std::vector<std::span<uint8_t>> refs{ref};
    ASSERT_TRUE(code_->Decode(**plan, all, refs).ok());
    EXPECT_EQ(ref, expect);
  }

  std::shared_ptr<const ErasureCode> code_;
  std::vector<std::vector<uint8_t>> chunks_;
};

TEST_P(FoldTest, OneLostChunkFromANodeGivingTwo) {
  if (GetParam() == Scheme::kXor) {
    // Issue 32, test 4: d2 lost; d1 and p0 on rank 4 (rebuilt d1 on the
    // spare holding p0): d2 = d0 ^ (d1 ^ p0) ^ d3.
    Make(4, 1);
    Check({0, 4, -1, 3, 4}, 2, 3);
    Check({-1, 1, 2, 1, 1}, 0, 2);  // rank 1 folds d1, d3 and p0
  } else {
    Make(4, 2);
    Check({10, -1, 12, 13, 12, -1}, 1, 3);  // d2 and p0 on rank 12
    Check({10, -1, 12, 13, 12, 12}, 1, 3);  // p1 on rank 12 too: not read
    Check({10, 10, -1, 13, 10, 15}, 2, 3);  // d0, d1, p0 on rank 10: d0 and d1 folded, p1 from 15
    Check({-1, 11, 11, 11, 11, 11}, 0, 1);  // one rank holds everything
  }
}

INSTANTIATE_TEST_SUITE_P(Schemes, FoldTest, ::testing::Values(Scheme::kXor, Scheme::kReedSolomon),
                         [](const auto& info) { return std::string(SchemeName(info.param)) == "xor" ? "Xor" : "ReedSolomon"; });

TEST(Specs, RebuildReadsOneChunkPerRankFirst) {
  auto code = ErasureCode::Create(Scheme::kReedSolomon, 4, 2);
  ASSERT_TRUE(code.ok());
  // d1 lost; p0 on rank 12 with d2, p1 on rank 15: four distinct ranks
  // suffice, nobody folds.
  std::vector<int> ranks = {10, -1, 12, 13, 12, 15};
  std::vector<int> wanted = {1}, targets = {7};
  std::vector<RebuildSource> given;
  auto spec = RebuildSpec(**code, ranks, wanted, targets, "g", &given);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->source_ranks, (std::vector<int>{10, 12, 13, 15}));
  ASSERT_EQ(given.size(), 4u);
  EXPECT_EQ(given[1].chunks, std::vector<int>{2});
  EXPECT_EQ(given[3].chunks, std::vector<int>{5});
  for (const auto& g : given) EXPECT_TRUE(g.coefficients.empty());
  // Without `sources` that spec is fine too.
  EXPECT_TRUE(RebuildSpec(**code, ranks, wanted, targets, "g").ok());

  // Two lost, the four survivors on three ranks: rank 10 would give d0 and
  // p0 to two outputs.
  std::vector<int> two_lost = {10, -1, -1, 13, 10, 15};
  std::vector<int> both = {1, 2}, two_targets = {7, 8};
  auto bad = RebuildSpec(**code, two_lost, both, two_targets, "group 0 rebuild", &given);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), EINVAL);
  EXPECT_NE(bad.status().message().find("group 0 rebuild: rank 10 would give data 0, parity 0 to a rebuild of "
                                        "data 1, data 2: two lost chunks of one stripe need their sources on "
                                        "distinct ranks"),
            std::string::npos)
      << bad.status().message();
  // A fold the caller cannot do.
  std::vector<int> folding = {10, -1, 12, 13, 12, -1};
  EXPECT_EQ(RebuildSpec(**code, folding, wanted, targets, "g").status().code(), EINVAL);
  // Too few chunks anywhere stays ENODATA.
  std::vector<int> three_left = {10, -1, -1, 13, 10, -1};
  EXPECT_EQ(RebuildSpec(**code, three_left, wanted, targets, "g", &given).status().code(), ENODATA);
}

TEST(Fold, CountsAndEmptyChunks) {
  std::vector<std::vector<Extent>> parts(2);
  std::vector<uint8_t> one{1};
  EXPECT_EQ(FoldChunks(one, parts).status().code(), EINVAL);
  std::vector<uint8_t> two{1, 1};
  auto f = FoldChunks(two, parts);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->length, 0u);
  // Chunks of different lengths: the shorter one padded with zeros.
  const uint8_t a[3] = {1, 2, 3}, b[1] = {7};
  parts[0] = {Extent{a, 3}};
  parts[1] = {Extent{b, 1}};
  f = FoldChunks(two, parts);
  ASSERT_TRUE(f.ok());
  ASSERT_EQ(f->length, 3u);
  EXPECT_EQ(f->data[0], 1 ^ 7);
  EXPECT_EQ(f->data[1], 2);
  EXPECT_EQ(f->data[2], 3);
}

}  // namespace
}  // namespace dlckpt::codec

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

}  // namespace
}  // namespace dlckpt::codec

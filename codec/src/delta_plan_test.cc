// The incremental encode's plan in the spread layout (internal::PlanSpreadDelta,
// service_delta.cc): a pure function of the exchanged records, so every
// member computes the same. When it must fall back to a full encode (no kept
// parity, another segment length, DLCKPT_DELTA=off, too much changed), and
// the per-stripe ranges it gives otherwise.
#include <gtest/gtest.h>

#include "dlckpt/codec/erasure.h"
#include "dlckpt/control/stripes.h"
#include "service_impl.h"

namespace dlckpt::codec::internal {
namespace {

namespace protocol = control::protocol;
using Range = memfs::Store::ByteRange;

constexpr uint64_t kImage = 3 * 64 * 1024;  // 4 members, XOR: 3 segments of 64 KiB

struct Shape {
  Group g;
  std::vector<protocol::MemberRecord> records;
  std::vector<DeltaInfo> infos;
};

// Four members of one rank each, every image kImage bytes in both epochs,
// every member holding the kept spread parity; nothing changed yet.
Shape Spread4() {
  Shape s;
  s.g.spread = true;
  s.g.spread_k = 1;
  for (int m = 0; m < 4; ++m) {
    s.g.data.push_back(NodeInfo{m, "vn" + std::to_string(m), {m}});
    s.records.push_back(protocol::MemberRecord{"vn" + std::to_string(m), {m}, {kImage}});
  }
  for (int m = 0; m < 4; ++m) {
    DeltaInfo d;
    d.have_delta = true;
    d.old_sizes = {kImage};
    d.have_kept = true;
    d.scheme = SchemeByte(Scheme::kXor);
    d.k = 1;
    d.kept_members = s.records;
    s.infos.push_back(d);
  }
  return s;
}

TEST(SpreadDeltaPlan, PerStripeRangesOfAConfinedChange) {
  Shape s = Spread4();
  // Member 1 changed 100 bytes in its segment 2 (image offset 2·64 KiB + 10).
  s.infos[1].ranges = {Range{2 * 65536 + 10, 100}};
  DeltaPlan p = PlanSpreadDelta(s.g, 5, s.records, s.infos, DeltaMode::kAuto, 0.35);
  ASSERT_TRUE(p.use) << p.why;
  EXPECT_EQ(p.length, 65536u);
  ASSERT_EQ(p.stripes.size(), 4u);
  // Member 1's segment 2 is its data chunk in stripe 3 (it holds parity in stripe 1).
  for (uint32_t st = 0; st < 4; ++st) {
    const bool changed = st == 3;
    EXPECT_EQ(control::SpreadHoldsData(4, 1, 1, st) && control::SpreadSegmentOf(4, 1, 1, st) == 2, changed);
    ASSERT_EQ(p.stripes[st].size(), changed ? 1u : 0u) << "stripe " << st;
    if (changed) {
      EXPECT_EQ(p.stripes[st][0].offset, 0u);
      EXPECT_EQ(p.stripes[st][0].len, 4096u);  // widened to 4 KiB
    }
  }
  EXPECT_EQ(p.packed, 4096u);
  EXPECT_EQ(p.whole, 4u * 65536);
  EXPECT_DOUBLE_EQ(p.fraction, 4096.0 / (4 * 65536));
}

TEST(SpreadDeltaPlan, FullEncodeWhenTheKeptParityDoesNotFit) {
  {
    Shape s = Spread4();
    s.infos[2].have_kept = false;  // e.g. a replacement node
    DeltaPlan p = PlanSpreadDelta(s.g, 5, s.records, s.infos, DeltaMode::kOn, 0.35);
    EXPECT_FALSE(p.use);
    EXPECT_NE(p.why.find("vn2 holds no spread parity of epoch 5"), std::string::npos) << p.why;
  }
  {
    Shape s = Spread4();
    s.infos[0].kept_members[3].node = "vn9";  // the kept parity had another member
    DeltaPlan p = PlanSpreadDelta(s.g, 5, s.records, s.infos, DeltaMode::kOn, 0.35);
    EXPECT_FALSE(p.use);
  }
  {
    // Every image grew past what 3 segments of 64 KiB hold: the segment changed.
    Shape s = Spread4();
    for (auto& r : s.records) r.sizes = {kImage + 4096};
    for (auto& d : s.infos) d.ranges = {Range{kImage, 4096}};
    DeltaPlan p = PlanSpreadDelta(s.g, 5, s.records, s.infos, DeltaMode::kOn, 0.35);
    EXPECT_FALSE(p.use);
    EXPECT_NE(p.why.find("segment length changed"), std::string::npos) << p.why;
  }
  {
    Shape s = Spread4();
    s.infos[3].have_delta = false;
    EXPECT_FALSE(PlanSpreadDelta(s.g, 5, s.records, s.infos, DeltaMode::kOn, 0.35).use);
  }
  {
    Shape s = Spread4();
    EXPECT_FALSE(PlanSpreadDelta(s.g, 0, s.records, s.infos, DeltaMode::kOn, 0.35).use);    // nothing kept
    EXPECT_FALSE(PlanSpreadDelta(s.g, 5, s.records, s.infos, DeltaMode::kOff, 0.35).use);   // DLCKPT_DELTA=off
  }
}

TEST(SpreadDeltaPlan, ThresholdOnThePackedFraction) {
  Shape s = Spread4();
  for (auto& d : s.infos) d.ranges = {Range{0, kImage}};  // everything changed
  DeltaPlan p = PlanSpreadDelta(s.g, 5, s.records, s.infos, DeltaMode::kAuto, 0.35);
  EXPECT_FALSE(p.use);
  EXPECT_DOUBLE_EQ(p.fraction, 1.0);
  EXPECT_EQ(p.why, "changed fraction above the threshold");
  EXPECT_TRUE(PlanSpreadDelta(s.g, 5, s.records, s.infos, DeltaMode::kOn, 0.35).use);  // forced
}

}  // namespace
}  // namespace dlckpt::codec::internal

#include "dlckpt/control/acknowledged.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace dlckpt::control {
namespace {

TEST(CheckOneAcknowledgedEpoch, OneEpochEverywhereIsOk) {
  EXPECT_TRUE(CheckOneAcknowledgedEpoch({}, {}, "").ok());
  EXPECT_TRUE(CheckOneAcknowledgedEpoch({0}, {"a"}, "").ok());
  EXPECT_TRUE(CheckOneAcknowledgedEpoch({7, 7, 7}, {"a", "b", "c"}, "remedy").ok());
}

TEST(CheckOneAcknowledgedEpoch, DifferentEpochsNameOneStorePerEpoch) {
  Status s = CheckOneAcknowledgedEpoch({7, 5, 7, 0}, {"a", "b", "c", "d"}, "");
  EXPECT_EQ(s.code(), EPROTO);
  EXPECT_EQ(s.message(),
            "the stores hold different checkpoints (acknowledged epochs 0 to 7: d epoch 0, b epoch 5, "
            "a epoch 7 and 1 more)");
}

TEST(CheckOneAcknowledgedEpoch, TheRemedyEndsTheMessage) {
  Status s = CheckOneAcknowledgedEpoch({1, 2}, {"r0", "r1"}, "use --epoch");
  EXPECT_EQ(s.code(), EPROTO);
  EXPECT_EQ(s.message(), "the stores hold different checkpoints (acknowledged epochs 1 to 2: r0 epoch 1, "
                         "r1 epoch 2): use --epoch");
}

TEST(CheckOneAcknowledgedEpoch, ListsAtMostSixteenEpochs) {
  std::vector<uint64_t> epochs;
  std::vector<std::string> names;
  for (uint64_t e = 1; e <= 20; ++e) {
    epochs.push_back(e);
    names.push_back("s" + std::to_string(e));
  }
  Status s = CheckOneAcknowledgedEpoch(epochs, names, "");
  EXPECT_EQ(s.code(), EPROTO);
  EXPECT_NE(s.message().find("epochs 1 to 20: s1 epoch 1,"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("s16 epoch 16, ...)"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("s17"), std::string::npos) << s.message();
}

TEST(CheckOneAcknowledgedEpoch, NamesMustMatchTheEpochs) {
  EXPECT_EQ(CheckOneAcknowledgedEpoch({1, 2}, {"a"}, "").code(), EINVAL);
}

}  // namespace
}  // namespace dlckpt::control

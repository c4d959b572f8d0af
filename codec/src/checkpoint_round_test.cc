// Tests of the checkpoint round: every outcome of the rule in
// dlckpt/codec/checkpoint_round.h, on one MPI process with a fake store and a
// fake encoder, and the plan (PlanRound) for several participants.
#include "dlckpt/codec/checkpoint_round.h"

#include <mpi.h>

#include <cerrno>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace dlckpt::codec {
namespace {

// A store as memfs keeps epochs, recording the calls it gets.
class FakeStore final : public RoundStore {
 public:
  Result<RoundEpochs> Prepare() override { return e_; }
  Status Commit(uint64_t epoch) override {
    calls.push_back("commit " + std::to_string(epoch));
    if (fail_commit) return Status::Error(ENOSPC, "store full");
    e_.pending = epoch;
    e_.next = epoch + 1;
    return Status::OK();
  }
  Status Acknowledge(uint64_t epoch) override {
    calls.push_back("ack " + std::to_string(epoch));
    if (e_.pending != epoch) return Status::Error(EINVAL, "not pending");
    e_.acknowledged = epoch;
    e_.pending = 0;
    return Status::OK();
  }
  Status Abort(uint64_t epoch) override {
    calls.push_back("abort " + std::to_string(epoch));
    if (e_.pending == epoch) e_.pending = 0;
    return Status::OK();
  }
  RoundEpochs e_;
  bool fail_commit = false;
  std::vector<std::string> calls;
};

class FakeEncoder final : public RoundEncoder {
 public:
  EncodeOutcome Encode(uint64_t epoch, uint64_t keep) override {
    calls.push_back("encode " + std::to_string(epoch) + " keep " + std::to_string(keep));
    return next;
  }
  EncodeOutcome next;
  std::vector<std::string> calls;
};

using Calls = std::vector<std::string>;

class RoundTest : public ::testing::Test {
 protected:
  Result<uint64_t> Run(RoundEncoder* encoder) {
    CheckpointRound round(&comm_, &store_, encoder, "rank 0");
    return round.Run();
  }
  mpi::Collective comm_{MPI_COMM_SELF, "rank 0"};
  FakeStore store_;
  FakeEncoder encoder_;
};

TEST_F(RoundTest, ProtectedEpochIsAcknowledged) {
  store_.e_ = {3, 0, 4};
  auto e = Run(&encoder_);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(*e, 4u);
  EXPECT_EQ(encoder_.calls, (Calls{"encode 4 keep 3"}));
  EXPECT_EQ(store_.calls, (Calls{"commit 4", "ack 4"}));
}

TEST_F(RoundTest, NoServiceAcknowledgesWithoutParity) {
  auto e = Run(nullptr);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(*e, 1u);
  EXPECT_EQ(store_.calls, (Calls{"commit 1", "ack 1"}));
}

TEST_F(RoundTest, FailedCommitEncodesNothing) {
  store_.e_ = {2, 0, 3};
  store_.fail_commit = true;
  auto e = Run(&encoder_);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), ENOSPC);
  EXPECT_NE(e.status().message().find("commit of epoch 3"), std::string::npos) << e.status().message();
  EXPECT_TRUE(encoder_.calls.empty());
  EXPECT_EQ(store_.e_.acknowledged, 2u);
}

TEST_F(RoundTest, RefusedEncodeAbortsTheEpoch) {
  store_.e_ = {2, 0, 3};
  encoder_.next.status = Status::Error(EHOSTDOWN, "a group lost a member");
  auto e = Run(&encoder_);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), EHOSTDOWN);
  EXPECT_EQ(store_.calls, (Calls{"commit 3", "abort 3"}));
  EXPECT_EQ(store_.e_.acknowledged, 2u);
  EXPECT_EQ(store_.e_.pending, 0u);
}

TEST_F(RoundTest, UnknownOutcomeKeepsTheEpochPendingAndTheNextRoundCompletesIt) {
  store_.e_ = {2, 0, 3};
  encoder_.next = {Status::Timeout("no answer"), true};
  auto e = Run(&encoder_);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("stays pending"), std::string::npos) << e.status().message();
  EXPECT_EQ(store_.calls, (Calls{"commit 3"}));
  EXPECT_EQ(store_.e_.pending, 3u);

  encoder_.next = {};
  store_.calls.clear();
  encoder_.calls.clear();
  e = Run(&encoder_);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(*e, 4u);
  // Epoch 3 encoded again (keeping 2) and acknowledged, then epoch 4 keeping 3.
  EXPECT_EQ(encoder_.calls, (Calls{"encode 3 keep 2", "encode 4 keep 3"}));
  EXPECT_EQ(store_.calls, (Calls{"ack 3", "commit 4", "ack 4"}));
}

TEST(PlanRound, DropsAPendingEpochNotEveryStoreHolds) {
  auto p = PlanRound({{8, 9, 10}, {8, 0, 9}, {8, 9, 10}}, {"a", "b", "c"}, false);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->drop, (std::vector<size_t>{0, 2}));
  EXPECT_EQ(p->finish, 0u);
  EXPECT_EQ(p->epoch, 10u);
}

TEST(PlanRound, CompletesAnEpochEveryStoreHolds) {
  auto p = PlanRound({{8, 9, 10}, {9, 0, 10}}, {"a", "b"}, false);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->finish, 9u);
  EXPECT_FALSE(p->finish_encode);  // b acknowledged it: it was encoded
  EXPECT_EQ(p->epoch, 10u);
}

TEST(PlanRound, RefusesDisagreementAndMismatch) {
  auto p = PlanRound({{9, 0, 10}, {8, 0, 9}, {8, 7, 9}}, {"a", "b", "c"}, false);
  EXPECT_EQ(p.status().code(), EPROTO);
  p = PlanRound({{7, 0, 8}, {5, 0, 6}}, {"a", "b"}, false);
  EXPECT_EQ(p.status().code(), EPROTO);
  EXPECT_NE(p.status().message().find("b epoch 5"), std::string::npos) << p.status().message();
  p = PlanRound({{7, 0, 8}, {5, 0, 6}}, {"a", "b"}, true);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->epoch, 8u);
}

}  // namespace
}  // namespace dlckpt::codec

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  MPI_Init(&argc, &argv);
  int rc = RUN_ALL_TESTS();
  MPI_Finalize();
  return rc;
}

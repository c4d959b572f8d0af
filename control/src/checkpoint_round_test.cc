// Tests of the checkpoint round: every outcome of the rule in
// dlckpt/control/checkpoint_round.h, on one MPI process with a fake store and a
// fake encoder, and the plan (PlanRound) for several participants. The tests
// of AgreeOneAcknowledgedEpoch run over MPI_COMM_WORLD: alone as a unit test,
// and under mpiexec with 3 processes (agree_acknowledged_np3) for a mismatch.
#include "dlckpt/control/checkpoint_round.h"

#include <mpi.h>

#include <cerrno>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace dlckpt::control {
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

// Records the encodes started; Await answers with `next` (then with
// `after`, when set).
class FakeEncoder final : public RoundEncoder {
 public:
  Status Start(uint64_t epoch, uint64_t keep) override {
    calls.push_back("encode " + std::to_string(epoch) + " keep " + std::to_string(keep));
    if (!start.ok()) return start;
    started = epoch;
    return Status::OK();
  }
  EncodeOutcome Await(uint64_t epoch) override {
    EXPECT_EQ(epoch, started);
    started = 0;
    ++awaited;
    EncodeOutcome out = next;
    if (then) next = *then;
    return out;
  }
  Status start;
  EncodeOutcome next;
  const EncodeOutcome* then = nullptr;
  uint64_t started = 0;
  int awaited = 0;
  std::vector<std::string> calls;
};

using Calls = std::vector<std::string>;

class RoundTest : public ::testing::Test {
 protected:
  Result<uint64_t> Run(RoundEncoder* encoder) {
    CheckpointRound round(&comm_, &store_, encoder, "rank 0");
    return round.Run();
  }
  CheckpointRound Async() {
    RoundOptions o;
    o.async = true;
    o.log = [this](const std::string& m) { log_.push_back(m); };
    return CheckpointRound(&comm_, &store_, &encoder_, "rank 0", o);
  }
  std::vector<std::string> log_;
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

TEST_F(RoundTest, RefusedEncodeRequestAbortsTheEpoch) {
  store_.e_ = {2, 0, 3};
  encoder_.start = Status::Error(ECONNREFUSED, "no service");
  auto e = Run(&encoder_);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), ECONNREFUSED);
  EXPECT_EQ(store_.calls, (Calls{"commit 3", "abort 3"}));
  EXPECT_EQ(encoder_.awaited, 0);
}

TEST_F(RoundTest, AsyncRunReturnsCommittedAndTheNextRunAcknowledges) {
  store_.e_ = {3, 0, 4};
  CheckpointRound round = Async();
  auto e = round.Run();
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(*e, 4u);
  // Committed, encode sent, outcome not collected: 3 is still the protected one.
  EXPECT_EQ(store_.calls, (Calls{"commit 4"}));
  EXPECT_EQ(encoder_.awaited, 0);
  EXPECT_EQ(round.in_flight(), 4u);
  EXPECT_EQ(round.protected_epoch(), 3u);
  EXPECT_EQ(store_.e_.acknowledged, 3u);

  e = round.Run();
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(*e, 5u);
  EXPECT_EQ(encoder_.calls, (Calls{"encode 4 keep 3", "encode 5 keep 4"}));
  EXPECT_EQ(store_.calls, (Calls{"commit 4", "ack 4", "commit 5"}));
  EXPECT_EQ(round.protected_epoch(), 4u);
  EXPECT_GE(round.last_wait_seconds(), 0.0);

  auto p = round.Wait();
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(*p, 5u);
  EXPECT_EQ(store_.e_.acknowledged, 5u);
  EXPECT_EQ(store_.e_.pending, 0u);
  EXPECT_EQ(round.in_flight(), 0u);
  // Nothing in flight: Wait returns at once.
  p = round.Wait();
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, 5u);
  EXPECT_EQ(encoder_.awaited, 2);
}

TEST_F(RoundTest, AsyncFailedEncodeKeepsTheProtectedEpochAndWaitReportsIt) {
  store_.e_ = {3, 0, 4};
  CheckpointRound round = Async();
  encoder_.next.status = Status::Error(EHOSTDOWN, "a group lost a member");
  const EncodeOutcome ok;
  encoder_.then = &ok;
  ASSERT_TRUE(round.Run().ok());
  auto e = round.Run();  // collects 4's failure, goes on with 5 (keeping 3)
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(*e, 5u);
  EXPECT_EQ(store_.calls, (Calls{"commit 4", "abort 4", "commit 5"}));
  EXPECT_EQ(encoder_.calls, (Calls{"encode 4 keep 3", "encode 5 keep 3"}));
  ASSERT_EQ(log_.size(), 1u);
  EXPECT_NE(log_[0].find("epoch 4 did not protect it"), std::string::npos) << log_[0];
  auto p = round.Wait();
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), EHOSTDOWN);
  EXPECT_EQ(store_.e_.acknowledged, 5u);  // 5 itself was protected
  p = round.Wait();
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(*p, 5u);
}

TEST_F(RoundTest, AsyncUnknownOutcomeIsEncodedAgainByTheNextRun) {
  store_.e_ = {3, 0, 4};
  CheckpointRound round = Async();
  encoder_.next = {Status::Timeout("no answer"), true};
  const EncodeOutcome ok;
  encoder_.then = &ok;
  ASSERT_TRUE(round.Run().ok());
  auto e = round.Run();
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(*e, 5u);
  // 4 stayed pending, so the round completed it first (encoding it again).
  EXPECT_EQ(encoder_.calls, (Calls{"encode 4 keep 3", "encode 4 keep 3", "encode 5 keep 4"}));
  EXPECT_EQ(store_.calls, (Calls{"commit 4", "ack 4", "commit 5"}));
  EXPECT_EQ(round.protected_epoch(), 4u);
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

TEST(PlanRound, NamesTheRemedyOfAMismatch) {
  auto p = PlanRound({{7, 0, 8}, {5, 0, 6}}, {"a", "b"}, false, "do this");
  EXPECT_EQ(p.status().code(), EPROTO);
  EXPECT_EQ(p.status().message(),
            "the stores hold different checkpoints (acknowledged epochs 5 to 7: b epoch 5, a epoch 7): do this");
  p = PlanRound({{7, 0, 8}, {5, 0, 6}}, {"a", "b"}, true, "do this");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->acknowledged, 7u);  // participant 0's: the encode keeps it
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

TEST_F(RoundTest, RunsThePlanItIsGiven) {
  store_.e_ = {3, 0, 4};
  auto plan = PlanRound({store_.e_}, {"rank 0"}, false);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  CheckpointRound round(&comm_, &store_, &encoder_, "rank 0");
  auto e = round.Run(*plan, store_.e_);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(*e, 4u);
  EXPECT_EQ(encoder_.calls, (Calls{"encode 4 keep 3"}));
  EXPECT_EQ(store_.calls, (Calls{"commit 4", "ack 4"}));
}

TEST_F(RoundTest, AGivenPlanIsRefusedWhileAnEncodeIsInFlight) {
  store_.e_ = {3, 0, 4};
  CheckpointRound round = Async();
  auto first = round.Run();  // epoch 4, its encode in flight
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto plan = PlanRound({store_.e_}, {"rank 0"}, false);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(round.Run(*plan, store_.e_).status().code(), EBUSY);
  auto done = round.Wait();
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(*done, 4u);
}

class AgreeTest : public ::testing::Test {
 protected:
  static int Rank() {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
  }
  mpi::Collective comm_{MPI_COMM_WORLD, "rank " + std::to_string(Rank())};
  const std::string name_ = "r" + std::to_string(Rank());
};

TEST_F(AgreeTest, OneEpochEverywhereIsThatEpoch) {
  auto e = AgreeOneAcknowledgedEpoch(&comm_, 5, name_, "remedy");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(*e, 5u);
  e = AgreeOneAcknowledgedEpoch(&comm_, 0, name_, "");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(*e, 0u);
}

TEST_F(AgreeTest, DifferentEpochsAreTheSameErrorEverywhere) {
  if (comm_.size() < 2) GTEST_SKIP() << "needs 2 processes or more (mpiexec)";
  auto e = AgreeOneAcknowledgedEpoch(&comm_, comm_.rank() == 1 ? 7 : 3, name_, "recover");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), EPROTO);
  const std::string more = comm_.size() > 2 ? " and " + std::to_string(comm_.size() - 2) + " more" : "";
  EXPECT_EQ(e.status().message(), "the stores hold different checkpoints (acknowledged epochs 3 to 7: r0 epoch 3" +
                                      more + ", r1 epoch 7): recover");
}

}  // namespace
}  // namespace dlckpt::control

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  MPI_Init(&argc, &argv);
  int rc = RUN_ALL_TESTS();
  MPI_Finalize();
  return rc;
}

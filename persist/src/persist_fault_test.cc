// Fault injection into every step of a drain and of a restore (FaultEnv):
// ENOSPC, short writes, EIO, a failed fsync, a failed rename, and a crash
// that drops what was not durable. For every step and fault: no epoch that
// looks complete is incomplete or wrong, a failed drain can be retried, and
// a restore never commits data it could not verify.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dlckpt/base/fault_env.h"
#include "persist_test_util.h"

namespace dlckpt::persist {
namespace {

using testing::FaultEnv;
using Fault = FaultEnv::Fault;

constexpr Fault kAll[] = {Fault::kNoSpace, Fault::kShortWrite, Fault::kIO,
                          Fault::kSyncFails, Fault::kRenameFails, Fault::kCrash};

class PersistFaultTest : public PersistFixture {
 protected:
  // On tmpfs: hundreds of drains, each fsyncing; the faults are injected
  // above the file system anyway.
  PersistFaultTest() { tmp_template_ = "/dev/shm/persist-fault-test.XXXXXX"; }

  void SetUp() override {
    PersistFixture::SetUp();
    a_ = &Filled(0, 7);
    b_ = &Filled(1, 7, memfs::Compression::kLz4);
    want_a_ = Read(*a_, "/ckpt/state.bin");
    want_b_ = Read(*b_, "/ckpt/state.bin");
  }

  // Every complete epoch under job_dir_ verifies and restores both ranks to
  // exactly the bytes drained; returns how many were complete.
  int CheckCompleteEpochsAreRight(const std::string& where) {
    auto l = ListEpochs(job_dir_);
    if (!l.ok()) return 0;  // the job directory itself was never made durable
    int complete = 0;
    for (const auto& e : *l) {
      if (e.state != EpochState::kComplete) continue;
      ++complete;
      Status v = VerifyEpoch(e.dir);
      EXPECT_TRUE(v.ok()) << where << ": a complete-looking epoch fails verification: " << v.ToString();
      auto m = ReadManifest(e.dir);
      EXPECT_TRUE(m.ok()) << where;
      if (!m.ok()) continue;
      for (int rank : {0, 1}) {
        memfs::Store& fresh = NewStore(rank);
        Status r = RestoreRank(e.dir, *m, rank, fresh);
        EXPECT_TRUE(r.ok()) << where << ": restore of rank " << rank << ": " << r.ToString();
        if (r.ok()) {
          EXPECT_EQ(Read(fresh, "/ckpt/state.bin"), rank == 0 ? want_a_ : want_b_) << where;
        }
        DropLastStore();
      }
    }
    return complete;
  }

  memfs::Store* a_ = nullptr;
  memfs::Store* b_ = nullptr;
  std::vector<uint8_t> want_a_, want_b_;
};

// Rank 1 drains last and publishes the MANIFEST: its drain runs every kind
// of step (directories, data, fsyncs, its part, the MANIFEST). Rank 0 drains
// first without faults.
TEST_F(PersistFaultTest, EveryStepOfADrain) {
  FaultEnv env;
  int runs = 0;
  for (Fault f : kAll) {
    for (int n = 0;; ++n) {
      const std::string where = std::string(FaultEnv::Name(f)) + " at step " + std::to_string(n);
      job_dir_ = JobDir(dir_, "jobF" + std::to_string(runs++));
      ASSERT_TRUE(Drain(*a_, 7, 0, 2).ok()) << where;
      env.Arm(f, n);
      DrainOptions o;
      o.env = &env;
      o.buffer = 64 << 10;  // several writes per file
      auto r = Drain(*b_, 7, 1, 2, o);
      if (!env.fired()) {
        ASSERT_TRUE(r.ok()) << where << ": " << r.status().ToString();
        EXPECT_EQ(CheckCompleteEpochsAreRight(where), 1) << where;
        fs::remove_all(job_dir_);
        break;
      }
      if (f == Fault::kCrash) env.DropUnsynced();
      // A failed step is reported, never swallowed (a short write is retried).
      if (f != Fault::kShortWrite) {
        EXPECT_FALSE(r.ok()) << where;
      }
      CheckCompleteEpochsAreRight(where);
      // What the fault left behind does not stop the next attempt.
      auto again = Drain(*b_, 7, 1, 2);
      ASSERT_TRUE(again.ok()) << where << ": the retry fails: " << again.status().ToString();
      EXPECT_EQ(CheckCompleteEpochsAreRight(where + ", retried"), 1) << where;
      fs::remove_all(job_dir_);
      ASSERT_LT(n, 10000) << where;
    }
  }
  EXPECT_GT(runs, 6 * 10);
}

// Every read step of a restore, failed or crashed: the store either holds the
// drained bytes committed as the epoch, or no epoch at all.
TEST_F(PersistFaultTest, EveryStepOfARestore) {
  ASSERT_TRUE(Drain(*a_, 7, 0, 2).ok());
  ASSERT_TRUE(Drain(*b_, 7, 1, 2).ok());
  const std::string edir = EpochDir(job_dir_, 7);
  auto m = ReadManifest(edir);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  FaultEnv env;
  for (Fault f : {Fault::kIO, Fault::kCrash}) {
    for (int n = 0;; ++n) {
      const std::string where = std::string(FaultEnv::Name(f)) + " at step " + std::to_string(n);
      env.Arm(f, n);
      memfs::Store& fresh = NewStore(1);
      Status s = RestoreRank(edir, *m, 1, fresh, &env);
      if (!env.fired()) {
        ASSERT_TRUE(s.ok()) << where << ": " << s.ToString();
        EXPECT_EQ(Read(fresh, "/ckpt/state.bin"), want_b_);
        break;
      }
      EXPECT_FALSE(s.ok()) << where;
      EXPECT_EQ(fresh.epochs().acknowledged, 0u) << where << ": committed after a failed read";
      DropLastStore();
      ASSERT_LT(n, 10000) << where;
    }
  }
  // Reading the manifest and listing, faulted at every step: an error, or the
  // right answer.
  for (int n = 0;; ++n) {
    env.Arm(Fault::kIO, n);
    auto l = ListEpochs(job_dir_, &env);
    auto rm = ReadManifest(edir, &env);
    if (!env.fired()) break;
    if (l.ok()) {
      for (const auto& e : *l) {
        if (e.state == EpochState::kComplete) {
          EXPECT_EQ(e.ranks, 2);
        }
      }
    }
    if (rm.ok()) {
      EXPECT_EQ(rm->files.size(), m->files.size());
    }
  }
}

}  // namespace
}  // namespace dlckpt::persist

// The application side of the second level (dlckpt/persist/persist.h): every
// rank drains every Nth protected epoch of its own store to the persistence
// directory in a background thread, and restores its store from a drained
// epoch at dlckpt_init when dlckpt-run asks for it.
//
// Environment (set by dlckpt-run --persist; usable without it):
//   DLCKPT_PERSIST            the directory; unset or empty: no drains
//   DLCKPT_PERSIST_EVERY      drain epochs E with E % N == 0 (default 1)
//   DLCKPT_PERSIST_KEEP       complete drained epochs kept (default 2)
//   DLCKPT_PERSIST_BANDWIDTH  bytes per second per rank (K, M, G suffixes); 0: unlimited
//   DLCKPT_JOB                the job directory's name (default "job")
//   DLCKPT_RESTORE_FROM       an epoch directory to restore the stores from at init
//   DLCKPT_DRAIN_HOLD         E:S, tests: hold the drain of epoch E S seconds
//                             before publishing (dlckpt-run --at drain:E)
//
// Thread safety: a Drainer is driven from the application thread that calls
// the API (OnProtected, Finish); its one worker thread only reads a held
// epoch and releases the hold. Failure: a drain that fails is reported on
// stderr and as an event and leaves its epoch incomplete; the run goes on
// protected by parity.
#ifndef DLCKPT_COORDINATOR_API_PERSIST_H_
#define DLCKPT_COORDINATOR_API_PERSIST_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "dlckpt/base/mpi.h"
#include "dlckpt/base/status.h"
#include "dlckpt/memfs/memfs.h"

namespace dlckpt::api {

class Drainer {
 public:
  // Null when $DLCKPT_PERSIST is unset; EINVAL for a malformed setting.
  // `collective` (the job's ranks) decides together whether an epoch drains.
  static Result<std::unique_ptr<Drainer>> FromEnv(memfs::Store* owner, mpi::Collective* collective);
  ~Drainer();  // waits for a running drain
  Drainer(const Drainer&) = delete;
  Drainer& operator=(const Drainer&) = delete;

  // `epoch` is now the newest protected (acknowledged) epoch of the store.
  // Collective: every rank calls it after every checkpoint (and at
  // finalize). Starts the epoch's drain on every rank if it is due and every
  // rank can start it; otherwise (a drain still running somewhere, a store
  // without room to hold it) none starts, and the skip is reported.
  void OnProtected(uint64_t epoch);
  // Waits for the running drain; its error if it failed.
  Status Finish();

 private:
  Drainer() = default;
  Status Prepare(uint64_t epoch, std::unique_ptr<memfs::Store>* view);
  void Warn(uint64_t epoch, const std::string& what);
  void Run(std::unique_ptr<memfs::Store> view, uint64_t epoch);

  memfs::Store* owner_ = nullptr;
  mpi::Collective* collective_ = nullptr;
  std::string dir_, job_, job_dir_;
  uint64_t every_ = 1;
  int keep_ = 2;  // complete drained epochs kept
  double bandwidth_ = 0;
  int rank_ = 0, ranks_ = 1;
  uint64_t last_due_ = 0;
  std::thread worker_;
  std::atomic<bool> running_{false};
  std::mutex mu_;
  Status last_;  // of the latest finished drain, under mu_
  bool warned_ = false;
};

// At dlckpt_init: if $DLCKPT_RESTORE_FROM names an epoch directory, replaces
// this rank's store by one restored from it (every CRC checked). *restored is
// set when it did. EINVAL if the epoch was drained from another number of ranks.
Status RestoreFromEnv(int rank, int ranks, bool* restored);

}  // namespace dlckpt::api

#endif  // DLCKPT_COORDINATOR_API_PERSIST_H_

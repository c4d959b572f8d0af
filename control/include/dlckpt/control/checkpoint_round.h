// dlckpt/control/checkpoint_round.h — one job-wide checkpoint: the local commit
// on every store, the encode request, the outcome agreed across ranks, and
// the acknowledgement or abort. The application API (dlckpt_checkpoint) and
// dlckpt-ctl's job checkpoints of FUSE mounts both run this one round; only
// how a store is reached differs (RoundStore).
//
// The rule for every case (docs/design.md, "The checkpoint round"):
//  0. Every participant reports its epochs; all derive the same RoundPlan
//     (PlanRound). An epoch P left pending everywhere by an earlier round
//     whose encode outcome was unknown is completed first: encoded again
//     unless some store acknowledged it, then acknowledged. A pending epoch
//     that not every store holds is aborted where it is. Different
//     acknowledged epochs are refused (EPROTO) unless allowed.
//  1. Every participant commits the new epoch E (larger than any epoch any
//     store has seen). If any commit failed, every participant that
//     committed E aborts it: the acknowledged epoch A stays; error.
//  2. Participant 0 asks the service to ENCODE(E, keep = A); all learn the
//     outcome:
//       protected  (DONE ok)           every store acknowledges E;
//       failed     (ERROR, DONE error) every store aborts E; A stays protected;
//       unknown    (sent, no answer)   E stays pending everywhere, since the
//                                      service may still finish its parity;
//                                      the next round completes E (step 0);
//       no service (encoder null)      every store acknowledges E unprotected.
//  Every participant returns the same Status: OK with E, or the agreed error
//  of the lowest failing participant.
// Asynchronous mode splits step 2: Run returns after the encode request went
// out; the outcome is collected (and E acknowledged, aborted or left pending
// by the same rule) at the start of the next Run or by Wait.
// Thread safety: Run and Wait are collective over the Collective's
// communicator and must be called by one thread per process.
#ifndef DLCKPT_CODEC_CHECKPOINT_ROUND_H_
#define DLCKPT_CODEC_CHECKPOINT_ROUND_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "dlckpt/base/mpi.h"
#include "dlckpt/base/status.h"
#include "dlckpt/control/client.h"

namespace dlckpt::control {

// One participant's epochs (as memfs::EpochState).
struct RoundEpochs {
  uint64_t acknowledged = 0;  // 0: none
  uint64_t pending = 0;       // 0: none
  uint64_t next = 1;          // the smallest epoch a commit may take
};

// One participant's store as the round drives it.
class RoundStore {
 public:
  virtual ~RoundStore() = default;
  // Makes the store's files current (flushes buffers) and reports its epochs.
  virtual Result<RoundEpochs> Prepare() = 0;
  virtual Status Commit(uint64_t epoch) = 0;
  virtual Status Acknowledge(uint64_t epoch) = 0;
  virtual Status Abort(uint64_t epoch) = 0;
};

// Asks the codec service to encode an epoch (participant 0 only), in two
// halves so that the encode can run while the application goes on.
class RoundEncoder {
 public:
  virtual ~RoundEncoder() = default;
  // Sends ENCODE(epoch, keep). An error: the service never got it.
  virtual Status Start(uint64_t epoch, uint64_t keep) = 0;
  // The outcome of the encode Start sent, waiting at most the encoder's
  // timeout (then `unknown`).
  virtual EncodeOutcome Await(uint64_t epoch) = 0;
};

// A CodecClient as the round's encoder.
class ClientEncoder final : public RoundEncoder {
 public:
  ClientEncoder(CodecClient* client, int timeout_ms) : client_(client), timeout_ms_(timeout_ms) {}
  Status Start(uint64_t epoch, uint64_t keep) override { return client_->StartEncode(epoch, keep); }
  EncodeOutcome Await(uint64_t epoch) override { return client_->AwaitEncode(epoch, timeout_ms_); }

 private:
  CodecClient* client_;
  int timeout_ms_;
};

// What one round does, decided alike by every participant (step 0).
struct RoundPlan {
  uint64_t finish = 0;         // an interrupted epoch to complete first (0: none)
  bool finish_encode = false;  // ... which no store acknowledged: encode it again
  std::vector<size_t> drop;    // participants whose pending epoch is aborted first
  uint64_t epoch = 0;          // the new epoch
  uint64_t acknowledged = 0;   // participant 0's acknowledged epoch: the encodes keep its parity
  std::string note;            // what happens to an interrupted epoch, for humans
};

// What PlanRound tells the user of stores with different acknowledged epochs.
inline constexpr std::string_view kOneCheckpointRemedy =
    "a job's stores hold one checkpoint (after a node loss dlckpt-run restores one everywhere)";

// Step 0 as a pure function of every participant's epochs; names[i] names
// participant i in messages. EPROTO when the stores disagree: about an
// interrupted epoch, or (unless allow_mismatch) about the acknowledged one,
// then with `mismatch_remedy` (CheckOneAcknowledgedEpoch).
Result<RoundPlan> PlanRound(const std::vector<RoundEpochs>& epochs, const std::vector<std::string>& names,
                            bool allow_mismatch, std::string_view mismatch_remedy = kOneCheckpointRemedy);

// Collective over `c`: the acknowledged epoch every participant's store
// holds (`acknowledged`, 0: none; `name` names the store), or on every
// participant CheckOneAcknowledgedEpoch's error (dlckpt/control/acknowledged.h)
// naming the stores, with `remedy`; an MPI error as mpi::Collective reports it.
Result<uint64_t> AgreeOneAcknowledgedEpoch(mpi::Collective* c, uint64_t acknowledged, const std::string& name,
                                           std::string_view remedy);

struct RoundOptions {
  bool allow_mismatch = false;
  // Asynchronous encode: Run returns once every store committed the new
  // epoch and its encode was sent; the next Run (or Wait) collects the
  // outcome first. Synchronous: Run returns once the epoch is protected.
  bool async = false;
  // Participant 0's notes for humans (a completed or dropped epoch).
  std::function<void(const std::string&)> log;
};

// The checkpoint rounds of one job, in sequence: keeps the epoch whose encode
// is in flight (asynchronous mode) between rounds.
class CheckpointRound final {
 public:
  // `encoder`: participant 0's, null elsewhere and when there is no service.
  // `name` names this participant in messages. Nothing is owned.
  CheckpointRound(mpi::Collective* comm, RoundStore* store, RoundEncoder* encoder, std::string name,
                  RoundOptions options = {})
      : c_(comm), store_(store), encoder_(encoder), name_(std::move(name)), o_(std::move(options)) {}

  // Runs one round (see the file comment): returns the new epoch, protected
  // in synchronous mode, committed and being encoded in asynchronous mode.
  // Asynchronous mode first completes the encode in flight (back-pressure);
  // if that encode failed, the error is logged and kept for Wait, and the new
  // round goes on (its epoch supersedes the failed one).
  // `local`: this participant's own readiness (the application API passes
  // the outcome of storing its memory regions): a failure on any participant
  // fails the round everywhere before anything is committed, with that
  // participant's message. It travels in the round's first collective.
  Result<uint64_t> Run(const Status& local = Status::OK());
  // The same round on a plan the caller made: every participant passes the
  // plan PlanRound derived from every participant's epochs as Prepare
  // reports them, and `mine`, its own (for a caller that gathers more than
  // the epochs, such as dlckpt-ctl's checks of the mounts; Prepare is not
  // called). No encode may be in flight (synchronous mode, or after Wait):
  // EBUSY on every participant otherwise.
  Result<uint64_t> Run(const RoundPlan& plan, const RoundEpochs& mine);
  // Completes the encode in flight, if any: returns the protected epoch (the
  // acknowledged one; 0: none yet), or the error of the encode collected now
  // or by an earlier Run since the last Wait.
  Result<uint64_t> Wait();
  // Switches mode between rounds; collective only in that every participant
  // must use the same mode in a round.
  void set_async(bool async) { o_.async = async; }
  bool async() const { return o_.async; }
  // The newest epoch this participant knows to be protected (0: none).
  uint64_t protected_epoch() const { return protected_; }
  // The epoch committed whose encode is in flight (0: none).
  uint64_t in_flight() const { return in_flight_; }
  // Seconds the last Run waited for the previous encode.
  double last_wait_seconds() const { return last_wait_s_; }

 private:
  // The encode outcome of participant 0, agreed: OK, or the error, with
  // *unknown set on every participant when the outcome is unknown.
  Status AgreeOutcome(const EncodeOutcome& mine, const std::string& what, bool* unknown);
  // Participant 0 starts the encode of `epoch` (keeping `keep`); agreed.
  Status AgreeStart(uint64_t epoch, uint64_t keep, const std::string& what);
  // Start and collect, for the completion of an interrupted epoch.
  Status AgreeEncode(uint64_t epoch, uint64_t keep, const std::string& what, bool* unknown);
  // Collects the outcome of in_flight_ and acknowledges, aborts or leaves it
  // pending on every store; emits events::CkptEnd.
  Status Complete();

  mpi::Collective* c_;
  RoundStore* store_;
  RoundEncoder* encoder_;
  std::string name_;
  std::vector<std::string> names_;  // every process's name_, from the first round
  RoundOptions o_;
  uint64_t in_flight_ = 0;
  uint64_t protected_ = 0;
  double last_wait_s_ = 0;
  Status deferred_;  // an asynchronous encode's failure, for Wait
  // Synchronous mode: participant 0's start of the encode in flight, whose
  // failure Complete agrees on with the outcome (one agreement, not two).
  Status started_;
};

}  // namespace dlckpt::control

#endif  // DLCKPT_CODEC_CHECKPOINT_ROUND_H_

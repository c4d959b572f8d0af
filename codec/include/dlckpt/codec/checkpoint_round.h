// dlckpt/codec/checkpoint_round.h — one job-wide checkpoint: the local commit
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
// Thread safety: Run is collective over the Collective's communicator and
// must be called by one thread per process.
#ifndef DLCKPT_CODEC_CHECKPOINT_ROUND_H_
#define DLCKPT_CODEC_CHECKPOINT_ROUND_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dlckpt/base/mpi.h"
#include "dlckpt/base/status.h"
#include "dlckpt/codec/client.h"

namespace dlckpt::codec {

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

// Asks the codec service to encode an epoch (participant 0 only).
class RoundEncoder {
 public:
  virtual ~RoundEncoder() = default;
  virtual EncodeOutcome Encode(uint64_t epoch, uint64_t keep) = 0;
};

// A CodecClient as the round's encoder.
class ClientEncoder final : public RoundEncoder {
 public:
  ClientEncoder(CodecClient* client, int timeout_ms) : client_(client), timeout_ms_(timeout_ms) {}
  EncodeOutcome Encode(uint64_t epoch, uint64_t keep) override {
    return client_->Encode(epoch, keep, timeout_ms_);
  }

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
  std::string note;            // what happens to an interrupted epoch, for humans
};

// Step 0 as a pure function of every participant's epochs; names[i] names
// participant i in messages. EPROTO when the stores disagree.
Result<RoundPlan> PlanRound(const std::vector<RoundEpochs>& epochs, const std::vector<std::string>& names,
                            bool allow_mismatch);

struct RoundOptions {
  bool allow_mismatch = false;
  // "ckpt-begin E" / "ckpt-end E code" go to the event log under this source.
  std::string event_source = "app";
  // Participant 0's notes for humans (a completed or dropped epoch).
  std::function<void(const std::string&)> log;
};

class CheckpointRound final {
 public:
  // `encoder`: participant 0's, null elsewhere and when there is no service.
  // `name` names this participant in messages. Nothing is owned.
  CheckpointRound(mpi::Collective* comm, RoundStore* store, RoundEncoder* encoder, std::string name,
                  RoundOptions options = {})
      : c_(comm), store_(store), encoder_(encoder), name_(std::move(name)), o_(std::move(options)) {}

  // Runs one round (see the file comment); returns the acknowledged epoch.
  Result<uint64_t> Run();

 private:
  // The encode outcome of participant 0, agreed: OK, or the error, with
  // *unknown set on every participant when the outcome is unknown.
  Status AgreeEncode(uint64_t epoch, uint64_t keep, const std::string& what, bool* unknown);

  mpi::Collective* c_;
  RoundStore* store_;
  RoundEncoder* encoder_;
  std::string name_;
  RoundOptions o_;
};

}  // namespace dlckpt::codec

#endif  // DLCKPT_CODEC_CHECKPOINT_ROUND_H_

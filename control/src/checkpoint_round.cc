// One job-wide checkpoint: see dlckpt/control/checkpoint_round.h.
#include "dlckpt/control/checkpoint_round.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "dlckpt/base/events.h"
#include "dlckpt/control/acknowledged.h"

namespace dlckpt::control {

Result<RoundPlan> PlanRound(const std::vector<RoundEpochs>& epochs, const std::vector<std::string>& names,
                            bool allow_mismatch, std::string_view mismatch_remedy) {
  if (epochs.empty()) return Status::InvalidArgument("no stores to checkpoint");
  RoundPlan plan;
  plan.acknowledged = epochs[0].acknowledged;
  std::vector<uint64_t> acked;
  uint64_t p = 0;
  for (const auto& e : epochs) {
    p = std::max(p, e.pending);
    acked.push_back(e.acknowledged);
  }
  if (p > 0) {
    bool holds_all = true, acked_somewhere = false;
    size_t missing = epochs.size();
    for (size_t i = 0; i < epochs.size(); ++i) {
      if (epochs[i].acknowledged == p) acked_somewhere = true;
      if (epochs[i].acknowledged != p && epochs[i].pending != p) {
        holds_all = false;
        if (missing == epochs.size()) missing = i;
      }
    }
    if (holds_all) {
      plan.finish = p;
      plan.finish_encode = !acked_somewhere;
      acked.assign(epochs.size(), p);
      plan.note = "completing epoch " + std::to_string(p) + ", left pending by an interrupted checkpoint" +
                  (acked_somewhere ? " after it was encoded" : " (encoding it again)");
    } else if (acked_somewhere) {
      return Status::Error(
          EPROTO, "the job's stores disagree about epoch " + std::to_string(p) + ": some acknowledged it, but " +
                      names[missing] + " holds acknowledged epoch " + std::to_string(epochs[missing].acknowledged) +
                      " and pending epoch " + std::to_string(epochs[missing].pending) +
                      "; recover the job (dlckpt-run restores one epoch everywhere) before checkpointing");
    } else {
      std::string dropped;
      for (size_t i = 0; i < epochs.size(); ++i) {
        if (epochs[i].pending == 0) continue;
        plan.drop.push_back(i);
        dropped += (dropped.empty() ? "" : ", ") + names[i] + " epoch " + std::to_string(epochs[i].pending);
      }
      plan.note = "dropping pending epochs that not every store holds (an interrupted checkpoint): " + dropped;
    }
  }
  if (plan.finish == 0 && !allow_mismatch) {
    DLCKPT_RETURN_IF_ERROR(CheckOneAcknowledgedEpoch(acked, names, mismatch_remedy));
  }
  uint64_t e = 0;
  for (size_t i = 0; i < epochs.size(); ++i) {
    e = std::max({e, epochs[i].next, acked[i] + 1, epochs[i].pending + 1});
  }
  plan.epoch = e;
  return plan;
}

Status CheckpointRound::AgreeOutcome(const EncodeOutcome& mine, const std::string& what, bool* unknown) {
  Status agreed = c_->Agree(mine.status, what);
  *unknown = false;
  if (!agreed.ok()) {
    auto any = c_->Max(mine.unknown ? 1 : 0);
    *unknown = !any.ok() || *any != 0;
  }
  return agreed;
}

Status CheckpointRound::AgreeStart(uint64_t epoch, uint64_t keep, const std::string& what) {
  Status started;
  if (encoder_ != nullptr) started = encoder_->Start(epoch, keep);
  return c_->Agree(started, what);
}

Status CheckpointRound::AgreeEncode(uint64_t epoch, uint64_t keep, const std::string& what, bool* unknown) {
  *unknown = false;
  DLCKPT_RETURN_IF_ERROR(AgreeStart(epoch, keep, what));
  EncodeOutcome out;
  if (encoder_ != nullptr) out = encoder_->Await(epoch);
  return AgreeOutcome(out, what, unknown);
}

Status CheckpointRound::Complete() {
  const uint64_t e = in_flight_;
  if (e == 0) return Status::OK();
  in_flight_ = 0;
  const std::string es = std::to_string(e);
  EncodeOutcome out;
  if (encoder_ != nullptr) out = started_.ok() ? encoder_->Await(e) : EncodeOutcome{started_};
  started_ = Status::OK();
  bool unknown = false;
  Status outcome = AgreeOutcome(out, "checkpoint of epoch " + es, &unknown);
  if (outcome.ok()) {
    outcome = c_->Agree(store_->Acknowledge(e), "acknowledgement of epoch " + es);
    if (outcome.ok()) protected_ = e;
  } else if (unknown) {
    outcome = Status::Error(outcome.code(), outcome.message() + "; epoch " + es +
                                                " stays pending on every store (the codec may still "
                                                "finish it): the next checkpoint completes it");
  } else {
    Status d = c_->Agree(store_->Abort(e), "dropping epoch " + es);
    if (!d.ok()) outcome = Status::Error(outcome.code(), outcome.message() + "; then " + d.message());
  }
  if (c_->rank() == 0) events::Emit(events::CkptEnd(e, outcome.code()));
  return outcome;
}

Result<uint64_t> CheckpointRound::Wait() {
  Status now = Complete();
  Status earlier = deferred_;
  deferred_ = Status::OK();
  if (!now.ok()) return now;
  if (!earlier.ok()) return earlier;
  return protected_;
}

Result<uint64_t> CheckpointRound::Run(const Status& local) {
  const size_t me = static_cast<size_t>(c_->rank());
  // Back-pressure: the previous epoch's encode must end before the next.
  last_wait_s_ = 0;
  if (in_flight_ != 0) {
    const uint64_t prev_epoch = in_flight_;
    const std::string prev = std::to_string(prev_epoch);
    const auto t0 = std::chrono::steady_clock::now();
    Status s = Complete();
    last_wait_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (me == 0) {
      events::Emit(events::CkptWait(prev_epoch, last_wait_s_));
      if (!s.ok() && o_.log) o_.log("the encode of epoch " + prev + " did not protect it: " + s.message());
    }
    if (!s.ok() && deferred_.ok()) deferred_ = s;
  }

  // 0. Every store's epochs, and the plan all derive from them alike. One
  // collective: a flag (Prepare succeeded) and the epochs; only when a flag
  // is down does an agreement carry the failing process's message. The
  // names never change: gathered at the first round.
  Result<RoundEpochs> mine = local.ok() ? store_->Prepare() : Result<RoundEpochs>(local);
  std::string blob(1 + sizeof(RoundEpochs), '\0');
  blob[0] = mine.ok() ? 1 : 0;
  if (mine.ok()) std::memcpy(blob.data() + 1, &*mine, sizeof(RoundEpochs));
  DLCKPT_ASSIGN_OR_RETURN(std::vector<std::string> blobs, c_->AllgatherFixed(blob));
  const bool every = std::all_of(blobs.begin(), blobs.end(), [](const std::string& b) { return !b.empty() && b[0] == 1; });
  if (!every) {
    DLCKPT_RETURN_IF_ERROR(c_->Agree(mine.status(), "checkpoint"));
    return Status::Error(EPROTO, "checkpoint: a process reported no epochs, yet agreed");
  }
  if (names_.empty()) {
    DLCKPT_ASSIGN_OR_RETURN(names_, c_->Allgather(name_));
  }
  std::vector<RoundEpochs> all(blobs.size());
  for (size_t i = 0; i < blobs.size(); ++i) {
    if (blobs[i].size() != 1 + sizeof(RoundEpochs)) return Status::Error(EPROTO, "checkpoint: malformed epochs");
    std::memcpy(&all[i], blobs[i].data() + 1, sizeof(RoundEpochs));
  }
  DLCKPT_ASSIGN_OR_RETURN(RoundPlan plan, PlanRound(all, names_, o_.allow_mismatch));
  return Run(plan, *mine);
}

Result<uint64_t> CheckpointRound::Run(const RoundPlan& plan, const RoundEpochs& mine) {
  const size_t me = static_cast<size_t>(c_->rank());
  if (in_flight_ != 0) {
    return Status::Busy("checkpoint: the encode of epoch " + std::to_string(in_flight_) +
                        " is in flight; its outcome comes before a new plan");
  }
  if (me == 0 && !plan.note.empty() && o_.log) o_.log(plan.note);
  if (!plan.drop.empty()) {
    Status dropped;
    if (std::find(plan.drop.begin(), plan.drop.end(), me) != plan.drop.end()) dropped = store_->Abort(mine.pending);
    DLCKPT_RETURN_IF_ERROR(c_->Agree(dropped, "dropping an interrupted checkpoint"));
  }
  const uint64_t acked = plan.acknowledged;
  protected_ = std::max(protected_, acked);
  if (plan.finish != 0) {
    const std::string what = "completing interrupted epoch " + std::to_string(plan.finish);
    if (plan.finish_encode) {
      bool unknown = false;
      DLCKPT_RETURN_IF_ERROR(AgreeEncode(plan.finish, acked, what, &unknown));
    }
    Status done;
    if (mine.pending == plan.finish) done = store_->Acknowledge(plan.finish);
    DLCKPT_RETURN_IF_ERROR(c_->Agree(done, what));
    protected_ = plan.finish;
  }

  // 1. Commit.
  const uint64_t e = plan.epoch;
  const std::string es = std::to_string(e);
  if (me == 0) events::Emit(events::CkptBegin(e));
  Status committed = store_->Commit(e);
  Status outcome = c_->Agree(committed, "commit of epoch " + es);
  if (me == 0) events::Emit(events::CkptCommit(e, outcome.code()));
  // 2. Start the encode; then collect it (now, or in the next round). In
  // synchronous mode the start's outcome is agreed on with the encode's
  // (Complete): a failed start drops the epoch there, as a failed encode.
  const uint64_t keep = std::max(acked, plan.finish);
  if (outcome.ok() && o_.async) outcome = AgreeStart(e, keep, "checkpoint of epoch " + es);
  if (!outcome.ok()) {
    Status dropped = committed.ok() ? store_->Abort(e) : Status::OK();
    Status d = c_->Agree(dropped, "dropping epoch " + es);
    if (!d.ok()) outcome = Status::Error(outcome.code(), outcome.message() + "; then " + d.message());
    if (me == 0) events::Emit(events::CkptEnd(e, outcome.code()));
    return outcome;
  }
  in_flight_ = e;
  if (o_.async) return e;
  if (encoder_ != nullptr) started_ = encoder_->Start(e, keep);
  DLCKPT_RETURN_IF_ERROR(Complete());
  return e;
}

}  // namespace dlckpt::control

// api_persist.cc — the ranks' drains and restores (see api_persist.h).
#include "api_persist.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "dlckpt/base/env.h"
#include "dlckpt/base/events.h"
#include "dlckpt/base/progress.h"
#include "dlckpt/base/units.h"
#include "dlckpt/intercept/intercept.h"
#include "dlckpt/persist/persist.h"

namespace dlckpt::api {
namespace {

std::string EnvStr(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

Result<std::unique_ptr<Drainer>> Drainer::FromEnv(memfs::Store* owner, mpi::Collective* collective) {
  std::string dir = EnvStr("DLCKPT_PERSIST");
  if (dir.empty() || owner == nullptr) return std::unique_ptr<Drainer>();
  std::unique_ptr<Drainer> d(new Drainer());
  d->owner_ = owner;
  d->dir_ = dir;
  d->job_ = EnvStr("DLCKPT_JOB").empty() ? "job" : EnvStr("DLCKPT_JOB");
  d->job_dir_ = persist::JobDir(dir, d->job_);
  d->collective_ = collective;
  d->rank_ = collective != nullptr ? collective->rank() : 0;
  d->ranks_ = collective != nullptr ? collective->size() : 1;
  std::string every = EnvStr("DLCKPT_PERSIST_EVERY");
  if (!every.empty()) {
    char* end = nullptr;
    long long n = std::strtoll(every.c_str(), &end, 10);
    if (end == every.c_str() || *end != '\0' || n < 1) {
      return Status::InvalidArgument("DLCKPT_PERSIST_EVERY=" + every + ": expected a positive number of epochs");
    }
    d->every_ = static_cast<uint64_t>(n);
  }
  std::string keep = EnvStr("DLCKPT_PERSIST_KEEP");
  if (!keep.empty()) {
    d->keep_ = std::atoi(keep.c_str());
    if (d->keep_ < 1) return Status::InvalidArgument("DLCKPT_PERSIST_KEEP=" + keep + ": expected at least 1");
  }
  std::string bw = EnvStr("DLCKPT_PERSIST_BANDWIDTH");
  if (!bw.empty()) {
    auto b = ParseSize(bw);
    if (!b.ok()) return b.status().Prefixed("DLCKPT_PERSIST_BANDWIDTH");
    d->bandwidth_ = static_cast<double>(*b);
  }
  return d;
}

Drainer::~Drainer() { (void)Finish(); }

// Hold `epoch`, load a view of it and check the store has room to keep it;
// on failure nothing stays held.
Status Drainer::Prepare(uint64_t epoch, std::unique_ptr<memfs::Store>* view) {
  // The epoch's blocks stay put until Release, and the view loads its file
  // table now, while the epoch is the acknowledged one.
  DLCKPT_RETURN_IF_ERROR(owner_->Hold(epoch));
  auto v = memfs::Store::Attach(owner_->name(), memfs::AttachMode::kReadOnly);
  Status s = v.status();
  if (s.ok()) s = (*v)->View(epoch);
  // Holding E keeps up to one more checkpoint's blocks in use while the
  // application writes the next ones: only with room for two more copies.
  if (s.ok()) {
    auto files = (*v)->List("/");
    s = files.status();
    uint64_t blocks = 0;
    if (files.ok()) {
      for (const auto& f : *files) blocks += f.blocks;
    }
    const uint64_t free_blocks = owner_->stats().blocks_free;
    if (s.ok() && free_blocks < 2 * blocks) {
      s = Status::NoSpace("store " + owner_->name() + " has " + std::to_string(free_blocks) +
                          " free blocks; holding epoch " + std::to_string(epoch) +
                          " while the next ones are written needs " + std::to_string(2 * blocks) +
                          " (raise the store capacity, dlckpt-run --capacity)");
    }
  }
  if (!s.ok()) {
    (void)owner_->Release(epoch);
    return s;
  }
  *view = std::move(*v);
  return Status::OK();
}

void Drainer::Warn(uint64_t epoch, const std::string& what) {
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    first = !warned_;
    warned_ = true;
  }
  // Every rank's first warning, and all of rank 0's: a full or read-only
  // directory is not said a thousand times.
  if (first || rank_ == 0) {
    std::fprintf(stderr, "dlckpt: rank %d: drain of epoch %llu %s\n", rank_, static_cast<unsigned long long>(epoch),
                 what.c_str());
  }
}

void Drainer::OnProtected(uint64_t epoch) {
  const uint64_t due = epoch != 0 && epoch % every_ == 0 && epoch > last_due_ ? epoch : 0;
  if (due != 0) last_due_ = due;
  const bool busy = due != 0 && running_.load();
  std::unique_ptr<memfs::Store> view;
  Status s;
  if (due != 0 && !busy) {
    if (worker_.joinable()) worker_.join();
    s = Prepare(due, &view);
  }
  // Every rank drains the epoch or none does (a part drained alone never
  // completes an epoch): one vote per checkpoint, 2 * due + ready, whose
  // minimum and maximum agree only if every rank is due for the same epoch
  // and ready.
  const uint64_t vote = 2 * due + (due != 0 && !busy && s.ok() ? 1 : 0);
  uint64_t lo = vote, hi = vote;
  if (collective_ != nullptr) {
    auto mn = collective_->Min(vote);
    auto mx = collective_->Max(vote);
    lo = mn.ok() ? *mn : 0;
    hi = mx.ok() ? *mx : 0;
  }
  const bool go = due != 0 && lo == hi && (lo & 1) == 1;
  if (!go) {
    if (view) {
      view.reset();
      (void)owner_->Release(due);
    }
    if (due == 0) return;
    if (!s.ok()) {
      events::Emit(events::DrainEnd(due, rank_, s.code(), 0, 0, false));
      Warn(due, "not started, the run goes on protected by parity: " + s.ToString());
      return;
    }
    events::Emit(events::DrainSkip(due, rank_));
    if (rank_ == 0) {
      std::fprintf(stderr, "dlckpt: drain of epoch %llu skipped: %s\n", static_cast<unsigned long long>(due),
                   busy ? "the drain of an earlier epoch still runs"
                        : "the drain of an earlier epoch still runs on another rank, or a rank cannot hold it");
    }
    return;
  }
  running_ = true;
  worker_ = std::thread(&Drainer::Run, this, std::move(view), due);
}

void Drainer::Run(std::unique_ptr<memfs::Store> view, uint64_t epoch) {
  events::Emit(events::DrainBegin(epoch, rank_));
  persist::DrainOptions o;
  o.bandwidth = bandwidth_;
  // DLCKPT_DRAIN_HOLD=E:S (dlckpt-run --at drain:E): hold that drain S seconds
  // before publishing, so that a kill lands inside it.
  o.hold_before_publish = events::HoldSeconds("DLCKPT_DRAIN_HOLD", epoch);
  // Rank 0 tells how a long drain goes (dlckpt/base/progress.h).
  std::unique_ptr<Progress> progress;
  if (rank_ == 0) {
    o.progress = [&](uint64_t done, uint64_t total) {
      if (!progress) {
        progress = std::make_unique<Progress>("dlckpt: rank 0 draining epoch " + std::to_string(epoch) + " to " +
                                                  job_dir_,
                                              total);
      }
      progress->Update(done);
    };
  }
  auto r = persist::DrainRank(*view, job_dir_, job_, epoch, rank_, ranks_, o);
  progress.reset();
  view.reset();
  (void)owner_->Release(epoch);
  Status s = r.status();
  // The drain ends when the epoch is durable and published; removing the
  // epochs beyond --persist-keep follows it and is timed apart (its cost is
  // the file system's: on ext4 mounted with `discard`, 0.05-0.2 s per
  // 128 MiB here, as long as the drain itself; bench/README.md).
  events::Emit(events::DrainEnd(epoch, rank_, s.code(), s.ok() ? r->bytes : 0, s.ok() ? r->seconds : 0.0,
                                s.ok() && r->published));
  if (s.ok() && r->published) {
    const auto t0 = std::chrono::steady_clock::now();
    auto pruned = persist::Prune(job_dir_, keep_);
    if (!pruned.ok()) {
      std::fprintf(stderr, "dlckpt: pruning %s: %s\n", job_dir_.c_str(), pruned.status().ToString().c_str());
    } else if (!pruned->empty()) {
      events::Emit(events::Prune(epoch, rank_, pruned->size(),
                                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()));
    }
  }
  if (!s.ok()) Warn(epoch, "to " + job_dir_ + " failed, the run goes on protected by parity: " + s.ToString());
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_ = s;
  }
  running_ = false;
}

Status Drainer::Finish() {
  if (worker_.joinable()) worker_.join();
  std::lock_guard<std::mutex> lock(mu_);
  return last_;
}

Status RestoreFromEnv(int rank, int ranks, bool* restored) {
  *restored = false;
  std::string edir = EnvStr("DLCKPT_RESTORE_FROM");
  if (edir.empty()) return Status::OK();
  DLCKPT_ASSIGN_OR_RETURN(persist::Manifest m, persist::ReadManifest(edir));
  if (m.ranks != ranks) {
    return Status::InvalidArgument("drained epoch " + edir + " holds " + std::to_string(m.ranks) +
                                   " ranks; this job has " + std::to_string(ranks));
  }
  DLCKPT_ASSIGN_OR_RETURN(std::string name, intercept::ProcessStoreName());
  DLCKPT_RETURN_IF_ERROR(intercept::DetachStore());
  Status u = Env::Default()->UnlinkShm(name);
  if (!u.ok() && u.code() != ENOENT) return u.Prefixed("removing store " + name + " before the restore");
  DLCKPT_ASSIGN_OR_RETURN(memfs::Store * store, intercept::ProcessStore());
  DLCKPT_RETURN_IF_ERROR(persist::RestoreRank(edir, m, rank, *store).Prefixed("restoring " + name + " from " + edir));
  *restored = true;
  return Status::OK();
}

}  // namespace dlckpt::api

// The application API (dlckpt/dlckpt.h): init, checkpoint, restarted epoch,
// finalize. Every rank owns its memfs store through libintercept's process
// store; rank 0 talks to the codec service through the CodecClient; a
// checkpoint is one CheckpointRound (dlckpt/control/checkpoint_round.h). Waits
// never spin (dlckpt/base/mpi.h; docs/design.md, invariant 5).
#include <mpi.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "dlckpt/dlckpt.h"
#include "dlckpt/base/env.h"
#include "dlckpt/base/events.h"
#include "dlckpt/base/mpi.h"
#include "dlckpt/base/mpi_libraries.h"
#include "dlckpt/base/names.h"
#include "dlckpt/base/version.h"
#include "dlckpt/control/checkpoint_round.h"
#include "dlckpt/control/client.h"
#include "dlckpt/intercept/intercept.h"
#include "dlckpt/memfs/memfs.h"
#include "api_boundary.h"
#include "api_memory.h"
#include "api_persist.h"

namespace dlckpt::api {
namespace {

struct State {
  bool initialized = false;
  MPI_Comm comm = MPI_COMM_NULL;
  std::unique_ptr<mpi::Collective> collective;
  memfs::Store* store = nullptr;
  std::unique_ptr<control::RoundStore> round_store;
  std::unique_ptr<control::CodecClient> service;     // rank 0, when under dlckpt-run
  std::unique_ptr<control::RoundEncoder> encoder;    // rank 0, over `service`
  std::unique_ptr<control::CheckpointRound> round;   // the job's checkpoints
  std::unique_ptr<Drainer> drainer;                // with $DLCKPT_PERSIST: the second level
  long long restarted_epoch = 0;
  bool with_service = false;  // under dlckpt-run (DLCKPT_RENDEZVOUS set), on every rank
};

State& S() {
  static State* const s = new State();
  return *s;
}

// "The application started writing checkpoint E" for dlckpt-run's
// phase:write failure injection: reported once per checkpoint, on the first
// write into memfs after the previous checkpoint. With DLCKPT_WRITE_HOLD=E:S
// (set by dlckpt-run for --at phase:write:E) the writing thread then waits S
// seconds, once per process, so that the kill lands inside the write phase
// however fast the checkpoint would be.
std::atomic<uint64_t> g_next_epoch{1};
std::atomic<int> g_rank{0};
std::atomic<bool> g_write_reported{false};  // for g_next_epoch
std::atomic<bool> g_write_held{false};
void OnFirstWrite() {
  g_write_reported = true;
  const uint64_t epoch = g_next_epoch.load();
  events::Emit(events::WriteBegin(epoch, g_rank.load()));
  const double hold = events::HoldSeconds("DLCKPT_WRITE_HOLD", epoch);
  if (hold > 0 && !g_write_held.exchange(true)) Env::Default()->SleepForMicros(static_cast<int64_t>(hold * 1e6));
}

int EnvInt(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : dflt;
}

// A flag in the environment: 1, true or yes.
bool EnvFlag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && (std::strcmp(v, "1") == 0 || std::strcmp(v, "true") == 0 || std::strcmp(v, "yes") == 0);
}

// DLCKPT_ENCODE: "sync" (also unset or empty) or "async".
Result<bool> EnvAsync() {
  const char* v = std::getenv("DLCKPT_ENCODE");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "sync") == 0) return false;
  if (std::strcmp(v, "async") == 0) return true;
  return Status::InvalidArgument(std::string("DLCKPT_ENCODE=") + v + ": expected sync or async");
}

// The process store as the checkpoint round drives it.
class ProcessRoundStore final : public control::RoundStore {
 public:
  explicit ProcessRoundStore(memfs::Store* store) : store_(store) {}
  Result<control::RoundEpochs> Prepare() override {
    DLCKPT_RETURN_IF_ERROR(intercept::FlushStreams());
    memfs::EpochState e = store_->epochs();
    return control::RoundEpochs{e.acknowledged, e.pending, e.next};
  }
  // A refusal (a write into the store had failed: "Failed writes" in
  // dlckpt/memfs/memfs.h) is reported to dlckpt-run for its summary.
  Status Commit(uint64_t epoch) override {
    Status s = store_->Commit(epoch).status();
    if (!s.ok()) {
      events::Emit(events::CkptRefused(epoch, g_rank.load(), s.ToString()));
    }
    return s;
  }
  Status Acknowledge(uint64_t epoch) override { return store_->Acknowledge(epoch); }
  Status Abort(uint64_t) override { return store_->AbortPending(); }

 private:
  memfs::Store* store_;
};

// ENOTSUP naming both libraries and the fix when the process maps MPICH's
// and Open MPI's library (dlckpt/base/mpi_libraries.h): checked before any
// MPI call, whose handle would mean something else in the other library.
Status CheckOneMpi() {
  char msg[3 * PATH_MAX];
  if (dlckpt_two_mpi_libraries(DLCKPT_MPI_FLAVOR, msg, sizeof msg)) {
    return Status::Unsupported(std::string("dlckpt_init: ") + msg);
  }
  return Status::OK();
}

Status Init(MPI_Comm comm) {
  State& st = S();
  if (st.initialized) return Status::Error(EALREADY, "dlckpt_init: already initialised");
  int flag = 0;
  MPI_Initialized(&flag);
  if (!flag) return Status::InvalidArgument("dlckpt_init: call MPI_Init first");
  auto async = EnvAsync();
  if (!async.ok()) return async.status().Prefixed("dlckpt_init");
  DLCKPT_RETURN_IF_ERROR(mpi::Check(MPI_Comm_dup(comm, &st.comm), "MPI_Comm_dup"));
  int rank = 0;
  MPI_Comm_rank(st.comm, &rank);
  st.collective = std::make_unique<mpi::Collective>(st.comm, "rank " + std::to_string(rank));
  mpi::Collective& c = *st.collective;

  // A relaunch from a drained epoch (dlckpt-run --restart-from, or a failure
  // parity could not cover): every rank first restores its store from it.
  bool restored = false;
  Status restore = RestoreFromEnv(rank, c.size(), &restored);
  DLCKPT_RETURN_IF_ERROR(c.Agree(restore, "dlckpt_init"));

  // Every rank's store, and the epoch it holds.
  Status mine;
  uint64_t acked = 0;
  std::string store_name;
  auto store = intercept::ProcessStore();
  memfs::EpochState ep;
  if (!store.ok()) {
    mine = store.status();
  } else {
    st.store = *store;
    store_name = st.store->name();
    ep = st.store->epochs();
  }
  DLCKPT_RETURN_IF_ERROR(c.Agree(mine, "dlckpt_init"));

  // Checkpoints of an earlier run are resumed only when asked: DLCKPT_RESUME=1
  // (dlckpt-run sets it when it relaunches after a recovery, and with
  // --resume). Otherwise every store that holds one is removed and created
  // empty, so that a second run, or another application, never starts from
  // what an earlier one left.
  DLCKPT_ASSIGN_OR_RETURN(uint64_t newest_held, c.Max(std::max(ep.acknowledged, ep.pending)));
  if (newest_held != 0 && !EnvFlag("DLCKPT_RESUME") && !restored) {
    if (c.rank() == 0) {
      std::fprintf(stderr,
                   "dlckpt: the stores (%s, ...) hold epoch %llu of an earlier run; not resuming it "
                   "(DLCKPT_RESUME=1 or dlckpt-run --resume restarts from it): starting from empty stores\n",
                   store_name.c_str(), static_cast<unsigned long long>(newest_held));
    }
    if (ep.acknowledged != 0 || ep.pending != 0) {
      st.store = nullptr;
      mine = intercept::DetachStore();
      if (mine.ok()) mine = Env::Default()->UnlinkShm(store_name);
      if (mine.ok()) {
        auto fresh = intercept::ProcessStore();
        if (fresh.ok()) st.store = *fresh;
        mine = fresh.status();
      }
      mine = mine.Prefixed("removing the earlier run's store " + store_name);
      ep = memfs::EpochState{};
    }
    DLCKPT_RETURN_IF_ERROR(c.Agree(mine, "dlckpt_init"));
  }
  if (ep.pending != 0) mine = st.store->AbortPending();  // never acknowledged
  acked = ep.acknowledged;
  DLCKPT_RETURN_IF_ERROR(c.Agree(mine, "dlckpt_init"));
  auto one = control::AgreeOneAcknowledgedEpoch(&c, acked, store_name,
                                                "run under dlckpt-run, which restores one epoch everywhere");
  if (!one.ok()) return one.status().Prefixed("dlckpt_init");
  st.restarted_epoch = static_cast<long long>(*one);

  // Rank 0 learns the layout and connects to the service.
  DLCKPT_ASSIGN_OR_RETURN(std::vector<std::string> stores, c.Allgather(store_name));
  Status connected;
  const char* rendezvous = std::getenv("DLCKPT_RENDEZVOUS");
  st.with_service = rendezvous != nullptr && *rendezvous != '\0';
  if (c.rank() == 0 && rendezvous != nullptr && *rendezvous != '\0') {
    std::vector<control::protocol::RankEntry> layout;
    for (int i = 0; i < c.size(); ++i) {
      control::protocol::RankEntry e;
      e.rank = i;
      e.store = stores[static_cast<size_t>(i)];
      auto id = ParseStoreName(e.store);
      if (id.ok()) e.node = id->node;
      layout.push_back(std::move(e));
    }
    control::ClientOptions o;
    o.rendezvous = rendezvous;
    o.rendezvous_wait_ms = EnvInt("DLCKPT_RENDEZVOUS_TIMEOUT", 60) * 1000;
    st.service = std::make_unique<control::CodecClient>(std::move(o));
    st.service->SetLayout(std::move(layout));
    connected = st.service->Connect();
    st.encoder = std::make_unique<control::ClientEncoder>(st.service.get(),
                                                        EnvInt("DLCKPT_ENCODE_TIMEOUT", 3600) * 1000);
  } else if (c.rank() == 0) {
    std::fprintf(stderr,
                 "dlckpt: no codec service (DLCKPT_RENDEZVOUS unset): checkpoints are "
                 "committed locally without parity\n");
  }
  DLCKPT_RETURN_IF_ERROR(c.Agree(connected, "dlckpt_init"));
  st.round_store = std::make_unique<ProcessRoundStore>(st.store);
  control::RoundOptions ro;
  ro.async = *async;
  ro.log = [](const std::string& m) { std::fprintf(stderr, "dlckpt: %s\n", m.c_str()); };
  st.round = std::make_unique<control::CheckpointRound>(st.collective.get(), st.round_store.get(),
                                                      st.encoder.get(), "rank " + std::to_string(c.rank()),
                                                      std::move(ro));
  auto drainer = Drainer::FromEnv(st.store, &c);
  DLCKPT_RETURN_IF_ERROR(c.Agree(drainer.status(), "dlckpt_init"));
  st.drainer = std::move(*drainer);
  st.initialized = true;
  memory::Attach(st.store);
  g_rank = c.rank();
  g_next_epoch = static_cast<uint64_t>(st.restarted_epoch) + 1;
  g_write_reported = false;
  if (std::getenv("DLCKPT_EVENTS")) intercept::ArmWriteHook(&OnFirstWrite);
  if (c.rank() == 0) events::Emit(events::Init(st.restarted_epoch));
  return Status::OK();
}

Status Checkpoint() {
  State& st = S();
  if (!st.initialized) return Status::InvalidArgument("dlckpt_checkpoint: call dlckpt_init first");
  // The protected memory regions join the checkpoint's files (api_memory.h).
  // Their writes bypass the interception: a checkpoint of regions alone
  // reports its write phase here.
  if (std::getenv("DLCKPT_EVENTS") && !g_write_reported && !memory::ProtectedIds().empty()) {
    intercept::ArmWriteHook(nullptr);
    OnFirstWrite();
  }
  // Storing the regions is agreed on in the round's first collective.
  Result<uint64_t> epoch = st.round->Run(memory::StoreRegions(st.store));
  memory::CheckpointEnded(epoch.status());
  if (st.drainer) st.drainer->OnProtected(st.round->protected_epoch());
  g_next_epoch = epoch.ok() ? *epoch + 1 : st.store->epochs().next;
  g_write_reported = false;
  if (std::getenv("DLCKPT_EVENTS")) intercept::ArmWriteHook(&OnFirstWrite);
  return epoch.status().Prefixed("dlckpt_checkpoint");
}

Status Wait() {
  State& st = S();
  if (!st.initialized) return Status::InvalidArgument("dlckpt_checkpoint_wait: call dlckpt_init first");
  Status s = st.round->Wait().status();
  memory::CheckpointEnded(s);
  return s.Prefixed("dlckpt_checkpoint_wait");
}

Status SetEncodeMode(int mode) {
  State& st = S();
  if (mode != DLCKPT_ENCODE_SYNC && mode != DLCKPT_ENCODE_ASYNC) {
    return Status::InvalidArgument("dlckpt_set_encode_mode: unknown mode " + std::to_string(mode) +
                                   " (DLCKPT_ENCODE_SYNC or DLCKPT_ENCODE_ASYNC)");
  }
  if (!st.initialized) return Status::InvalidArgument("dlckpt_set_encode_mode: call dlckpt_init first");
  st.round->set_async(mode == DLCKPT_ENCODE_ASYNC);
  return Status::OK();
}

long long ProtectedEpoch() {
  const State& st = S();
  long long p = st.round ? static_cast<long long>(st.round->protected_epoch()) : 0;
  return std::max(p, st.restarted_epoch);
}

Status Finalize() {
  State& st = S();
  if (!st.initialized) return Status::InvalidArgument("dlckpt_finalize: not initialised");
  // The last checkpoint is protected before the service goes.
  Status waited = st.round->Wait().status();
  // A drain due at the last protected epoch starts now; every drain ends
  // before the store may go. A failed drain leaves the run protected by
  // parity: reported by the drainer, not an error of finalize.
  if (st.drainer) {
    st.drainer->OnProtected(st.round->protected_epoch());
    (void)st.drainer->Finish();
    st.drainer.reset();
  }
  // Without dlckpt-run (no service), a run that ends well removes its store
  // unless DLCKPT_KEEP=1: nothing would restart from it, and it holds the
  // memory of up to three checkpoints. Under dlckpt-run, dlckpt-run decides.
  const bool remove_store = !st.with_service && st.store != nullptr && !EnvFlag("DLCKPT_KEEP") && waited.ok();
  st.round.reset();
  st.encoder.reset();
  st.service.reset();
  Status s = st.collective->Barrier();
  st.collective.reset();
  st.round_store.reset();
  MPI_Comm_free(&st.comm);
  st.initialized = false;
  memory::Attach(nullptr);
  if (remove_store && s.ok()) {
    // Unlinked, not detached: the process keeps its mapping (and a pointer
    // from intercept::ProcessStore stays valid) until it exits.
    const std::string name = st.store->name();
    Status removed = Env::Default()->UnlinkShm(name);
    if (!removed.ok()) s = removed.Prefixed("removing store " + name + " (DLCKPT_KEEP=1 keeps it)");
  }
  if (!waited.ok()) return waited.Prefixed("dlckpt_finalize");
  return s.Prefixed("dlckpt_finalize");
}

}  // namespace
}  // namespace dlckpt::api

extern "C" {

int dlckpt_init(MPI_Comm comm) {
  return dlckpt::api::Guarded([&] {
    DLCKPT_RETURN_IF_ERROR(dlckpt::api::CheckOneMpi());
    return dlckpt::api::Init(comm);
  });
}

// MPI_Comm_f2c is a function call in Open MPI: the check comes first.
int dlckpt_init_f(MPI_Fint comm) {
  return dlckpt::api::Guarded([&] {
    DLCKPT_RETURN_IF_ERROR(dlckpt::api::CheckOneMpi());
    return dlckpt::api::Init(MPI_Comm_f2c(comm));
  });
}

int dlckpt_checkpoint(void) {
  return dlckpt::api::Guarded([] { return dlckpt::api::Checkpoint(); });
}

int dlckpt_encode(void) { return dlckpt_checkpoint(); }

int dlckpt_set_encode_mode(int mode) {
  return dlckpt::api::Guarded([&] { return dlckpt::api::SetEncodeMode(mode); });
}

int dlckpt_checkpoint_wait(void) {
  return dlckpt::api::Guarded([] { return dlckpt::api::Wait(); });
}

long long dlckpt_protected_epoch(void) { return dlckpt::api::ProtectedEpoch(); }

long long dlckpt_restarted_epoch(void) { return dlckpt::api::S().restarted_epoch; }

int dlckpt_finalize(void) {
  return dlckpt::api::Guarded([] { return dlckpt::api::Finalize(); });
}

}  // extern "C"

// The application API (dlckpt/dlckpt.h): init, checkpoint, restarted epoch,
// finalize. Every rank owns its memfs store through libintercept's process
// store; rank 0 talks to the codec service. Collective waits use non-blocking
// MPI plus short sleeps so idle ranks never spin (DESIGN.md invariant 5).
#include <mpi.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "dlckpt/dlckpt.h"
#include "dlckpt/events.h"
#include "dlckpt/intercept.h"
#include "dlckpt/memfs.h"
#include "dlckpt/protocol.h"

namespace dlckpt::api {
namespace {

struct State {
  bool initialized = false;
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  memfs::Store* store = nullptr;
  std::unique_ptr<protocol::Connection> service;  // rank 0, when under dlckpt-run
  long long restarted_epoch = 0;
  std::string node;
};

State& S() {
  static State* const s = new State();
  return *s;
}

// "The application started writing checkpoint E" for dlckpt-run's
// phase:write failure injection: reported once per checkpoint, on the first
// write into memfs after the previous checkpoint.
std::atomic<uint64_t> g_next_epoch{1};
std::atomic<int> g_rank{0};
void OnFirstWrite() {
  events::Emit("app", "write-begin " + std::to_string(g_next_epoch.load()) + " rank " +
                          std::to_string(g_rank.load()));
}

int EnvInt(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : dflt;
}

// Waits for a non-blocking MPI request without spinning.
int Wait(MPI_Request* req) {
  long sleep_ns = 20000;
  for (;;) {
    int done = 0;
    int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return rc;
    if (done) return MPI_SUCCESS;
    struct timespec ts{0, sleep_ns};
    nanosleep(&ts, nullptr);
    if (sleep_ns < 500000) sleep_ns = std::min(500000L, sleep_ns * 2);  // 0.5 ms at most
  }
}

Status MpiStatus(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return Status::OK();
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return Status::Error(EIO, std::string(what) + ": " + std::string(msg, static_cast<size_t>(len)));
}

// Agrees on one outcome across ranks: the error of the lowest failing rank,
// or OK. Collective.
Status Agree(const Status& mine, const char* what) {
  State& st = S();
  int failed_rank = mine.ok() ? st.size : st.rank;
  int lowest = st.size;
  MPI_Request req;
  int rc = MPI_Iallreduce(&failed_rank, &lowest, 1, MPI_INT, MPI_MIN, st.comm, &req);
  if (rc == MPI_SUCCESS) rc = Wait(&req);
  if (rc != MPI_SUCCESS) return MpiStatus(rc, what);
  if (lowest == st.size) return Status::OK();
  // Share the failing rank's code and message with everyone.
  char buf[1024] = {};
  int code = 0;
  if (st.rank == lowest) {
    code = mine.code();
    std::snprintf(buf, sizeof buf, "rank %d: %s", st.rank, mine.message().c_str());
  }
  MPI_Request reqs[2];
  MPI_Ibcast(&code, 1, MPI_INT, lowest, st.comm, &reqs[0]);
  MPI_Ibcast(buf, sizeof buf, MPI_CHAR, lowest, st.comm, &reqs[1]);
  Wait(&reqs[0]);
  Wait(&reqs[1]);
  buf[sizeof buf - 1] = '\0';
  return Status::Error(code > 0 ? code : EIO, std::string(what) + ": " + buf);
}

Result<uint64_t> AllreduceMax(uint64_t v) {
  uint64_t out = 0;
  MPI_Request req;
  int rc = MPI_Iallreduce(&v, &out, 1, MPI_UINT64_T, MPI_MAX, S().comm, &req);
  if (rc == MPI_SUCCESS) rc = Wait(&req);
  if (rc != MPI_SUCCESS) return MpiStatus(rc, "MPI_Iallreduce");
  return out;
}

Result<uint64_t> AllreduceMin(uint64_t v) {
  uint64_t out = 0;
  MPI_Request req;
  int rc = MPI_Iallreduce(&v, &out, 1, MPI_UINT64_T, MPI_MIN, S().comm, &req);
  if (rc == MPI_SUCCESS) rc = Wait(&req);
  if (rc != MPI_SUCCESS) return MpiStatus(rc, "MPI_Iallreduce");
  return out;
}

// Rank 0: connects to the codec service and introduces the job's layout.
Status ConnectService(const std::vector<protocol::RankEntry>& layout) {
  const char* path = std::getenv("DLCKPT_RENDEZVOUS");
  if (path == nullptr || *path == '\0') return Status::OK();  // no service: local commits only
  int wait_ms = EnvInt("DLCKPT_RENDEZVOUS_TIMEOUT", 60) * 1000;
  DLCKPT_ASSIGN_OR_RETURN(protocol::Rendezvous r, protocol::ReadRendezvous(path, wait_ms));
  DLCKPT_ASSIGN_OR_RETURN(auto conn, protocol::Connection::Connect(r.host, r.port, 30000));
  protocol::Hello h;
  h.token = r.token;
  h.role = protocol::Role::kApplication;
  h.job = r.job;
  h.layout = layout;
  DLCKPT_ASSIGN_OR_RETURN(protocol::Frame f,
                          conn->Call(protocol::MsgType::kHello, protocol::EncodeHello(h), 120000));
  if (f.type != protocol::MsgType::kHelloOk) {
    return Status::Error(EPROTO, std::string("codec service answered HELLO with ") +
                                     protocol::MsgTypeName(f.type));
  }
  S().service = std::move(conn);
  return Status::OK();
}

Status Init(MPI_Comm comm) {
  State& st = S();
  if (st.initialized) return Status::Error(EALREADY, "dlckpt_init: already initialised");
  int flag = 0;
  MPI_Initialized(&flag);
  if (!flag) return Status::InvalidArgument("dlckpt_init: call MPI_Init first");
  DLCKPT_RETURN_IF_ERROR(MpiStatus(MPI_Comm_dup(comm, &st.comm), "MPI_Comm_dup"));
  MPI_Comm_rank(st.comm, &st.rank);
  MPI_Comm_size(st.comm, &st.size);

  // Every rank's store, and the epoch it holds.
  Status mine;
  uint64_t acked = 0;
  std::string store_name;
  auto store = intercept::ProcessStore();
  if (!store.ok()) {
    mine = store.status();
  } else {
    st.store = *store;
    store_name = st.store->name();
    st.node = st.store->stats().node;
    memfs::EpochState ep = st.store->epochs();
    if (ep.pending != 0) mine = st.store->AbortPending();  // never acknowledged
    acked = ep.acknowledged;
  }
  DLCKPT_RETURN_IF_ERROR(Agree(mine, "dlckpt_init"));
  DLCKPT_ASSIGN_OR_RETURN(uint64_t lo, AllreduceMin(acked));
  DLCKPT_ASSIGN_OR_RETURN(uint64_t hi, AllreduceMax(acked));
  if (lo != hi) {
    return Status::Error(EPROTO, "dlckpt_init: the ranks' stores hold different checkpoints "
                                 "(epochs " + std::to_string(lo) + " to " + std::to_string(hi) +
                                 "); run under dlckpt-run, which restores one epoch everywhere");
  }
  st.restarted_epoch = static_cast<long long>(lo);

  // Rank 0 learns the layout and connects to the service.
  std::string entry = store_name;
  int len = static_cast<int>(entry.size());
  std::vector<int> lens(static_cast<size_t>(st.size));
  MPI_Request req;
  MPI_Igather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, st.comm, &req);
  Wait(&req);
  std::vector<int> displs(static_cast<size_t>(st.size));
  int total = 0;
  for (int i = 0; i < st.size; ++i) {
    displs[static_cast<size_t>(i)] = total;
    total += lens[static_cast<size_t>(i)];
  }
  std::string all(static_cast<size_t>(st.rank == 0 ? total : 0), '\0');
  MPI_Igatherv(entry.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, 0,
               st.comm, &req);
  Wait(&req);
  Status connected;
  if (st.rank == 0) {
    std::vector<protocol::RankEntry> layout;
    for (int i = 0; i < st.size; ++i) {
      protocol::RankEntry e;
      e.rank = i;
      e.store = all.substr(static_cast<size_t>(displs[static_cast<size_t>(i)]),
                           static_cast<size_t>(lens[static_cast<size_t>(i)]));
      // "/dlckpt.<job>.<node>.r<rank>": the node is between the job and the rank.
      size_t a = e.store.find('.', 8);
      size_t b = e.store.rfind(".r");
      if (a != std::string::npos && b != std::string::npos && b > a) e.node = e.store.substr(a + 1, b - a - 1);
      layout.push_back(std::move(e));
    }
    connected = ConnectService(layout);
    if (connected.ok() && !st.service) {
      std::fprintf(stderr,
                   "dlckpt: no codec service (DLCKPT_RENDEZVOUS unset): checkpoints are "
                   "committed locally without parity\n");
    }
  }
  DLCKPT_RETURN_IF_ERROR(Agree(connected, "dlckpt_init"));
  st.initialized = true;
  g_rank = st.rank;
  g_next_epoch = static_cast<uint64_t>(st.restarted_epoch) + 1;
  if (std::getenv("DLCKPT_EVENTS")) intercept::ArmWriteHook(&OnFirstWrite);
  if (st.rank == 0) events::Emit("app", "init " + std::to_string(st.restarted_epoch));
  return Status::OK();
}

// Rank 0: asks the service to encode `epoch` and waits for its answer.
Status EncodeAtService(uint64_t epoch, uint64_t keep) {
  State& st = S();
  if (!st.service) return Status::OK();
  DLCKPT_RETURN_IF_ERROR(st.service->Send(protocol::MsgType::kEncode, protocol::EncodeEncode({epoch, keep})));
  int timeout_ms = EnvInt("DLCKPT_ENCODE_TIMEOUT", 3600) * 1000;
  DLCKPT_ASSIGN_OR_RETURN(protocol::Frame f, st.service->Receive(timeout_ms));
  if (f.type == protocol::MsgType::kError) {
    auto e = protocol::DecodeError(f.payload);
    return Status::Error(e.ok() && e->code > 0 ? e->code : EPROTO,
                         "codec service refused ENCODE: " + (e.ok() ? e->message : "malformed error"));
  }
  if (f.type != protocol::MsgType::kDone) {
    return Status::Error(EPROTO, std::string("codec service answered ENCODE with ") +
                                     protocol::MsgTypeName(f.type));
  }
  DLCKPT_ASSIGN_OR_RETURN(protocol::Done d, protocol::DecodeDone(f.payload));
  if (d.epoch != epoch) {
    return Status::Error(EPROTO, "codec service answered for epoch " + std::to_string(d.epoch) +
                                     " instead of " + std::to_string(epoch));
  }
  if (d.code != 0) return Status::Error(d.code, "encode of epoch " + std::to_string(epoch) + ": " + d.message);
  return Status::OK();
}

Status Checkpoint() {
  State& st = S();
  if (!st.initialized) return Status::InvalidArgument("dlckpt_checkpoint: call dlckpt_init first");
  DLCKPT_RETURN_IF_ERROR(intercept::FlushStreams());
  memfs::EpochState ep = st.store->epochs();
  // Epoch numbers are never reused, even after an interrupted encode: take
  // the largest "next" of all stores.
  DLCKPT_ASSIGN_OR_RETURN(uint64_t epoch, AllreduceMax(std::max(ep.next, std::max(ep.acknowledged, ep.pending) + 1)));
  if (st.rank == 0) events::Emit("app", "ckpt-begin " + std::to_string(epoch));
  Status committed = st.store->Commit(epoch).status();
  Status all = Agree(committed, "dlckpt_checkpoint: commit");
  if (all.ok()) {
    Status encoded = st.rank == 0 ? EncodeAtService(epoch, ep.acknowledged) : Status::OK();
    all = Agree(encoded, "dlckpt_checkpoint: encode");
  }
  if (all.ok()) {
    all = Agree(st.store->Acknowledge(epoch), "dlckpt_checkpoint: acknowledge");
  } else if (committed.ok()) {
    (void)st.store->AbortPending();
  }
  if (st.rank == 0) {
    events::Emit("app", "ckpt-end " + std::to_string(epoch) + " " + std::to_string(all.code()));
  }
  g_next_epoch = epoch + 1;
  if (std::getenv("DLCKPT_EVENTS")) intercept::ArmWriteHook(&OnFirstWrite);
  return all;
}

Status Finalize() {
  State& st = S();
  if (!st.initialized) return Status::InvalidArgument("dlckpt_finalize: not initialised");
  st.service.reset();
  MPI_Request req;
  MPI_Ibarrier(st.comm, &req);
  Wait(&req);
  MPI_Comm_free(&st.comm);
  st.initialized = false;
  return Status::OK();
}

int Boundary(const Status& s) noexcept { return s.ok() ? 0 : SetErrno(s); }

template <class Fn>
int Guarded(Fn&& fn) noexcept {
  try {
    return Boundary(fn());
  } catch (const std::bad_alloc&) {
    return SetErrno(Status::Error(ENOMEM, "out of memory"));
  } catch (...) {
    return SetErrno(Status::Error(EIO, "unexpected exception"));
  }
}

}  // namespace
}  // namespace dlckpt::api

extern "C" {

int dlckpt_init(MPI_Comm comm) {
  return dlckpt::api::Guarded([&] { return dlckpt::api::Init(comm); });
}

int dlckpt_init_f(MPI_Fint comm) { return dlckpt_init(MPI_Comm_f2c(comm)); }

int dlckpt_checkpoint(void) {
  return dlckpt::api::Guarded([] { return dlckpt::api::Checkpoint(); });
}

int dlckpt_encode(void) { return dlckpt_checkpoint(); }

long long dlckpt_restarted_epoch(void) { return dlckpt::api::S().restarted_epoch; }

int dlckpt_finalize(void) {
  return dlckpt::api::Guarded([] { return dlckpt::api::Finalize(); });
}

}  // extern "C"

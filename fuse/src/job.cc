// Job-wide checkpoints of dlckpt-fuse mounts: see dlckpt/fuse_job.h.
#include "dlckpt/fuse_job.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "collective.h"
#include "dlckpt/events.h"
#include "dlckpt/memfs.h"

namespace dlckpt::fusefs {

// ---- collectives -------------------------------------------------------------------

Status WaitMpi(MPI_Request* req, std::string_view what, long max_sleep_ns) {
  long sleep_ns = 20000;
  for (;;) {
    int done = 0;
    int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      char msg[MPI_MAX_ERROR_STRING];
      int len = 0;
      MPI_Error_string(rc, msg, &len);
      return Status::Error(EIO, std::string(what) + ": " + std::string(msg, static_cast<size_t>(len)));
    }
    if (done) return Status::OK();
    struct timespec ts{0, sleep_ns};
    nanosleep(&ts, nullptr);
    if (sleep_ns < max_sleep_ns) sleep_ns = std::min(2 * sleep_ns, max_sleep_ns);
  }
}

Collective::Collective(MPI_Comm comm, std::string who) : comm_(comm), who_(std::move(who)) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

Status Collective::Agree(const Status& mine, std::string_view what) {
  int failed = mine.ok() ? size_ : rank_;
  int lowest = size_;
  MPI_Request req;
  MPI_Iallreduce(&failed, &lowest, 1, MPI_INT, MPI_MIN, comm_, &req);
  DLCKPT_RETURN_IF_ERROR(WaitMpi(&req, what));
  if (lowest == size_) return Status::OK();
  // The failing process's errno and message, with its name.
  int code = 0;
  std::string text;
  if (rank_ == lowest) {
    code = mine.code();
    text = who_ + ": " + mine.message();
  }
  int len = static_cast<int>(std::min<size_t>(text.size(), 8192));
  int head[2] = {code, len};
  MPI_Ibcast(head, 2, MPI_INT, lowest, comm_, &req);
  DLCKPT_RETURN_IF_ERROR(WaitMpi(&req, what));
  text.resize(static_cast<size_t>(head[1]));
  if (head[1] > 0) {
    MPI_Ibcast(text.data(), head[1], MPI_CHAR, lowest, comm_, &req);
    DLCKPT_RETURN_IF_ERROR(WaitMpi(&req, what));
  }
  return Status::Error(head[0] > 0 ? head[0] : EIO, std::string(what) + ": " + text);
}

Result<std::vector<std::string>> Collective::Allgather(const std::string& mine) {
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<size_t>(size_));
  MPI_Request req;
  MPI_Iallgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm_, &req);
  DLCKPT_RETURN_IF_ERROR(WaitMpi(&req, "MPI_Iallgather"));
  std::vector<int> displs(static_cast<size_t>(size_));
  int total = 0;
  for (int i = 0; i < size_; ++i) {
    displs[static_cast<size_t>(i)] = total;
    total += lens[static_cast<size_t>(i)];
  }
  std::string all(static_cast<size_t>(total), '\0');
  MPI_Iallgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR,
                  comm_, &req);
  DLCKPT_RETURN_IF_ERROR(WaitMpi(&req, "MPI_Iallgatherv"));
  std::vector<std::string> out;
  for (int i = 0; i < size_; ++i) {
    out.push_back(all.substr(static_cast<size_t>(displs[static_cast<size_t>(i)]),
                             static_cast<size_t>(lens[static_cast<size_t>(i)])));
  }
  return out;
}

Result<long> Collective::Max(long mine, long max_sleep_ns) {
  long out = 0;
  MPI_Request req;
  MPI_Iallreduce(&mine, &out, 1, MPI_LONG, MPI_MAX, comm_, &req);
  DLCKPT_RETURN_IF_ERROR(WaitMpi(&req, "MPI_Iallreduce", max_sleep_ns));
  return out;
}

// ---- planning ------------------------------------------------------------------------

namespace {

std::string Describe(const MountState& m) {
  return "mount " + m.mount + " (rank " + std::to_string(m.rank) + ", node " + m.node + ")";
}

std::string EncodeState(const MountState& m) {
  protocol::Writer w;
  w.Str(m.mount);
  w.Str(m.store);
  w.Str(m.job);
  w.Str(m.node);
  w.I32(m.rank);
  w.I32(m.pid);
  w.U64(m.acked);
  w.U64(m.pending);
  w.U64(m.next);
  w.U8(m.coordinated ? 1 : 0);
  return w.Take();
}

Result<MountState> DecodeState(const std::string& data) {
  protocol::Reader r(data, "mount state");
  MountState m;
  int32_t rank = 0, pid = 0;
  uint8_t coordinated = 0;
  DLCKPT_RETURN_IF_ERROR(r.Str(&m.mount));
  DLCKPT_RETURN_IF_ERROR(r.Str(&m.store));
  DLCKPT_RETURN_IF_ERROR(r.Str(&m.job));
  DLCKPT_RETURN_IF_ERROR(r.Str(&m.node));
  DLCKPT_RETURN_IF_ERROR(r.I32(&rank));
  DLCKPT_RETURN_IF_ERROR(r.I32(&pid));
  DLCKPT_RETURN_IF_ERROR(r.U64(&m.acked));
  DLCKPT_RETURN_IF_ERROR(r.U64(&m.pending));
  DLCKPT_RETURN_IF_ERROR(r.U64(&m.next));
  DLCKPT_RETURN_IF_ERROR(r.U8(&coordinated));
  DLCKPT_RETURN_IF_ERROR(r.End());
  m.rank = rank;
  m.pid = pid;
  m.coordinated = coordinated != 0;
  return m;
}

}  // namespace

Result<CheckpointPlan> PlanCheckpoint(const std::vector<MountState>& mounts, bool allow_mismatch) {
  if (mounts.empty()) return Status::InvalidArgument("no mounts to checkpoint");
  std::map<int, const MountState*> by_rank;
  for (const auto& m : mounts) {
    if (!m.coordinated) {
      return Status::Error(EPERM, Describe(m) + " checkpoints locally: start its dlckpt-fuse with "
                                               "--checkpoint coordinated to make it part of a job");
    }
    if (m.job != mounts[0].job) {
      return Status::InvalidArgument("the mounts serve different jobs: " + Describe(mounts[0]) +
                                     " job " + mounts[0].job + ", " + Describe(m) + " job " + m.job);
    }
    auto name = memfs::StoreName(m.job, m.node, m.rank);
    if (!name.ok() || *name != m.store) {
      return Status::InvalidArgument(
          Describe(m) + " serves store " + m.store + ", but the codec finds rank " +
          std::to_string(m.rank) + " of node " + m.node + " as " +
          (name.ok() ? *name : name.status().message()) +
          ": start its dlckpt-fuse with --job/--node/--rank instead of --store");
    }
    auto [it, fresh] = by_rank.emplace(m.rank, &m);
    if (!fresh) {
      return Status::InvalidArgument("two mounts serve rank " + std::to_string(m.rank) + ": " +
                                     Describe(*it->second) + " and " + Describe(m));
    }
  }
  CheckpointPlan plan;
  std::vector<uint64_t> acked;
  uint64_t p = 0;
  for (const auto& m : mounts) p = std::max(p, m.pending);
  for (const auto& m : mounts) acked.push_back(m.acked);
  if (p > 0) {
    bool holds_all = true, acked_somewhere = false;
    const MountState* missing = nullptr;
    for (const auto& m : mounts) {
      if (m.acked == p) acked_somewhere = true;
      if (m.acked != p && m.pending != p) {
        holds_all = false;
        if (!missing) missing = &m;
      }
    }
    if (holds_all) {
      plan.finish = p;
      plan.finish_encode = !acked_somewhere;
      acked.assign(mounts.size(), p);
      plan.note = "completing epoch " + std::to_string(p) + ", left pending by an interrupted checkpoint" +
                  (acked_somewhere ? " after it was encoded" : " (encoding it again)");
    } else if (acked_somewhere) {
      return Status::Error(
          EPROTO, "the job's stores disagree about epoch " + std::to_string(p) +
                      ": some acknowledged it, but " + Describe(*missing) + " holds acknowledged epoch " +
                      std::to_string(missing->acked) + " and pending epoch " +
                      std::to_string(missing->pending) +
                      "; recover the job (dlckpt-run restores one epoch everywhere) before checkpointing");
    } else {
      std::string dropped;
      for (size_t i = 0; i < mounts.size(); ++i) {
        if (mounts[i].pending == 0) continue;
        plan.drop.push_back(i);
        dropped += (dropped.empty() ? "" : ", ") + Describe(mounts[i]) + " epoch " +
                   std::to_string(mounts[i].pending);
      }
      plan.note = "dropping pending epochs that not every store holds (an interrupted checkpoint): " + dropped;
    }
  }
  if (plan.finish == 0) {
    auto [lo, hi] = std::minmax_element(acked.begin(), acked.end());
    if (*lo != *hi && !allow_mismatch) {
      std::string list;
      for (size_t i = 0; i < mounts.size() && i < 16; ++i) {
        list += (i ? ", " : "") + Describe(mounts[i]) + " epoch " + std::to_string(acked[i]);
      }
      if (mounts.size() > 16) list += ", ...";
      return Status::Error(
          EPROTO, "the mounts hold different checkpoints (acknowledged " + list +
                      "): a job's mounts hold one checkpoint (after a node loss dlckpt-run restores "
                      "one everywhere); check --mount, or use --allow-mismatch to checkpoint anyway");
    }
  }
  uint64_t e = 0;
  for (size_t i = 0; i < mounts.size(); ++i) {
    const MountState& m = mounts[i];
    e = std::max({e, m.next, acked[i] + 1, m.pending + 1});
  }
  plan.epoch = e;
  return plan;
}

std::string ExpandMountPattern(const std::string& pattern, const std::string& node, int rank) {
  std::string out = pattern;
  for (size_t p; (p = out.find("{node}")) != std::string::npos;) out.replace(p, 6, node);
  for (size_t p; (p = out.find("{rank}")) != std::string::npos;) out.replace(p, 6, std::to_string(rank));
  return out;
}

std::string ThisNode() {
  const char* env = std::getenv("DLCKPT_NODE");
  if (env && *env) return env;
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  std::string out;
  for (char* p = name; *p; ++p) {
    char c = *p;
    out += (isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  }
  return out;
}

// ---- JobCheckpointer -------------------------------------------------------------------

JobCheckpointer::JobCheckpointer(MPI_Comm comm, JobOptions options) : comm_(comm), o_(std::move(options)) {
  MPI_Comm_rank(comm_, &rank_);
}

JobCheckpointer::~JobCheckpointer() = default;

Status JobCheckpointer::EnsureService(const std::vector<MountState>& mounts) {
  if (o_.rendezvous.empty()) {
    if (o_.no_codec) return Status::OK();
    return Status::InvalidArgument(
        "no codec service: give --rendezvous (or set DLCKPT_RENDEZVOUS; dlckpt-run does), or "
        "--no-codec for checkpoints without parity");
  }
  std::vector<protocol::RankEntry> layout;
  for (const auto& m : mounts) layout.push_back({m.rank, m.node, m.store});
  std::sort(layout.begin(), layout.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  auto same = [&] {
    if (layout.size() != hello_layout_.size()) return false;
    for (size_t i = 0; i < layout.size(); ++i) {
      if (layout[i].rank != hello_layout_[i].rank || layout[i].node != hello_layout_[i].node ||
          layout[i].store != hello_layout_[i].store) {
        return false;
      }
    }
    return true;
  };
  if (service_ && same()) return Status::OK();
  service_.reset();
  auto context = [&](const Status& s) { return s.Prefixed("codec service (rendezvous " + o_.rendezvous + ")"); };
  auto r = protocol::ReadRendezvous(o_.rendezvous, o_.rendezvous_timeout_ms);
  if (!r.ok()) return context(r.status());
  if (r->job != mounts[0].job) {
    return Status::InvalidArgument("the codec service of " + o_.rendezvous + " serves job " + r->job +
                                   ", the mounts job " + mounts[0].job);
  }
  auto conn = protocol::Connection::Connect(r->host, r->port, 30000);
  if (!conn.ok()) return context(conn.status());
  protocol::Hello h;
  h.token = r->token;
  h.role = protocol::Role::kApplication;
  h.job = r->job;
  h.layout = layout;
  auto f = (*conn)->Call(protocol::MsgType::kHello, protocol::EncodeHello(h), 120000);
  if (!f.ok()) return context(f.status().Prefixed("HELLO"));
  if (f->type != protocol::MsgType::kHelloOk) {
    return Status::Error(EPROTO, std::string("codec service answered HELLO with ") +
                                     protocol::MsgTypeName(f->type));
  }
  service_ = std::move(*conn);
  hello_layout_ = std::move(layout);
  return Status::OK();
}

Status JobCheckpointer::Encode(uint64_t epoch, uint64_t keep, bool* unknown) {
  *unknown = false;
  if (!service_) return Status::OK();  // --no-codec
  const std::string what = "codec service: encode of epoch " + std::to_string(epoch);
  Status sent = service_->Send(protocol::MsgType::kEncode, protocol::EncodeEncode({epoch, keep}));
  if (!sent.ok()) {
    service_.reset();  // the codec is gone: reconnect next time
    return sent.Prefixed(what);
  }
  Result<protocol::Frame> f = service_->Receive(o_.encode_timeout_ms);
  if (!f.ok()) {
    // Sent but not answered: the codec may still finish the parity.
    *unknown = true;
    service_.reset();
    return f.status().Prefixed(what);
  }
  if (f->type == protocol::MsgType::kError) {
    service_.reset();
    auto e = protocol::DecodeError(f->payload);
    return Status::Error(e.ok() && e->code > 0 ? e->code : EPROTO,
                         what + ": refused: " + (e.ok() ? e->message : "malformed error"));
  }
  if (f->type != protocol::MsgType::kDone) {
    service_.reset();
    return Status::Error(EPROTO, what + ": answered with " + protocol::MsgTypeName(f->type));
  }
  auto d = protocol::DecodeDone(f->payload);
  if (!d.ok()) return d.status().Prefixed(what);
  if (d->epoch != epoch) {
    service_.reset();
    return Status::Error(EPROTO, what + ": answered for epoch " + std::to_string(d->epoch));
  }
  if (d->code != 0) return Status::Error(d->code, what + ": " + d->message);
  return Status::OK();
}

Result<uint64_t> JobCheckpointer::Checkpoint(MountControl& mount) {
  Collective c(comm_, "rank " + std::to_string(rank_) + " on node " + ThisNode());
  // 1. This process's mount.
  Result<MountState> mine = mount.State();
  Status s = mine.ok() ? mount.Sync() : mine.status();
  DLCKPT_RETURN_IF_ERROR(c.Agree(s, "checkpoint"));
  // 2. Every mount, and the plan every process derives from them alike.
  DLCKPT_ASSIGN_OR_RETURN(std::vector<std::string> blobs, c.Allgather(EncodeState(*mine)));
  std::vector<MountState> all;
  for (const auto& b : blobs) {
    DLCKPT_ASSIGN_OR_RETURN(MountState m, DecodeState(b));
    all.push_back(std::move(m));
  }
  DLCKPT_ASSIGN_OR_RETURN(CheckpointPlan plan, PlanCheckpoint(all, o_.allow_mismatch));
  const size_t me = static_cast<size_t>(c.rank());
  if (c.rank() == 0 && !plan.note.empty() && o_.log) o_.log(plan.note);
  DLCKPT_RETURN_IF_ERROR(c.Agree(c.rank() == 0 ? EnsureService(all) : Status::OK(), "checkpoint"));
  if (!plan.drop.empty()) {
    Status dropped;
    if (std::find(plan.drop.begin(), plan.drop.end(), me) != plan.drop.end()) {
      dropped = mount.Command("abort", mine->pending).status();
    }
    DLCKPT_RETURN_IF_ERROR(c.Agree(dropped, "dropping an interrupted checkpoint"));
  }

  // An interrupted checkpoint first: its epoch may be the newest parity.
  if (plan.finish != 0) {
    const std::string what = "completing interrupted epoch " + std::to_string(plan.finish);
    if (plan.finish_encode) {
      bool unknown = false;
      DLCKPT_RETURN_IF_ERROR(c.Agree(c.rank() == 0 ? Encode(plan.finish, all[me].acked, &unknown) : Status::OK(), what));
    }
    Status acked;
    if (mine->pending == plan.finish) acked = mount.Command("ack", plan.finish).status();
    DLCKPT_RETURN_IF_ERROR(c.Agree(acked, what));
  }

  // 3-5. Commit, encode, acknowledge (or drop).
  const uint64_t e = plan.epoch;
  const std::string es = std::to_string(e);
  if (c.rank() == 0) events::Emit("app", "ckpt-begin " + es);
  Result<uint64_t> committed = mount.Command("commit", e);
  Status all_ok = c.Agree(committed.status(), "commit of epoch " + es);
  bool unknown = false;
  if (all_ok.ok()) {
    all_ok = c.Agree(c.rank() == 0 ? Encode(e, std::max(all[me].acked, plan.finish), &unknown) : Status::OK(), "checkpoint of epoch " + es);
    if (!all_ok.ok()) {
      auto any = c.Max(unknown ? 1 : 0);
      unknown = !any.ok() || *any != 0;
    }
  }
  if (all_ok.ok()) {
    all_ok = c.Agree(mount.Command("ack", e).status(), "acknowledgement of epoch " + es);
  } else if (unknown) {
    // The codec may still complete e's parity, which its double buffer then
    // keeps as the newest: dropping e could leave the next encode
    // overwriting the parity of the acknowledged epoch. e stays pending and
    // the next checkpoint completes it (PlanCheckpoint).
    all_ok = Status::Error(all_ok.code(), all_ok.message() + "; epoch " + es +
                                              " stays pending on every mount (the codec may still "
                                              "finish it): the next checkpoint completes it");
  } else {
    // Every mount that committed e drops it: the previous epoch stays.
    Status dropped = committed.ok() ? mount.Command("abort", e).status() : Status::OK();
    Status d = c.Agree(dropped, "dropping epoch " + es);
    if (!d.ok()) all_ok = Status::Error(all_ok.code(), all_ok.message() + "; then " + d.message());
  }
  if (c.rank() == 0) events::Emit("app", "ckpt-end " + es + " " + std::to_string(all_ok.code()));
  if (!all_ok.ok()) return all_ok;
  return e;
}

}  // namespace dlckpt::fusefs

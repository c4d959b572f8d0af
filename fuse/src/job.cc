// Job-wide checkpoints of dlckpt-fuse mounts: see dlckpt/fuse/job.h.
#include "dlckpt/fuse/job.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "dlckpt/base/mpi.h"
#include "dlckpt/base/names.h"
#include "dlckpt/base/node.h"
#include "dlckpt/control/checkpoint_round.h"

namespace dlckpt::fusefs {

// ---- planning ------------------------------------------------------------------------

namespace {

std::string Describe(const MountState& m) {
  return "mount " + m.mount + " (rank " + std::to_string(m.rank) + ", node " + m.node + ")";
}

std::string EncodeState(const MountState& m) {
  control::protocol::Writer w;
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
  control::protocol::Reader r(data, "mount state");
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
    auto name = StoreName(m.job, m.node, m.rank);
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
  std::vector<control::RoundEpochs> epochs;
  std::vector<std::string> names;
  for (const auto& m : mounts) {
    epochs.push_back({m.acked, m.pending, m.next});
    names.push_back(Describe(m));
  }
  return control::PlanRound(epochs, names, allow_mismatch,
                            "check --mount, or use --allow-mismatch to checkpoint anyway");
}

std::string ExpandMountPattern(const std::string& pattern, const std::string& node, int rank) {
  std::string out = pattern;
  for (size_t p; (p = out.find("{node}")) != std::string::npos;) out.replace(p, 6, node);
  for (size_t p; (p = out.find("{rank}")) != std::string::npos;) out.replace(p, 6, std::to_string(rank));
  return out;
}

// ---- JobCheckpointer -------------------------------------------------------------------

namespace {

// A mount's store, reached through its control files, as the round drives it.
class MountRoundStore final : public control::RoundStore {
 public:
  explicit MountRoundStore(MountControl* mount) : mount_(mount) {}
  Result<control::RoundEpochs> Prepare() override {
    DLCKPT_ASSIGN_OR_RETURN(MountState m, mount_->State());
    return control::RoundEpochs{m.acked, m.pending, m.next};
  }
  Status Commit(uint64_t epoch) override { return mount_->Command("commit", epoch).status(); }
  Status Acknowledge(uint64_t epoch) override { return mount_->Command("ack", epoch).status(); }
  Status Abort(uint64_t epoch) override { return mount_->Command("abort", epoch).status(); }

 private:
  MountControl* mount_;
};

}  // namespace

JobCheckpointer::JobCheckpointer(MPI_Comm comm, JobOptions options) : comm_(comm), o_(std::move(options)) {
  MPI_Comm_rank(comm_, &rank_);
  if (!o_.rendezvous.empty()) {
    control::ClientOptions co;
    co.rendezvous = o_.rendezvous;
    co.rendezvous_wait_ms = o_.rendezvous_timeout_ms;
    service_ = std::make_unique<control::CodecClient>(std::move(co));
  }
}

JobCheckpointer::~JobCheckpointer() = default;

Status JobCheckpointer::EnsureService(const std::vector<MountState>& mounts) {
  if (!service_) {
    if (o_.no_codec) return Status::OK();
    return Status::InvalidArgument(
        "no codec service: give --rendezvous (or set DLCKPT_RENDEZVOUS; dlckpt-run does), or "
        "--no-codec for checkpoints without parity");
  }
  std::vector<control::protocol::RankEntry> layout;
  for (const auto& m : mounts) layout.push_back({m.rank, m.node, m.store});
  std::sort(layout.begin(), layout.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  service_->SetLayout(std::move(layout));
  DLCKPT_RETURN_IF_ERROR(service_->Connect());
  if (service_->job() != mounts[0].job) {
    service_->Disconnect();
    return Status::InvalidArgument("the codec service of " + o_.rendezvous + " serves job " + service_->job() +
                                   ", the mounts job " + mounts[0].job);
  }
  return Status::OK();
}

Result<uint64_t> JobCheckpointer::Checkpoint(MountControl& mount) {
  const std::string who = "rank " + std::to_string(rank_) + " on node " + ThisNode();
  mpi::Collective c(comm_, who);
  // 1. This process's mount.
  Result<MountState> mine = mount.State();
  Status s = mine.ok() ? mount.Sync() : mine.status();
  DLCKPT_RETURN_IF_ERROR(c.Agree(s, "checkpoint"));
  // 2. Every mount: one coordinated job the codec can find (PlanCheckpoint).
  DLCKPT_ASSIGN_OR_RETURN(std::vector<std::string> blobs, c.Allgather(EncodeState(*mine)));
  std::vector<MountState> all;
  for (const auto& b : blobs) {
    DLCKPT_ASSIGN_OR_RETURN(MountState m, DecodeState(b));
    all.push_back(std::move(m));
  }
  DLCKPT_ASSIGN_OR_RETURN(CheckpointPlan plan, PlanCheckpoint(all, o_.allow_mismatch));
  DLCKPT_RETURN_IF_ERROR(c.Agree(c.rank() == 0 ? EnsureService(all) : Status::OK(), "checkpoint"));
  // 3-5. The checkpoint round.
  MountRoundStore store(&mount);
  std::unique_ptr<control::ClientEncoder> encoder;
  if (c.rank() == 0 && service_) {
    encoder = std::make_unique<control::ClientEncoder>(service_.get(), o_.encode_timeout_ms);
  }
  control::RoundOptions ro;
  ro.log = o_.log;
  control::CheckpointRound round(&c, &store, encoder.get(), Describe(*mine), std::move(ro));
  return round.Run(plan, control::RoundEpochs{mine->acked, mine->pending, mine->next});
}

}  // namespace dlckpt::fusefs

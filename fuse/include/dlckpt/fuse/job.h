// dlckpt/fuse/job.h — job-wide checkpoints of dlckpt-fuse mounts: one MPI
// process per mount drives the checkpoint protocol of the application API
// (dlckpt/dlckpt.h) through the mounts' control files, so the daemons stay
// the only owners of their stores and the application stays unmodified.
//
// One checkpoint (JobCheckpointer::Checkpoint, collective):
//   1. every process reads its mount's status and syncs it (syncfs);
//   2. every process learns every mount's state and checks the job: all
//      mounts coordinated, one job, store names the codec can find, distinct
//      ranks, one acknowledged epoch; an epoch left pending by an interrupted
//      checkpoint is completed first, or dropped if it cannot be (PlanCheckpoint);
//   3. epoch E (newer than every epoch any store has seen) is committed on
//      every mount ("commit E");
//   4. process 0 introduces the layout rank -> node -> store to the codec
//      (HELLO) and has it encode E (ENCODE, waits for DONE);
//   5. every mount acknowledges E ("ack E"); if 3 or 4 failed anywhere, every
//      mount that committed E drops it ("abort E"), except when ENCODE went
//      out but no answer came (a timeout, a lost connection): the codec may
//      still finish E, so E stays pending and the next checkpoint completes
//      it. Either way the previous acknowledged epoch stays, and every
//      process returns the same error.
// Waiting never spins (non-blocking MPI and short sleeps).
#ifndef DLCKPT_FUSE_JOB_H_
#define DLCKPT_FUSE_JOB_H_

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dlckpt/fuse/control.h"
#include "dlckpt/control/checkpoint_round.h"
#include "dlckpt/control/client.h"
#include "dlckpt/base/status.h"

namespace dlckpt::fusefs {

struct JobOptions {
  // The codec service's rendezvous file (dlckpt-run sets $DLCKPT_RENDEZVOUS).
  // Empty: no codec; then no_codec must be set.
  std::string rendezvous;
  // Commit and acknowledge every mount without parity (a job-wide epoch that
  // survives no node loss).
  bool no_codec = false;
  // Checkpoint even if the mounts hold different acknowledged epochs.
  bool allow_mismatch = false;
  int rendezvous_timeout_ms = 60000;
  int encode_timeout_ms = 3600 * 1000;
  // Process 0's notes for humans (completed or dropped interrupted epochs).
  std::function<void(const std::string&)> log;
};

// What one checkpoint does, decided from every mount's state (the round's plan).
using CheckpointPlan = control::RoundPlan;

// Checks the job's mounts (see the file comment, step 2) and plans the
// checkpoint. An epoch P left pending (the coordinator died between commit
// and acknowledgement) is completed when every store holds P (acknowledged
// or pending): encoded again when no store acknowledged it (the codec may not
// have finished), then acknowledged. Otherwise it is dropped, unless some
// store acknowledged P (then the stores disagree: EPROTO, recover the job).
// Errors: EPERM (a local mount), EINVAL (jobs, names, ranks), EPROTO (epochs).
Result<CheckpointPlan> PlanCheckpoint(const std::vector<MountState>& mounts, bool allow_mismatch);

// "{node}" and "{rank}" in `pattern` replaced.
std::string ExpandMountPattern(const std::string& pattern, const std::string& node, int rank);

// Takes job-wide checkpoints over `comm` (one process per mount). Process 0
// keeps its connection to the codec between checkpoints and reconnects after
// an error. Not thread-safe; every process of `comm` must call Checkpoint
// together.
class JobCheckpointer final {
 public:
  JobCheckpointer(MPI_Comm comm, JobOptions options);
  ~JobCheckpointer();
  JobCheckpointer(const JobCheckpointer&) = delete;
  JobCheckpointer& operator=(const JobCheckpointer&) = delete;

  // Collective: one checkpoint of every process's mount; the epoch, or the
  // same error on every process (naming the rank, node and mount at fault).
  Result<uint64_t> Checkpoint(MountControl& mount);

 private:
  // Process 0: connects to the codec service with the mounts' layout.
  Status EnsureService(const std::vector<MountState>& mounts);

  MPI_Comm comm_;
  JobOptions o_;
  int rank_ = 0;
  std::unique_ptr<control::CodecClient> service_;  // null with no_codec
};

// `dlckpt-ctl run`: collective over MPI_COMM_WORLD, one process per mount.
struct RunOptions {
  std::string mount_pattern;            // {node}, {rank}
  std::string job;                      // the job id (stores /dlckpt.JOB.NODE.rRANK)
  std::string fuse_path;                // the dlckpt-fuse executable
  std::vector<std::string> fuse_args;   // more dlckpt-fuse options (--capacity ...)
  JobOptions checkpoint;
  std::vector<std::string> command;     // run on every process, with its mount
  int mount_timeout_ms = 30000;
};

// Every process: starts dlckpt-fuse (coordinated, --coordinator a private
// socket) on its mount for store (job, node, MPI rank), attaching a store
// that exists (restored or rebuilt by a recovery) and unmounting a dead
// dlckpt-fuse mount left at the mount point first; checks that all mounts
// hold one acknowledged epoch; emits "app init E" (for dlckpt-run); runs
// `command` with DLCKPT_MOUNT, DLCKPT_RANK, DLCKPT_NODE and
// DLCKPT_RESTARTED_EPOCH set. Whenever the command of every process has
// triggered a checkpoint on its mount (`dlckpt-ctl checkpoint
// $DLCKPT_MOUNT`), one job-wide checkpoint runs and every trigger gets its
// epoch or error. A trigger while another process's command has ended fails
// (ECANCELED). When every command has ended, the mounts are unmounted and
// this process's command's exit status is returned (1 for a setup error or
// a daemon that died, which also stops the command).
int RunJob(const RunOptions& options);

}  // namespace dlckpt::fusefs

#endif  // DLCKPT_FUSE_JOB_H_

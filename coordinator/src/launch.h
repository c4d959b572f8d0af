// How dlckpt-run turns a job (the codec service or the application) into a
// launcher command: Hydra's mpiexec, or Slurm's srun. Pure functions of their
// inputs (no process is started, no file written), so tests can check the
// commands; the supervisor writes Launch::files and spawns Launch::argv with
// Launch::env added to its environment.
#ifndef DLCKPT_COORDINATOR_LAUNCH_H_
#define DLCKPT_COORDINATOR_LAUNCH_H_

#include <string>
#include <utility>
#include <vector>

#include "dlckpt/base/status.h"
#include "run_options.h"

namespace dlckpt::run {

// One MPI job: ranks in order, in runs of consecutive ranks on one node.
struct JobSpec {
  std::string name;  // "codec" or "app": names Slurm jobs and per-job files
  std::vector<std::pair<std::string, int>> segments;  // (node, ranks), in rank order
  bool virtual_nodes = true;  // segments name virtual nodes (DLCKPT_NODE), else hosts
  std::vector<std::string> program;
  std::vector<std::pair<std::string, std::string>> env;  // for every rank
  std::string preload;  // LD_PRELOAD of the ranks (not of the launcher), or ""
};

struct Launch {
  std::vector<std::string> argv;
  std::vector<std::string> env;                             // "NAME=value", for the launcher
  std::vector<std::pair<std::string, std::string>> files;   // (path, content) to write first
};

// "H1:C1,H2:C2,...": runs of equal consecutive nodes, for mpiexec -hosts.
std::string HostList(const std::vector<std::string>& nodes);

// mpiexec: virtual nodes as MPMD segments with -env DLCKPT_NODE, hosts with
// -hosts H:COUNT; the job's environment through -genv; --mpiexec-args, with a
// -genv LD_PRELOAD in them merged after the job's preload.
Launch MpiexecLaunch(const Options& o, const JobSpec& job);

// srun --mpi=pmi2 (MPICH's PMI client speaks PMI-2 with Slurm's pmi2 plugin):
// the ranks' programs in a --multi-prog file (DLCKPT_NODE and LD_PRELOAD set
// per line through env(1)); hosts placed rank by rank with
// --distribution=arbitrary and SLURM_HOSTFILE; --kill-on-bad-exit so that a
// lost rank ends the step as Hydra does; --overlap so that the codec and the
// application steps share the nodes of one allocation. Virtual nodes all run
// on `this_host` (--nodes=1 --nodelist, --overcommit). The job's environment
// travels in the launcher's own (srun exports it). Files go to `dir`.
// EINVAL for a program argument srun's multi-prog format cannot carry.
Result<Launch> SrunLaunch(const Options& o, const JobSpec& job, const std::string& dir,
                          const std::string& this_host);

// Kills, through Slurm, every job step named by SrunLaunch for this dlckpt job
// (dlckpt-<job>-codec, dlckpt-<job>-app): `scancel --signal=KILL` on the ids
// `squeue --steps` lists, so the tasks die on every node at once (srun's own
// SIGTERM path gives them KillWait, 30 s by default, and a relaunch must not
// meet old ranks still holding their stores). The scancels run in the
// background (one may take seconds when a node of the step is dead). Best
// effort: returns the number of steps signalled, and says nothing when Slurm is
// unreachable.
int KillSlurmSteps(const Options& o);

// The host names of a Slurm allocation: `scontrol show hostnames` of
// SLURM_JOB_NODELIST (--hosts slurm). ENOENT outside an allocation.
Result<std::vector<std::string>> SlurmAllocationHosts();

}  // namespace dlckpt::run

#endif  // DLCKPT_COORDINATOR_LAUNCH_H_

// How dlckpt-run turns a job (the codec service or the application) into a
// launcher command: the MPI's own launcher (Hydra's mpiexec for MPICH, mpirun
// for Open MPI), or Slurm's srun. Pure functions of their
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
  // Names of variables of the launcher's own environment the ranks need too
  // (Launch::env and the supervisor's additions: the heartbeat key travels
  // there, never on a command line). Hydra and srun pass the whole
  // environment; Open MPI's mpirun passes it to local ranks only, so
  // OmpiLaunch names these with `-x NAME` for hosts.
  std::vector<std::string> forward;
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

// Open MPI's mpirun (4.x, ORTE). Virtual nodes are MPMD app contexts
// (`-np N -x DLCKPT_NODE=node prog : ...`) on this machine, with
// --oversubscribe (both jobs together run more ranks than it has cores).
// Hosts are app contexts too, each pinned with `--host H:SLOTS` (SLOTS: every
// rank of the job on H), so ranks are placed in order even when a host comes
// back later in the list. Open MPI applies a `-x` only to the app context it
// stands in (measured, docs/design.md "MPICH and Open MPI"), so the job's
// environment, LD_PRELOAD and every `-x` of --mpiexec-args are repeated in
// each context; a `-x LD_PRELOAD=V` of --mpiexec-args is merged after the job's
// preload; with hosts, each JobSpec::forward name is a `-x NAME` (its value
// from mpirun's environment). The rest of --mpiexec-args comes first, as given. --launcher-exec
// becomes `--mca plm_rsh_agent PATH`. `as_root` (euid 0): mpirun refuses root
// unless OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 are in
// its environment, so Launch::env carries them.
Launch OmpiLaunch(const Options& o, const JobSpec& job, bool as_root);

// The launch with the MPI's own launcher (--launcher mpiexec), in the dialect
// of o.mpi_flavor: OmpiLaunch for "openmpi", else MpiexecLaunch.
Launch MpiLaunch(const Options& o, const JobSpec& job, bool as_root);

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

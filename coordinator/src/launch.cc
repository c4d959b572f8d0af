#include "launch.h"

#include <sys/wait.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <map>

namespace dlckpt::run {

std::string HostList(const std::vector<std::string>& nodes) {
  // Hydra places ranks in order on H:COUNT slots (it has no per-segment -host).
  std::string out;
  for (size_t i = 0; i < nodes.size();) {
    size_t j = i;
    while (j < nodes.size() && nodes[j] == nodes[i]) ++j;
    out += (out.empty() ? "" : ",") + nodes[i] + ":" + std::to_string(j - i);
    i = j;
  }
  return out;
}

namespace {

int Ranks(const JobSpec& job) {
  int n = 0;
  for (const auto& s : job.segments) n += s.second;
  return n;
}

std::vector<std::string> RankNodes(const JobSpec& job) {
  std::vector<std::string> out;
  for (const auto& [node, count] : job.segments) out.insert(out.end(), count, node);
  return out;
}

// One word of a --multi-prog line. Slurm splits lines at white space and
// strips single quotes; it has no escape for a single quote itself.
Result<std::string> MultiProgWord(const std::string& w) {
  if (w.find('\'') != std::string::npos || w.find('\n') != std::string::npos) {
    return Status::InvalidArgument("srun --multi-prog cannot pass the argument '" + w +
                                   "' (single quote or newline); use --launcher mpiexec");
  }
  return "'" + w + "'";
}

}  // namespace

Launch MpiexecLaunch(const Options& o, const JobSpec& job) {
  Launch l;
  l.argv.push_back(o.mpiexec);
  l.argv.insert(l.argv.end(), o.mpiexec_args.begin(), o.mpiexec_args.end());
  if (!job.preload.empty()) {
    // One LD_PRELOAD for the ranks: the job's library first, then any from --mpiexec-args.
    bool merged = false;
    for (size_t i = 1; i + 2 < l.argv.size(); ++i) {
      if (l.argv[i] == "-genv" && l.argv[i + 1] == "LD_PRELOAD") {
        l.argv[i + 2] = job.preload + ":" + l.argv[i + 2];
        merged = true;
        break;
      }
    }
    if (!merged) l.argv.insert(l.argv.end(), {"-genv", "LD_PRELOAD", job.preload});
  }
  if (!o.launcher_exec.empty()) {
    l.argv.insert(l.argv.end(), {"-launcher", "ssh", "-launcher-exec", o.launcher_exec});
  } else if (job.virtual_nodes) {
    l.argv.insert(l.argv.end(), {"-launcher", "fork"});
  }
  for (const auto& [k, v] : job.env) l.argv.insert(l.argv.end(), {"-genv", k, v});
  if (!job.virtual_nodes) {
    l.argv.insert(l.argv.end(), {"-hosts", HostList(RankNodes(job)), "-n", std::to_string(Ranks(job))});
    l.argv.insert(l.argv.end(), job.program.begin(), job.program.end());
    return l;
  }
  // Virtual nodes: one MPMD segment per run of ranks on one node, named by DLCKPT_NODE.
  bool first = true;
  for (const auto& [node, count] : job.segments) {
    if (!first) l.argv.push_back(":");
    first = false;
    l.argv.insert(l.argv.end(), {"-n", std::to_string(count), "-env", "DLCKPT_NODE", node});
    l.argv.insert(l.argv.end(), job.program.begin(), job.program.end());
  }
  return l;
}

Launch OmpiLaunch(const Options& o, const JobSpec& job, bool as_root) {
  Launch l;
  l.argv.push_back(o.mpiexec);
  // --mpiexec-args: its -x K=V go into every app context (below), the rest here.
  std::vector<std::string> xs;  // "K=V", in order
  std::string extra_preload;
  for (size_t i = 0; i < o.mpiexec_args.size(); ++i) {
    const std::string& a = o.mpiexec_args[i];
    if ((a == "-x" || a == "--x") && i + 1 < o.mpiexec_args.size()) {
      const std::string& kv = o.mpiexec_args[++i];
      if (kv.rfind("LD_PRELOAD=", 0) == 0 && !job.preload.empty()) {
        extra_preload = kv.substr(11);
      } else {
        xs.push_back(kv);
      }
      continue;
    }
    l.argv.push_back(a);
  }
  if (job.virtual_nodes) l.argv.push_back("--oversubscribe");
  if (!o.launcher_exec.empty()) l.argv.insert(l.argv.end(), {"--mca", "plm_rsh_agent", o.launcher_exec});
  if (as_root) l.env = {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"};

  // What every app context carries: LD_PRELOAD, the job's environment, --mpiexec-args' -x.
  std::vector<std::string> common;
  if (!job.preload.empty()) {
    common.insert(common.end(),
                  {"-x", "LD_PRELOAD=" + job.preload + (extra_preload.empty() ? "" : ":" + extra_preload)});
  }
  for (const auto& [k, v] : job.env) common.insert(common.end(), {"-x", k + "=" + v});
  for (const auto& kv : xs) common.insert(common.end(), {"-x", kv});
  if (!job.virtual_nodes) {
    for (const auto& name : job.forward) common.insert(common.end(), {"-x", name});
  }

  std::map<std::string, int> slots;  // hosts: every rank of the job on each
  if (!job.virtual_nodes) {
    for (const auto& [node, count] : job.segments) slots[node] += count;
  }
  bool first = true;
  for (const auto& [node, count] : job.segments) {
    if (!first) l.argv.push_back(":");
    first = false;
    l.argv.insert(l.argv.end(), {"-np", std::to_string(count)});
    if (job.virtual_nodes) {
      l.argv.insert(l.argv.end(), {"-x", "DLCKPT_NODE=" + node});
    } else {
      l.argv.insert(l.argv.end(), {"--host", node + ":" + std::to_string(slots[node])});
    }
    l.argv.insert(l.argv.end(), common.begin(), common.end());
    l.argv.insert(l.argv.end(), job.program.begin(), job.program.end());
  }
  return l;
}

Launch MpiLaunch(const Options& o, const JobSpec& job, bool as_root) {
  return o.mpi_flavor == "openmpi" ? OmpiLaunch(o, job, as_root) : MpiexecLaunch(o, job);
}

Result<Launch> SrunLaunch(const Options& o, const JobSpec& job, const std::string& dir,
                          const std::string& this_host) {
  Launch l;
  const int n = Ranks(job);
  const std::string prog_file = dir + "/" + job.name + ".multi-prog";
  l.argv = {o.srun,
            "--mpi=pmi2",
            "--kill-on-bad-exit=1",
            "--overlap",
            "--job-name=dlckpt-" + o.job + "-" + job.name,
            "--ntasks=" + std::to_string(n)};
  if (job.virtual_nodes) {
    l.argv.insert(l.argv.end(), {"--nodes=1", "--nodelist=" + this_host, "--overcommit"});
  } else {
    const std::string host_file = dir + "/" + job.name + ".hosts";
    std::string hosts;
    for (const auto& h : RankNodes(job)) hosts += h + "\n";
    l.files.emplace_back(host_file, hosts);
    l.env.push_back("SLURM_HOSTFILE=" + host_file);
    l.argv.push_back("--distribution=arbitrary");
    // A host running more ranks than --ranks-per-node (a lost node's ranks
    // relaunched on a survivor when no spare is left) exceeds the CPUs the
    // allocation gives the step there: Slurm refuses the step ("More
    // processors requested than permitted") unless it may overcommit. Only
    // then: an overcommitted step may share CPUs between all its tasks.
    std::map<std::string, int> per_host;
    int most = 0;
    for (const auto& h : RankNodes(job)) most = std::max(most, ++per_host[h]);
    if (most > o.ranks_per_node) l.argv.push_back("--overcommit");
  }
  l.argv.insert(l.argv.end(), o.srun_args.begin(), o.srun_args.end());
  l.argv.insert(l.argv.end(), {"--multi-prog", prog_file});

  std::string words;
  for (const auto& w : job.program) {
    DLCKPT_ASSIGN_OR_RETURN(std::string q, MultiProgWord(w));
    words += " " + q;
  }
  std::string preload;
  if (!job.preload.empty()) {
    DLCKPT_ASSIGN_OR_RETURN(preload, MultiProgWord("LD_PRELOAD=" + job.preload));
    preload = " " + preload;
  }
  std::string lines;
  int rank = 0;
  if (job.virtual_nodes) {
    for (const auto& [node, count] : job.segments) {
      DLCKPT_ASSIGN_OR_RETURN(std::string nv, MultiProgWord("DLCKPT_NODE=" + node));
      lines += std::to_string(rank) + "-" + std::to_string(rank + count - 1) + " env " + nv + preload + words + "\n";
      rank += count;
    }
  } else {
    lines = "0-" + std::to_string(n - 1) + " env" + preload + words + "\n";
  }
  l.files.emplace_back(prog_file, lines);
  for (const auto& [k, v] : job.env) l.env.push_back(k + "=" + v);
  return l;
}

namespace {

// A Slurm tool beside --srun (same installation), else from PATH.
std::string SlurmTool(const Options& o, const std::string& tool) {
  size_t slash = o.srun.rfind('/');
  return slash == std::string::npos ? tool : o.srun.substr(0, slash + 1) + tool;
}

}  // namespace

int KillSlurmSteps(const Options& o) {
  std::string cmd = SlurmTool(o, "squeue") + " --noheader --steps --format='%i %j' 2>/dev/null";
  std::FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return 0;
  std::vector<std::string> ids;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) {
    std::string id, name;
    std::string line(buf);
    size_t sp = line.find(' ');
    if (sp == std::string::npos) continue;
    id = line.substr(0, sp);
    name = line.substr(sp + 1);
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
    if (name != "dlckpt-" + o.job + "-app" && name != "dlckpt-" + o.job + "-codec") continue;
    if (id.empty() || id.find_first_not_of("0123456789._") != std::string::npos) continue;
    ids.push_back(id);
  }
  pclose(p);
  // scancel returns only once slurmctld has heard from every node of the step, a
  // dead one included (about 12 s here): the signals go out at once, so run them
  // in the background, bounded, and let the caller go on.
  for (const auto& id : ids) {
    std::string kill = "(timeout -k 1 30 " + SlurmTool(o, "scancel") + " --quiet --signal=KILL " + id +
                       " >/dev/null 2>&1 &)";
    (void)std::system(kill.c_str());
  }
  return static_cast<int>(ids.size());
}

Result<std::vector<std::string>> SlurmAllocationHosts() {
  const char* list = std::getenv("SLURM_JOB_NODELIST");
  if (list == nullptr || *list == '\0') {
    return Status::NotFound("--hosts slurm: SLURM_JOB_NODELIST is not set (run inside salloc or sbatch)");
  }
  std::FILE* p = popen("scontrol show hostnames \"$SLURM_JOB_NODELIST\" 2>&1", "r");
  if (p == nullptr) return Status::FromErrno(errno, "--hosts slurm: popen scontrol");
  std::vector<std::string> hosts;
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) {
    std::string h(buf);
    while (!h.empty() && (h.back() == '\n' || h.back() == ' ')) h.pop_back();
    out += h + " ";
    if (!h.empty()) hosts.push_back(h);
  }
  int rc = pclose(p);
  if (rc != 0) {
    return Status::Error(ECHILD, "--hosts slurm: scontrol show hostnames " + std::string(list) + " failed: " + out);
  }
  if (hosts.empty()) return Status::NotFound("--hosts slurm: SLURM_JOB_NODELIST " + std::string(list) + " is empty");
  return hosts;
}

}  // namespace dlckpt::run

// run_machine_limits.cc — whether a dlckpt-run job on virtual nodes fits
// this machine (its CPUs, RLIMIT_NPROC, the size of /dev/shm), checked before
// anything starts (run_options.h, ThisMachine and CheckMachineLimits).
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "dlckpt/base/units.h"
#include "run_options.h"

namespace dlckpt::run {

MachineLimits ThisMachine() {
  MachineLimits m;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  m.online_cpus = cpus > 0 ? cpus : 1;
  struct rlimit rl;
  // RLIMIT_NPROC binds neither root nor a process with CAP_SYS_RESOURCE; root is the common case.
  if (geteuid() != 0 && getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    m.max_processes = static_cast<uint64_t>(rl.rlim_cur);
  }
  struct statvfs sv;
  if (statvfs("/dev/shm", &sv) == 0) {
    m.shm_bytes = static_cast<uint64_t>(sv.f_blocks) * static_cast<uint64_t>(sv.f_frsize);
  }
  return m;
}

Status CheckMachineLimits(const Options& o, const MachineLimits& m) {
  if (o.oversubscribe || !o.hosts.empty()) return Status::OK();
  const uint64_t ranks = static_cast<uint64_t>(o.nodes) * static_cast<uint64_t>(o.ranks_per_node);
  const uint64_t codecs = static_cast<uint64_t>(o.nodes) + static_cast<uint64_t>(o.spares);
  const uint64_t procs = ranks + codecs;
  const uint64_t cpus = static_cast<uint64_t>(std::max(1L, m.online_cpus));
  const std::string what = "--nodes " + std::to_string(o.nodes) + " x --ranks-per-node " +
                           std::to_string(o.ranks_per_node) + " application rank(s) + " + std::to_string(codecs) +
                           " codec process(es) = " + std::to_string(procs) + " processes on this machine";
  const std::string hint = "; give fewer --nodes, --ranks-per-node or --spares, use --hosts, or --oversubscribe";
  if (procs > kProcessesPerCpu * cpus) {
    return Status::InvalidArgument(what + ", more than it can run (" + std::to_string(kProcessesPerCpu) +
                                   " per online CPU x " + std::to_string(cpus) + " = " +
                                   std::to_string(kProcessesPerCpu * cpus) + ")" + hint);
  }
  if (m.max_processes > 0 && procs > m.max_processes) {
    return Status::InvalidArgument(what + ", more than RLIMIT_NPROC (" + std::to_string(m.max_processes) + ")" + hint);
  }
  const unsigned __int128 stores = static_cast<unsigned __int128>(ranks) * o.capacity;
  if (m.shm_bytes > 0 && stores > m.shm_bytes) {
    return Status::InvalidArgument(std::to_string(ranks) + " store(s) of --capacity " + FormatSize(o.capacity) +
                                   " need more than /dev/shm holds (" + FormatSize(m.shm_bytes) + ")" + hint);
  }
  return Status::OK();
}

}  // namespace dlckpt::run

// app_mpi.cc — see app_mpi.h.
#include "app_mpi.h"

#include <sys/wait.h>

#include <cstdio>
#include <sstream>

#include "dlckpt/base/mpi_libraries.h"

namespace dlckpt::run {

namespace {

std::string ShellQuoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') {
      q += "'\\''";
    } else {
      q += c;
    }
  }
  return q + "'";
}

std::string MpiName(const std::string& flavor) { return flavor == "openmpi" ? "Open MPI" : "MPICH"; }

}  // namespace

ProgramMpi MpiLibrariesIn(const std::string& ldd_output) {
  ProgramMpi m;
  std::stringstream lines(ldd_output);
  std::string line;
  while (std::getline(lines, line)) {
    // "\tlibmpi.so.40 => /lib/x86_64-linux-gnu/libmpi.so.40 (0x...)" or
    // "\t/lib64/ld-linux-x86-64.so.2 (0x...)"; "libx.so => not found".
    std::stringstream words(line);
    std::string first, arrow, path;
    words >> first >> arrow;
    if (arrow == "=>") {
      words >> path;
      if (path.empty() || path[0] != '/') path = first;
    } else {
      path = first;
    }
    if (path.empty()) continue;
    const char* kind = dlckpt_mpi_library_kind(path.c_str());
    if (kind == nullptr) continue;
    std::string& slot = std::string(kind) == "mpich" ? m.mpich : m.openmpi;
    if (slot.empty()) slot = path;
  }
  return m;
}

std::optional<ProgramMpi> ProgramMpiLibraries(const std::string& path) {
  std::FILE* p = popen(("ldd " + ShellQuoted(path) + " 2>/dev/null").c_str(), "r");
  if (p == nullptr) return std::nullopt;
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int rc = pclose(p);
  if (rc == -1 || !WIFEXITED(rc) || WEXITSTATUS(rc) != 0) return std::nullopt;
  return MpiLibrariesIn(out);
}

Status CheckProgramMpi(const std::string& program, const ProgramMpi& m, const std::string& flavor,
                       const std::string& launcher) {
  const bool ours_openmpi = flavor == "openmpi";
  const std::string& other = ours_openmpi ? m.mpich : m.openmpi;
  if (other.empty()) return Status::OK();
  const std::string other_name = ours_openmpi ? "MPICH" : "Open MPI";
  const std::string fix = "build the application with " + MpiName(flavor) + "'s compiler wrappers (" +
                          (ours_openmpi ? "mpicc.openmpi" : "mpicc.mpich") + ", or dlckpt-cc), or use a dlckpt built "
                          "with -DDLCKPT_MPI=" + (ours_openmpi ? "mpich" : "openmpi");
  if (!m.mpich.empty() && !m.openmpi.empty()) {
    return Status::Unsupported(program + " is linked with two MPI libraries, MPICH (" + m.mpich + ") and Open MPI (" +
                               m.openmpi + "), and dlckpt is built with " + MpiName(flavor) +
                               ": its MPI calls would mix the two. Use one MPI: " + fix);
  }
  return Status::Unsupported(program + " is linked with " + other_name + " (" + other + "), and dlckpt is built with " +
                             MpiName(flavor) + ": its launcher (" + launcher + ") would start every rank as an " +
                             other_name + " job of its own, each rank 0 of 1. To run it, " + fix);
}

}  // namespace dlckpt::run

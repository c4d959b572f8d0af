// app_mpi.h — which MPI an application program is linked with, seen before
// dlckpt-run launches it.
//
// A program linked with the other MPI than dlckpt's is started by dlckpt's
// launcher as one MPI job per rank: Hydra's mpiexec starting an Open MPI
// binary, or Open MPI's mpirun starting an MPICH one, gives every rank
// "rank 0 of 1" (measured, docs/design.md "MPICH and Open MPI"), so the run
// is wrong without any error. dlckpt-run refuses such a program before it
// starts anything. The libraries are the dynamic loader's answer (ldd): the
// program's own dependencies and theirs (an HDF5 or a solver library built
// with an MPI counts). A program ldd cannot answer for (a script, a static
// binary, a missing ldd) is not checked; a script's interpreter (python3
// with mpi4py) is checked by the ranks at MPI_Init and dlckpt_init instead.
#ifndef DLCKPT_COORDINATOR_APP_MPI_H_
#define DLCKPT_COORDINATOR_APP_MPI_H_

#include <optional>
#include <string>

#include "dlckpt/base/status.h"

namespace dlckpt::run {

// The MPI libraries among a program's libraries: paths, or "" when absent.
struct ProgramMpi {
  std::string mpich;    // libmpich.so*
  std::string openmpi;  // libmpi.so.40*
};

// The MPI libraries named in `ldd_output` (lines "name => path (address)"
// or "path (address)"). Pure, for tests.
ProgramMpi MpiLibrariesIn(const std::string& ldd_output);

// ldd's answer for the program at `path` (as found in PATH: the
// supervisor's CheckProgram), or nullopt when there is none (no such file,
// not a dynamic executable, no ldd).
std::optional<ProgramMpi> ProgramMpiLibraries(const std::string& path);

// OK when `m` holds no MPI library, or only that of `flavor` ("mpich" or
// "openmpi", the MPI dlckpt is built with). Otherwise ENOTSUP (Unsupported),
// naming the program, the libraries, the launcher and what to do.
Status CheckProgramMpi(const std::string& program, const ProgramMpi& m, const std::string& flavor,
                       const std::string& launcher);

}  // namespace dlckpt::run

#endif  // DLCKPT_COORDINATOR_APP_MPI_H_

/* dlckpt/base/mpi_libraries.h: refusing a process that holds two MPI
 * libraries (C and C++, header only).
 *
 * MPICH (libmpich.so.12) and Open MPI (libmpi.so.40) export the same MPI_*
 * names with different handle representations (an MPI_Comm is an int in
 * MPICH, a pointer in Open MPI). A process that maps both — a Python whose
 * mpi4py loaded Open MPI, under a dlckpt preloaded with MPICH — binds each
 * call to whichever library the dynamic linker finds first, and fails with
 * raw MPI errors ("MPI_Comm_dup: invalid communicator", or an abort inside
 * mpi4py's import). dlckpt_init and the preload's MPI_Init interposers call
 * dlckpt_two_mpi_libraries first and fail with its message instead. */
#ifndef DLCKPT_BASE_MPI_LIBRARIES_H_
#define DLCKPT_BASE_MPI_LIBRARIES_H_

#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct dlckpt_mpi_libraries {
  char mpich[PATH_MAX];    /* first mapped MPICH library, or "" */
  char openmpi[PATH_MAX];  /* first mapped Open MPI library, or "" */
};

/* The implementation of a shared object by the name its file really has
 * (links followed: Debian's libmpi.so is an alternatives link): "mpich" for
 * libmpich.so*, "openmpi" for libmpi.so.40*, else NULL. */
static inline const char* dlckpt_mpi_library_kind(const char* path) {
  char real[PATH_MAX];
  const char* p = realpath(path, real) != NULL ? real : path;
  const char* slash = strrchr(p, '/');
  const char* base = slash != NULL ? slash + 1 : p;
  if (strncmp(base, "libmpich.so", 11) == 0) return "mpich";
  if (strncmp(base, "libmpi.so.40", 12) == 0) return "openmpi";
  return NULL;
}

static inline int dlckpt_collect_mpi_library(struct dl_phdr_info* info, size_t size, void* data) {
  struct dlckpt_mpi_libraries* m = (struct dlckpt_mpi_libraries*)data;
  (void)size;
  if (info->dlpi_name == NULL || info->dlpi_name[0] == '\0') return 0;
  const char* kind = dlckpt_mpi_library_kind(info->dlpi_name);
  char* slot = kind == NULL ? NULL : strcmp(kind, "mpich") == 0 ? m->mpich : m->openmpi;
  if (slot != NULL && slot[0] == '\0') snprintf(slot, PATH_MAX, "%s", info->dlpi_name);
  return 0;
}

/* Returns 1 and writes a message (at most cap bytes, NUL-terminated) naming
 * both libraries, `built_with` (DLCKPT_MPI_FLAVOR: the MPI dlckpt was built
 * with) and the fix when the process maps both MPICH's and Open MPI's library;
 * returns 0 and leaves msg alone otherwise. Calls no MPI function. */
static inline int dlckpt_two_mpi_libraries(const char* built_with, char* msg, size_t cap) {
  struct dlckpt_mpi_libraries m;
  m.mpich[0] = m.openmpi[0] = '\0';
  dl_iterate_phdr(dlckpt_collect_mpi_library, &m);
  if (m.mpich[0] == '\0' || m.openmpi[0] == '\0') return 0;
  snprintf(msg, cap,
           "two MPI libraries in one process: MPICH (%s) and Open MPI (%s); dlckpt is built with %s, "
           "and MPI calls would mix the two. Use one MPI: a dlckpt built with -DDLCKPT_MPI=openmpi for "
           "an Open MPI application (Debian's python3-mpi4py), or the application (mpi4py) built "
           "against the MPI dlckpt uses",
           m.mpich, m.openmpi, strcmp(built_with, "openmpi") == 0 ? "Open MPI" : "MPICH");
  return 1;
}

#endif /* DLCKPT_BASE_MPI_LIBRARIES_H_ */

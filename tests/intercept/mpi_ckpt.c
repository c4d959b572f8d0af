/* mpi_ckpt: each MPI rank writes its checkpoint file BASE/rank<r>.ckpt with
 * stdio and POSIX calls, then reads it back. Built by mpi.sh with the
 * non-CMake recipe (mpicc @dlckpt-intercept.flags). Waits without spinning. */
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void quiet_barrier(void) {
  MPI_Request req;
  int done = 0;
  MPI_Ibarrier(MPI_COMM_WORLD, &req);
  while (!done) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (!done) nanosleep(&(struct timespec){0, 100000}, NULL);
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char path[4096];
  snprintf(path, sizeof path, "%s/rank%d.ckpt", argc > 1 ? argv[1] : "/dlckpt", rank);
  FILE* f = fopen(path, "w");
  if (f == NULL) {
    fprintf(stderr, "rank %d: fopen %s: %s\n", rank, path, strerror(errno));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (int i = 0; i < 1000; ++i) fprintf(f, "rank %d value %d\n", rank, i * rank);
  fclose(f);
  int fd = open(path, O_RDONLY);
  char buf[32];
  int ok = fd >= 0 && read(fd, buf, 7) == 7 && memcmp(buf, "rank ", 5) == 0 && close(fd) == 0;
  quiet_barrier();
  MPI_Finalize();
  return ok ? 0 : 1;
}

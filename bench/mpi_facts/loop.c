/* loop.c: each rank prints "pid P rank R", then waits in MPI_Ibarrier +
 * MPI_Test + usleep(1000) forever (killrun.sh kills one). */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  printf("pid %d rank %d\n", (int)getpid(), rank);
  fflush(stdout);
  for (;;) {
    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    int done = 0;
    while (!done) {
      MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      usleep(1000);
    }
  }
}

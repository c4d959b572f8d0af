/* poll.c: CPU time of a rank blocked in MPI_Recv, then in MPI_Barrier, while
 * rank 0 sleeps 3 s before each (getrusage of each rank, per phase). */
#include <mpi.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

static double cpu_seconds(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, x = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Barrier(MPI_COMM_WORLD);
  double c0 = cpu_seconds(), w0 = MPI_Wtime();
  if (rank == 0) {
    sleep(3);
    MPI_Send(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
  } else if (rank == 1) {
    MPI_Recv(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  double c1 = cpu_seconds(), w1 = MPI_Wtime();
  if (rank == 0) sleep(3);
  MPI_Barrier(MPI_COMM_WORLD);
  double c2 = cpu_seconds(), w2 = MPI_Wtime();
  printf("rank %d recv-phase cpu %.2f/%.2f s  barrier-phase cpu %.2f/%.2f s\n", rank, c1 - c0, w1 - w0, c2 - c1,
         w2 - w1);
  MPI_Finalize();
  return 0;
}

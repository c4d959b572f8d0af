/* early_store.c [thread] [MIB] — issue 36: under LD_PRELOAD=libdlckpt_preload.so
 * an unmodified MPI program (it never calls dlckpt_init, as IOR) finds its
 * store made once MPI_Init (or, with "thread", MPI_Init_thread) returned,
 * before its first open. Prints per rank:
 *   rank R store_before_open 0|1 open_s T write_s T MiBps B
 * store_before_open: /dev/shm/dlckpt.$DLCKPT_JOB.$DLCKPT_NODE.rR existed
 * before the first open under /dlckpt; open_s: that open (O_CREAT); write_s
 * and MiBps: MIB MiB (default 64) written in 1 MiB transfers, then close.
 * Exits 1 on an I/O error, naming the path and errno. */
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  int threaded = argc > 1 && strcmp(argv[1], "thread") == 0;
  int mib = argc > 2 ? atoi(argv[2]) : 64;
  if (threaded) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  } else {
    MPI_Init(&argc, &argv);
  }
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char* job = getenv("DLCKPT_JOB");
  const char* node = getenv("DLCKPT_NODE");
  char shm[512];
  snprintf(shm, sizeof shm, "/dev/shm/dlckpt.%s.%s.r%d", job ? job : "local", node ? node : "?", rank);
  int before = access(shm, F_OK) == 0;
  char path[64];
  snprintf(path, sizeof path, "/dlckpt/early/f.%d", rank);
  static char buf[1 << 20];
  memset(buf, 'a' + rank % 26, sizeof buf);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
  double t1 = MPI_Wtime();
  if (fd < 0) {
    fprintf(stderr, "early_store: rank %d: open %s: %s\n", rank, path, strerror(errno));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (int i = 0; i < mib; ++i) {
    if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) {
      fprintf(stderr, "early_store: rank %d: write %s: %s\n", rank, path, strerror(errno));
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  if (close(fd) != 0) {
    fprintf(stderr, "early_store: rank %d: close %s: %s\n", rank, path, strerror(errno));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  double t2 = MPI_Wtime();
  printf("rank %d store_before_open %d open_s %.6f write_s %.6f MiBps %.1f\n", rank, before, t1 - t0,
         t2 - t0, t2 > t0 ? mib / (t2 - t0) : 0.0);
  fflush(stdout);
  MPI_Finalize();
  return 0;
}

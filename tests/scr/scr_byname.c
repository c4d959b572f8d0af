/* scr_byname: an SCR application that restarts by checkpoint name, as SCR's
 * own examples do. It checkpoints with SCR_Start_checkpoint (the dataset is
 * named by SCR: scr.dataset.<N>) into ckpt.<iteration>/rank_NNNNN.ckpt and, on
 * restart, reads "<name from SCR_Start_restart>/rank_NNNNN.ckpt": a path that
 * was never written, found by its base name (SCR 3.1's SCR_Route_file).
 * After each checkpoint it asks SCR_Should_exit and stops if told to.
 *
 *   scr_byname [--iters N] [--sleep-ms MS] [--fail-restart exit|kill]
 *
 * --fail-restart: after a checkpoint, route a file the checkpoint does not
 * hold (it must fail) and end without SCR_Finalize, by exit(3) or by
 * SIGKILL: no staging directory may be left behind.
 * Prints "restarted from iteration K (checkpoint NAME)", "checkpoint:
 * iteration K", "should_exit: iteration K" and "checksum: X" (the same for
 * any failure-free or restarted run of the same iterations). */
#include <mpi.h>
#include <scr.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N 512

static int g_rank, g_size;

static void die(const char* what) {
  fprintf(stderr, "scr_byname: rank %d: %s failed\n", g_rank, what);
  MPI_Abort(MPI_COMM_WORLD, 2);
}

int main(int argc, char** argv) {
  int iters = 20, sleep_ms = 0;
  const char* fail_restart = NULL;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--sleep-ms")) sleep_ms = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--fail-restart")) fail_restart = argv[i + 1];
    else { fprintf(stderr, "scr_byname: unknown option %s\n", argv[i]); return 2; }
  }
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  if (SCR_Init() != SCR_SUCCESS) die("SCR_Init");

  double x[N];
  for (int i = 0; i < N; ++i) x[i] = (double)(g_rank * N + i);
  int start = 0, have = 0;
  char name[SCR_MAX_FILENAME], path[SCR_MAX_FILENAME + 32], file[SCR_MAX_FILENAME];
  if (SCR_Have_restart(&have, name) != SCR_SUCCESS) die("SCR_Have_restart");
  if (have) {
    if (SCR_Start_restart(name) != SCR_SUCCESS) die("SCR_Start_restart");
    snprintf(path, sizeof path, "%s/rank_%05d.ckpt", name, g_rank);
    int valid = 0;
    if (SCR_Route_file(path, file) == SCR_SUCCESS) {
      FILE* f = fopen(file, "rb");
      if (f) {
        valid = fread(&start, sizeof start, 1, f) == 1 && fread(x, sizeof x, 1, f) == 1;
        fclose(f);
      }
    }
    if (SCR_Complete_restart(valid) != SCR_SUCCESS) die("SCR_Complete_restart");
    if (g_rank == 0) printf("restarted from iteration %d (checkpoint %s)\n", start, name);
  }
  fflush(stdout);

  for (int it = start; it < iters; ++it) {
    double local = 0, sum = 0;
    for (int i = 0; i < N; ++i) local += x[i];
    MPI_Allreduce(&local, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < N; ++i) x[i] = 0.5 * x[i] + sum / (4.0 * N * g_size) + (double)((it + i) % 5);
    if (sleep_ms > 0) {
      struct timespec ts = {sleep_ms / 1000, (long)(sleep_ms % 1000) * 1000000L};
      nanosleep(&ts, NULL);
    }
    int need = 0;
    if (SCR_Need_checkpoint(&need) != SCR_SUCCESS) die("SCR_Need_checkpoint");
    if (!need) continue;
    if (SCR_Start_checkpoint() != SCR_SUCCESS) die("SCR_Start_checkpoint");
    snprintf(path, sizeof path, "ckpt.%d/rank_%05d.ckpt", it + 1, g_rank);
    int valid = 0, next = it + 1;
    if (SCR_Route_file(path, file) == SCR_SUCCESS) {
      FILE* f = fopen(file, "wb");
      if (f) {
        valid = fwrite(&next, sizeof next, 1, f) == 1 && fwrite(x, sizeof x, 1, f) == 1;
        valid = fclose(f) == 0 && valid;
      }
    }
    if (SCR_Complete_checkpoint(valid) != SCR_SUCCESS) die("SCR_Complete_checkpoint");
    if (g_rank == 0) printf("checkpoint: iteration %d\n", next);
    fflush(stdout);
    if (fail_restart) {
      /* A restart file the checkpoint does not hold: refused, and then the
       * application gives up without SCR_Finalize. */
      if (SCR_Route_file("scr.dataset.1/no_such_file.ckpt", file) == SCR_SUCCESS) die("a missing file was routed");
      if (g_rank == 0) printf("route of a missing file failed\n");
      fflush(stdout);
      MPI_Barrier(MPI_COMM_WORLD);
      if (!strcmp(fail_restart, "kill")) raise(SIGKILL);
      exit(3);
    }
    int stop = 0;
    if (SCR_Should_exit(&stop) != SCR_SUCCESS) die("SCR_Should_exit");
    if (stop) {
      if (g_rank == 0) printf("should_exit: iteration %d\n", next);
      break;
    }
  }
  double local = 0, sum = 0;
  for (int i = 0; i < N; ++i) local += x[i] * (double)(g_rank * N + i + 1);
  MPI_Reduce(&local, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  if (g_rank == 0) printf("checksum: %.17g\n", sum);
  if (SCR_Finalize() != SCR_SUCCESS) die("SCR_Finalize");
  MPI_Finalize();
  return 0;
}

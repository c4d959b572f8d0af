/* ckpt_app: a small MPI application that checkpoints through the dlckpt
 * application API and plain stdio under /dlckpt (the static I/O wrappers
 * route it into memfs), built by tests/install/ against an installed dlckpt
 * only. Each rank evolves a vector of doubles, coupled by an allreduce per
 * iteration, and checkpoints every iteration.
 *
 *   ckpt_app [--iters N] [--n N] [--sleep-ms MS]
 *
 * Prints "restarted from iteration K" after a restart and "checksum: <hex>"
 * at the end (the same for a failure-free and a recovered run). */
#include <dlckpt/dlckpt.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int g_rank, g_size;

static void die(const char* what) {
  fprintf(stderr, "ckpt_app: rank %d: %s: %s\n", g_rank, what, dlckpt_last_error());
  MPI_Abort(MPI_COMM_WORLD, 2);
}

int main(int argc, char** argv) {
  int iters = 16, n = 1000, sleep = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--n")) n = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--sleep-ms")) sleep = atoi(argv[i + 1]);
  }
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  if (dlckpt_init(MPI_COMM_WORLD) != 0) die("dlckpt_init");
  double* x = malloc(sizeof(double) * (size_t)n);
  if (!x) die("malloc");
  for (int i = 0; i < n; ++i) x[i] = (double)(g_rank * n + i) / (double)(g_size * n);
  char path[64];
  snprintf(path, sizeof path, "/dlckpt/app/rank_%d.dat", g_rank);
  int start = 0;
  if (dlckpt_restarted_epoch() > 0) {
    FILE* f = fopen(path, "rb");
    if (!f || fread(&start, sizeof start, 1, f) != 1 || fread(x, sizeof *x, (size_t)n, f) != (size_t)n) {
      die("reading the checkpoint");
    }
    fclose(f);
    if (g_rank == 0) printf("restarted from iteration %d\n", start);
  }
  for (int it = start; it < iters; ++it) {
    double local = 0, global = 0;
    for (int i = 0; i < n; ++i) local += x[i];
    MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double mean = global / (double)(g_size * n);
    for (int i = 0; i < n; ++i) x[i] = 0.5 * x[i] + 0.25 * mean + 0.25 * ((it + i) % 7) / 7.0;
    if (sleep) {
      struct timespec ts = {sleep / 1000, (long)(sleep % 1000) * 1000000L};
      nanosleep(&ts, NULL);
    }
    int next = it + 1;
    FILE* f = fopen(path, "wb");
    if (!f || fwrite(&next, sizeof next, 1, f) != 1 || fwrite(x, sizeof *x, (size_t)n, f) != (size_t)n ||
        fclose(f) != 0) {
      die("writing the checkpoint");
    }
    if (dlckpt_checkpoint() != 0) die("dlckpt_checkpoint");
    if (g_rank == 0) printf("checkpoint: iteration %d\n", next);
    fflush(stdout);
  }
  uint64_t h = 0, all = 0;
  for (int i = 0; i < n; ++i) {
    uint64_t b;
    memcpy(&b, &x[i], sizeof b);
    h += b * (uint64_t)(2 * (g_rank * n + i) + 1);
  }
  MPI_Allreduce(&h, &all, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) printf("checksum: %016llx\n", (unsigned long long)all);
  free(x);
  if (dlckpt_finalize() != 0) die("dlckpt_finalize");
  MPI_Finalize();
  return 0;
}

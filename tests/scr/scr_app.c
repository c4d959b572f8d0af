/* scr_app: an MPI application written from SCR's documented usage pattern,
 * built against scr.h and libdlckpt_scr only. Each rank evolves a vector of
 * doubles, coupled through an allreduce each iteration; its state (iteration
 * and vector) is its checkpoint file ckpt/rank_<r>.dat.
 *
 *   scr_app [--iters N] [--n N] [--sleep-ms MS] [--interval K] [--mode new|old|errors]
 *
 * --interval K: SCR_Configf("SCR_CHECKPOINT_INTERVAL=%d") before SCR_Init
 *         (checkpoint every K-th SCR_Need_checkpoint; default: every call).
 * new:    restart with SCR_Have_restart / SCR_Start_restart / SCR_Route_file /
 *         SCR_Complete_restart, then checkpoint with SCR_Need_checkpoint,
 *         SCR_Start_output, SCR_Route_file, write, SCR_Complete_output.
 * old:    the older restart pattern (SCR_Route_file right after SCR_Init,
 *         outside any phase; failing means there is no checkpoint) and
 *         SCR_Start_checkpoint / SCR_Complete_checkpoint.
 * errors: the error paths: SCR_Complete_output without SCR_Start_output,
 *         SCR_Start_restart with no checkpoint, valid = 0 on rank 1 only
 *         (discarded everywhere; the checkpoint before it stays the newest),
 *         a routed file never written, a checkpoint too large for rank 1's
 *         store (run with 16 MiB stores); prints "errors: ok".
 * Prints "restarted from iteration K" after a restart and, at the end,
 * "checksum: <hex>" (the same for any failure-free or restarted run). */
#include <mpi.h>
#include <scr.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int g_rank, g_size;

static void die(const char* what) {
  fprintf(stderr, "scr_app: rank %d: %s failed\n", g_rank, what);
  MPI_Abort(MPI_COMM_WORLD, 2);
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* ckpt/rank_<r>.dat: iteration, n, then n doubles. 1 on success. */
static int write_state(const char* path, int iter, int n, const double* x) {
  FILE* f = fopen(path, "wb");
  if (!f) return 0;
  int ok = fwrite(&iter, sizeof iter, 1, f) == 1 && fwrite(&n, sizeof n, 1, f) == 1 &&
           fwrite(x, sizeof *x, (size_t)n, f) == (size_t)n;
  return fclose(f) == 0 && ok;
}

static int read_state(const char* path, int* iter, int n, double* x) {
  FILE* f = fopen(path, "rb");
  if (!f) return 0;
  int m = 0;
  int ok = fread(iter, sizeof *iter, 1, f) == 1 && fread(&m, sizeof m, 1, f) == 1 && m == n &&
           fread(x, sizeof *x, (size_t)n, f) == (size_t)n;
  fclose(f);
  return ok;
}

static void init_state(int n, double* x) {
  for (int i = 0; i < n; ++i) x[i] = (double)(g_rank * n + i) / (double)(g_size * n);
}

static void step(int iter, int n, double* x) {
  double local = 0, global = 0;
  for (int i = 0; i < n; ++i) local += x[i];
  MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  double mean = global / (double)(g_size * n);
  for (int i = 0; i < n; ++i) x[i] = 0.5 * x[i] + 0.25 * mean + 0.25 * ((iter + i) % 7) / 7.0;
}

static int checkpoint(int iter, int n, const double* x, int old_api, int valid_here) {
  char name[64], file[SCR_MAX_FILENAME], rel[64];
  snprintf(name, sizeof name, "step.%d", iter);
  if (old_api ? SCR_Start_checkpoint() : SCR_Start_output(name, SCR_FLAG_CHECKPOINT)) die("SCR_Start_output");
  snprintf(rel, sizeof rel, "ckpt/rank_%d.dat", g_rank);
  int valid = SCR_Route_file(rel, file) == SCR_SUCCESS && write_state(file, iter, n, x) && valid_here;
  return old_api ? SCR_Complete_checkpoint(valid) : SCR_Complete_output(valid);
}

/* The error paths; every check must hold on every rank. */
static void errors(int n, double* x) {
  char name[SCR_MAX_FILENAME], file[SCR_MAX_FILENAME];
  int have = -1, bad = 0;
  if (SCR_Complete_output(1) != SCR_FAILURE) bad |= 1;
  if (SCR_Have_restart(&have, name) != SCR_SUCCESS || have != 0) bad |= 2;
  if (SCR_Start_restart(name) != SCR_FAILURE) bad |= 4;
  if (SCR_Route_file("ckpt/none.dat", file) != SCR_FAILURE) bad |= 8;  /* no checkpoint yet */
  if (checkpoint(1, n, x, 0, 1) != SCR_SUCCESS) bad |= 16;
  /* valid = 0 on rank 1 only: discarded on every rank. */
  x[0] += 1;
  if (checkpoint(2, n, x, 0, g_rank != 1) != SCR_FAILURE) bad |= 32;
  /* The newest checkpoint is still step.1 (old pattern: outside any phase). */
  int iter = -1;
  char rel[64];
  snprintf(rel, sizeof rel, "ckpt/rank_%d.dat", g_rank);
  if (SCR_Route_file(rel, file) != SCR_SUCCESS || !read_state(file, &iter, n, x) || iter != 1) bad |= 64;
  /* A checkpoint larger than rank 1's store (24 MiB; the test's stores hold
   * 16 MiB): invalid on every rank, and step.1 stays the newest. */
  int big_n = g_rank == 1 ? 3 << 20 : n;
  double* big = calloc((size_t)big_n, sizeof *big);
  if (!big || checkpoint(3, big_n, big, 0, 1) != SCR_FAILURE) bad |= 16384;
  free(big);
  iter = -1;
  if (SCR_Route_file(rel, file) != SCR_SUCCESS || !read_state(file, &iter, n, x) || iter != 1) bad |= 32768;
  /* A routed file never written makes the dataset invalid everywhere. */
  if (SCR_Start_output("unwritten", SCR_FLAG_CHECKPOINT) != SCR_SUCCESS) bad |= 128;
  if (g_rank == 0 && SCR_Route_file("never.dat", file) != SCR_SUCCESS) bad |= 256;
  if (SCR_Complete_output(1) != SCR_FAILURE) bad |= 512;
  if (SCR_Start_output("a", SCR_FLAG_CHECKPOINT) != SCR_SUCCESS) bad |= 1024;
  if (SCR_Start_output("b", SCR_FLAG_CHECKPOINT) != SCR_FAILURE) bad |= 2048;  /* nested */
  if (SCR_Complete_output(1) != SCR_SUCCESS) bad |= 4096;  /* no files: valid */
  if (SCR_Config("SCR_CHECKPOINT_SECONDS=5") != NULL) bad |= 8192;  /* set after SCR_Init */
  int all = 0;
  MPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_BOR, MPI_COMM_WORLD);
  if (g_rank == 0) {
    if (all) printf("errors: FAILED (mask %d)\n", all);
    else printf("errors: ok\n");
  }
}

int main(int argc, char** argv) {
  int iters = 16, n = 1000, sleep = 0, interval = 0;
  const char* mode = "new";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--n")) n = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--sleep-ms")) sleep = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--mode")) mode = argv[i + 1];
    else if (!strcmp(argv[i], "--interval")) interval = atoi(argv[i + 1]);
    else { fprintf(stderr, "scr_app: unknown option %s\n", argv[i]); return 2; }
  }
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  if (interval > 0) {
    /* Set, then query (a malloc'ed copy), before SCR_Init. */
    const char* set = SCR_Configf("SCR_CHECKPOINT_INTERVAL=%d", interval);
    char* got = (char*)SCR_Config("SCR_CHECKPOINT_INTERVAL");
    if (!set || !got || atoi(got) != interval) die("SCR_Config");
    free(got);
  }
  if (SCR_Init() != SCR_SUCCESS) die("SCR_Init");
  if (g_rank == 0) printf("scr_app: %s, %d ranks\n", SCR_Get_version(), g_size);
  double* x = malloc(sizeof(double) * (size_t)n);
  if (!x) die("malloc");
  init_state(n, x);
  int old_api = !strcmp(mode, "old");
  if (!strcmp(mode, "errors")) {
    errors(n, x);
    if (SCR_Finalize() != SCR_SUCCESS) die("SCR_Finalize");
    MPI_Finalize();
    return 0;
  }

  int start = 0;
  char rel[64], file[SCR_MAX_FILENAME], name[SCR_MAX_FILENAME];
  snprintf(rel, sizeof rel, "ckpt/rank_%d.dat", g_rank);
  if (old_api) {
    /* Older pattern: route right after SCR_Init; failure = no checkpoint. */
    int found = SCR_Route_file(rel, file) == SCR_SUCCESS && read_state(file, &start, n, x);
    int all = 0;
    MPI_Allreduce(&found, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) {
      start = 0;
      init_state(n, x);
    }
  } else {
    int have = 0;
    if (SCR_Have_restart(&have, name) != SCR_SUCCESS) die("SCR_Have_restart");
    if (have) {
      if (SCR_Start_restart(name) != SCR_SUCCESS) die("SCR_Start_restart");
      int valid = SCR_Route_file(rel, file) == SCR_SUCCESS && read_state(file, &start, n, x);
      if (SCR_Complete_restart(valid) != SCR_SUCCESS) {
        start = 0;
        init_state(n, x);
      }
    }
  }
  if (start > 0 && g_rank == 0) printf("restarted from iteration %d\n", start);
  fflush(stdout);

  for (int it = start; it < iters; ++it) {
    step(it, n, x);
    if (sleep) sleep_ms(sleep);
    int need = 0;
    if (SCR_Need_checkpoint(&need) != SCR_SUCCESS) die("SCR_Need_checkpoint");
    if (need) {
      if (checkpoint(it + 1, n, x, old_api, 1) != SCR_SUCCESS) die("SCR_Complete_output");
      if (g_rank == 0) printf("checkpoint: iteration %d\n", it + 1);
      fflush(stdout);
    }
    int stop = 0;
    if (SCR_Should_exit(&stop) != SCR_SUCCESS) die("SCR_Should_exit");
    if (stop) break;
  }
  /* Order-independent checksum of the bits of every value. */
  uint64_t h = 0, all = 0;
  for (int i = 0; i < n; ++i) {
    uint64_t b;
    memcpy(&b, &x[i], sizeof b);
    h += b * (uint64_t)(2 * (g_rank * n + i) + 1);
  }
  MPI_Allreduce(&h, &all, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) printf("checksum: %016llx\n", (unsigned long long)all);
  free(x);
  if (SCR_Finalize() != SCR_SUCCESS) die("SCR_Finalize");
  MPI_Finalize();
  return 0;
}

/* A VeloC application, written to VeloC's documented API only (veloc.h):
 * a 1-D heat-diffusion ring in the style of VeloC's heatdis example. Every
 * rank protects its iteration counter (region 0) and its grid (region 1);
 * each iteration it checkpoints ("veloc_app", version = iteration):
 *  - default (hybrid): VELOC_Checkpoint_wait, VELOC_Checkpoint_begin,
 *    VELOC_Checkpoint_mem, VELOC_Route_file + its own file (a second array
 *    and a text line, written with stdio), VELOC_Checkpoint_end; restart
 *    with VELOC_Restart_test, VELOC_Restart_begin, VELOC_Recover_mem,
 *    VELOC_Route_file + reading the file, VELOC_Restart_end;
 *  - --simple: VELOC_Checkpoint and VELOC_Restart, memory only (the second
 *    array is region 2).
 * Rank 0 prints "restarted from iteration K" after a restart that recovered
 * K > 0 and, last, "checksum: <hex>" of every rank's grid and file array.
 *
 *   veloc_app CFG [--iters N] [--sleep-ms S] [--simple | --errors] */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <veloc.h>

enum { kCells = 4096, kAux = 1024 };

static int g_rank;

static void fail(const char* what) {
  fprintf(stderr, "veloc_app rank %d: %s failed\n", g_rank, what);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return x;
}

/* --errors: calls VeloC documents as failing, each VELOC_FAILURE, then one
 * checkpoint and its restart within the run. Prints "veloc_app errors: ok". */
static void run_error_checks(const char* cfg) {
#define EXPECT(cond) \
  if (!(cond)) fail(#cond)
  char path[VELOC_MAX_NAME];
  int x = 5, y[4] = {1, 2, 3, 4};
  EXPECT(VELOC_Init(MPI_COMM_WORLD, "/nonexistent/veloc.cfg") == VELOC_FAILURE);
  EXPECT(VELOC_Init_single(0, cfg) == VELOC_FAILURE);
  EXPECT(VELOC_Init(MPI_COMM_WORLD, cfg) == VELOC_SUCCESS);
  EXPECT(VELOC_Mem_protect(-1, &x, 1, sizeof x) == VELOC_FAILURE);
  EXPECT(VELOC_Mem_unprotect(3) == VELOC_FAILURE);
  EXPECT(VELOC_Mem_protect(0, &x, 1, sizeof x) == VELOC_SUCCESS);
  EXPECT(VELOC_Route_file("f", path) == VELOC_FAILURE);  /* outside a phase */
  EXPECT(VELOC_Checkpoint_mem() == VELOC_FAILURE);
  EXPECT(VELOC_Restart_test("errs", 0) == VELOC_FAILURE);  /* nothing to restart from */
  EXPECT(VELOC_Checkpoint_begin("a/b", 1) == VELOC_FAILURE);
  EXPECT(VELOC_Checkpoint_begin("errs", 4) == VELOC_SUCCESS);
  EXPECT(VELOC_Checkpoint_begin("errs", 5) == VELOC_FAILURE);  /* a phase is open */
  EXPECT(VELOC_Checkpoint_selective(VELOC_CKPT_SOME, (int[]){7}, 1) == VELOC_FAILURE);  /* not protected */
  EXPECT(VELOC_Checkpoint_selective(3, NULL, 0) == VELOC_FAILURE);                      /* no such mode */
  EXPECT(VELOC_Checkpoint_mem() == VELOC_SUCCESS);
  EXPECT(VELOC_Checkpoint_end(g_rank != 1) == VELOC_FAILURE);  /* one rank failed: none taken */
  EXPECT(VELOC_Restart_test("errs", 0) == VELOC_FAILURE);
  EXPECT(VELOC_Checkpoint("errs", 4) == VELOC_SUCCESS);
  EXPECT(VELOC_Checkpoint("errs", 4) == VELOC_FAILURE);  /* versions increase */
  EXPECT(VELOC_Restart_test("errs", 0) == 4);
  EXPECT(VELOC_Restart_test("errs", 4) == VELOC_FAILURE);  /* only versions below 4 */
  EXPECT(VELOC_Restart_test("other", 0) == VELOC_FAILURE);
  EXPECT(VELOC_Restart_begin("errs", 3) == VELOC_FAILURE);
  x = 0;
  EXPECT(VELOC_Mem_protect(1, y, 4, sizeof y[0]) == VELOC_SUCCESS);  /* not in the checkpoint */
  EXPECT(VELOC_Restart_begin("errs", 4) == VELOC_SUCCESS);
  EXPECT(VELOC_Recover_size(0) == (int)sizeof x && VELOC_Recover_size(1) == -1);
  EXPECT(VELOC_Recover_mem() == VELOC_FAILURE && x == 0);  /* region 1 is missing: nothing copied */
  EXPECT(VELOC_Recover_selective(VELOC_RECOVER_REST, (int[]){1}, 1) == VELOC_SUCCESS && x == 5);
  EXPECT(VELOC_Route_file("f", path) == VELOC_FAILURE);  /* the checkpoint holds no file */
  EXPECT(VELOC_Restart_end(1) == VELOC_SUCCESS);
  /* A selective checkpoint holds only the regions chosen; the next full one
   * holds every region again. */
  EXPECT(VELOC_Checkpoint_begin("errs", 5) == VELOC_SUCCESS);
  EXPECT(VELOC_Checkpoint_selective(VELOC_CKPT_REST, (int[]){0}, 1) == VELOC_SUCCESS);  /* region 1 only */
  EXPECT(VELOC_Checkpoint_end(1) == VELOC_SUCCESS);
  EXPECT(VELOC_Restart_test("errs", 0) == 5);
  y[0] = 9;
  EXPECT(VELOC_Restart_begin("errs", 5) == VELOC_SUCCESS);
  EXPECT(VELOC_Recover_size(0) == -1 && VELOC_Recover_size(1) == (int)sizeof y);
  EXPECT(VELOC_Recover_selective(VELOC_RECOVER_SOME, (int[]){1}, 1) == VELOC_SUCCESS && y[0] == 1);
  EXPECT(VELOC_Restart_end(1) == VELOC_SUCCESS);
  EXPECT(VELOC_Checkpoint_begin("errs", 6) == VELOC_SUCCESS);
  EXPECT(VELOC_Checkpoint_selective(VELOC_CKPT_SOME, (int[]){0}, 1) == VELOC_SUCCESS);
  EXPECT(VELOC_Checkpoint_mem() == VELOC_SUCCESS);  /* the last call wins: all */
  EXPECT(VELOC_Checkpoint_end(1) == VELOC_SUCCESS);
  EXPECT(VELOC_Restart_begin("errs", 6) == VELOC_SUCCESS);
  EXPECT(VELOC_Recover_size(0) == (int)sizeof x && VELOC_Recover_size(1) == (int)sizeof y);
  EXPECT(VELOC_Restart_end(1) == VELOC_SUCCESS);
  EXPECT(VELOC_Finalize(0) == VELOC_SUCCESS);
  if (g_rank == 0) printf("veloc_app errors: ok\n");
#undef EXPECT
}

int main(int argc, char** argv) {
  int iters = 10, sleep_ms = 50, simple = 0, errors = 0;
  const char* cfg = argc > 1 ? argv[1] : NULL;
  for (int i = 2; i < argc; ++i) {
    if (!strcmp(argv[i], "--simple")) simple = 1;
    else if (!strcmp(argv[i], "--errors")) errors = 1;
    else if (i + 1 < argc && !strcmp(argv[i], "--iters")) iters = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--sleep-ms")) sleep_ms = atoi(argv[++i]);
  }
  MPI_Init(&argc, &argv);
  int size;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (errors) {
    run_error_checks(cfg);
    MPI_Finalize();
    return 0;
  }
  if (VELOC_Init(MPI_COMM_WORLD, cfg) != VELOC_SUCCESS) fail("VELOC_Init");

  int it = 0;
  double* h = malloc(kCells * sizeof(double));
  double* g = malloc(kCells * sizeof(double));
  uint64_t aux[kAux];
  for (int i = 0; i < kCells; ++i) h[i] = (double)((g_rank * 131 + i * 7) % 100);
  for (int i = 0; i < kAux; ++i) aux[i] = mix((uint64_t)g_rank * 1000003u + (uint64_t)i);
  if (VELOC_Mem_protect(0, &it, 1, sizeof(int)) != VELOC_SUCCESS) fail("VELOC_Mem_protect");
  if (VELOC_Mem_protect(1, h, kCells, sizeof(double)) != VELOC_SUCCESS) fail("VELOC_Mem_protect");
  /* Without a file, the second array is a region too. */
  if (simple && VELOC_Mem_protect(2, aux, kAux, sizeof aux[0]) != VELOC_SUCCESS) fail("VELOC_Mem_protect");

  int v = VELOC_Restart_test("veloc_app", 0);
  if (v > 0) {
    if (simple) {
      if (VELOC_Restart("veloc_app", v) != VELOC_SUCCESS) fail("VELOC_Restart");
    } else {
      char path[VELOC_MAX_NAME];
      if (VELOC_Restart_begin("veloc_app", v) != VELOC_SUCCESS) fail("VELOC_Restart_begin");
      if (VELOC_Recover_size(1) != (int)(kCells * sizeof(double))) fail("VELOC_Recover_size");
      if (VELOC_Recover_mem() != VELOC_SUCCESS) fail("VELOC_Recover_mem");
      if (VELOC_Route_file("aux.dat", path) != VELOC_SUCCESS) fail("VELOC_Route_file");
      FILE* f = fopen(path, "rb");
      int ok = f != NULL;
      int r = -1, fit = -1;
      char header[64]; /* the line alone: fscanf's "\n" would eat leading data bytes too */
      if (ok) ok = fgets(header, sizeof header, f) != NULL;
      if (ok) ok = sscanf(header, "veloc_app rank %d iteration %d", &r, &fit) == 2 && r == g_rank && fit == it;
      if (ok) ok = fread(aux, sizeof aux[0], kAux, f) == kAux;
      if (f) fclose(f);
      if (VELOC_Restart_end(ok) != VELOC_SUCCESS) fail("VELOC_Restart_end");
    }
    if (it != v) fail("the recovered counter");
    if (g_rank == 0) printf("restarted from iteration %d\n", it);
  }

  const int left = (g_rank + size - 1) % size, right = (g_rank + 1) % size;
  while (it < iters) {
    double from_left, from_right;
    MPI_Sendrecv(&h[kCells - 1], 1, MPI_DOUBLE, right, 0, &from_left, 1, MPI_DOUBLE, left, 0, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    MPI_Sendrecv(&h[0], 1, MPI_DOUBLE, left, 1, &from_right, 1, MPI_DOUBLE, right, 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    for (int i = 0; i < kCells; ++i) {
      double l = i > 0 ? h[i - 1] : from_left, r = i < kCells - 1 ? h[i + 1] : from_right;
      g[i] = 0.25 * l + 0.5 * h[i] + 0.25 * r;
    }
    memcpy(h, g, kCells * sizeof(double));
    for (int i = 0; i < kAux; ++i) aux[i] = mix(aux[i] + (uint64_t)h[i % kCells]);
    ++it;
    struct timespec ts = {0, (long)sleep_ms * 1000000L};
    nanosleep(&ts, NULL);
    if (simple) {
      if (VELOC_Checkpoint("veloc_app", it) != VELOC_SUCCESS) fail("VELOC_Checkpoint");
      continue;
    }
    char path[VELOC_MAX_NAME];
    if (VELOC_Checkpoint_wait() != VELOC_SUCCESS) fail("VELOC_Checkpoint_wait");
    if (VELOC_Checkpoint_begin("veloc_app", it) != VELOC_SUCCESS) fail("VELOC_Checkpoint_begin");
    if (VELOC_Checkpoint_mem() != VELOC_SUCCESS) fail("VELOC_Checkpoint_mem");
    if (VELOC_Route_file("aux.dat", path) != VELOC_SUCCESS) fail("VELOC_Route_file");
    FILE* f = fopen(path, "wb");
    int ok = f != NULL;
    if (ok) ok = fprintf(f, "veloc_app rank %d iteration %d\n", g_rank, it) > 0;
    if (ok) ok = fwrite(aux, sizeof aux[0], kAux, f) == kAux;
    if (f && fclose(f) != 0) ok = 0;
    if (VELOC_Checkpoint_end(ok) != VELOC_SUCCESS) fail("VELOC_Checkpoint_end");
  }

  uint64_t hash = mix((uint64_t)g_rank + 1), total = 0;
  for (int i = 0; i < kCells; ++i) {
    uint64_t bits;
    memcpy(&bits, &h[i], sizeof bits);
    hash = mix(hash ^ bits);
  }
  for (int i = 0; i < kAux; ++i) hash = mix(hash ^ aux[i]);
  MPI_Reduce(&hash, &total, 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
  if (VELOC_Finalize(1) != VELOC_SUCCESS) fail("VELOC_Finalize");
  if (g_rank == 0) printf("checksum: %016llx\n", (unsigned long long)total);
  free(h);
  free(g);
  MPI_Finalize();
  return 0;
}

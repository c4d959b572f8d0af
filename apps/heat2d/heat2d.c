/* heat2d — steady-state heat flow on a thin plate (Laplace's equation), the
 * example of the first chapter of Lu's thesis, solved by Jacobi iteration:
 *
 *     u(x,y) <- (u(x-1,y) + u(x+1,y) + u(x,y-1) + u(x,y+1)) / 4
 *
 * on a global grid of (px*nx) x (py*ny) interior points with fixed edge
 * temperatures (top 100, left 50, right and bottom 0). The grid is split over
 * a 2-D Cartesian process grid; every iteration exchanges one ghost row or
 * column with each of the four neighbours. Each point's update is the same
 * arithmetic whatever the decomposition, so the final state (and checksum)
 * does not depend on the process count for a given global grid.
 *
 * Checkpoints (C stdio): every --ckpt-every iterations each rank writes its
 * interior points to <dir>/heat2d.<rank>.<slot>.ckpt — one text header line
 * written with fprintf, then the grid rows with fwrite — and the ranks
 * restart from the newest iteration every rank holds intact. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app_common.h"
#include "dlckpt_hooks.h"

#define APP "heat2d"
#define CKPT_VERSION 1
#define HASH_SEED 0x68656174326431ULL /* "heat2d1" */

/* The header line has a fixed width so that every checkpoint file of a run
 * has the same size. */
#define HEADER_FORMAT                                                                       \
  "heat2d-ckpt v%d rank %06d nprocs %06d px %06d py %06d nx %09lld ny %09lld iter %012lld " \
  "hash %016" PRIx64 "\n"
#define HEADER_SCAN                                                                      \
  "heat2d-ckpt v%d rank %d nprocs %d px %d py %d nx %lld ny %lld iter %lld hash %" SCNx64

typedef struct {
  long long nx, ny;          /* interior points per rank */
  long long iters;           /* total iterations of the run */
  long long ckpt_every;      /* 0: never checkpoint (nor restart) */
  const char* ckpt_dir;
  int slots;                 /* 1 or 2 checkpoint files per rank */
  int sleep_ms;              /* padding per iteration */
  long long print_every;     /* progress lines; 0: about ten per run */
} Options;

typedef struct {
  MPI_Comm cart;
  int rank, nprocs;
  int px, py, cx, cy;        /* process grid and this rank's coordinates */
  int west, east, south, north;
  long long nx, ny, stride;  /* stride = nx + 2 (one ghost column each side) */
  double* u;                 /* current state, (ny + 2) x (nx + 2), x fastest */
  double* v;                 /* next state */
  MPI_Datatype column;
} Grid;

static int g_rank = 0;

static void usage(FILE* out) {
  fprintf(out,
          "usage: heat2d [options]\n"
          "Jacobi iteration for Laplace's equation on a 2-D plate, decomposed over a\n"
          "2-D process grid, with checkpoint/restart through C stdio.\n"
          "\n"
          "  --nx N            interior points per rank along x (default 256)\n"
          "  --ny N            interior points per rank along y (default 256)\n"
          "                    checkpoint payload per rank = nx * ny * 8 bytes\n"
          "  --iters N         iterations of the whole run (default 200)\n"
          "  --ckpt-every N    checkpoint every N iterations; 0 = never (default 20)\n"
          "  --ckpt-dir DIR    checkpoint directory (default /dlckpt/heat2d);\n"
          "                    use a disk path such as /tmp/h for runs without dlckpt\n"
          "  --ckpt-slots 1|2  files kept per rank: 2 alternate (default without dlckpt),\n"
          "                    1 is rewritten in place (default with dlckpt)\n"
          "  --sleep-ms MS     sleep MS milliseconds per iteration (compute padding)\n"
          "  --print-every N   progress line every N iterations (default iters/10)\n"
          "  --help            this text\n"
          "\n"
          "On start the run resumes from the newest checkpoint iteration that every\n"
          "rank holds intact. The last line of output is 'checksum: <16 hex digits>'.\n");
}

static int parse_count(const char* name, const char* text, long long min, long long max,
                       long long* out) {
  return app_parse_count(APP, name, text, min, max, out, g_rank == 0);
}

/* Returns 0 to run, 1 after --help, -1 on a usage error (message printed). */
static int parse_options(int argc, char** argv, Options* o) {
  *o = (Options){256, 256, 200, 20, "/dlckpt/heat2d", 0, 0, 0};
  static const struct option longopts[] = {
      {"nx", required_argument, NULL, 'x'},          {"ny", required_argument, NULL, 'y'},
      {"iters", required_argument, NULL, 'i'},       {"ckpt-every", required_argument, NULL, 'c'},
      {"ckpt-dir", required_argument, NULL, 'd'},    {"ckpt-slots", required_argument, NULL, 's'},
      {"sleep-ms", required_argument, NULL, 'z'},    {"print-every", required_argument, NULL, 'p'},
      {"help", no_argument, NULL, 'h'},              {NULL, 0, NULL, 0}};
  opterr = 0;
  int c;
  long long v;
  while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
    int rc = 0;
    switch (c) {
      case 'x': rc = parse_count("nx", optarg, 1, 1LL << 28, &o->nx); break;
      case 'y': rc = parse_count("ny", optarg, 1, 1LL << 28, &o->ny); break;
      case 'i': rc = parse_count("iters", optarg, 0, LLONG_MAX / 2, &o->iters); break;
      case 'c': rc = parse_count("ckpt-every", optarg, 0, LLONG_MAX / 2, &o->ckpt_every); break;
      case 'd': o->ckpt_dir = optarg; break;
      case 's':
        rc = parse_count("ckpt-slots", optarg, 1, 2, &v);
        o->slots = (int)v;
        break;
      case 'z':
        rc = parse_count("sleep-ms", optarg, 0, 3600000, &v);
        o->sleep_ms = (int)v;
        break;
      case 'p': rc = parse_count("print-every", optarg, 0, LLONG_MAX / 2, &o->print_every); break;
      case 'h':
        if (g_rank == 0) usage(stdout);
        return 1;
      default:
        if (g_rank == 0) {
          fprintf(stderr, APP ": unknown or incomplete option '%s'\n", argv[optind - 1]);
          usage(stderr);
        }
        return -1;
    }
    if (rc != 0) return -1;
  }
  if (optind < argc) {
    if (g_rank == 0) fprintf(stderr, APP ": unexpected argument '%s'\n", argv[optind]);
    return -1;
  }
  if (o->nx * o->ny > (1LL << 31)) {
    if (g_rank == 0) fprintf(stderr, APP ": --nx * --ny must not exceed 2^31 points per rank\n");
    return -1;
  }
  if (o->slots == 0) o->slots = app_default_slots();
  if (o->print_every == 0) o->print_every = o->iters >= 10 ? o->iters / 10 : 1;
  return 0;
}

/* ---- grid --------------------------------------------------------------- */

#define AT(g, a, i, j) ((a)[(size_t)(j) * (size_t)(g)->stride + (size_t)(i)])

/* Fixed edge temperatures of the global plate; corners are never read. */
static void set_boundaries(Grid* g, double* a) {
  if (g->cy == g->py - 1)
    for (long long i = 0; i <= g->nx + 1; i++) AT(g, a, i, g->ny + 1) = 100.0;
  if (g->cy == 0)
    for (long long i = 0; i <= g->nx + 1; i++) AT(g, a, i, 0) = 0.0;
  if (g->cx == 0)
    for (long long j = 1; j <= g->ny; j++) AT(g, a, 0, j) = 50.0;
  if (g->cx == g->px - 1)
    for (long long j = 1; j <= g->ny; j++) AT(g, a, g->nx + 1, j) = 0.0;
}

static int grid_create(Grid* g, const Options* o) {
  memset(g, 0, sizeof *g);
  g->cart = MPI_COMM_NULL;
  g->column = MPI_DATATYPE_NULL;
  MPI_Comm_size(MPI_COMM_WORLD, &g->nprocs);
  int dims[2] = {0, 0}, periods[2] = {0, 0}, coords[2];
  MPI_Dims_create(g->nprocs, 2, dims);
  /* reorder = 0: a rank keeps its number, which names its checkpoint files. */
  MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &g->cart);
  MPI_Comm_rank(g->cart, &g->rank);
  MPI_Cart_coords(g->cart, g->rank, 2, coords);
  g->px = dims[0];
  g->py = dims[1];
  g->cx = coords[0];
  g->cy = coords[1];
  MPI_Cart_shift(g->cart, 0, 1, &g->west, &g->east);
  MPI_Cart_shift(g->cart, 1, 1, &g->south, &g->north);
  g->nx = o->nx;
  g->ny = o->ny;
  g->stride = g->nx + 2;
  size_t cells = (size_t)(g->nx + 2) * (size_t)(g->ny + 2);
  g->u = calloc(cells, sizeof(double));
  g->v = calloc(cells, sizeof(double));
  if (g->u == NULL || g->v == NULL) {
    fprintf(stderr, APP ": rank %d: out of memory for a %lld x %lld grid\n", g->rank, g->nx,
            g->ny);
    return -1;
  }
  set_boundaries(g, g->u);
  set_boundaries(g, g->v);
  MPI_Type_vector((int)g->ny, 1, (int)g->stride, MPI_DOUBLE, &g->column);
  MPI_Type_commit(&g->column);
  return 0;
}

static void grid_destroy(Grid* g) {
  if (g->column != MPI_DATATYPE_NULL) MPI_Type_free(&g->column);
  free(g->u);
  free(g->v);
  if (g->cart != MPI_COMM_NULL) MPI_Comm_free(&g->cart);
}

/* Fills the ghost rows and columns of u that border other ranks. */
static void exchange_halo(Grid* g) {
  MPI_Request r[8];
  double* u = g->u;
  const int n = (int)g->nx;
  MPI_Irecv(&AT(g, u, 1, 0), n, MPI_DOUBLE, g->south, 0, g->cart, &r[0]);
  MPI_Irecv(&AT(g, u, 1, g->ny + 1), n, MPI_DOUBLE, g->north, 1, g->cart, &r[1]);
  MPI_Irecv(&AT(g, u, 0, 1), 1, g->column, g->west, 2, g->cart, &r[2]);
  MPI_Irecv(&AT(g, u, g->nx + 1, 1), 1, g->column, g->east, 3, g->cart, &r[3]);
  MPI_Isend(&AT(g, u, 1, g->ny), n, MPI_DOUBLE, g->north, 0, g->cart, &r[4]);
  MPI_Isend(&AT(g, u, 1, 1), n, MPI_DOUBLE, g->south, 1, g->cart, &r[5]);
  MPI_Isend(&AT(g, u, g->nx, 1), 1, g->column, g->east, 2, g->cart, &r[6]);
  MPI_Isend(&AT(g, u, 1, 1), 1, g->column, g->west, 3, g->cart, &r[7]);
  app_waitall(8, r);
}

/* One Jacobi sweep u -> v, then swap. Returns max |v - u| over this rank. */
static double jacobi_step(Grid* g, int want_change) {
  exchange_halo(g);
  double change = 0.0;
  for (long long j = 1; j <= g->ny; j++) {
    const double* up = &AT(g, g->u, 0, j + 1);
    const double* mid = &AT(g, g->u, 0, j);
    const double* down = &AT(g, g->u, 0, j - 1);
    double* out = &AT(g, g->v, 0, j);
    for (long long i = 1; i <= g->nx; i++) out[i] = 0.25 * (mid[i - 1] + mid[i + 1] + down[i] + up[i]);
    if (want_change)
      for (long long i = 1; i <= g->nx; i++) change = fmax(change, fabs(out[i] - mid[i]));
  }
  double* t = g->u;
  g->u = g->v;
  g->v = t;
  return change;
}

/* ---- checkpoint files --------------------------------------------------- */

typedef enum { CKPT_OK, CKPT_MISSING, CKPT_DAMAGED, CKPT_MISMATCH } CkptResult;

static void ckpt_path(char* out, size_t n, const Options* o, int rank, int slot) {
  snprintf(out, n, "%s/" APP ".%d.%d.ckpt", o->ckpt_dir, rank, slot);
}

static uint64_t payload_hash(const Grid* g) {
  uint64_t h = HASH_SEED;
  for (long long j = 1; j <= g->ny; j++)
    h = app_hash_bytes(&AT(g, g->u, 1, j), (size_t)g->nx * sizeof(double), h);
  return h;
}

static long long header_bytes(const Grid* g, long long iter) {
  return snprintf(NULL, 0, HEADER_FORMAT, CKPT_VERSION, g->rank, g->nprocs, g->px, g->py, g->nx,
                  g->ny, iter, (uint64_t)0);
}

static long long ckpt_file_bytes(const Grid* g) {
  return header_bytes(g, 0) + g->nx * g->ny * (long long)sizeof(double);
}

/* Writes this rank's state as of `iter` into `slot`. A failure ends the job:
 * the other ranks would otherwise wait for this one forever. */
static void ckpt_write(const Grid* g, const Options* o, int slot, long long iter, int durable) {
  char path[4096];
  ckpt_path(path, sizeof path, o, g->rank, slot);
  uint64_t hash = payload_hash(g);
  FILE* f = fopen(path, "wb");
  if (f == NULL) {
    fprintf(stderr, APP ": rank %d: cannot create checkpoint %s: %s\n", g->rank, path,
            strerror(errno));
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int ok = fprintf(f, HEADER_FORMAT, CKPT_VERSION, g->rank, g->nprocs, g->px, g->py, g->nx, g->ny,
                   iter, hash) > 0;
  for (long long j = 1; ok && j <= g->ny; j++)
    ok = fwrite(&AT(g, g->u, 1, j), sizeof(double), (size_t)g->nx, f) == (size_t)g->nx;
  int saved = errno;
  if (fclose(f) != 0 && ok) {
    ok = 0;
    saved = errno;
  }
  if (ok && durable && app_make_durable(path) != 0) {
    ok = 0;
    saved = errno;
  }
  if (!ok) {
    fprintf(stderr, APP ": rank %d: cannot write checkpoint %s: %s\n", g->rank, path,
            strerror(saved));
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
}

/* Reads `slot` into g->u's interior. On CKPT_OK sets *iter; on CKPT_DAMAGED
 * and CKPT_MISMATCH writes the reason to msg. g->u's interior is undefined
 * after a failure. */
static CkptResult ckpt_read(Grid* g, const Options* o, int slot, long long* iter, char* msg,
                            size_t msglen) {
  char path[4096];
  ckpt_path(path, sizeof path, o, g->rank, slot);
  FILE* f = fopen(path, "rb");
  if (f == NULL) {
    if (errno == ENOENT) return CKPT_MISSING;
    snprintf(msg, msglen, "%s cannot be opened: %s", path, strerror(errno));
    return CKPT_DAMAGED;
  }
  int version = 0, rank = -1, nprocs = -1, px = -1, py = -1;
  long long nx = -1, ny = -1, it = -1;
  uint64_t hash = 0;
  CkptResult result = CKPT_OK;
  int fields = fscanf(f, HEADER_SCAN, &version, &rank, &nprocs, &px, &py, &nx, &ny, &it, &hash);
  if (fields != 9 || fgetc(f) != '\n' || version != CKPT_VERSION || it < 0) {
    snprintf(msg, msglen, "%s is damaged: its header line is unreadable", path);
    result = CKPT_DAMAGED;
  } else if (rank != g->rank || nprocs != g->nprocs || px != g->px || py != g->py ||
             nx != g->nx || ny != g->ny) {
    snprintf(msg, msglen,
             "%s was written by rank %d of %d (process grid %dx%d, %lldx%lld points per rank); "
             "this run is rank %d of %d (grid %dx%d, %lldx%lld points per rank). "
             "Rerun with the same process count and sizes, or use an empty --ckpt-dir",
             path, rank, nprocs, px, py, nx, ny, g->rank, g->nprocs, g->px, g->py, g->nx, g->ny);
    result = CKPT_MISMATCH;
  } else {
    long long rows_read = 0;
    for (long long j = 1; j <= g->ny; j++, rows_read++)
      if (fread(&AT(g, g->u, 1, j), sizeof(double), (size_t)g->nx, f) != (size_t)g->nx) break;
    if (rows_read != g->ny) {
      snprintf(msg, msglen, "%s is damaged: %s after %lld of %lld rows", path,
               ferror(f) ? strerror(errno) : "truncated", rows_read, g->ny);
      result = CKPT_DAMAGED;
    } else if (fgetc(f) != EOF) {
      snprintf(msg, msglen, "%s is damaged: unexpected bytes after the grid", path);
      result = CKPT_DAMAGED;
    } else if (payload_hash(g) != hash) {
      snprintf(msg, msglen, "%s is damaged: content hash does not match its header", path);
      result = CKPT_DAMAGED;
    }
  }
  fclose(f);
  if (result == CKPT_OK) *iter = it;
  return result;
}

/* Finds the checkpoint to resume from and loads it. Returns the iteration
 * (0 for a fresh start), -1 if the run must stop (message printed). Sets
 * *last_slot to the slot holding the loaded checkpoint (or the one written
 * least recently). */
static long long restart(Grid* g, const Options* o, int* last_slot) {
  long long held[2] = {-1, -1};
  int mismatch = 0, loaded = -1;
  char msg[8192];
  for (int s = 0; s < 2; s++) {
    long long it = -1;
    CkptResult r = ckpt_read(g, o, s, &it, msg, sizeof msg);
    if (r == CKPT_OK) {
      held[s] = it;
      loaded = s;
    } else {
      if (r != CKPT_MISSING) loaded = -1; /* a failed read may have overwritten the grid */
      if (r == CKPT_DAMAGED)
        fprintf(stderr, APP ": rank %d: checkpoint %s; not using it\n", g->rank, msg);
      if (r == CKPT_MISMATCH) {
        fprintf(stderr, APP ": rank %d: checkpoint %s\n", g->rank, msg);
        mismatch = 1;
      }
    }
  }
  if (app_any(mismatch, g->cart)) return -1;
  long long newest = -1;
  int lacking = 0, first_lacking = -1;
  long long chosen = app_agree_restart(held, g->cart, &newest, &lacking, &first_lacking);
  if (g->rank == 0 && newest >= 0 && chosen != newest)
    printf("restart: iteration %lld is not intact on %d rank(s) (first: rank %d)\n", newest,
           lacking, first_lacking);
  if (chosen > o->iters) {
    if (g->rank == 0)
      fprintf(stderr, APP ": checkpoint iteration %lld in %s is past --iters %lld\n", chosen,
              o->ckpt_dir, o->iters);
    return -1;
  }
  if (chosen < 0 && app_dlckpt_restarted_epoch() > 0) {
    if (g->rank == 0)
      fprintf(stderr, APP ": dlckpt restored epoch %lld but no checkpoint in %s is intact on "
              "every rank\n", app_dlckpt_restarted_epoch(), o->ckpt_dir);
    return -1;
  }
  if (chosen < 0) {
    /* A failed read may have left data in the interior. */
    for (long long j = 1; j <= g->ny; j++)
      memset(&AT(g, g->u, 1, j), 0, (size_t)g->nx * sizeof(double));
    *last_slot = 1;
    if (g->rank == 0) {
      if (newest >= 0)
        printf("restart: no iteration is checkpointed intact on every rank; starting from "
               "scratch\n");
      else
        printf("fresh start: no checkpoint in %s\n", o->ckpt_dir);
    }
    return 0;
  }
  int slot = held[0] == chosen ? 0 : 1;
  if (loaded != slot) {
    long long it = -1;
    if (ckpt_read(g, o, slot, &it, msg, sizeof msg) != CKPT_OK || it != chosen) {
      fprintf(stderr, APP ": rank %d: checkpoint changed while restarting: %s\n", g->rank, msg);
      MPI_Abort(g->cart, 2);
    }
  }
  *last_slot = slot;
  if (g->rank == 0) {
    printf("restarted from iteration %lld (%s)\n", chosen, o->ckpt_dir);
    long long epoch = app_dlckpt_restarted_epoch();
    if (epoch > 0) printf("dlckpt: restarted epoch %lld\n", epoch);
  }
  return chosen;
}

/* ---- main --------------------------------------------------------------- */

static uint64_t state_checksum(const Grid* g) {
  long long origin[3] = {(long long)g->cx * g->nx, (long long)g->cy * g->ny, 0};
  long long global[3] = {(long long)g->px * g->nx, (long long)g->py * g->ny, 1};
  long long count[3] = {g->nx, g->ny, 1};
  long long stride[3] = {1, g->stride, 0};
  uint64_t local = app_checksum_block(&AT(g, g->u, 1, 1), 0, origin, global, count, stride);
  return app_checksum_combine(local, g->cart);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  Options o;
  int prc = parse_options(argc, argv, &o);
  if (prc != 0) {
    MPI_Finalize();
    return prc > 0 ? 0 : 1;
  }
  if (app_dlckpt_init(MPI_COMM_WORLD) != 0) {
    fprintf(stderr, APP ": rank %d: %s\n", g_rank, app_dlckpt_last_error());
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  Grid g;
  if (app_any(grid_create(&g, &o) != 0, MPI_COMM_WORLD)) MPI_Abort(MPI_COMM_WORLD, 2);

  const int checkpointing = o.ckpt_every > 0;
  const int durable = !app_dlckpt_linked();
  if (g.rank == 0) {
    printf("heat2d: %d ranks (%dx%d), %lldx%lld points per rank, global %lldx%lld, "
           "%lld iterations\n",
           g.nprocs, g.px, g.py, g.nx, g.ny, g.px * g.nx, g.py * g.ny, o.iters);
    if (checkpointing)
      printf("checkpoint: every %lld iterations to %s, %d slot(s) per rank%s\n", o.ckpt_every,
             o.ckpt_dir, o.slots, app_dlckpt_linked() ? ", dlckpt linked" : "");
    else
      printf("checkpoint: disabled\n");
    printf("checkpoint bytes per rank: %lld\n", ckpt_file_bytes(&g));
    fflush(stdout);
  }

  long long start = 0;
  int last_slot = 1;
  if (checkpointing) {
    int bad = 0;
    if (app_mkdir_p(o.ckpt_dir) != 0 && durable) {
      fprintf(stderr,
              APP ": rank %d: cannot create checkpoint directory %s: %s "
                  "(choose another with --ckpt-dir)\n",
              g.rank, o.ckpt_dir, strerror(errno));
      bad = 1;
    }
    if (app_any(bad, g.cart)) {
      grid_destroy(&g);
      MPI_Finalize();
      return 2;
    }
    start = restart(&g, &o, &last_slot);
    if (start < 0) {
      grid_destroy(&g);
      MPI_Finalize();
      return 2;
    }
    fflush(stdout);
  }

  double t0 = app_now();
  double change = 0;
  for (long long it = start + 1; it <= o.iters; it++) {
    int report = it % o.print_every == 0 || it == o.iters;
    change = jacobi_step(&g, report);
    app_sleep_ms(o.sleep_ms);
    if (report) {
      change = app_max_double(change, g.cart);
      if (g.rank == 0) printf("iter %lld max change %.6e\n", it, change);
    }
    if (checkpointing && it % o.ckpt_every == 0) {
      double c0 = app_now();
      int slot = o.slots == 1 ? 0 : 1 - last_slot;
      ckpt_write(&g, &o, slot, it, durable);
      app_checkpoint_commit(g.cart, APP);
      last_slot = slot;
      if (g.rank == 0)
        printf("checkpoint: iteration %lld complete (slot %d, %.3f s)\n", it, slot,
               app_now() - c0);
    }
    if (g.rank == 0) fflush(stdout);
  }
  double elapsed = app_now() - t0;

  uint64_t sum = state_checksum(&g);
  if (g.rank == 0) {
    char hex[17];
    app_format_hex(sum, hex);
    printf("compute: %lld iterations in %.3f s\n", o.iters - start, elapsed);
    printf("checksum: %s\n", hex);
    fflush(stdout);
  }
  int rc = 0;
  if (app_dlckpt_finalize() != 0) {
    fprintf(stderr, APP ": rank %d: %s\n", g.rank, app_dlckpt_last_error());
    rc = 3;
  }
  grid_destroy(&g);
  MPI_Finalize();
  return rc;
}

/* A test application that checks fclose but not fwrite, as many do: every
 * rank writes its checkpoint through C stdio into /dlckpt and ignores what
 * fwrite returns. Iteration --big-at writes --big-kib KiB, the others
 * --small-kib KiB. A checkpoint that dlckpt_checkpoint() refuses is reported
 * ("checkpoint of iteration I refused: <why>") and the run goes on. On
 * restart every rank reads its checkpoint back and checks it byte for byte:
 * a short or wrong file ends the job ("short checkpoint", exit 3).
 *
 *   trunc_app [--iters N] [--small-kib S] [--big-kib B] [--big-at I] [--sleep-ms MS]
 *
 * Prints "trunc_app: restarted from epoch E (iteration I, N bytes), checkpoint
 * verified" after a restart and "trunc_app: done, N checkpoint(s) refused" at
 * the end (rank 0). */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dlckpt/dlckpt.h"

#define TEST_APP_NAME "trunc_app"
#include "../common/test_app.h"

/* Word w of iteration `it`'s checkpoint on `rank`. */
static uint64_t word(int rank, int it, size_t w) {
  return mix(((uint64_t)rank << 40) ^ ((uint64_t)(unsigned)it << 32) ^ (uint64_t)w);
}

int main(int argc, char** argv) {
  int iters = 3, small_kib = 256, big_kib = 1600, big_at = 1, sleep = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--small-kib")) small_kib = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--big-kib")) big_kib = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--big-at")) big_at = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--sleep-ms")) sleep = atoi(argv[i + 1]);
  }
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (dlckpt_init(MPI_COMM_WORLD) != 0) die(rank, "dlckpt_init");

  size_t max_words = (size_t)(big_kib > small_kib ? big_kib : small_kib) * 1024 / 8;
  uint64_t* buf = malloc(max_words * 8);
  if (!buf) die(rank, "malloc");
  char path[256];
  snprintf(path, sizeof path, "/dlckpt/trunc_app/rank%d.ckpt", rank);
  int start = 0;
  long long restarted = dlckpt_restarted_epoch();
  if (restarted > 0) {
    FILE* f = fopen(path, "rb");
    if (!f) die(rank, "open checkpoint after restart");
    int r = -1, it = -1;
    size_t words = 0;
    /* The header line alone: fscanf's "\n" would also eat the data's leading
     * bytes that happen to be whitespace. */
    char header[128];
    if (!fgets(header, sizeof header, f) ||
        sscanf(header, "trunc_app rank %d iter %d words %zu", &r, &it, &words) != 3 || r != rank ||
        words > max_words) {
      fprintf(stderr, "trunc_app rank %d: bad checkpoint header in %s\n", rank, path);
      sleep_ms(300);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    size_t got = fread(buf, 8, words, f);
    char extra;
    int longer = fread(&extra, 1, 1, f) != 0;
    fclose(f);
    if (got != words || longer) {
      fprintf(stderr, "trunc_app rank %d: short checkpoint %s: %zu of %zu words%s (iteration %d)\n", rank, path, got,
              words, longer ? ", then more bytes" : "", it);
      sleep_ms(300);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    for (size_t w = 0; w < words; ++w) {
      if (buf[w] != word(rank, it, w)) {
        fprintf(stderr, "trunc_app rank %d: checkpoint %s differs from what was written at word %zu\n", rank, path,
                w);
        sleep_ms(300);
        MPI_Abort(MPI_COMM_WORLD, 3);
      }
    }
    start = it + 1;
    if (rank == 0) {
      printf("trunc_app: restarted from epoch %lld (iteration %d, %zu bytes), checkpoint verified\n", restarted, it,
             words * 8);
    }
  }
  mkdir("/dlckpt/trunc_app", 0755);
  int refused = 0;
  for (int it = start; it < iters; ++it) {
    sleep_ms(sleep);
    size_t words = (size_t)(it == big_at ? big_kib : small_kib) * 1024 / 8;
    for (size_t w = 0; w < words; ++w) buf[w] = word(rank, it, w);
    FILE* f = fopen(path, "wb");
    if (!f) die(rank, "fopen checkpoint");
    fprintf(f, "trunc_app rank %d iter %d words %zu\n", rank, it, words);
    (void)fwrite(buf, 8, words, f); /* the result is ignored, as many applications do */
    if (fclose(f) != 0) die(rank, "fclose checkpoint");
    if (dlckpt_checkpoint() != 0) {
      fprintf(stderr, "trunc_app rank %d: checkpoint of iteration %d refused: %s\n", rank, it, dlckpt_last_error());
      ++refused;
    } else if (rank == 0) {
      printf("trunc_app: iteration %d checkpointed (epoch %lld protected)\n", it, dlckpt_protected_epoch());
    }
    fflush(stdout);
  }
  if (dlckpt_finalize() != 0) die(rank, "dlckpt_finalize");
  if (rank == 0) printf("trunc_app: done, %d checkpoint(s) refused\n", refused);
  free(buf);
  MPI_Finalize();
  return 0;
}

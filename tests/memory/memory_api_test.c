/* The memory interface's contract on a real store, without dlckpt-run (run
 * it under mpiexec; each rank's store is removed by dlckpt_finalize):
 * argument errors, protect / unprotect / re-protect, a checkpoint and a
 * recover, a size different from the checkpoint's (an error naming the
 * region, no byte overwritten), a region dropped by unprotect, a region one
 * rank cannot store (every rank's checkpoint fails, nothing is committed),
 * and the message of each error. Prints "memory_api_test: ok" on rank 0. */
#include <errno.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlckpt/dlckpt.h"

#define TEST_APP_NAME "memory_api_test"
#include "../common/test_app.h"

static int g_rank;

#define CHECK(cond)                                                                          \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      fprintf(stderr, "memory_api_test rank %d: line %d: %s failed (last error: %s)\n", g_rank, \
              __LINE__, #cond, dlckpt_last_error());                                         \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
    }                                                                                        \
  } while (0)

/* A call that must fail with `err` and a message containing `text`. */
#define EXPECT_FAIL(call, err, text)                                                       \
  do {                                                                                     \
    errno = 0;                                                                             \
    CHECK((call) == -1);                                                                   \
    CHECK(errno == (err));                                                                 \
    CHECK(strstr(dlckpt_last_error(), (text)) != NULL);                                    \
  } while (0)

int main(int argc, char** argv) {
  setenv("DLCKPT_STORE_CAPACITY", "4M", 1); /* see the region one rank cannot store */
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  uint64_t a[512], b[100], big[200];
  for (int i = 0; i < 512; ++i) a[i] = mix((uint64_t)g_rank * 1000 + (uint64_t)i);
  for (int i = 0; i < 100; ++i) b[i] = mix(7u + (uint64_t)i);

  /* Arguments, before dlckpt_init (protecting is allowed then). */
  EXPECT_FAIL(dlckpt_protect(-1, a, sizeof a), EINVAL, "region -1");
  EXPECT_FAIL(dlckpt_protect(3, NULL, 8), EINVAL, "region 3: NULL pointer");
  EXPECT_FAIL(dlckpt_protect(3, a, (size_t)-8), EINVAL, "region 3: size");
  EXPECT_FAIL(dlckpt_unprotect(9), ENOENT, "region 9 is not protected");
  CHECK(dlckpt_protect(4, NULL, 0) == 0); /* an empty region */
  CHECK(dlckpt_protect(1, a, sizeof a) == 0);
  EXPECT_FAIL(dlckpt_recover(), EINVAL, "dlckpt_init first");

  if (dlckpt_init(MPI_COMM_WORLD) != 0) die(g_rank, "dlckpt_init");
  CHECK(dlckpt_protect(2, big, sizeof big) == 0);
  CHECK(dlckpt_protect(2, b, sizeof b) == 0); /* re-protected: another pointer and size */
  EXPECT_FAIL(dlckpt_region_size(1), ENOENT, "region 1 is not in the checkpoint");
  EXPECT_FAIL(dlckpt_recover(), ENOENT, "region 1 is not in the checkpoint");
  if (dlckpt_checkpoint() != 0) die(g_rank, "dlckpt_checkpoint");
  CHECK(dlckpt_region_size(1) == (long long)sizeof a);
  CHECK(dlckpt_region_size(2) == (long long)sizeof b);
  CHECK(dlckpt_region_size(4) == 0);

  /* Recover: the checkpoint's bytes come back. */
  uint64_t a0[512], b0[100];
  memcpy(a0, a, sizeof a);
  memcpy(b0, b, sizeof b);
  memset(a, 0xab, sizeof a);
  memset(b, 0xcd, sizeof b);
  CHECK(dlckpt_recover_region(2) == 0);
  CHECK(memcmp(b, b0, sizeof b) == 0);
  CHECK(a[0] == 0xababababababababULL);
  CHECK(dlckpt_recover() == 0);
  CHECK(memcmp(a, a0, sizeof a) == 0);

  /* A size different from the checkpoint's: an error, nothing overwritten
   * (not even region 1, checked before region 2 would be copied). */
  memset(a, 0x11, sizeof a);
  memset(big, 0x22, sizeof big);
  CHECK(dlckpt_protect(2, big, sizeof big) == 0);
  EXPECT_FAIL(dlckpt_recover(), EINVAL, "region 2: the checkpoint holds 800 bytes, the protected region 1600");
  EXPECT_FAIL(dlckpt_recover_region(2), EINVAL, "nothing copied");
  CHECK(a[0] == 0x1111111111111111ULL && a[511] == 0x1111111111111111ULL);
  CHECK(big[0] == 0x2222222222222222ULL && big[199] == 0x2222222222222222ULL);
  EXPECT_FAIL(dlckpt_recover_region(8), ENOENT, "region 8 is not protected");

  /* The next checkpoint stores the grown region and drops the unprotected. */
  for (int i = 0; i < 200; ++i) big[i] = mix(99u + (uint64_t)i);
  CHECK(dlckpt_unprotect(1) == 0);
  if (dlckpt_checkpoint() != 0) die(g_rank, "dlckpt_checkpoint");
  EXPECT_FAIL(dlckpt_region_size(1), ENOENT, "region 1 is not in the checkpoint");
  CHECK(dlckpt_region_size(2) == (long long)sizeof big);
  uint64_t big0[200];
  memcpy(big0, big, sizeof big);
  memset(big, 0, sizeof big);
  CHECK(dlckpt_recover() == 0);
  CHECK(memcmp(big, big0, sizeof big) == 0);
  /* Protected again, region 1 is absent from this checkpoint: an error. */
  CHECK(dlckpt_protect(1, a, sizeof a) == 0);
  EXPECT_FAIL(dlckpt_recover(), ENOENT, "region 1 is not in the checkpoint");
  CHECK(a[0] == 0x1111111111111111ULL);

  /* A region one rank cannot store (its store holds 4 MiB): the checkpoint
   * fails on every rank with that rank's error, before anything is
   * committed; dropped again, the next checkpoint goes through. */
  const long long protected_before = dlckpt_protected_epoch();
  const size_t huge_len = (size_t)6 << 20;
  uint8_t* huge = malloc(huge_len);
  CHECK(huge != NULL);
  memset(huge, 7, huge_len);
  if (g_rank == 1) CHECK(dlckpt_protect(5, huge, huge_len) == 0);
  EXPECT_FAIL(dlckpt_checkpoint(), ENOSPC, "region 5");
  CHECK(dlckpt_protected_epoch() == protected_before);
  if (g_rank == 1) CHECK(dlckpt_unprotect(5) == 0);
  free(huge);
  if (dlckpt_checkpoint() != 0) die(g_rank, "dlckpt_checkpoint after a refused one");
  CHECK(dlckpt_protected_epoch() > protected_before);
  memset(big, 0, sizeof big);
  CHECK(dlckpt_recover_region(2) == 0);
  CHECK(memcmp(big, big0, sizeof big) == 0);

  if (dlckpt_finalize() != 0) die(g_rank, "dlckpt_finalize");
  EXPECT_FAIL(dlckpt_recover(), EINVAL, "dlckpt_init first");
  if (g_rank == 0) printf("memory_api_test: ok\n");
  MPI_Finalize();
  return 0;
}

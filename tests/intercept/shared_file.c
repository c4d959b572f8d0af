/* shared_file.c MODE — issue 36: what IOR's POSIX backend does with a shared
 * file (no -F), and two correct per-rank patterns, under the preload.
 *   shared      every rank opens /dlckpt/sf/shared (O_CREAT|O_RDWR) and writes
 *               its 64 KiB block of each of 2 segments at (s x size + rank) x
 *               64 KiB, as IOR does;
 *   private     every rank writes /dlckpt/sf/private, its own file of that
 *               name, from the start;
 *   headerlast  every rank writes /dlckpt/sf/headerlast's body at 4 KiB, then
 *               its 64-byte header at 0.
 * Then close, and the bytes written are read back. Prints per rank
 *   rank R close OK | rank R close ERRNO_NAME, then rank R kept OK.
 * Exits 0 if close succeeded, 3 if close failed and the bytes were kept, 1 on
 * any other error (named with the path and errno). */
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { kBlock = 64 << 10, kSegments = 2, kHeader = 64 };

static int fail(int rank, const char* what, const char* path) {
  fprintf(stderr, "rank %d: %s %s: %s\n", rank, what, path, strerror(errno));
  return 1;
}

static int put(int fd, const char* buf, size_t len, off_t off) {
  return pwrite(fd, buf, len, off) == (ssize_t)len ? 0 : -1;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* mode = argc > 1 ? argv[1] : "shared";
  char path[256];
  snprintf(path, sizeof path, "/dlckpt/sf/%s", mode);
  static char buf[kBlock], back[kBlock];
  memset(buf, 'a' + rank % 26, sizeof buf);
  int rc = 0;
  int fd = open(path, O_CREAT | O_RDWR, 0644);
  if (fd < 0) {
    rc = fail(rank, "open", path);
    goto out;
  }
  /* (offset, length) of what this rank wrote, for the read-back. */
  off_t at[kSegments];
  size_t len[kSegments];
  int pieces = 0;
  if (strcmp(mode, "shared") == 0) {
    for (int s = 0; s < kSegments; ++s) {
      at[pieces] = ((off_t)s * size + rank) * kBlock;
      len[pieces++] = kBlock;
    }
  } else if (strcmp(mode, "private") == 0) {
    at[pieces] = 0;
    len[pieces++] = kBlock;
  } else if (strcmp(mode, "headerlast") == 0) {
    at[pieces] = 4096;
    len[pieces++] = kBlock;
    at[pieces] = 0;
    len[pieces++] = kHeader;
  } else {
    fprintf(stderr, "shared_file: unknown mode %s\n", mode);
    rc = 1;
    goto out;
  }
  for (int i = 0; i < pieces; ++i) {
    if (put(fd, buf, len[i], at[i]) != 0) {
      rc = fail(rank, "pwrite", path);
      goto out;
    }
  }
  if (close(fd) == 0) {
    printf("rank %d close OK\n", rank);
  } else {
    printf("rank %d close %s\n", rank, errno == ENOTSUP ? "ENOTSUP" : strerror(errno));
    rc = 3;
  }
  /* Nothing is lost: this rank's bytes are in its store. */
  fd = open(path, O_RDONLY);
  if (fd < 0) {
    rc = fail(rank, "reopen", path);
    goto out;
  }
  for (int i = 0; i < pieces; ++i) {
    if (pread(fd, back, len[i], at[i]) != (ssize_t)len[i] || memcmp(back, buf, len[i]) != 0) {
      fprintf(stderr, "rank %d: %s: bytes at %lld not kept\n", rank, path, (long long)at[i]);
      rc = 1;
    }
  }
  close(fd);
  if (rc != 1) printf("rank %d kept OK\n", rank);
out:
  fflush(stdout);
  MPI_Finalize();
  return rc;
}

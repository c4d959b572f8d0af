/* dlckpt-vhost-probe: a small MPI program for the virtual-host tests.
 *
 * Every rank prints "rank R of S host H" (H = gethostname(), the node identity), then checks
 * an allreduce (sum of ranks) and a ring message (each rank sends its rank to the next one);
 * on success rank 0 prints "probe ok: S ranks on N hosts". Any mismatch prints the rank, the
 * expected and the received value, and the exit status is 1.
 *
 * Options:
 *   --shm MIB     before the checks, write MIB MiB to /dev/shm/dlckpt-vhost-probe.R (the
 *                 object outlives the process: that is the point of the crash test)
 *   --loop SECS   after the checks, repeat allreduces for SECS seconds, one every 10 ms,
 *                 printing "rank R looping" once (the failure tests kill hosts meanwhile)
 *   --unlink      remove the shm object before MPI_Finalize
 *   --tag WORD    ignored; lets a test find its own processes (pgrep -f "--tag WORD")
 *
 * Waits never spin: collectives are non-blocking, completed with MPI_Test and a 200 us sleep
 * (MPICH busy-polls in blocking waits, which on an oversubscribed machine starves the others).
 */
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "dlckpt/base/version.h"

static void nap_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* Completes req without spinning. */
static void wait_req(MPI_Request* req) {
  int done = 0;
  for (;;) {
    MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (done) return;
    nap_us(200);
  }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Writes mib MiB into a new shm object; returns 0 or -1 with a message. */
static int fill_shm(const char* name, long mib, int rank) {
  int fd = shm_open(name, O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    fprintf(stderr, "rank %d: shm_open /dev/shm%s: %s\n", rank, name, strerror(errno));
    return -1;
  }
  char buf[1 << 16];
  memset(buf, 0x5a, sizeof buf);
  for (long left = mib << 20; left > 0;) {
    ssize_t n = write(fd, buf, left < (long)sizeof buf ? (size_t)left : sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      fprintf(stderr, "rank %d: write /dev/shm%s: %s\n", rank, name, strerror(errno));
      close(fd);
      return -1;
    }
    left -= n;
  }
  close(fd);
  return 0;
}

int main(int argc, char** argv) {
  if (dlckpt_version_requested(argc, argv)) return 0;
  long shm_mib = 0;
  double loop_s = 0;
  int unlink_shm = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--shm") == 0 && i + 1 < argc) {
      shm_mib = atol(argv[++i]);
    } else if (strcmp(argv[i], "--loop") == 0 && i + 1 < argc) {
      loop_s = atof(argv[++i]);
    } else if (strcmp(argv[i], "--tag") == 0 && i + 1 < argc) {
      ++i;
    } else if (strcmp(argv[i], "--unlink") == 0) {
      unlink_shm = 1;
    } else {
      int help = strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0;
      fprintf(help ? stdout : stderr, "usage: %s [--shm MIB] [--loop SECS] [--unlink] [--tag WORD]\n",
              argv[0]);
      return help ? 0 : 2;
    }
  }

  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) {
    fprintf(stderr, "rank %d: gethostname: %s\n", rank, strerror(errno));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  char shm_name[64];
  snprintf(shm_name, sizeof shm_name, "/dlckpt-vhost-probe.%d", rank);
  if (shm_mib > 0 && fill_shm(shm_name, shm_mib, rank) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
  printf("rank %d of %d host %s\n", rank, size, host);
  fflush(stdout);

  int errors = 0;

  /* Allreduce: the sum of all ranks. */
  long mine = rank, sum = -1;
  MPI_Request req;
  MPI_Iallreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD, &req);
  wait_req(&req);
  if (sum != (long)size * (size - 1) / 2) {
    fprintf(stderr, "rank %d: allreduce sum %ld, expected %ld\n", rank, sum,
            (long)size * (size - 1) / 2);
    ++errors;
  }

  /* Ring: send my rank and host to the next rank, receive from the previous one. */
  struct {
    int rank;
    char host[64];
  } out, in;
  memset(&out, 0, sizeof out);
  memset(&in, 0, sizeof in);
  out.rank = rank;
  snprintf(out.host, sizeof out.host, "%.63s", host); /* a node name fits (names.h) */
  int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  MPI_Request reqs[2];
  MPI_Irecv(&in, (int)sizeof in, MPI_BYTE, prev, 7, MPI_COMM_WORLD, &reqs[0]);
  MPI_Isend(&out, (int)sizeof out, MPI_BYTE, next, 7, MPI_COMM_WORLD, &reqs[1]);
  wait_req(&reqs[0]);
  wait_req(&reqs[1]);
  if (in.rank != prev) {
    fprintf(stderr, "rank %d: ring got rank %d, expected %d\n", rank, in.rank, prev);
    ++errors;
  }

  /* Count distinct hosts: every rank gathers all host names. */
  char* all = calloc((size_t)size, 64);
  MPI_Iallgather(out.host, 64, MPI_CHAR, all, 64, MPI_CHAR, MPI_COMM_WORLD, &req);
  wait_req(&req);
  int nhosts = 0;
  for (int r = 0; r < size; ++r) {
    int seen = 0;
    for (int q = 0; q < r && !seen; ++q) seen = strncmp(all + 64 * q, all + 64 * r, 64) == 0;
    nhosts += !seen;
  }
  free(all);

  int total_errors = 0;
  MPI_Iallreduce(&errors, &total_errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
  wait_req(&req);
  if (rank == 0 && total_errors == 0) {
    printf("probe ok: %d ranks on %d hosts\n", size, nhosts);
    fflush(stdout);
  }

  if (loop_s > 0) {
    printf("rank %d looping\n", rank);
    fflush(stdout);
    double end = now_s() + loop_s;
    int go = 1;
    while (go) {
      int local = now_s() < end;
      MPI_Iallreduce(&local, &go, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &req);
      wait_req(&req);
      nap_us(10000);
    }
  }

  if (unlink_shm && shm_mib > 0) shm_unlink(shm_name);
  MPI_Finalize();
  return total_errors == 0 ? 0 : 1;
}

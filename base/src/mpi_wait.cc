// The sleeping MPI wait: see dlckpt/base/mpi_wait.h.
#include "dlckpt/base/mpi_wait.h"

#include <time.h>

#include <algorithm>

namespace {

long long NowNs() {
  struct timespec ts {};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

}  // namespace

extern "C" int dlckpt_mpi_waitall_until(int count, MPI_Request* requests, long min_ns, long max_ns,
                                        long long timeout_ns, int* timed_out) {
  if (timed_out != nullptr) *timed_out = 0;
  const long long deadline = timeout_ns > 0 ? NowNs() + timeout_ns : 0;
  long sleep_ns = std::max(min_ns, 1000L);
  for (;;) {
    int done = 0;
    int rc = MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS || done) return rc;
    if (deadline > 0 && NowNs() > deadline) {
      if (timed_out != nullptr) *timed_out = 1;
      return MPI_SUCCESS;
    }
    struct timespec ts{sleep_ns / 1000000000L, sleep_ns % 1000000000L};
    nanosleep(&ts, nullptr);
    sleep_ns = std::min(std::max(max_ns, min_ns), sleep_ns + sleep_ns / 2);
  }
}

extern "C" int dlckpt_mpi_waitall_backoff(int count, MPI_Request* requests, long min_ns, long max_ns) {
  return dlckpt_mpi_waitall_until(count, requests, min_ns, max_ns, 0, nullptr);
}

extern "C" int dlckpt_mpi_waitall(int count, MPI_Request* requests) {
  return dlckpt_mpi_waitall_backoff(count, requests, 10000, 100000);
}

extern "C" int dlckpt_mpi_wait(MPI_Request* request) { return dlckpt_mpi_waitall(1, request); }

// Small MPI collectives of the job coordinator (dlckpt-ctl checkpoint-all and
// run). Every wait tests a non-blocking request with growing sleeps (20 us up
// to 2 ms, or longer where latency does not matter): an idle process never
// spins (DESIGN.md invariant 5).
#ifndef DLCKPT_FUSE_COLLECTIVE_H_
#define DLCKPT_FUSE_COLLECTIVE_H_

#include <mpi.h>

#include <string>
#include <string_view>
#include <vector>

#include "dlckpt/status.h"

namespace dlckpt::fusefs {

inline constexpr long kMaxSleepNs = 2000000;

// Waits for `req` without spinning (sleeps grow up to max_sleep_ns).
Status WaitMpi(MPI_Request* req, std::string_view what, long max_sleep_ns = kMaxSleepNs);

class Collective {
 public:
  // `who` names this process in errors ("rank 3 on node vn1").
  Collective(MPI_Comm comm, std::string who);

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Every process gets the error of the lowest failing process ("what: who:
  // message", its errno), or OK when none failed.
  Status Agree(const Status& mine, std::string_view what);
  // Every process's string, in rank order.
  Result<std::vector<std::string>> Allgather(const std::string& mine);
  // The maximum of every process's value (and minimum as -max(-v)).
  Result<long> Max(long mine, long max_sleep_ns = kMaxSleepNs);

 private:
  MPI_Comm comm_;
  std::string who_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace dlckpt::fusefs

#endif  // DLCKPT_FUSE_COLLECTIVE_H_

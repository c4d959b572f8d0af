// dlckpt/base/mpi.h — waiting for MPI without spinning, and the small
// collectives every MPI component needs (the application API, the checkpoint
// round, dlckpt-ctl's job coordinator, the codec service).
//
// MPICH busy-polls inside blocking calls; on oversubscribed cores a waiting
// rank then takes the CPU from the ranks it waits for (docs/design.md,
// invariant 5). Every wait here tests a non-blocking request and sleeps
// between tests, the sleep growing by half from Backoff::min_ns to
// Backoff::max_ns (one implementation: dlckpt/base/mpi_wait.h). Errors carry
// the MPI error string and `what`.
// Thread safety: as MPI's (the calling thread must be allowed to call MPI).
#ifndef DLCKPT_BASE_MPI_H_
#define DLCKPT_BASE_MPI_H_

#include <mpi.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dlckpt/base/status.h"

namespace dlckpt::mpi {

struct Backoff {
  long min_ns;
  long max_ns;
};
// Inside an operation (every step of a collective needs its peers to test).
inline constexpr Backoff kBusy{10000, 100000};
// Between operations: an idle process costs about nothing.
inline constexpr Backoff kIdle{20000, 2000000};

// OK for MPI_SUCCESS, else EIO with "what: <MPI error string>".
Status Check(int rc, std::string_view what);

// Completes `req` without spinning. ETIMEDOUT after timeout_seconds (0:
// never); the request stays active then.
Status Wait(MPI_Request* req, std::string_view what, Backoff backoff = kBusy, double timeout_seconds = 0);
// Completes every request of `reqs` without spinning.
Status WaitAll(int count, MPI_Request* reqs, std::string_view what, Backoff backoff = kBusy);

// Collectives over one communicator, every call collective over it. `who`
// names this process in errors ("rank 3 on node vn1").
class Collective final {
 public:
  Collective(MPI_Comm comm, std::string who, Backoff backoff = kBusy);

  int rank() const { return rank_; }
  int size() const { return size_; }
  MPI_Comm comm() const { return comm_; }

  // The outcome agreed by all: OK when every process passed OK, else on every
  // process the error of the lowest failing process, "what: who: message"
  // with its errno (EIO when it had none). A message is cut at kMaxMessage.
  static constexpr size_t kMaxMessage = 8192;
  Status Agree(const Status& mine, std::string_view what);
  // Every process's string, in rank order: one collective when every string
  // has at most 508 bytes, two otherwise.
  Result<std::vector<std::string>> Allgather(const std::string& mine);
  // The same for strings of one size on every process (one collective, not
  // two); a process whose string has another size gets EPROTO, and the
  // others may then block: only for sizes fixed by the caller's code.
  Result<std::vector<std::string>> AllgatherFixed(const std::string& mine);
  // The maximum and minimum of every process's value.
  Result<uint64_t> Max(uint64_t mine);
  Result<uint64_t> Min(uint64_t mine);
  Status Barrier();

 private:
  Result<uint64_t> Reduce(uint64_t mine, MPI_Op op);
  MPI_Comm comm_;
  std::string who_;
  Backoff backoff_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace dlckpt::mpi

#endif  // DLCKPT_BASE_MPI_H_

// Sleeping MPI waits and small collectives: see dlckpt/base/mpi.h.
#include "dlckpt/base/mpi.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>

#include "dlckpt/base/mpi_wait.h"

namespace dlckpt::mpi {

Status Check(int rc, std::string_view what) {
  if (rc == MPI_SUCCESS) return Status::OK();
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) len = 0;
  std::string text = len > 0 ? std::string(msg, static_cast<size_t>(len)) : "MPI error " + std::to_string(rc);
  return Status::Error(EIO, std::string(what) + ": " + text);
}

Status Wait(MPI_Request* req, std::string_view what, Backoff backoff, double timeout_seconds) {
  int timed_out = 0;
  DLCKPT_RETURN_IF_ERROR(Check(dlckpt_mpi_waitall_until(1, req, backoff.min_ns, backoff.max_ns,
                                                        static_cast<long long>(timeout_seconds * 1e9),
                                                        &timed_out),
                               what));
  if (timed_out) {
    return Status::Timeout(std::string(what) + ": not complete after " + std::to_string(timeout_seconds) + " s");
  }
  return Status::OK();
}

Status WaitAll(int count, MPI_Request* reqs, std::string_view what, Backoff backoff) {
  return Check(dlckpt_mpi_waitall_backoff(count, reqs, backoff.min_ns, backoff.max_ns), what);
}

Collective::Collective(MPI_Comm comm, std::string who, Backoff backoff)
    : comm_(comm), who_(std::move(who)), backoff_(backoff) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

Status Collective::Agree(const Status& mine, std::string_view what) {
  int failed = mine.ok() ? size_ : rank_;
  int lowest = size_;
  MPI_Request req;
  DLCKPT_RETURN_IF_ERROR(Check(MPI_Iallreduce(&failed, &lowest, 1, MPI_INT, MPI_MIN, comm_, &req), what));
  DLCKPT_RETURN_IF_ERROR(Wait(&req, what, backoff_));
  if (lowest == size_) return Status::OK();
  // The failing process's errno and message, with its name.
  int code = 0;
  std::string text;
  if (rank_ == lowest) {
    code = mine.code();
    text = who_.empty() ? mine.message() : who_ + ": " + mine.message();
  }
  int head[2] = {code, static_cast<int>(std::min(text.size(), kMaxMessage))};
  DLCKPT_RETURN_IF_ERROR(Check(MPI_Ibcast(head, 2, MPI_INT, lowest, comm_, &req), what));
  DLCKPT_RETURN_IF_ERROR(Wait(&req, what, backoff_));
  text.resize(static_cast<size_t>(head[1]));
  if (head[1] > 0) {
    DLCKPT_RETURN_IF_ERROR(Check(MPI_Ibcast(text.data(), head[1], MPI_CHAR, lowest, comm_, &req), what));
    DLCKPT_RETURN_IF_ERROR(Wait(&req, what, backoff_));
  }
  return Status::Error(head[0] > 0 ? head[0] : EIO, std::string(what) + ": " + text);
}

Result<std::vector<std::string>> Collective::Allgather(const std::string& mine) {
  // One collective of fixed slots (the length, then the string when it
  // fits); only when a string does not fit, a second one with the strings.
  constexpr size_t kSlot = 512, kRoom = kSlot - sizeof(uint32_t);
  // A string too long for MPI still takes part (every process must enter
  // the collective): its length marks it, and every process then fails.
  std::string slot(kSlot, '\0');
  const uint32_t len = mine.size() > static_cast<size_t>(INT_MAX) ? UINT32_MAX : static_cast<uint32_t>(mine.size());
  std::memcpy(slot.data(), &len, sizeof len);
  if (mine.size() <= kRoom) std::memcpy(slot.data() + sizeof len, mine.data(), mine.size());
  std::string slots(kSlot * static_cast<size_t>(size_), '\0');
  MPI_Request req;
  DLCKPT_RETURN_IF_ERROR(Check(MPI_Iallgather(slot.data(), static_cast<int>(kSlot), MPI_CHAR, slots.data(),
                                              static_cast<int>(kSlot), MPI_CHAR, comm_, &req),
                               "MPI_Iallgather"));
  DLCKPT_RETURN_IF_ERROR(Wait(&req, "MPI_Iallgather", backoff_));
  std::vector<int> lens(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
  bool fits = true;
  size_t total = 0;
  for (size_t i = 0; i < static_cast<size_t>(size_); ++i) {
    uint32_t l = 0;
    std::memcpy(&l, slots.data() + i * kSlot, sizeof l);
    if (l > static_cast<uint32_t>(INT_MAX) || total + l > static_cast<size_t>(INT_MAX)) {
      return Status::Error(EOVERFLOW, "Allgather: more than INT_MAX bytes in all");
    }
    lens[i] = static_cast<int>(l);
    displs[i] = static_cast<int>(total);
    total += l;
    fits = fits && l <= kRoom;
  }
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(size_));
  if (fits) {
    for (size_t i = 0; i < static_cast<size_t>(size_); ++i) {
      out.emplace_back(slots.data() + i * kSlot + sizeof(uint32_t), static_cast<size_t>(lens[i]));
    }
    return out;
  }
  std::string all(total, '\0');
  DLCKPT_RETURN_IF_ERROR(Check(MPI_Iallgatherv(mine.data(), static_cast<int>(len), MPI_CHAR, all.data(), lens.data(),
                                               displs.data(), MPI_CHAR, comm_, &req),
                               "MPI_Iallgatherv"));
  DLCKPT_RETURN_IF_ERROR(Wait(&req, "MPI_Iallgatherv", backoff_));
  for (size_t i = 0; i < static_cast<size_t>(size_); ++i) {
    out.push_back(all.substr(static_cast<size_t>(displs[i]), static_cast<size_t>(lens[i])));
  }
  return out;
}

Result<std::vector<std::string>> Collective::AllgatherFixed(const std::string& mine) {
  const int len = static_cast<int>(mine.size());
  std::string all(mine.size() * static_cast<size_t>(size_), '\0');
  MPI_Request req;
  DLCKPT_RETURN_IF_ERROR(
      Check(MPI_Iallgather(mine.data(), len, MPI_CHAR, all.data(), len, MPI_CHAR, comm_, &req), "MPI_Iallgather"));
  DLCKPT_RETURN_IF_ERROR(Wait(&req, "MPI_Iallgather", backoff_));
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(size_));
  for (int i = 0; i < size_; ++i) out.push_back(all.substr(static_cast<size_t>(i) * mine.size(), mine.size()));
  return out;
}

Result<uint64_t> Collective::Reduce(uint64_t mine, MPI_Op op) {
  uint64_t out = 0;
  MPI_Request req;
  DLCKPT_RETURN_IF_ERROR(Check(MPI_Iallreduce(&mine, &out, 1, MPI_UINT64_T, op, comm_, &req),
                               "MPI_Iallreduce"));
  DLCKPT_RETURN_IF_ERROR(Wait(&req, "MPI_Iallreduce", backoff_));
  return out;
}

Result<uint64_t> Collective::Max(uint64_t mine) { return Reduce(mine, MPI_MAX); }
Result<uint64_t> Collective::Min(uint64_t mine) { return Reduce(mine, MPI_MIN); }

Status Collective::Barrier() {
  MPI_Request req;
  DLCKPT_RETURN_IF_ERROR(Check(MPI_Ibarrier(comm_, &req), "MPI_Ibarrier"));
  return Wait(&req, "MPI_Ibarrier", backoff_);
}

}  // namespace dlckpt::mpi

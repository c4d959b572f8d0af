// MPI test of the codec's doorbells (codec/src/doorbell.h), 3 or more ranks.
//
// Each scenario is one "command": rank 0 posts an MPI send of a value to
// every other rank, then (maybe) rings; the others complete the receive with
// Doorbells::Wait and check the value.
//  1. SetUp on loopback connects every process (run with 70 ranks too: more
//     than a listen queue of 64).
//  2. A ring wakes a process in a sleep of an hour: the waiters start with an
//     hour-long sleep, so without the ring this scenario hangs until the
//     test's timeout. Rank 0 sends 0.2 s after every waiter said it is
//     about to Wait, so that the ring, not Wait's first test, completes it
//     (had the first test found it, the scenario passes without proving the
//     ring: a weaker test, never a false failure).
//  3. A byte left over (rank 0 rings twice for one command) costs nothing:
//     the next command, not rung, still arrives.
//  4. Rank 0 closes every doorbell: the waiters, again starting with an hour,
//     notice and fall back to testing every 2 ms, so an unrung command
//     arrives.
//  5. SetUp whose address the others cannot resolve: no doorbells, logged,
//     and commands still arrive.
// Exit status 0 when every check passed on every rank.
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "doorbell.h"
#include "mpi_check.h"

using namespace dlckpt;

namespace {

using mpitest::g_rank;

constexpr long kHourNs = 3600L * 1000 * 1000 * 1000;
constexpr int kTagReady = 7, kTagCommand = 8;

// One command: rank 0 waits for every waiter's "ready" (sent before its
// Wait), sends `value` to each, rings `rings` times; the others check it.
void Command(codec::Doorbells& bells, int size, int value, int rings, long first_ns) {
  if (g_rank == 0) {
    for (int r = 1; r < size; ++r) {
      int ready = 0;
      MPI_Recv(&ready, 1, MPI_INT, r, kTagReady, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    if (first_ns > mpi::kIdle.max_ns) usleep(200000);
    std::vector<MPI_Request> reqs(static_cast<size_t>(size - 1));
    for (int r = 1; r < size; ++r) MPI_Isend(&value, 1, MPI_INT, r, kTagCommand, MPI_COMM_WORLD, &reqs[r - 1]);
    for (int i = 0; i < rings; ++i) bells.Ring();
    MPI_Waitall(size - 1, reqs.data(), MPI_STATUSES_IGNORE);
    return;
  }
  int got = -1, ready = 1;
  MPI_Request req;
  MPI_Irecv(&got, 1, MPI_INT, 0, kTagCommand, MPI_COMM_WORLD, &req);
  MPI_Send(&ready, 1, MPI_INT, 0, kTagReady, MPI_COMM_WORLD);
  Status st = bells.Wait(&req, "command", kHourNs, first_ns);
  CHECK(st.ok(), "%s", st.ToString().c_str());
  CHECK(got == value, "got %d, want %d", got, value);
}

}  // namespace

int main(int argc, char** argv) {
  const int size = mpitest::Start(&argc, &argv);
  if (size < 3) {
    if (g_rank == 0) std::fprintf(stderr, "doorbell_mpi_test: needs 3 or more ranks\n");
    MPI_Finalize();
    return 2;
  }
  std::vector<std::string> logged;
  auto log = [&](const std::string& m) {
    std::fprintf(stderr, "rank %d: %s\n", g_rank, m.c_str());
    logged.push_back(m);
  };
  mpi::Collective c(MPI_COMM_WORLD, "rank " + std::to_string(g_rank));

  {
    // 1.
    codec::Doorbells bells;
    Status st = bells.SetUp(c, g_rank == 0 ? "127.0.0.1" : "", log);
    CHECK(st.ok(), "%s", st.ToString().c_str());
    CHECK(bells.connected() == (g_rank == 0 ? size - 1 : 1), "connected %d", bells.connected());
    // 2.
    Command(bells, size, 42, 1, kHourNs);
    // 3.
    Command(bells, size, 43, 2, mpi::kIdle.min_ns);
    Command(bells, size, 44, 0, mpi::kIdle.min_ns);
    // 4.
    if (g_rank == 0) bells = codec::Doorbells{};
    Command(bells, size, 45, 0, kHourNs);
    if (g_rank != 0) CHECK(bells.connected() == 0, "still connected after rank 0 closed");
  }
  {
    // 5.
    logged.clear();
    codec::Doorbells bells;
    Status st = bells.SetUp(c, g_rank == 0 ? "no-such-host.invalid" : "", log);
    CHECK(st.ok(), "%s", st.ToString().c_str());
    CHECK(bells.connected() == 0, "connected %d", bells.connected());
    if (g_rank != 0) {
      CHECK(!logged.empty() && logged[0].find("no doorbell") != std::string::npos &&
                logged[0].find("no-such-host.invalid") != std::string::npos,
            "logged: %s", logged.empty() ? "(nothing)" : logged[0].c_str());
    }
    Command(bells, size, 46, 1, kHourNs);
  }

  return mpitest::Finish("doorbell_mpi_test");
}

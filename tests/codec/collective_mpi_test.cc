// MPI test of mpi::Collective::Allgather (dlckpt/base/mpi.h), 3 or more
// ranks: strings that fit its fixed slots (one collective) and strings that
// do not (a second one), alone and mixed, empty ones, and binary bytes; every
// rank must get every rank's string exactly.
// Exit status 0 when every check passed on every rank.
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#include "dlckpt/base/mpi.h"
#include "mpi_check.h"

using namespace dlckpt;

namespace {

using mpitest::g_rank;

// Rank r's string in round `round`: `len(r)` bytes, every byte a function of
// (round, r, i), zeros included.
std::string Of(int round, int r, size_t len) {
  std::string s(len, '\0');
  for (size_t i = 0; i < len; ++i) s[i] = static_cast<char>((round * 131 + r * 31 + i * 7) % 256);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const int size = mpitest::Start(&argc, &argv);
  mpi::Collective c(MPI_COMM_WORLD, "rank " + std::to_string(g_rank));
  // Lengths by round: all small, at the slot's edge (508 bytes fit, 509 do
  // not), one large among small, all large, all empty.
  const std::vector<std::vector<size_t>> rounds = {
      {3, 0, 17}, {508, 508, 508}, {508, 509, 0}, {5, 70000, 12}, {4096, 1 << 20, 600}, {0, 0, 0}};
  for (size_t round = 0; round < rounds.size(); ++round) {
    auto len = [&](int r) { return rounds[round][static_cast<size_t>(r) % rounds[round].size()]; };
    auto got = c.Allgather(Of(static_cast<int>(round), g_rank, len(g_rank)));
    CHECK(got.ok() && got->size() == static_cast<size_t>(size), "round %zu: %s", round,
          got.ok() ? "wrong number of strings" : got.status().ToString().c_str());
    if (!got.ok() || got->size() != static_cast<size_t>(size)) continue;
    for (int r = 0; r < size; ++r) {
      CHECK((*got)[static_cast<size_t>(r)] == Of(static_cast<int>(round), r, len(r)),
            "round %zu: rank %d's string differs (%zu bytes, want %zu)", round, r,
            (*got)[static_cast<size_t>(r)].size(), len(r));
    }
  }
  return mpitest::Finish("collective_mpi_test");
}

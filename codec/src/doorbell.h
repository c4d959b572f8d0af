// doorbell.h — waking idle codec processes the moment rank 0 has a command.
//
// Between commands every codec process but rank 0 waits for rank 0's next
// command (Service::BroadcastCommand) on an MPI receive. MPI cannot block
// without spinning, so the wait tests the receive and sleeps in between, up
// to mpi::kIdle.max_ns (2 ms): every command started up to 2 ms late on some
// process, and every process woke 500 times a second while idle.
//
// A doorbell is one TCP connection from each of those processes to rank 0,
// made once when the service starts (SetUp). After posting a command's
// sends, rank 0 writes one byte to every doorbell (Ring); an idle process
// sleeps in poll(2) on its doorbell instead of nanosleep(2), so the byte
// wakes it at once, and with nothing to do it sleeps kDoorbellIdleMaxNs
// between tests.
//
// Contract: the command itself travels by MPI only. A doorbell is a hint
// that changes when a process tests, never what it receives: a byte that is
// late, lost, spurious or left over from an earlier command costs at most one
// sleep (kDoorbellIdleMaxNs) or one extra test. A process whose doorbell
// could not be made (logged at SetUp) or broke (closed by either side, an
// error) waits as before, sleeping at most mpi::kIdle.max_ns. A connection
// proves it belongs to the job with a token rank 0 sent over MPI; rank 0
// accepts only during SetUp, then closes its listening socket.
// Thread safety: one thread (the service's) uses a Doorbells.
#ifndef DLCKPT_CODEC_DOORBELL_H_
#define DLCKPT_CODEC_DOORBELL_H_

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dlckpt/base/mpi.h"
#include "dlckpt/base/status.h"
#include "dlckpt/control/protocol.h"

namespace dlckpt::codec {

// The longest sleep of an idle process that has a doorbell.
inline constexpr long kDoorbellIdleMaxNs = 50'000'000;

class Doorbells {
 public:
  using Log = std::function<void(const std::string&)>;

  // Collective over `c`. Rank 0 listens on `host` (a numeric address its
  // peers reach it by: the service's published address) and sends the port
  // and a fresh token to the others, which connect and present the token and
  // their rank. A failure leaves the processes concerned without a doorbell
  // and is logged through `log`; only a failed collective is an error. An
  // empty `host` on rank 0 makes no doorbells.
  Status SetUp(mpi::Collective& c, const std::string& host, const Log& log);

  // Rank 0: one byte to every doorbell. A doorbell whose send fails (other
  // than a full buffer, which already holds an unread byte) is closed.
  void Ring();

  // Not rank 0: completes `req`, sleeping in poll(2) on the doorbell between
  // tests (from first_ns, growing by half up to idle_max_ns; after a ring,
  // at most mpi::kBusy.max_ns for 20 ms), or in nanosleep(2) up to
  // mpi::kIdle.max_ns without a doorbell. EIO with the MPI error and `what`
  // when the test fails.
  Status Wait(MPI_Request* req, std::string_view what, long idle_max_ns = kDoorbellIdleMaxNs,
              long first_ns = mpi::kIdle.min_ns);

  // Rank 0: doorbells connected; others: 1 when this process has one.
  int connected() const;

 private:
  void Drop(std::unique_ptr<control::protocol::Connection>& conn, const std::string& why);

  Log log_;
  std::vector<std::unique_ptr<control::protocol::Connection>> peers_;  // rank 0: by rank
  std::unique_ptr<control::protocol::Connection> mine_;               // the others
};

namespace internal {

// What a process presents on connecting: the token, then its rank.
struct Hello {
  char token[64];
  uint32_t rank;
};

// Rank 0's side of SetUp: accepts connections and reads their hellos as they
// arrive, never waiting for one peer. A hello that proves the token and names
// a rank in [1, size) not yet taken makes (*peers)[rank]; any other
// connection (wrong token, rank 0 or out of range, a rank taken, closed or
// failed before a whole hello) is closed and logged as refused. A connection
// that sends nothing stays pending without delaying the others. `l` and
// `token` must outlive the Acceptor; `l` is made non-blocking.
class Acceptor {
 public:
  Acceptor(control::protocol::Listener& l, const std::string& token, int size);
  // Waits up to timeout_ms for the listener or a pending hello, and handles
  // what is ready. *peers has `size` entries.
  void Step(int timeout_ms, std::vector<std::unique_ptr<control::protocol::Connection>>* peers,
            const Doorbells::Log& log);

 private:
  struct Pending {
    std::unique_ptr<control::protocol::Connection> conn;
    Hello hello;
    size_t got;
  };
  control::protocol::Listener& l_;
  const std::string& token_;
  const int size_;
  std::vector<Pending> pending_;
};

}  // namespace internal

}  // namespace dlckpt::codec

#endif  // DLCKPT_CODEC_DOORBELL_H_

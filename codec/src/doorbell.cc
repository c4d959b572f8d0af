// Doorbells of the idle codec processes: see doorbell.h.
#include "doorbell.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <sstream>

namespace dlckpt::codec {

namespace protocol = control::protocol;

namespace {

// How an idle process waits without a doorbell, for log lines.
std::string Fallback() { return "testing for commands every " + std::to_string(mpi::kIdle.max_ns / 1000000) + " ms"; }

bool SendAll(int fd, const void* buf, size_t n) {
  const auto* p = static_cast<const char*>(buf);
  size_t sent = 0;
  while (sent < n) {
    ssize_t k = send(fd, p + sent, n - sent, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    sent += static_cast<size_t>(k);
  }
  return true;
}

}  // namespace

namespace internal {

Acceptor::Acceptor(protocol::Listener& l, const std::string& token, int size) : l_(l), token_(token), size_(size) {
  fcntl(l_.fd(), F_SETFL, fcntl(l_.fd(), F_GETFL) | O_NONBLOCK);
}

void Acceptor::Step(int timeout_ms, std::vector<std::unique_ptr<protocol::Connection>>* peers,
                    const Doorbells::Log& log) {
  std::vector<struct pollfd> fds{{l_.fd(), POLLIN, 0}};
  for (const Pending& p : pending_) fds.push_back({p.conn->fd(), POLLIN, 0});
  if (poll(fds.data(), fds.size(), timeout_ms) <= 0) return;
  for (size_t i = pending_.size(); i-- > 0;) {
    if (fds[i + 1].revents == 0) continue;
    Pending& p = pending_[i];
    const ssize_t k =
        recv(p.conn->fd(), reinterpret_cast<char*>(&p.hello) + p.got, sizeof(Hello) - p.got, MSG_DONTWAIT);
    if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (k > 0) p.got += static_cast<size_t>(k);
    if (k > 0 && p.got < sizeof(Hello)) continue;
    const Hello& h = p.hello;
    if (k > 0 && std::memcmp(h.token, token_.data(), sizeof h.token) == 0 && h.rank != 0 &&
        h.rank < static_cast<uint32_t>(size_) && !(*peers)[h.rank]) {
      (*peers)[h.rank] = std::move(p.conn);
    } else {
      log("doorbells: refused a connection from " + p.conn->peer());
    }
    pending_.erase(pending_.begin() + static_cast<long>(i));
  }
  if ((fds[0].revents & POLLIN) != 0) {
    for (;;) {
      auto conn = l_.Accept();  // non-blocking: EAGAIN once the queue is empty
      if (!conn.ok()) break;
      pending_.push_back({std::move(*conn), {}, 0});
    }
  }
}

}  // namespace internal

Status Doorbells::SetUp(mpi::Collective& c, const std::string& host, const Log& log) {
  log_ = log;
  const int rank = c.rank(), size = c.size();
  std::unique_ptr<protocol::Listener> listener;
  std::string token, offer;
  if (rank == 0 && size > 1 && !host.empty()) {
    auto l = protocol::Listener::Listen(0, protocol::ListenAddressFor(host), std::max(64, size));
    auto t = protocol::NewToken();
    if (!l.ok() || !t.ok() || t->size() != sizeof(internal::Hello::token)) {
      log_("no doorbells (idle processes " + Fallback() +
           "): " + (!l.ok() ? l.status().ToString() : t.ok() ? "bad token" : t.status().ToString()));
    } else {
      listener = std::move(*l);
      token = *t;
      offer = host + " " + std::to_string(listener->port()) + " " + token;
    }
  }
  DLCKPT_ASSIGN_OR_RETURN(std::vector<std::string> offers, c.Allgather(offer));
  if (rank != 0 && !offers.empty() && !offers[0].empty()) {
    std::istringstream in(offers[0]);
    std::string h;
    int port = 0;
    in >> h >> port >> token;
    auto conn = protocol::Connection::Connect(h, port, 5000);
    internal::Hello hello{};
    std::memcpy(hello.token, token.data(), std::min(token.size(), sizeof hello.token));
    hello.rank = static_cast<uint32_t>(rank);
    if (!conn.ok()) {
      log_("no doorbell (" + Fallback() + "): " + conn.status().ToString());
    } else if (!SendAll((*conn)->fd(), &hello, sizeof hello)) {
      log_("no doorbell: sending to " + (*conn)->peer() + ": " + std::strerror(errno));
    } else {
      mine_ = std::move(*conn);
    }
  }
  // Rank 0 accepts while the others connect (a listen queue holds only so
  // many), then, once every process said whether it connected, waits up to
  // 5 s for those still on their way (over a network a connection may reach
  // the queue after the collective). Hellos are read as they come, so a
  // silent stranger holds no one up.
  char mine = mine_ ? 1 : 0;
  std::vector<char> made(static_cast<size_t>(size), 0);
  MPI_Request req;
  DLCKPT_RETURN_IF_ERROR(
      mpi::Check(MPI_Iallgather(&mine, 1, MPI_CHAR, made.data(), 1, MPI_CHAR, c.comm(), &req), "doorbells"));
  if (!listener) return mpi::Wait(&req, "doorbells");
  peers_.resize(static_cast<size_t>(size));
  internal::Acceptor acceptor{*listener, token, size};
  for (int done = 0; !done;) {
    DLCKPT_RETURN_IF_ERROR(mpi::Check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "doorbells"));
    if (!done) acceptor.Step(1, &peers_, log_);
  }
  const int expected = static_cast<int>(std::count(made.begin(), made.end(), 1));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (connected() < expected) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    acceptor.Step(static_cast<int>(std::min<long>(left.count(), 100)), &peers_, log_);
  }
  log_("doorbells: " + std::to_string(connected()) + " of " + std::to_string(size - 1) + " processes connected" +
       (connected() < size - 1 ? "; the others go on " + Fallback() : ""));
  return Status::OK();
}

void Doorbells::Drop(std::unique_ptr<protocol::Connection>& conn, const std::string& why) {
  if (log_) log_("doorbell to " + conn->peer() + " closed (" + why + "); " + Fallback());
  conn.reset();
}

void Doorbells::Ring() {
  for (auto& p : peers_) {
    if (!p) continue;
    const char byte = 1;
    ssize_t k;
    do {
      k = send(p->fd(), &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    } while (k < 0 && errno == EINTR);
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK) Drop(p, std::strerror(errno));
  }
}

Status Doorbells::Wait(MPI_Request* req, std::string_view what, long idle_max_ns, long first_ns) {
  const long idle_ns = mine_ ? std::max(idle_max_ns, mpi::kIdle.min_ns) : mpi::kIdle.max_ns;
  long max_ns = idle_ns, sleep_ns = std::clamp(first_ns, 1000L, idle_ns);
  // After a ring, the operation's pace for this long at most: a byte left
  // over from an earlier command must not keep an idle process testing often.
  constexpr long kRungNs = 20'000'000;
  long rung_ns = 0;
  for (;;) {
    int done = 0;
    DLCKPT_RETURN_IF_ERROR(mpi::Check(MPI_Test(req, &done, MPI_STATUS_IGNORE), what));
    if (done) return Status::OK();
    if (!mine_) {  // none, or it broke: as without doorbells
      max_ns = std::min(max_ns, mpi::kIdle.max_ns);
      sleep_ns = std::min(sleep_ns, max_ns);
      struct timespec ts {sleep_ns / 1000000000L, sleep_ns % 1000000000L};
      nanosleep(&ts, nullptr);
    } else {
      struct timespec ts {sleep_ns / 1000000000L, sleep_ns % 1000000000L};
      struct pollfd pfd {mine_->fd(), POLLIN, 0};
      const int r = ppoll(&pfd, 1, &ts, nullptr);
      if (r < 0 && errno != EINTR) {
        Drop(mine_, std::string("poll: ") + std::strerror(errno));
      } else if (r > 0 && (pfd.revents & POLLIN) != 0) {
        char bytes[64];
        const ssize_t k = recv(mine_->fd(), bytes, sizeof bytes, MSG_DONTWAIT);
        if (k > 0) {
          // Rung: the command's sends are posted; test at the pace of an
          // operation until it arrives.
          sleep_ns = mpi::kBusy.min_ns;
          max_ns = mpi::kBusy.max_ns;
          rung_ns = kRungNs;
          continue;
        }
        if (k == 0) {
          Drop(mine_, "closed by rank 0");
        } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          Drop(mine_, std::strerror(errno));
        }
      } else if (r > 0) {
        Drop(mine_, "connection error");
      }
    }
    if (rung_ns > 0 && (rung_ns -= sleep_ns) <= 0) max_ns = idle_ns;
    sleep_ns = std::min(max_ns, sleep_ns + sleep_ns / 2);
  }
}

int Doorbells::connected() const {
  if (!mine_) return static_cast<int>(std::count_if(peers_.begin(), peers_.end(), [](const auto& p) { return p != nullptr; }));
  return 1;
}

}  // namespace dlckpt::codec

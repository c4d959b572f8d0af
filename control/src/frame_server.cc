#include "dlckpt/control/frame_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "dlckpt/base/env.h"

namespace dlckpt::control::protocol {

namespace {

int64_t NowMs() { return Env::Default()->NowNanos() / 1000000; }

// Bytes read from one connection per readiness, so that a fast sender cannot
// keep the loop on itself.
constexpr size_t kReadBudget = size_t{1} << 20;
constexpr size_t kReadChunk = size_t{64} << 10;
// Connections accepted per poll round.
constexpr int kAcceptBurst = 16;

std::string Seconds(int ms) {
  char b[32];
  std::snprintf(b, sizeof b, "%g s", ms / 1000.0);
  return b;
}

}  // namespace

struct FrameServer::Peer {
  uint64_t id = 0;
  std::unique_ptr<Connection> conn;
  std::optional<Role> role;
  uint8_t header[kHeaderBytes] = {};
  size_t header_got = 0;
  bool have_header = false;
  MsgType type = MsgType::kError;
  uint32_t length = 0;
  uint32_t crc = 0;
  std::string payload;
  bool ready = false;     // a complete, checked frame waits to be handed out
  int64_t deadline = 0;   // monotonic ms; 0: none
  bool open() const { return conn != nullptr; }
  bool mid_frame() const { return header_got > 0; }
};

FrameServer::FrameServer(std::unique_ptr<Listener> listener, Limits limits, LogFn log)
    : listener_(std::move(listener)), limits_(limits), log_(std::move(log)) {}

FrameServer::~FrameServer() = default;

Result<std::unique_ptr<FrameServer>> FrameServer::Listen(int port, Limits limits, LogFn log,
                                                         const std::string& address) {
  DLCKPT_ASSIGN_OR_RETURN(std::unique_ptr<Listener> l, Listener::Listen(port, address));
  // accept(2) must never block the loop, even for a connection reset between
  // poll(2) and accept(2).
  int flags = fcntl(l->fd(), F_GETFL);
  if (flags < 0 || fcntl(l->fd(), F_SETFL, flags | O_NONBLOCK) != 0) {
    return Status::FromErrno(errno, "listener O_NONBLOCK");
  }
  if (!log) log = [](const std::string&) {};
  return std::unique_ptr<FrameServer>(new FrameServer(std::move(l), limits, std::move(log)));
}

int FrameServer::port() const { return listener_->port(); }

size_t FrameServer::connections() const {
  size_t n = 0;
  for (const auto& p : peers_) n += p->open() ? 1 : 0;
  return n;
}

FrameServer::Peer* FrameServer::Find(uint64_t id) {
  for (auto& p : peers_) {
    if (p->id == id && p->open()) return p.get();
  }
  return nullptr;
}

size_t FrameServer::UnauthenticatedBytes() const {
  size_t n = 0;
  for (const auto& p : peers_) {
    if (p->open() && !p->role) n += p->payload.size();
  }
  return n;
}

void FrameServer::Drop(Peer& p, int code, const std::string& why, bool answer) {
  log_((answer ? "rejected " : "dropping ") + p.conn->peer() + ": " + why);
  if (code != 0) {
    // Best effort: an ERROR the socket takes at once, or none.
    std::string frame = EncodeFrame(MsgType::kError, EncodeError({code, why}));
    (void)send(p.conn->fd(), frame.data(), frame.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  p.conn.reset();
  p.payload = std::string();
  p.ready = false;
}

// Drops the oldest unauthenticated connections (never `keep`, never one whose
// frame is complete) until `bytes` more fit in the budget. False when they
// cannot be made to fit.
bool FrameServer::MakeRoom(const Peer* keep, size_t bytes) {
  for (auto& p : peers_) {
    if (UnauthenticatedBytes() + bytes <= limits_.unauthenticated_bytes) return true;
    if (p.get() == keep || !p->open() || p->role || p->ready || p->payload.empty()) continue;
    Drop(*p, EBUSY, "unauthenticated connections hold " + std::to_string(UnauthenticatedBytes()) +
                        " bytes of partial frames; dropping the oldest", false);
  }
  return UnauthenticatedBytes() + bytes <= limits_.unauthenticated_bytes;
}

void FrameServer::AcceptSome(int64_t now) {
  for (int i = 0; i < kAcceptBurst; ++i) {
    auto c = listener_->Accept();
    if (!c.ok()) {
      int e = c.status().code();
      if (e == EAGAIN || e == EWOULDBLOCK) return;
      if (e == ECONNABORTED || e == EPROTO || e == EPERM) continue;
      // Out of descriptors or memory: the listener stays readable, so wait
      // a little before trying again instead of spinning on it.
      log_(c.status().ToString());
      accept_paused_until_ms_ = now + 100;
      return;
    }
    auto p = std::make_unique<Peer>();
    p->id = next_id_++;
    p->conn = std::move(*c);
    p->deadline = now + limits_.hello_ms;
    peers_.push_back(std::move(p));
    size_t waiting = 0;
    for (const auto& q : peers_) waiting += q->open() && !q->role && !q->ready ? 1 : 0;
    for (auto& q : peers_) {
      if (waiting <= limits_.max_unauthenticated) break;
      if (!q->open() || q->role || q->ready) continue;
      Drop(*q, EBUSY, std::to_string(waiting) + " unauthenticated connections (limit " +
                          std::to_string(limits_.max_unauthenticated) + "); dropping the oldest",
           false);
      --waiting;
    }
  }
}

void FrameServer::ReadSome(Peer& p, int64_t now) {
  size_t budget = kReadBudget;
  char chunk[kReadChunk];
  while (p.open() && !p.ready && budget > 0) {
    uint8_t* dst;
    size_t want;
    if (!p.have_header) {
      dst = p.header + p.header_got;
      want = kHeaderBytes - p.header_got;
    } else {
      want = std::min({static_cast<size_t>(p.length) - p.payload.size(), kReadChunk, budget});
      if (!p.role && !MakeRoom(&p, want)) {
        return Drop(p, EBUSY, "unauthenticated connections hold too many bytes of partial frames", false);
      }
      dst = reinterpret_cast<uint8_t*>(chunk);
    }
    ssize_t n = recv(p.conn->fd(), dst, want, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      int e = n < 0 ? errno : 0;
      if (p.mid_frame()) {
        log_("dropping " + p.conn->peer() + ": " +
             (e ? std::string(std::strerror(e)) : std::string("connection closed")) +
             " in the middle of a frame");
      } else if (e != 0 && e != ECONNRESET) {
        log_("dropping " + p.conn->peer() + ": receive: " + std::strerror(e));
      }
      p.conn.reset();
      p.payload = std::string();
      return;
    }
    budget -= static_cast<size_t>(n);
    if (p.header_got == 0 && p.role) p.deadline = now + limits_.frame_ms;  // a frame begins
    if (!p.have_header) {
      p.header_got += static_cast<size_t>(n);
      if (p.header_got < kHeaderBytes) continue;
      auto len = ParseHeader(p.header, &p.type, &p.crc);
      if (!len.ok()) return Drop(p, len.status().code(), len.status().message(), true);
      if (!p.role && p.type != MsgType::kHello) {
        return Drop(p, EACCES, std::string("first message must be HELLO, not ") + MsgTypeName(p.type), true);
      }
      p.have_header = true;
      p.length = *len;
    } else {
      p.payload.append(chunk, static_cast<size_t>(n));
    }
    if (p.have_header && p.payload.size() == p.length) {
      Status s = CheckPayload(p.payload, p.crc);
      if (!s.ok()) return Drop(p, EBADMSG, s.message(), true);
      p.ready = true;
      if (p.role) p.deadline = 0;
      ready_.push_back(p.id);
    }
  }
}

Result<std::optional<FrameServer::Request>> FrameServer::Next(int timeout_ms) {
  int64_t now = NowMs();
  if (returned_ms_ >= 0) {
    // The owner was busy since the last return: nobody's clock ran.
    int64_t away = now - returned_ms_;
    for (auto& p : peers_) {
      if (p->deadline != 0) p->deadline += away;
    }
  }
  const int64_t end = now + std::max(timeout_ms, 0);
  auto give = [&](std::optional<Request> r) -> Result<std::optional<Request>> {
    returned_ms_ = NowMs();
    return r;
  };
  std::vector<struct pollfd> fds;
  std::vector<Peer*> polled;
  for (;;) {
    while (!ready_.empty()) {
      uint64_t id = ready_.front();
      ready_.erase(ready_.begin());
      Peer* p = Find(id);
      if (p == nullptr || !p->ready) continue;
      Request r{p->id, p->conn->peer(), p->role, Frame{p->type, std::move(p->payload)}};
      p->payload = std::string();
      p->ready = false;
      p->have_header = false;
      p->header_got = 0;
      p->length = 0;
      return give(std::move(r));
    }
    peers_.erase(std::remove_if(peers_.begin(), peers_.end(), [](const auto& p) { return !p->open(); }),
                 peers_.end());

    now = NowMs();
    int64_t wait = end - now;
    fds.clear();
    polled.clear();
    bool listening = now >= accept_paused_until_ms_;
    if (!listening) wait = std::min(wait, accept_paused_until_ms_ - now);
    fds.push_back({listening ? listener_->fd() : -1, POLLIN, 0});
    for (auto& p : peers_) {
      if (p->deadline != 0) wait = std::min(wait, p->deadline - now);
      fds.push_back({p->conn->fd(), POLLIN, 0});
      polled.push_back(p.get());
    }
    int rc = poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(wait, 0)));
    if (rc < 0 && errno != EINTR) return Status::FromErrno(errno, "poll");
    now = NowMs();
    if (rc > 0) {
      // Connections already open go first, so that a flood of new ones
      // cannot push out a peer whose frame is waiting to be read.
      for (size_t i = 0; i < polled.size(); ++i) {
        if (fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) ReadSome(*polled[i], now);
      }
      if (fds[0].revents & POLLIN) AcceptSome(now);
    }
    for (auto& p : peers_) {
      if (!p->open() || p->ready || p->deadline == 0 || now < p->deadline) continue;
      if (!p->role) {
        Drop(*p, ETIMEDOUT, "no complete HELLO within " + Seconds(limits_.hello_ms) + " of connecting", false);
      } else {
        Drop(*p, ETIMEDOUT, "frame not completed within " + Seconds(limits_.frame_ms) + " of its first byte",
             false);
      }
    }
    if (ready_.empty() && now >= end) return give(std::nullopt);
  }
}

void FrameServer::Authenticate(uint64_t id, Role role) {
  Peer* p = Find(id);
  if (p == nullptr) return;
  p->role = role;
  p->deadline = p->mid_frame() ? NowMs() + limits_.frame_ms : 0;
}

Status FrameServer::Reply(uint64_t id, MsgType type, std::string_view payload) {
  Peer* p = Find(id);
  if (p == nullptr) return Status::Error(EPIPE, "connection " + std::to_string(id) + " is closed");
  Status s = p->conn->Send(type, payload);
  if (!s.ok()) {
    p->conn.reset();
    p->payload = std::string();
  }
  return s;
}

void FrameServer::Reject(uint64_t id, int code, const std::string& why) {
  Peer* p = Find(id);
  if (p != nullptr) Drop(*p, code, why, true);
}

}  // namespace dlckpt::control::protocol

// dlckpt/control/frame_server.h — the codec service's side of the protocol's
// connections: one listener and every client, read without blocking.
#ifndef DLCKPT_CODEC_FRAME_SERVER_H_
#define DLCKPT_CODEC_FRAME_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlckpt/base/status.h"
#include "dlckpt/control/protocol.h"

namespace dlckpt::control::protocol {

// ---- serving many connections -------------------------------------------------

// The server side for a single-threaded service: a listener and every
// connection accepted from it, all read without blocking. Each connection's
// bytes are reassembled into frames as they arrive, and a frame is handed out
// only once it is complete and its header and CRC are checked, so a peer that
// sends part of a frame, or nothing at all, never delays another one.
//
// Limits (FrameServer::Limits):
//  - An unauthenticated connection (not yet Authenticate()d) may send only a
//    HELLO, refused at its header otherwise, and must deliver it whole within
//    hello_ms of being accepted.
//  - At most max_unauthenticated of them are open at once, buffering at most
//    unauthenticated_bytes together; the oldest is dropped to make room.
//  - An authenticated connection may stay idle between frames for as long as
//    it likes, but a frame once begun must complete within frame_ms.
//  - A header announcing more than kMaxPayload is refused at once; payload
//    memory grows only as bytes arrive.
// Deadlines run only while the owner waits in Next(): the time between one
// Next() returning and the following call (the owner executing a request) is
// added to every deadline, so a long command does not expire peers whose
// bytes sat in the kernel meanwhile.
// Every refused, expired or dropped connection is logged through the log
// callback with its peer, and is sent an ERROR frame when the socket takes it
// without blocking. A peer closing between frames is closed silently.
// Thread safety: none; one thread owns the server and calls every member.
class FrameServer final {
 public:
  struct Limits {
    int hello_ms = 2000;
    int frame_ms = 30000;
    size_t max_unauthenticated = 32;
    size_t unauthenticated_bytes = size_t{64} << 20;
  };
  using LogFn = std::function<void(const std::string&)>;
  // A complete frame from connection `id`.
  struct Request {
    uint64_t id = 0;
    std::string peer;
    std::optional<Role> role;  // empty until the connection is Authenticate()d
    Frame frame;
  };

  ~FrameServer();
  FrameServer(const FrameServer&) = delete;
  FrameServer& operator=(const FrameServer&) = delete;
  // Listens on `port` (0: any free port) on `address` (Listener::Listen;
  // "" = all interfaces).
  static Result<std::unique_ptr<FrameServer>> Listen(int port, Limits limits, LogFn log,
                                                     const std::string& address = "");
  int port() const;

  // Waits up to timeout_ms (>= 0) for a complete frame on any connection,
  // accepting, reading, expiring and dropping connections meanwhile; blocks
  // in poll(2), never spins. Empty when no frame completed in time. Frames of
  // different connections are handed out in the order they completed, one at
  // a time per connection: a connection's next frame is not read before its
  // current one was handed out. Fails only when poll(2) does.
  Result<std::optional<Request>> Next(int timeout_ms);
  // Connection `id` proved the job's token: it is held to frame_ms from now on.
  void Authenticate(uint64_t id, Role role);
  // Sends a frame on `id`, blocking until it is sent (Connection::Send); a
  // failed send closes the connection. EPIPE when `id` is no longer open.
  Status Reply(uint64_t id, MsgType type, std::string_view payload);
  // Logs "rejected PEER: why", sends ERROR(code, why) if the socket takes it
  // without blocking, and closes `id`.
  void Reject(uint64_t id, int code, const std::string& why);
  // Open connections, authenticated or not.
  size_t connections() const;

 private:
  struct Peer;
  FrameServer(std::unique_ptr<Listener> listener, Limits limits, LogFn log);
  Peer* Find(uint64_t id);
  void AcceptSome(int64_t now);
  void ReadSome(Peer& p, int64_t now);
  bool MakeRoom(const Peer* keep, size_t bytes);
  void Drop(Peer& p, int code, const std::string& why, bool answer);
  size_t UnauthenticatedBytes() const;

  std::unique_ptr<Listener> listener_;
  Limits limits_;
  LogFn log_;
  std::vector<std::unique_ptr<Peer>> peers_;  // in accept order, oldest first
  std::vector<uint64_t> ready_;               // ids with a complete frame, in completion order
  uint64_t next_id_ = 1;
  int64_t returned_ms_ = -1;          // when Next() last returned (-1: never)
  int64_t accept_paused_until_ms_ = 0;  // after accept(2) failed for lack of descriptors
};

}  // namespace dlckpt::control::protocol

#endif  // DLCKPT_CODEC_FRAME_SERVER_H_

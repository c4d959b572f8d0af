// dlckpt/control/client.h — the one client of the codec service: reads the
// rendezvous, connects, introduces itself (HELLO with the job's token, its
// role and, for an application, the layout rank -> node -> store), sends
// requests and waits for their replies with a timeout, and reconnects after
// any error. The application API, dlckpt-ctl's job checkpoints and dlckpt-run
// all talk to the service through it; nothing else builds a HELLO.
//
// Failure behaviour: every error names the service (its rendezvous file) and
// the request. A transport or protocol error (lost connection, timeout,
// malformed or unexpected reply) drops the connection, so the next request
// connects afresh; an ERROR reply or a DONE with an error code keeps it.
// One request is outstanding at a time: an encode started with StartEncode is
// collected with AwaitEncode before any other request (which would otherwise
// discard its answer).
// Thread safety: one thread at a time.
#ifndef DLCKPT_CODEC_CLIENT_H_
#define DLCKPT_CODEC_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dlckpt/base/status.h"
#include "dlckpt/control/protocol.h"

namespace dlckpt::control {

struct ClientOptions {
  std::string rendezvous;  // path of the service's rendezvous file
  int rendezvous_wait_ms = 60000;  // how long to wait for the file to appear
  int connect_timeout_ms = 30000;
  int hello_timeout_ms = 120000;
  protocol::Role role = protocol::Role::kApplication;
  std::string job;  // when set, a service of another job is refused (EINVAL)
};

// What an ENCODE came to. `unknown` is set when the request went out but no
// answer came (timeout, lost connection): the service may still finish the
// epoch's parity, so the caller must not treat the epoch as never encoded.
// `running` (AwaitEncode with keep_waiting only) is set when the wait ran out
// while the connection is intact: the encode is still running, await it again.
struct EncodeOutcome {
  Status status;
  bool unknown = false;
  bool running = false;
};

// Called while a request waits for its reply (about every 50 ms); an error
// it returns ends the wait with that error.
using IdleFn = std::function<Status()>;

class CodecClient final {
 public:
  explicit CodecClient(ClientOptions options) : o_(std::move(options)) {}
  CodecClient(const CodecClient&) = delete;
  CodecClient& operator=(const CodecClient&) = delete;

  // The layout an application client introduces (empty for a supervisor).
  // A different layout than the connected one reconnects at the next request.
  void SetLayout(std::vector<protocol::RankEntry> layout);
  // Connects and says HELLO unless already connected with the current layout.
  // ENOENT/ETIMEDOUT while the rendezvous file does not appear.
  Status Connect();
  void Disconnect() { conn_.reset(); }
  bool connected() const { return conn_ != nullptr; }
  const std::string& job() const { return job_; }

  // ENCODE(epoch, keep) and its DONE; see EncodeOutcome.
  EncodeOutcome Encode(uint64_t epoch, uint64_t keep, int timeout_ms);
  // The two halves of Encode, for an encode that runs while the caller goes
  // on: StartEncode sends the request (an error: it was never sent, so the
  // service never started it); AwaitEncode waits up to timeout_ms for its
  // DONE. With keep_waiting, running out of time keeps the connection and
  // reports `running`; otherwise the outcome is then unknown.
  Status StartEncode(uint64_t epoch, uint64_t keep);
  EncodeOutcome AwaitEncode(uint64_t epoch, int timeout_ms, bool keep_waiting = false);
  // The epoch of the encode started and not yet collected (0: none).
  uint64_t awaiting() const { return awaiting_; }
  // SURVEY and its reply.
  Result<protocol::SurveyReply> Survey(int timeout_ms, const IdleFn& idle = {});
  // RECOVER(plan) and its DONE.
  Result<protocol::Done> Recover(const protocol::Recover& plan, int timeout_ms, const IdleFn& idle = {});
  // SHUTDOWN and its DONE.
  Status Shutdown(int timeout_ms);

 private:
  // Connects if needed and sends one request.
  Status Send(protocol::MsgType type, std::string_view payload, std::string_view what);
  // Waits for the reply; an ERROR reply becomes its Status. A transport or
  // protocol error drops the connection, a timeout too unless keep_on_timeout.
  Result<protocol::Frame> Receive(std::string_view what, int timeout_ms, const IdleFn& idle,
                                  bool keep_on_timeout);
  // Send, then Receive.
  Result<protocol::Frame> Call(protocol::MsgType type, std::string_view payload, std::string_view what,
                               int timeout_ms, const IdleFn& idle);
  // A reply that must be a DONE with code 0.
  Result<protocol::Done> ToDone(Result<protocol::Frame> f, std::string_view what);
  // Call, then ToDone.
  Result<protocol::Done> CallDone(protocol::MsgType type, std::string_view payload, std::string_view what,
                                  int timeout_ms, const IdleFn& idle);
  Status Named(const Status& s, std::string_view what) const;

  ClientOptions o_;
  std::vector<protocol::RankEntry> layout_;
  std::unique_ptr<protocol::Connection> conn_;
  std::string job_;
  uint64_t awaiting_ = 0;
};

}  // namespace dlckpt::control

#endif  // DLCKPT_CODEC_CLIENT_H_

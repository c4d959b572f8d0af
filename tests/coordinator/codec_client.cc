// Talks to a running dlckpt-codec service as a hostile or clumsy client would,
// then as a proper one: every bad connection must be rejected with a reason
// while the service keeps serving the good ones.
//
//   codec_client RENDEZVOUS_FILE
#include <sys/socket.h>

#include <cstdio>
#include <string>

#include "dlckpt/control/protocol.h"

using namespace dlckpt::control::protocol;  // NOLINT

namespace {

int failures = 0;

void Check(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAIL", what.c_str());
  if (!ok) ++failures;
}

std::unique_ptr<Connection> Connect(const Rendezvous& r) {
  auto c = Connection::Connect(r.host, r.port, 10000);
  if (!c.ok()) {
    std::printf("FAIL: connect: %s\n", c.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(*c);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  auto r = ReadRendezvous(argv[1], 60000);
  if (!r.ok()) {
    std::printf("FAIL: %s\n", r.status().ToString().c_str());
    return 1;
  }
  Hello good;
  good.token = r->token;
  good.role = Role::kSupervisor;
  good.job = r->job;

  {  // wrong token
    auto c = Connect(*r);
    Hello h = good;
    h.token = std::string(64, '0');
    auto reply = c->Call(MsgType::kHello, EncodeHello(h), 10000);
    Check(reply.status().code() == EACCES && reply.status().message().find("wrong token") != std::string::npos,
          "a wrong token is refused: " + reply.status().ToString());
  }
  {  // a command before HELLO
    auto c = Connect(*r);
    auto reply = c->Call(MsgType::kStatus, "", 10000);
    Check(reply.status().code() == EACCES, "STATUS before HELLO is refused: " + reply.status().ToString());
  }
  {  // garbage bytes
    auto c = Connect(*r);
    (void)c->Send(MsgType::kHello, "");  // a valid frame header with an empty HELLO payload
    auto reply = c->Receive(10000);
    Check(reply.ok() && reply->type == MsgType::kError, "a malformed HELLO is answered with ERROR");
  }
  {  // an oversized frame header
    auto c = Connect(*r);
    std::string frame = EncodeFrame(MsgType::kStatus, "");
    frame[8] = '\xff';
    frame[9] = '\xff';
    frame[10] = '\xff';
    frame[11] = '\x7f';
    ::send(c->fd(), frame.data(), frame.size(), 0);
    auto reply = c->Receive(10000);
    Check(!reply.ok() || reply->type == MsgType::kError, "an oversized frame is dropped");
  }
  {  // the wrong job
    auto c = Connect(*r);
    Hello h = good;
    h.job = "otherjob";
    auto reply = c->Call(MsgType::kHello, EncodeHello(h), 10000);
    Check(reply.status().code() == EACCES, "another job's HELLO is refused: " + reply.status().ToString());
  }
  {  // a supervisor may not ENCODE; an unexpected message type is refused
    auto c = Connect(*r);
    auto hello = c->Call(MsgType::kHello, EncodeHello(good), 10000);
    Check(hello.ok() && hello->type == MsgType::kHelloOk, "a proper HELLO is accepted");
    auto reply = c->Call(MsgType::kDone, EncodeDone({}), 10000);
    Check(reply.status().code() == EPROTO, "an unexpected DONE is refused: " + reply.status().ToString());
    auto st = c->Call(MsgType::kStatus, "", 10000);
    Check(st.ok() && st->type == MsgType::kStatusReply, "the service still answers STATUS");
    if (st.ok()) std::printf("status: %s\n", DecodeStatusReply(st->payload)->text.c_str());
    auto enc = c->Call(MsgType::kEncode, EncodeEncode({1}), 10000);
    Check(enc.status().code() == EPERM, "ENCODE from the supervisor is refused: " + enc.status().ToString());
  }
  {  // the service survived all of that
    auto c = Connect(*r);
    auto hello = c->Call(MsgType::kHello, EncodeHello(good), 10000);
    auto sv = c->Call(MsgType::kSurvey, "", 60000);
    Check(hello.ok() && sv.ok() && sv->type == MsgType::kSurveyReply, "SURVEY works after the rejects");
    auto down = c->Call(MsgType::kShutdown, "", 60000);
    Check(down.ok() && down->type == MsgType::kDone, "SHUTDOWN is acknowledged");
  }
  return failures == 0 ? 0 : 1;
}

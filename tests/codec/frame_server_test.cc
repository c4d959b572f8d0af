// protocol::FrameServer, the codec service's connection handling, without MPI:
// silent peers, half frames and floods must never delay a proper client;
// deadlines and limits close them with a logged reason naming the peer.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "dlckpt/control/frame_server.h"
#include "dlckpt/control/protocol.h"

namespace dlckpt::control::protocol {
namespace {

using std::chrono::milliseconds;

struct Fixture {
  std::vector<std::string> log;
  std::unique_ptr<FrameServer> server;

  explicit Fixture(FrameServer::Limits limits) {
    auto s = FrameServer::Listen(0, limits, [this](const std::string& m) { log.push_back(m); });
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (s.ok()) server = std::move(*s);
  }
  std::unique_ptr<Connection> Connect() {
    auto c = Connection::Connect("127.0.0.1", server->port(), 5000);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  }
  // Serves until a frame arrives or `ms` pass.
  std::optional<FrameServer::Request> Next(int ms) {
    auto r = server->Next(ms);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(*r) : std::nullopt;
  }
  // Runs the server for `ms` and expects no frame.
  void Idle(int ms) {
    auto end = std::chrono::steady_clock::now() + milliseconds(ms);
    while (std::chrono::steady_clock::now() < end) {
      auto left = std::chrono::duration_cast<milliseconds>(end - std::chrono::steady_clock::now()).count();
      auto r = Next(static_cast<int>(std::max<int64_t>(left, 0)));
      EXPECT_FALSE(r.has_value()) << "unexpected frame " << MsgTypeName(r->frame.type);
    }
  }
  bool Logged(const std::string& what) const {
    for (const auto& l : log) {
      if (l.find(what) != std::string::npos) return true;
    }
    return false;
  }
};

void SendRaw(Connection& c, std::string_view bytes) {
  ASSERT_EQ(::send(c.fd(), bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
}

int LocalPort(const Connection& c) {
  struct sockaddr_storage ss {};
  socklen_t len = sizeof ss;
  getsockname(c.fd(), reinterpret_cast<struct sockaddr*>(&ss), &len);
  return ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                  : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

std::string HelloFrame() {
  Hello h;
  h.token = std::string(64, 'a');
  h.role = Role::kSupervisor;
  h.job = "job";
  return EncodeFrame(MsgType::kHello, EncodeHello(h));
}

// A frame header announcing `length` payload bytes that never come.
std::string HeaderOnly(MsgType type, uint32_t length) {
  std::string f = EncodeFrame(type, "");
  for (int i = 0; i < 4; ++i) f[8 + i] = static_cast<char>(length >> (8 * i));
  return f;
}

// The peer sees an ERROR with `code`, or the connection closed.
void ExpectClosed(Connection& c, int code) {
  auto f = c.Receive(5000);
  if (f.ok()) {
    ASSERT_EQ(f->type, MsgType::kError);
    auto e = DecodeError(f->payload);
    ASSERT_TRUE(e.ok());
    EXPECT_EQ(e->code, code) << e->message;
    f = c.Receive(5000);
  }
  EXPECT_EQ(f.status().code(), ECONNRESET) << f.status().ToString();
}

TEST(FrameServerTest, StalledPeersDoNotDelayAProperClient) {
  FrameServer::Limits limits;
  limits.hello_ms = 20000;  // far beyond the test: nothing may wait for it
  Fixture fx(limits);
  ASSERT_TRUE(fx.server);
  auto silent = fx.Connect();
  auto partial = fx.Connect();
  SendRaw(*partial, std::string("DLCK\x01\x00", 6));
  auto big = fx.Connect();
  SendRaw(*big, HeaderOnly(MsgType::kHello, kMaxPayload));
  SendRaw(*big, "a few bytes of 16 MiB");
  fx.Idle(200);  // all three accepted and read as far as they go
  auto good = fx.Connect();
  SendRaw(*good, HelloFrame());
  auto r = fx.Next(10000);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->frame.type, MsgType::kHello);
  EXPECT_FALSE(r->role.has_value());
  // Handed out while every stalled peer is still connected.
  EXPECT_EQ(fx.server->connections(), 4u);
  fx.server->Authenticate(r->id, Role::kSupervisor);
  ASSERT_TRUE(fx.server->Reply(r->id, MsgType::kHelloOk, "").ok());
  auto ok = good->Receive(5000);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->type, MsgType::kHelloOk);
  // And its next request, too.
  SendRaw(*good, EncodeFrame(MsgType::kStatus, ""));
  r = fx.Next(10000);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->frame.type, MsgType::kStatus);
  EXPECT_EQ(r->role, Role::kSupervisor);
}

TEST(FrameServerTest, UnauthenticatedPeersHaveAShortDeadline) {
  FrameServer::Limits limits;
  limits.hello_ms = 300;
  Fixture fx(limits);
  ASSERT_TRUE(fx.server);
  auto silent = fx.Connect();
  auto partial = fx.Connect();
  SendRaw(*partial, std::string("DLCK\x01\x00", 6));
  auto big = fx.Connect();
  SendRaw(*big, HeaderOnly(MsgType::kHello, kMaxPayload));
  fx.Idle(1000);
  EXPECT_EQ(fx.server->connections(), 0u);
  EXPECT_TRUE(fx.Logged("no complete HELLO within 0.3 s")) << (fx.log.empty() ? "" : fx.log[0]);
  EXPECT_TRUE(fx.Logged("dropping ")) << "a dropped peer is logged";
  EXPECT_TRUE(fx.Logged("127.0.0.1:" + std::to_string(LocalPort(*silent)) + ": no complete HELLO"))
      << "the log names the peer: " << (fx.log.empty() ? "" : fx.log[0]);
  ExpectClosed(*silent, ETIMEDOUT);
  ExpectClosed(*partial, ETIMEDOUT);
  ExpectClosed(*big, ETIMEDOUT);
}

TEST(FrameServerTest, BadHeadersAreRefusedAtOnce) {
  FrameServer::Limits limits;
  limits.hello_ms = 20000;
  Fixture fx(limits);
  ASSERT_TRUE(fx.server);
  auto oversized = fx.Connect();
  SendRaw(*oversized, HeaderOnly(MsgType::kHello, kMaxPayload + 1));
  auto not_hello = fx.Connect();
  SendRaw(*not_hello, HeaderOnly(MsgType::kEncode, 1000));
  auto garbage = fx.Connect();
  SendRaw(*garbage, "GET / HTTP/1.0\r\n\r\n");
  auto bad_crc = fx.Connect();
  std::string f = HelloFrame();
  f.back() ^= 1;
  SendRaw(*bad_crc, f);
  fx.Idle(500);
  EXPECT_EQ(fx.server->connections(), 0u);
  ExpectClosed(*oversized, EMSGSIZE);
  ExpectClosed(*not_hello, EACCES);
  ExpectClosed(*garbage, EBADMSG);
  ExpectClosed(*bad_crc, EBADMSG);
  EXPECT_TRUE(fx.Logged("first message must be HELLO, not ENCODE"));
  EXPECT_TRUE(fx.Logged("exceeds the limit"));
}

TEST(FrameServerTest, AFloodDropsTheOldestUnauthenticated) {
  FrameServer::Limits limits;
  limits.hello_ms = 20000;
  limits.max_unauthenticated = 4;
  Fixture fx(limits);
  ASSERT_TRUE(fx.server);
  // An authenticated client is not counted and never dropped for the flood.
  auto good = fx.Connect();
  SendRaw(*good, HelloFrame());
  auto r = fx.Next(5000);
  ASSERT_TRUE(r.has_value());
  fx.server->Authenticate(r->id, Role::kSupervisor);
  std::vector<std::unique_ptr<Connection>> flood;
  for (int i = 0; i < 12; ++i) {
    flood.push_back(fx.Connect());
    fx.Idle(20);
  }
  EXPECT_EQ(fx.server->connections(), 5u);
  EXPECT_TRUE(fx.Logged("dropping the oldest"));
  ExpectClosed(*flood.front(), EBUSY);
  SendRaw(*good, EncodeFrame(MsgType::kStatus, ""));
  r = fx.Next(5000);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->frame.type, MsgType::kStatus);
  // The newest flood connection is still open and may still say HELLO.
  SendRaw(*flood.back(), HelloFrame());
  r = fx.Next(5000);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->frame.type, MsgType::kHello);
}

TEST(FrameServerTest, UnauthenticatedBytesAreBounded) {
  FrameServer::Limits limits;
  limits.hello_ms = 20000;
  limits.unauthenticated_bytes = 100000;
  Fixture fx(limits);
  ASSERT_TRUE(fx.server);
  auto a = fx.Connect();
  SendRaw(*a, HeaderOnly(MsgType::kHello, 90000));
  SendRaw(*a, std::string(60000, 'x'));
  fx.Idle(200);
  auto b = fx.Connect();
  SendRaw(*b, HeaderOnly(MsgType::kHello, 90000));
  SendRaw(*b, std::string(60000, 'y'));
  fx.Idle(300);
  // a (the oldest) made room for b.
  EXPECT_EQ(fx.server->connections(), 1u);
  EXPECT_TRUE(fx.Logged("bytes of partial frames"));
  ExpectClosed(*a, EBUSY);
}

TEST(FrameServerTest, AuthenticatedPeersMayIdleButNotStallAFrame) {
  FrameServer::Limits limits;
  limits.hello_ms = 200;
  limits.frame_ms = 400;
  Fixture fx(limits);
  ASSERT_TRUE(fx.server);
  auto idle = fx.Connect();
  SendRaw(*idle, HelloFrame());
  auto r = fx.Next(5000);
  ASSERT_TRUE(r.has_value());
  fx.server->Authenticate(r->id, Role::kApplication);
  auto stalled = fx.Connect();
  SendRaw(*stalled, HelloFrame());
  r = fx.Next(5000);
  ASSERT_TRUE(r.has_value());
  fx.server->Authenticate(r->id, Role::kApplication);
  std::string half = EncodeFrame(MsgType::kEncode, EncodeEncode({3, 2}));
  SendRaw(*stalled, half.substr(0, half.size() - 3));
  fx.Idle(1000);
  EXPECT_EQ(fx.server->connections(), 1u);
  EXPECT_TRUE(fx.Logged("frame not completed within 0.4 s"));
  ExpectClosed(*stalled, ETIMEDOUT);
  SendRaw(*idle, EncodeFrame(MsgType::kEncode, EncodeEncode({3, 2})));
  r = fx.Next(5000);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->frame.type, MsgType::kEncode);
  EXPECT_EQ(DecodeEncode(r->frame.payload)->epoch, 3u);
}

TEST(FrameServerTest, DeadlinesDoNotRunWhileTheOwnerIsBusy) {
  FrameServer::Limits limits;
  limits.hello_ms = 1000;
  Fixture fx(limits);
  ASSERT_TRUE(fx.server);
  auto slow = fx.Connect();
  std::string hello = HelloFrame();
  SendRaw(*slow, hello.substr(0, 20));
  auto quick = fx.Connect();
  SendRaw(*quick, hello);
  auto r = fx.Next(5000);
  ASSERT_TRUE(r.has_value());
  // A long command: the slow peer's deadline passes in wall time only.
  std::this_thread::sleep_for(milliseconds(2000));
  std::thread rest([&] {
    std::this_thread::sleep_for(milliseconds(300));
    SendRaw(*slow, hello.substr(20));
  });
  r = fx.Next(5000);
  rest.join();
  ASSERT_TRUE(r.has_value()) << (fx.log.empty() ? "" : fx.log[0]);
  EXPECT_EQ(r->frame.type, MsgType::kHello);
  EXPECT_EQ(r->frame.payload, hello.substr(kHeaderBytes));
}

TEST(FrameServerTest, FramesOfOneConnectionAreHandedOutOneAtATime) {
  Fixture fx(FrameServer::Limits{});
  ASSERT_TRUE(fx.server);
  auto c = fx.Connect();
  SendRaw(*c, HelloFrame() + EncodeFrame(MsgType::kStatus, "") + EncodeFrame(MsgType::kSurvey, ""));
  auto r = fx.Next(5000);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->frame.type, MsgType::kHello);
  fx.server->Authenticate(r->id, Role::kSupervisor);
  r = fx.Next(5000);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->frame.type, MsgType::kStatus);
  r = fx.Next(5000);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->frame.type, MsgType::kSurvey);
  // A peer closing between frames goes silently.
  c.reset();
  fx.Idle(200);
  EXPECT_EQ(fx.server->connections(), 0u);
  EXPECT_TRUE(fx.log.empty()) << fx.log[0];
}

TEST(FrameServerTest, IdleWaitDoesNotSpin) {
  Fixture fx(FrameServer::Limits{});
  ASSERT_TRUE(fx.server);
  auto silent = fx.Connect();
  clock_t before = clock();
  fx.Idle(500);
  EXPECT_LT(static_cast<double>(clock() - before) / CLOCKS_PER_SEC, 0.1);
}

}  // namespace
}  // namespace dlckpt::control::protocol

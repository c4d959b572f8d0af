#include "dlckpt/control/protocol.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

namespace dlckpt::control::protocol {
namespace {

Hello SampleHello() {
  Hello h;
  h.token = std::string(64, 'a');
  h.role = Role::kApplication;
  h.job = "job7";
  for (int r = 0; r < 5; ++r) h.layout.push_back({r, "vn" + std::to_string(r / 2), "/dlckpt.job7.vn.r" + std::to_string(r)});
  return h;
}

TEST(ProtocolTest, MessagesRoundTrip) {
  Hello h = SampleHello();
  auto h2 = DecodeHello(EncodeHello(h));
  ASSERT_TRUE(h2.ok()) << h2.status().ToString();
  EXPECT_EQ(h2->token, h.token);
  EXPECT_EQ(h2->job, "job7");
  ASSERT_EQ(h2->layout.size(), 5u);
  EXPECT_EQ(h2->layout[3].node, "vn1");
  EXPECT_EQ(h2->layout[3].store, "/dlckpt.job7.vn.r3");

  EXPECT_EQ(DecodeEncode(EncodeEncode({42, 41}))->epoch, 42u);
  EXPECT_EQ(DecodeEncode(EncodeEncode({42, 41}))->keep, 41u);
  Done d{7, ENOSPC, "store full", 1.5, 12345};
  auto d2 = DecodeDone(EncodeDone(d));
  ASSERT_TRUE(d2.ok());
  EXPECT_EQ(d2->epoch, 7u);
  EXPECT_EQ(d2->code, ENOSPC);
  EXPECT_EQ(d2->message, "store full");
  EXPECT_DOUBLE_EQ(d2->seconds, 1.5);
  EXPECT_EQ(d2->bytes, 12345u);

  SurveyReply s;
  NodeReport n;
  n.node = "vn4";
  n.stores.push_back({"/dlckpt.j.vn4.r1", "j", 1, 3, 4, "", true, false, "epoch 4: CRC mismatch"});
  ParityReport p;
  p.name = "/dlckpt.j.vn4.g0.p0.s1";
  p.group = 2;
  p.index = 1;
  p.k = 2;
  p.scheme = 1;
  p.epoch = 9;
  p.generation = 3;
  p.complete = true;
  p.members.push_back({"vn0", {0, 1}, {100, 200}});
  n.parities.push_back(p);
  s.nodes.push_back(n);
  auto s2 = DecodeSurveyReply(EncodeSurveyReply(s));
  ASSERT_TRUE(s2.ok()) << s2.status().ToString();
  ASSERT_EQ(s2->nodes.size(), 1u);
  EXPECT_EQ(s2->nodes[0].stores[0].pending, 4u);
  EXPECT_TRUE(s2->nodes[0].stores[0].acked_ok);
  EXPECT_FALSE(s2->nodes[0].stores[0].pending_ok);
  EXPECT_EQ(s2->nodes[0].stores[0].damage, "epoch 4: CRC mismatch");
  EXPECT_EQ(s2->nodes[0].parities[0].members[0].sizes[1], 200u);
  EXPECT_TRUE(s2->nodes[0].parities[0].complete);

  Recover rc{5, 2, {{1, 3, "vn9"}}, {"vn3"}, {}};
  rc.groups.push_back({1, 0, 1, 0, {{"vn2", {2}, {10}}, {"vn3", {3}, {20}}}, {"vn2", "", "vn9"}});
  auto rc2 = DecodeRecover(EncodeRecover(rc));
  ASSERT_TRUE(rc2.ok());
  EXPECT_EQ(rc2->rebuilds[0].target_node, "vn9");
  EXPECT_EQ(rc2->lost_nodes[0], "vn3");
  ASSERT_EQ(rc2->groups.size(), 1u);
  EXPECT_EQ(rc2->groups[0].members[1].sizes[0], 20u);
  EXPECT_EQ(rc2->groups[0].sources, (std::vector<std::string>{"vn2", "", "vn9"}));
  // A group whose sources do not cover its stripe is malformed.
  rc.groups[0].sources.pop_back();
  EXPECT_EQ(DecodeRecover(EncodeRecover(rc)).status().code(), EBADMSG);
  // Spread layout: n stripes of n chunks (n = 3 members, k = 1).
  Recover sp{5, 2, {{0, 1, "vn2"}}, {"vn1"}, {}};
  sp.groups.push_back({0, 0, 1, 1, {{"vn0", {0}, {10}}, {"vn1", {1}, {10}}, {"vn2", {2}, {10}}},
                       {"", "vn2", "vn0", "vn0", "vn2", "", "vn0", "", "vn2"}});
  auto sp2 = DecodeRecover(EncodeRecover(sp));
  ASSERT_TRUE(sp2.ok()) << sp2.status().ToString();
  EXPECT_EQ(sp2->groups[0].layout, 1);
  EXPECT_EQ(sp2->groups[0].sources, sp.groups[0].sources);
  sp.groups[0].sources.resize(4);  // the spares layout's count is not a spread stripe set
  auto bad = DecodeRecover(EncodeRecover(sp));
  EXPECT_EQ(bad.status().code(), EBADMSG);
  EXPECT_NE(bad.status().message().find("spread layout: 9"), std::string::npos) << bad.status().ToString();
  sp.groups[0].k = 3;  // k >= n cannot be spread
  EXPECT_EQ(DecodeRecover(EncodeRecover(sp)).status().code(), EBADMSG);
}

TEST(ProtocolTest, FramesAreChecked) {
  std::string payload = EncodeEncode({3});
  std::string frame = EncodeFrame(MsgType::kEncode, payload);
  auto f = ParseFrame(frame);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->type, MsgType::kEncode);
  EXPECT_TRUE(ValidatePayload(*f).ok());

  auto bad = [&](std::string b) { return ParseFrame(b).status().code(); };
  std::string x = frame;
  x[0] ^= 1;
  EXPECT_EQ(bad(x), EBADMSG);  // magic
  x = frame;
  x[4] = 9;
  EXPECT_EQ(bad(x), EBADMSG);  // version
  x = frame;
  x[6] = 99;
  EXPECT_EQ(bad(x), EBADMSG);  // type
  x = frame;
  x[11] = 0x7f;
  EXPECT_EQ(bad(x), EMSGSIZE);  // oversized
  x = frame;
  x.back() ^= 1;
  EXPECT_EQ(bad(x), EBADMSG);  // crc
  EXPECT_EQ(bad(frame.substr(0, 10)), EBADMSG);
  EXPECT_EQ(bad(frame + "z"), EBADMSG);

  // Well-framed but malformed payloads.
  auto invalid = [](MsgType t, std::string p) {
    auto fr = ParseFrame(EncodeFrame(t, p));
    EXPECT_TRUE(fr.ok());
    return ValidatePayload(*fr).code();
  };
  EXPECT_EQ(invalid(MsgType::kEncode, "abc"), EBADMSG);
  EXPECT_EQ(invalid(MsgType::kEncode, payload + "x"), EBADMSG);
  EXPECT_EQ(invalid(MsgType::kStatus, "x"), EBADMSG);
  Writer w;
  w.Str("tok");
  w.U8(1);
  w.Str("job");
  w.U32(0xffffffff);  // a count far beyond the payload
  EXPECT_EQ(invalid(MsgType::kHello, w.data()), EBADMSG);
  Writer w2;
  w2.U32(1u << 30);  // string length beyond the limit
  EXPECT_EQ(invalid(MsgType::kStatusReply, w2.data()), EBADMSG);
  Writer w3;
  w3.Str("t");
  w3.U8(77);  // unknown role
  EXPECT_EQ(invalid(MsgType::kHello, w3.data()), EBADMSG);
  EXPECT_EQ(invalid(MsgType::kEncode, EncodeEncode({0})), EBADMSG);
  EXPECT_EQ(invalid(MsgType::kEncode, EncodeEncode({5, 5})), EBADMSG);
}

TEST(ProtocolTest, ConnectionsCarryFramesAndErrors) {
  auto l = Listener::Listen(0);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  int port = (*l)->port();
  std::thread server([&] {
    auto c = (*l)->Accept();
    ASSERT_TRUE(c.ok());
    auto f = (*c)->Receive(5000);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(f->type, MsgType::kStatus);
    ASSERT_TRUE((*c)->Send(MsgType::kStatusReply, EncodeStatusReply({"fine"})).ok());
    f = (*c)->Receive(5000);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*c)->Send(MsgType::kError, EncodeError({EPERM, "bad token"})).ok());
  });
  auto c = Connection::Connect("localhost", port, 5000);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto r = (*c)->Call(MsgType::kStatus, "", 5000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(DecodeStatusReply(r->payload)->text, "fine");
  auto e = (*c)->Call(MsgType::kHello, EncodeHello(SampleHello()), 5000);
  EXPECT_EQ(e.status().code(), EPERM);
  EXPECT_NE(e.status().message().find("bad token"), std::string::npos);
  server.join();
  // The server closed: the next receive reports it.
  EXPECT_EQ((*c)->Receive(2000).status().code(), ECONNRESET);
  EXPECT_EQ((*c)->Receive(100).status().code(), ECONNRESET);
}

TEST(ProtocolTest, ReceiveTimesOutWithoutSpinning) {
  auto l = Listener::Listen(0);
  ASSERT_TRUE(l.ok());
  auto c = Connection::Connect("127.0.0.1", (*l)->port(), 5000);
  ASSERT_TRUE(c.ok());
  auto s = (*l)->Accept();
  ASSERT_TRUE(s.ok());
  clock_t before = clock();
  EXPECT_EQ((*c)->Receive(300).status().code(), ETIMEDOUT);
  // Blocking in poll(2): far less CPU than wall time.
  EXPECT_LT(static_cast<double>(clock() - before) / CLOCKS_PER_SEC, 0.1);
  EXPECT_EQ(Connection::Connect("127.0.0.1", 1, 2000).status().code(), ECONNREFUSED);
}

// Virtual nodes publish a loopback address: the service listens there
// only, not on every interface; other addresses (hosts) need all of them.
TEST(ProtocolTest, AServicePublishingLoopbackListensOnLoopbackOnly) {
  EXPECT_EQ(ListenAddressFor("127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(ListenAddressFor("127.0.1.1"), "127.0.1.1");
  EXPECT_EQ(ListenAddressFor("::1"), "::1");
  EXPECT_EQ(ListenAddressFor("10.0.0.7"), "");
  EXPECT_EQ(ListenAddressFor("fd00::7"), "");
  EXPECT_EQ(ListenAddressFor("vm"), "");
  EXPECT_EQ(ListenAddressFor(""), "");
  auto l = Listener::Listen(0, "127.0.0.1");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  struct sockaddr_storage ss {};
  socklen_t len = sizeof ss;
  ASSERT_EQ(getsockname((*l)->fd(), reinterpret_cast<struct sockaddr*>(&ss), &len), 0);
  ASSERT_EQ(ss.ss_family, AF_INET);
  char ip[INET_ADDRSTRLEN] = "";
  inet_ntop(AF_INET, &reinterpret_cast<struct sockaddr_in*>(&ss)->sin_addr, ip, sizeof ip);
  EXPECT_STREQ(ip, "127.0.0.1");
  auto c = Connection::Connect("127.0.0.1", (*l)->port(), 5000);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  auto any = Listener::Listen(0);
  ASSERT_TRUE(any.ok());
  len = sizeof ss;
  ASSERT_EQ(getsockname((*any)->fd(), reinterpret_cast<struct sockaddr*>(&ss), &len), 0);
  if (ss.ss_family == AF_INET6) {
    EXPECT_TRUE(IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<struct sockaddr_in6*>(&ss)->sin6_addr));
  }
  EXPECT_EQ(Listener::Listen(0, "vm").status().code(), EINVAL);
}

TEST(ProtocolTest, RendezvousFile) {
  std::string dir = ::testing::TempDir() + "/rdv." + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::string path = dir + "/rendezvous";
  auto tok = NewToken();
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ(tok->size(), 64u);
  EXPECT_NE(*tok, *NewToken());
  ASSERT_TRUE(WriteRendezvous(path, {"node1", 4242, *tok, "job1"}).ok());
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto r = ReadRendezvous(path, 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->host, "node1");
  EXPECT_EQ(r->port, 4242);
  EXPECT_EQ(r->token, *tok);
  chmod(path.c_str(), 0644);
  EXPECT_EQ(ReadRendezvous(path, 0).status().code(), EACCES);
  FILE* f = fopen(path.c_str(), "w");
  fputs("dlckpt-rendezvous 1\nhost h\nport 99999\n", f);
  fclose(f);
  chmod(path.c_str(), 0600);
  EXPECT_EQ(ReadRendezvous(path, 0).status().code(), EBADMSG);
  auto missing = ReadRendezvous(dir + "/none", 200);
  EXPECT_EQ(missing.status().code(), ETIMEDOUT);
  EXPECT_NE(missing.status().message().find(dir + "/none"), std::string::npos);
  EXPECT_EQ(ReadRendezvous(dir + "/none", 0).status().code(), ENOENT);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dlckpt::control::protocol

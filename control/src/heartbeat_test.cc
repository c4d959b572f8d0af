// Tests of the heartbeat failure detector: the MAC and the datagram format,
// then real senders and monitors on loopback (detection time, no false
// suspicion under load and pauses, bad datagrams, generations, shutdown).
#include "dlckpt/control/heartbeat.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "dlckpt/base/env.h"

namespace dlckpt::control::heartbeat {
namespace {

const char kKeyHex[] = "00112233445566778899aabbccddeeff0123456789abcdef0f1e2d3c4b5a6978";
const char kOtherKeyHex[] = "f0112233445566778899aabbccddeeff0123456789abcdef0f1e2d3c4b5a6978";

int64_t Now() { return Env::Default()->NowNanos(); }
double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }
void SleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// ---- MAC, key, format -----------------------------------------------------------

TEST(SipHash, ReferenceVectors) {
  // Key 00..0f, message 00..(len-1): values of an independent SipHash-2-4
  // (Rust's std::hash::SipHasher); len 15 is the paper's worked example.
  uint64_t k0 = 0x0706050403020100ULL, k1 = 0x0f0e0d0c0b0a0908ULL;
  const std::pair<size_t, uint64_t> vectors[] = {
      {0, 0x726fdb47dd0e0e31ULL},  {1, 0x74f839c593dc67fdULL},  {7, 0xab0200f58b01d137ULL},
      {8, 0x93f5f5799a932462ULL},  {15, 0xa129ca6149be45e5ULL}, {16, 0x3f2acc7f57c29bdbULL},
      {63, 0x958a324ceb064572ULL},
  };
  for (const auto& [len, want] : vectors) {
    std::string m;
    for (size_t i = 0; i < len; ++i) m.push_back(static_cast<char>(i));
    EXPECT_EQ(SipHash24(k0, k1, m), want) << "length " << len;
  }
}

TEST(Key, Parse) {
  auto k = ParseKey(kKeyHex);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  std::string upper = kKeyHex;
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  auto ku = ParseKey(upper);
  ASSERT_TRUE(ku.ok());
  EXPECT_EQ(k->k0, ku->k0);
  EXPECT_EQ(k->k1, ku->k1);
  auto other = ParseKey(kOtherKeyHex);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(k->k0, other->k0);

  EXPECT_EQ(ParseKey("").status().code(), EINVAL);
  EXPECT_EQ(ParseKey(std::string(kKeyHex).substr(1)).status().code(), EINVAL);
  std::string bad = kKeyHex;
  bad[10] = 'g';
  auto r = ParseKey(bad);
  EXPECT_EQ(r.status().code(), EINVAL);
  EXPECT_EQ(r.status().message().find(bad), std::string::npos) << "the key must not be echoed";
}

Beat SampleBeat() {
  Beat b;
  b.job = "job42";
  b.node = "c-1";
  b.generation = 3;
  b.incarnation = 1700000000123456789ULL;
  b.seq = 77;
  return b;
}

TEST(Datagram, RoundTrip) {
  Key key = *ParseKey(kKeyHex);
  auto d = EncodeBeat(key, SampleBeat());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->size(), 32u + 1 + 5 + 1 + 3 + 8);
  auto b = DecodeBeat(key, *d);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->job, "job42");
  EXPECT_EQ(b->node, "c-1");
  EXPECT_EQ(b->generation, 3u);
  EXPECT_EQ(b->incarnation, 1700000000123456789ULL);
  EXPECT_EQ(b->seq, 77u);

  Beat longest = SampleBeat();
  longest.job.assign(kMaxNameBytes, 'j');
  longest.node.assign(kMaxNameBytes, 'n');
  auto dl = EncodeBeat(key, longest);
  ASSERT_TRUE(dl.ok());
  EXPECT_EQ(dl->size(), kMaxDatagramBytes);
  ASSERT_TRUE(DecodeBeat(key, *dl).ok());
}

TEST(Datagram, EncodeRejectsBadNames) {
  Key key = *ParseKey(kKeyHex);
  for (std::string bad : {std::string(), std::string(kMaxNameBytes + 1, 'x'), std::string("a b"),
                          std::string("a\nb"), std::string("a\0b", 3), std::string("\xc3\xa9")}) {
    Beat b = SampleBeat();
    b.node = bad;
    EXPECT_EQ(EncodeBeat(key, b).status().code(), EINVAL) << "node '" << bad << "'";
    b = SampleBeat();
    b.job = bad;
    EXPECT_EQ(EncodeBeat(key, b).status().code(), EINVAL) << "job '" << bad << "'";
  }
}

TEST(Datagram, WrongKeyIsUnauthenticated) {
  auto d = EncodeBeat(*ParseKey(kKeyHex), SampleBeat());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(DecodeBeat(*ParseKey(kOtherKeyHex), *d).status().code(), EACCES);
}

TEST(Datagram, EveryBitFlipAndTruncationIsRejected) {
  Key key = *ParseKey(kKeyHex);
  std::string d = *EncodeBeat(key, SampleBeat());
  for (size_t i = 0; i < d.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string m = d;
      m[i] = static_cast<char>(m[i] ^ (1 << bit));
      auto r = DecodeBeat(key, m);
      ASSERT_FALSE(r.ok()) << "byte " << i << " bit " << bit;
      ASSERT_TRUE(r.status().code() == EBADMSG || r.status().code() == EACCES) << r.status().ToString();
    }
  }
  for (size_t n = 0; n < d.size(); ++n) {
    ASSERT_FALSE(DecodeBeat(key, d.substr(0, n)).ok()) << "truncated to " << n;
  }
  ASSERT_FALSE(DecodeBeat(key, d + "x").ok());
  ASSERT_EQ(DecodeBeat(key, std::string(kMaxDatagramBytes + 1, '\0')).status().code(), EBADMSG);
}

TEST(Datagram, RandomBytesNeverDecode) {
  Key key = *ParseKey(kKeyHex);
  std::mt19937_64 rng(12);
  std::string d = *EncodeBeat(key, SampleBeat());
  for (int i = 0; i < 20000; ++i) {
    std::string m;
    if (i % 2) {
      m.resize(rng() % (kMaxDatagramBytes + 20));
      for (auto& c : m) c = static_cast<char>(rng());
    } else {
      m = d;  // valid header, random damage of up to 4 bytes
      for (int k = 0, n = 1 + static_cast<int>(rng() % 4); k < n; ++k) m[rng() % m.size()] = static_cast<char>(rng());
      if (m == d) continue;
    }
    ASSERT_FALSE(DecodeBeat(key, m).ok());
  }
}

TEST(Address, Parse) {
  std::string h;
  uint16_t p = 0;
  ASSERT_TRUE(ParseAddress("10.213.1.1:4000", &h, &p).ok());
  EXPECT_EQ(h, "10.213.1.1");
  EXPECT_EQ(p, 4000);
  ASSERT_TRUE(ParseAddress("head-node:65535", &h, &p).ok());
  EXPECT_EQ(h, "head-node");
  ASSERT_TRUE(ParseAddress("[::1]:7", &h, &p).ok());
  EXPECT_EQ(h, "::1");
  EXPECT_EQ(p, 7);
  for (const char* bad : {"", "host", ":80", "host:", "host:0", "host:65536", "host:8x", "::1:80",
                          "[::1]80", "[::1]", "[]:80"}) {
    EXPECT_EQ(ParseAddress(bad, &h, &p).code(), EINVAL) << bad;
  }
}

TEST(Address, LocalAddressToward) {
  auto a = LocalAddressToward("127.0.0.1");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(*a, "127.0.0.1");
  auto bad = LocalAddressToward("no-such-host.invalid");
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("no-such-host.invalid"), std::string::npos);
}

TEST(Options, FromEnvironment) {
  unsetenv(kEnvAddress);
  unsetenv(kEnvKey);
  unsetenv(kEnvPeriod);
  EXPECT_EQ(SenderOptionsFromEnv("j", "n", 1).status().code(), ENOENT);
  setenv(kEnvAddress, "127.0.0.1:5000", 1);
  EXPECT_EQ(SenderOptionsFromEnv("j", "n", 1).status().code(), EINVAL);  // no key
  setenv(kEnvKey, "abc", 1);
  EXPECT_EQ(SenderOptionsFromEnv("j", "n", 1).status().code(), EINVAL);
  setenv(kEnvKey, kKeyHex, 1);
  auto o = SenderOptionsFromEnv("j", "n", 9);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->monitor_host, "127.0.0.1");
  EXPECT_EQ(o->monitor_port, 5000);
  EXPECT_EQ(o->period_ms, kDefaultPeriodMs);
  EXPECT_EQ(o->generation, 9u);
  setenv(kEnvPeriod, "50", 1);
  EXPECT_EQ(SenderOptionsFromEnv("j", "n", 1)->period_ms, 50);
  setenv(kEnvPeriod, "0", 1);
  EXPECT_EQ(SenderOptionsFromEnv("j", "n", 1).status().code(), EINVAL);
  setenv(kEnvAddress, "nonsense", 1);
  EXPECT_EQ(SenderOptionsFromEnv("j", "n", 1).status().code(), EINVAL);
  unsetenv(kEnvAddress);
  unsetenv(kEnvKey);
  unsetenv(kEnvPeriod);
}

// ---- on loopback ------------------------------------------------------------------

MonitorOptions MonOpts(int timeout_ms = kDefaultTimeoutMs, int startup_ms = -1) {
  MonitorOptions o;
  o.bind_host = "127.0.0.1";
  o.key_hex = kKeyHex;
  o.job = "job42";
  o.timeout_ms = timeout_ms;
  o.startup_timeout_ms = startup_ms < 0 ? timeout_ms : startup_ms;
  return o;
}

SenderOptions SendOpts(const Monitor& m, const std::string& node, uint64_t gen, int period_ms = kDefaultPeriodMs) {
  SenderOptions o;
  o.monitor_host = "127.0.0.1";
  o.monitor_port = m.port();
  o.key_hex = kKeyHex;
  o.job = "job42";
  o.node = node;
  o.generation = gen;
  o.period_ms = period_ms;
  return o;
}

std::unique_ptr<Monitor> MakeMonitor(MonitorOptions o) {
  auto m = Monitor::Create(std::move(o));
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(*m) : nullptr;
}

std::unique_ptr<Sender> MakeSender(SenderOptions o) {
  auto s = Sender::Create(std::move(o));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

// Waits (10 ms steps, as the supervisor's tick) until `node` was heard `beats` times.
bool WaitHeard(const Monitor& m, const std::string& node, uint64_t beats, int ms) {
  int64_t deadline = Now() + static_cast<int64_t>(ms) * 1000000;
  while (Now() < deadline) {
    auto s = m.Node(node);
    if (s && s->beats >= beats) return true;
    SleepMs(10);
  }
  return false;
}

// Polls Suspects() every 10 ms until `node` is suspected; returns the time of
// detection (or -1 after `ms`). Fails if another node is suspected meanwhile.
int64_t WaitSuspect(const Monitor& m, const std::string& node, int ms) {
  int64_t deadline = Now() + static_cast<int64_t>(ms) * 1000000;
  while (Now() < deadline) {
    int64_t now = Now();
    auto s = m.Suspects(now);
    for (const auto& n : s) EXPECT_EQ(n, node) << "false suspicion of " << n;
    if (!s.empty()) return now;
    SleepMs(10);
  }
  return -1;
}

// A node whose sender stops is suspected within timeout + period of the stop
// (+ scheduling slack on this shared machine), never before it was silent
// for the timeout, and no beat of it is accepted after the stop.
void CheckDetection(int period_ms, int timeout_ms) {
  auto m = MakeMonitor(MonOpts(timeout_ms));
  ASSERT_TRUE(m);
  m->Expect(1, {"a", "b"}, Now());
  auto a = MakeSender(SendOpts(*m, "a", 1, period_ms));
  auto b = MakeSender(SendOpts(*m, "b", 1, period_ms));
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->Start().ok());
  ASSERT_TRUE(b->Start().ok());
  ASSERT_TRUE(WaitHeard(*m, "a", 3, 5000));
  ASSERT_TRUE(WaitHeard(*m, "b", 3, 5000));
  int64_t last_before = m->Node("b")->last_heard_ns;
  b->Stop();  // node b dies: no beat after this instant
  int64_t stopped = Now();
  uint64_t sent = b->stats().sent;
  int64_t detected = WaitSuspect(*m, "b", timeout_ms + period_ms + 5000);
  ASSERT_GT(detected, 0) << "b never suspected";
  double d = Ms(detected - stopped);
  double silence = Ms(detected - m->Node("b")->last_heard_ns);
  std::printf("period %d ms, timeout %d ms: detected %.1f ms after the sender stopped "
              "(silence %.1f ms)\n", period_ms, timeout_ms, d, silence);
  EXPECT_GT(silence, timeout_ms) << "suspected before the timeout";
  EXPECT_LE(d, timeout_ms + period_ms + 250) << "slower than timeout + period (+250 ms slack)";
  EXPECT_GE(m->Node("b")->last_heard_ns, last_before);
  EXPECT_LE(m->Node("b")->last_seq, sent) << "a beat accepted after the stop";
  EXPECT_EQ(m->Node("b")->beats, sent) << "loopback lost or duplicated a beat";
  EXPECT_EQ(m->Suspects(Now()), std::vector<std::string>{"b"});
  EXPECT_EQ(m->stats().accepted, m->Node("a")->beats + m->Node("b")->beats);
}

TEST(Loopback, DetectionFast) { CheckDetection(50, 300); }

TEST(Loopback, DetectionWithDefaultsIsUnderThreeSeconds) {
  CheckDetection(kDefaultPeriodMs, kDefaultTimeoutMs);
}

TEST(Loopback, NeverHeardNodeUsesStartupTimeout) {
  auto m = MakeMonitor(MonOpts(200, 600));
  ASSERT_TRUE(m);
  int64_t t0 = Now();
  m->Expect(1, {"ghost"}, t0);
  EXPECT_TRUE(m->Suspects(t0 + 500 * 1000000LL).empty());
  EXPECT_EQ(m->Suspects(t0 + 601 * 1000000LL), std::vector<std::string>{"ghost"});
  EXPECT_FALSE(m->Node("ghost")->heard);
  EXPECT_FALSE(m->Node("nobody"));
}

// Many live senders, two busy threads competing for the (2) cores, and a
// third of the senders paused for 1 s (< the 1.5 s timeout) twice: nobody is
// ever suspected.
TEST(Loopback, NoFalseSuspicionUnderLoadAndShortPauses) {
  auto m = MakeMonitor(MonOpts());
  ASSERT_TRUE(m);
  constexpr int kNodes = 60;
  std::vector<std::string> names;
  for (int i = 0; i < kNodes; ++i) names.push_back("n" + std::to_string(i));
  m->Expect(7, names, Now());
  std::vector<std::unique_ptr<Sender>> senders;
  for (const auto& n : names) {
    senders.push_back(MakeSender(SendOpts(*m, n, 7)));
    ASSERT_TRUE(senders.back());
    ASSERT_TRUE(senders.back()->Start().ok());
  }
  for (const auto& n : names) ASSERT_TRUE(WaitHeard(*m, n, 1, 5000)) << n;
  std::atomic<bool> stop{false};
  std::vector<std::thread> burners;
  for (int i = 0; i < 2; ++i) {
    burners.emplace_back([&stop] {
      volatile uint64_t x = 0;
      while (!stop.load(std::memory_order_relaxed)) x = x * 6364136223846793005ULL + 1;
    });
  }
  int64_t end = Now() + 4000 * 1000000LL;
  int64_t pause_at[2] = {Now() + 500 * 1000000LL, Now() + 2300 * 1000000LL};
  int round = 0;
  bool paused = false;
  int64_t resume_at = 0;
  size_t checks = 0;
  while (Now() < end) {
    int64_t now = Now();
    if (!paused && round < 2 && now >= pause_at[round]) {
      for (int i = 0; i < kNodes; i += 3) senders[i]->Stop();
      paused = true;
      resume_at = now + 1000 * 1000000LL;
    }
    if (paused && now >= resume_at) {
      for (int i = 0; i < kNodes; i += 3) ASSERT_TRUE(senders[i]->Start().ok());
      paused = false;
      ++round;
    }
    auto s = m->Suspects(Now());
    EXPECT_TRUE(s.empty()) << "false suspicion of " << s.front() << " (and " << s.size() - 1 << " more)";
    if (!s.empty()) break;
    ++checks;
    SleepMs(10);
  }
  stop = true;
  for (auto& t : burners) t.join();
  EXPECT_EQ(round, 2);
  auto st = m->stats();
  std::printf("%zu checks, %llu beats accepted, %llu replayed/reordered, receiver CPU %.1f ms\n", checks,
              static_cast<unsigned long long>(st.accepted), static_cast<unsigned long long>(st.replayed),
              Ms(st.receiver_cpu_ns));
  EXPECT_EQ(st.malformed + st.unauthenticated + st.wrong_job + st.wrong_generation + st.unknown_node, 0u);
}

// Raw UDP client for hand-made datagrams.
class RawClient {
 public:
  explicit RawClient(uint16_t port) : fd_(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) {
    addr_.sin_family = AF_INET;
    addr_.sin_port = htons(port);
    addr_.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  }
  ~RawClient() { close(fd_); }
  void Send(const std::string& d) {
    ASSERT_EQ(sendto(fd_, d.data(), d.size(), 0, reinterpret_cast<sockaddr*>(&addr_), sizeof addr_),
              static_cast<ssize_t>(d.size()));
  }

 private:
  int fd_;
  sockaddr_in addr_{};
};

bool WaitReceived(const Monitor& m, uint64_t n) {
  for (int i = 0; i < 500; ++i) {
    if (m.stats().received >= n) return true;
    SleepMs(10);
  }
  return false;
}

TEST(Loopback, BadDatagramsAreCountedAndIgnored) {
  auto m = MakeMonitor(MonOpts(400));
  ASSERT_TRUE(m);
  int64_t t0 = Now();
  m->Expect(5, {"a", "b"}, t0);
  Key key = *ParseKey(kKeyHex), other = *ParseKey(kOtherKeyHex);
  RawClient c(m->port());
  auto beat = [](std::string job, std::string node, uint64_t gen, uint64_t inc, uint64_t seq) {
    Beat b;
    b.job = std::move(job);
    b.node = std::move(node);
    b.generation = gen;
    b.incarnation = inc;
    b.seq = seq;
    return b;
  };
  uint64_t sent = 0;
  auto send = [&](const std::string& d) {
    c.Send(d);
    ++sent;
  };
  // Valid for node a: incarnation 10, seq 5.
  std::string good = *EncodeBeat(key, beat("job42", "a", 5, 10, 5));
  send(good);
  ASSERT_TRUE(WaitReceived(*m, sent));
  ASSERT_EQ(m->Node("a")->beats, 1u);
  // Everything below is rejected; b only ever gets rejected datagrams.
  send("");                                          // malformed: empty
  send("hello");                                     // malformed
  send(std::string(2000, 'x'));                      // malformed: too long
  send(good.substr(0, good.size() - 1));             // malformed: truncated
  std::string flipped = good;
  flipped[30] ^= 1;                                  // seq changed, tag stale
  send(flipped);                                     // unauthenticated
  send(*EncodeBeat(other, beat("job42", "b", 5, 10, 1)));   // unauthenticated: wrong key
  send(*EncodeBeat(key, beat("job43", "b", 5, 10, 1)));     // wrong job
  send(*EncodeBeat(key, beat("job42", "b", 4, 10, 1)));     // stale generation
  send(*EncodeBeat(key, beat("job42", "b", 6, 10, 1)));     // future generation
  send(*EncodeBeat(key, beat("job42", "z", 5, 10, 1)));     // unknown node
  send(good);                                               // replay
  send(*EncodeBeat(key, beat("job42", "a", 5, 10, 4)));     // older seq
  send(*EncodeBeat(key, beat("job42", "a", 5, 9, 100)));    // older incarnation
  ASSERT_TRUE(WaitReceived(*m, sent));
  auto st = m->stats();
  EXPECT_EQ(st.received, sent);
  EXPECT_EQ(st.accepted, 1u);
  EXPECT_EQ(st.malformed, 4u);
  EXPECT_EQ(st.unauthenticated, 2u);
  EXPECT_EQ(st.wrong_job, 1u);
  EXPECT_EQ(st.wrong_generation, 2u);
  EXPECT_EQ(st.unknown_node, 1u);
  EXPECT_EQ(st.replayed, 3u);
  EXPECT_EQ(m->Node("a")->beats, 1u);
  EXPECT_EQ(m->Node("a")->last_seq, 5u);
  EXPECT_FALSE(m->Node("b")->heard);
  // Newer ones are accepted: next seq, and a restarted sender (newer incarnation, seq from 1).
  send(*EncodeBeat(key, beat("job42", "a", 5, 10, 6)));
  send(*EncodeBeat(key, beat("job42", "a", 5, 11, 1)));
  ASSERT_TRUE(WaitReceived(*m, sent));
  EXPECT_EQ(m->Node("a")->beats, 3u);
  EXPECT_EQ(m->Node("a")->last_seq, 1u);
  // b, fed only bad datagrams, is suspected; a is not (just heard).
  ASSERT_GT(m->Node("a")->last_heard_ns, t0 + 1000000);
  EXPECT_EQ(m->Suspects(t0 + 401 * 1000000LL), std::vector<std::string>{"b"});
}

TEST(Loopback, GenerationChange) {
  auto m = MakeMonitor(MonOpts(300, 1000));
  ASSERT_TRUE(m);
  m->Expect(1, {"a", "b"}, Now());
  auto a1 = MakeSender(SendOpts(*m, "a", 1, 50));
  auto b1 = MakeSender(SendOpts(*m, "b", 1, 50));
  ASSERT_TRUE(a1->Start().ok() && b1->Start().ok());
  ASSERT_TRUE(WaitHeard(*m, "a", 2, 5000) && WaitHeard(*m, "b", 2, 5000));
  EXPECT_EQ(m->generation(), 1u);

  // Same generation, b dropped (declared dead): a keeps its state, b is no longer watched.
  uint64_t a_beats = m->Node("a")->beats;
  m->Expect(1, {"a"}, Now());
  EXPECT_GE(m->Node("a")->beats, a_beats);
  EXPECT_FALSE(m->Node("b"));
  b1->Stop();
  SleepMs(400);
  EXPECT_TRUE(m->Suspects(Now()).empty());

  // Generation 2 on nodes a and c: generation-1 beats (a1 still running) do not count.
  int64_t t2 = Now();
  m->Expect(2, {"a", "c"}, t2);
  EXPECT_EQ(m->generation(), 2u);
  EXPECT_FALSE(m->Node("a")->heard);
  uint64_t stale0 = m->stats().wrong_generation;
  SleepMs(200);
  EXPECT_GT(m->stats().wrong_generation, stale0);
  EXPECT_FALSE(m->Node("a")->heard);
  EXPECT_TRUE(m->Suspects(Now()).empty()) << "startup timeout (1 s) not over";
  auto a2 = MakeSender(SendOpts(*m, "a", 2, 50));
  ASSERT_TRUE(a2->Start().ok());
  ASSERT_TRUE(WaitHeard(*m, "a", 2, 5000));
  // c never starts: suspected once the startup timeout is over, a is not.
  int64_t detected = WaitSuspect(*m, "c", 5000);
  ASSERT_GT(detected, 0);
  EXPECT_GE(Ms(detected - t2), 1000);
  EXPECT_EQ(m->Suspects(Now()), std::vector<std::string>{"c"});
  a1->Stop();
}

TEST(Loopback, ResumedSenderIsNoLongerSuspected) {
  auto m = MakeMonitor(MonOpts(200));
  m->Expect(1, {"a"}, Now());
  auto a = MakeSender(SendOpts(*m, "a", 1, 20));
  ASSERT_TRUE(a->Start().ok());
  ASSERT_TRUE(WaitHeard(*m, "a", 2, 5000));
  a->Stop();
  ASSERT_GT(WaitSuspect(*m, "a", 3000), 0);
  uint64_t beats = m->Node("a")->beats;
  ASSERT_TRUE(a->Start().ok());
  ASSERT_TRUE(WaitHeard(*m, "a", beats + 1, 5000));
  EXPECT_TRUE(m->Suspects(Now()).empty());
}

TEST(Shutdown, StopIsPromptAndStartStopAreThreadSafe) {
  auto m = MakeMonitor(MonOpts());
  m->Expect(1, {"a"}, Now());
  auto a = MakeSender(SendOpts(*m, "a", 1, 60000));  // a long period: Stop must not wait it out
  ASSERT_TRUE(a->Start().ok());
  ASSERT_TRUE(WaitHeard(*m, "a", 1, 5000));
  int64_t t = Now();
  a->Stop();
  EXPECT_LT(Ms(Now() - t), 100.0);
  a->Stop();  // idempotent

  auto b = MakeSender(SendOpts(*m, "a", 1, 1));
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i) {
    ts.emplace_back([&b, i] {
      for (int k = 0; k < 200; ++k) {
        if ((k + i) % 2) {
          EXPECT_TRUE(b->Start().ok());
        } else {
          b->Stop();
        }
        (void)b->stats();
      }
    });
  }
  for (auto& th : ts) th.join();
  ASSERT_TRUE(b->Start().ok());
  SleepMs(30);
  EXPECT_GT(b->stats().sent, 0u);
  EXPECT_EQ(b->stats().send_errors, 0u);
  b.reset();  // destructor stops a running sender

  // A monitor destroyed while datagrams arrive, with senders outliving it.
  auto c = MakeSender(SendOpts(*m, "a", 1, 1));
  ASSERT_TRUE(c->Start().ok());
  SleepMs(30);
  int64_t t2 = Now();
  m.reset();
  EXPECT_LT(Ms(Now() - t2), 100.0);
  SleepMs(30);  // sends into a closed port: an unconnected socket never reports ECONNREFUSED
  EXPECT_EQ(c->stats().send_errors, 0u);
  c.reset();
}

TEST(Create, Errors) {
  MonitorOptions mo = MonOpts();
  mo.key_hex = "xyz";
  EXPECT_EQ(Monitor::Create(mo).status().code(), EINVAL);
  mo = MonOpts();
  mo.job = "a job";
  EXPECT_EQ(Monitor::Create(mo).status().code(), EINVAL);
  mo = MonOpts(5);
  EXPECT_EQ(Monitor::Create(mo).status().code(), EINVAL);
  mo = MonOpts(1000, 500);
  EXPECT_EQ(Monitor::Create(mo).status().code(), EINVAL);
  mo = MonOpts();
  mo.bind_host = "not-an-address";
  EXPECT_EQ(Monitor::Create(mo).status().code(), EINVAL);

  auto m = MakeMonitor(MonOpts());
  ASSERT_TRUE(m);
  EXPECT_NE(m->port(), 0);
  mo = MonOpts();
  mo.port = m->port();
  auto dup = Monitor::Create(mo);
  EXPECT_EQ(dup.status().code(), EADDRINUSE);
  EXPECT_NE(dup.status().message().find("127.0.0.1:" + std::to_string(m->port())), std::string::npos)
      << dup.status().ToString();

  SenderOptions so = SendOpts(*m, "a", 1);
  so.period_ms = 0;
  EXPECT_EQ(Sender::Create(so).status().code(), EINVAL);
  so = SendOpts(*m, "", 1);
  EXPECT_EQ(Sender::Create(so).status().code(), EINVAL);
  so = SendOpts(*m, "a", 1);
  so.key_hex = kKeyHex + std::string("0");
  EXPECT_EQ(Sender::Create(so).status().code(), EINVAL);
  so = SendOpts(*m, "a", 1);
  so.monitor_host = "no-such-host.invalid";
  auto bad = Sender::Create(so);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("no-such-host.invalid"), std::string::npos);
  so = SendOpts(*m, "a", 1);
  auto s = Sender::Create(so);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->monitor_address(), "127.0.0.1:" + std::to_string(m->port()));
}

TEST(Loopback, IPv6) {
  MonitorOptions mo = MonOpts(300);
  mo.bind_host = "::1";
  auto m = Monitor::Create(mo);
  if (!m.ok() && (m.status().code() == EADDRNOTAVAIL || m.status().code() == EAFNOSUPPORT)) {
    GTEST_SKIP() << "no IPv6 loopback here: " << m.status().ToString();
  }
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  (*m)->Expect(1, {"a"}, Now());
  SenderOptions so = SendOpts(**m, "a", 1, 20);
  so.monitor_host = "::1";
  auto s = MakeSender(so);
  ASSERT_TRUE(s->Start().ok());
  EXPECT_TRUE(WaitHeard(**m, "a", 2, 5000));
}

}  // namespace
}  // namespace dlckpt::control::heartbeat

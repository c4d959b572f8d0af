#include "dlckpt/control/heartbeat.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "dlckpt/base/env.h"

namespace dlckpt::control::heartbeat {

namespace {

constexpr uint32_t kMagic = 0x42484C44;  // "DLHB" in little-endian bytes
constexpr uint16_t kVersion = 1;
constexpr size_t kFixedBytes = 4 + 2 + 2 + 8 + 8 + 8;  // before the names
constexpr size_t kTagBytes = 8;
constexpr size_t kMinDatagramBytes = kFixedBytes + 1 + 1 + 1 + 1 + kTagBytes;

uint64_t Rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

uint64_t LoadLe64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void PutLe(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

uint64_t GetLe(std::string_view d, size_t pos, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(d[pos + i]);
  return v;
}

bool ValidName(std::string_view s) {
  if (s.empty() || s.size() > kMaxNameBytes) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= '!' && c <= '~'; });
}

Status CheckName(std::string_view what, std::string_view s) {
  if (ValidName(s)) return Status::OK();
  return Status::InvalidArgument(std::string(what) + " name '" + std::string(s.substr(0, 64)) +
                                 "' is not 1.." + std::to_string(kMaxNameBytes) +
                                 " printable characters without spaces");
}

int64_t MonoNow() { return Env::Default()->NowNanos(); }

std::string SockaddrText(const sockaddr* sa) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (sa->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  if (sa->sa_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    port = ntohs(in6->sin6_port);
    return "[" + std::string(host) + "]:" + std::to_string(port);
  }
  return "?";
}

Status ParseIntOption(std::string_view what, std::string_view text, long lo, long hi, long* out) {
  std::string s(text);
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || errno != 0 || *end != '\0' || v < lo || v > hi) {
    return Status::InvalidArgument(std::string(what) + "='" + s.substr(0, 32) + "': want an integer in " +
                                   std::to_string(lo) + ".." + std::to_string(hi));
  }
  *out = v;
  return Status::OK();
}

}  // namespace

// ---- key, MAC, datagrams ----------------------------------------------------------

uint64_t SipHash24(uint64_t k0, uint64_t k1, std::string_view data) {
  uint64_t v0 = k0 ^ 0x736f6d6570736575ULL;
  uint64_t v1 = k1 ^ 0x646f72616e646f6dULL;
  uint64_t v2 = k0 ^ 0x6c7967656e657261ULL;
  uint64_t v3 = k1 ^ 0x7465646279746573ULL;
  auto round = [&] {
    v0 += v1; v1 = Rotl(v1, 13); v1 ^= v0; v0 = Rotl(v0, 32);
    v2 += v3; v3 = Rotl(v3, 16); v3 ^= v2;
    v0 += v3; v3 = Rotl(v3, 21); v3 ^= v0;
    v2 += v1; v1 = Rotl(v1, 17); v1 ^= v2; v2 = Rotl(v2, 32);
  };
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  size_t n = data.size();
  size_t full = n & ~size_t{7};
  for (size_t i = 0; i < full; i += 8) {
    uint64_t m = LoadLe64(p + i);
    v3 ^= m;
    round();
    round();
    v0 ^= m;
  }
  uint64_t b = static_cast<uint64_t>(n & 0xff) << 56;
  for (size_t i = 0; i < (n & 7); ++i) b |= static_cast<uint64_t>(p[full + i]) << (8 * i);
  v3 ^= b;
  round();
  round();
  v0 ^= b;
  v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) round();
  return v0 ^ v1 ^ v2 ^ v3;
}

Result<Key> ParseKey(std::string_view hex) {
  if (hex.size() != 64) {
    return Status::InvalidArgument("heartbeat key: want 64 hex digits, got " + std::to_string(hex.size()) +
                                   " characters");
  }
  unsigned char raw[32];
  for (size_t i = 0; i < 32; ++i) {
    int v = 0;
    for (size_t j = 0; j < 2; ++j) {
      char c = hex[2 * i + j];
      int d = c >= '0' && c <= '9' ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                     : -1;
      if (d < 0) return Status::InvalidArgument("heartbeat key: not a hex digit at position " + std::to_string(2 * i + j));
      v = v * 16 + d;
    }
    raw[i] = static_cast<unsigned char>(v);
  }
  Key k;
  k.k0 = LoadLe64(raw) ^ LoadLe64(raw + 16);
  k.k1 = LoadLe64(raw + 8) ^ LoadLe64(raw + 24);
  return k;
}

Result<std::string> EncodeBeat(const Key& key, const Beat& beat) {
  DLCKPT_RETURN_IF_ERROR(CheckName("job", beat.job));
  DLCKPT_RETURN_IF_ERROR(CheckName("node", beat.node));
  std::string out;
  out.reserve(kFixedBytes + 2 + beat.job.size() + beat.node.size() + kTagBytes);
  PutLe(&out, kMagic, 4);
  PutLe(&out, kVersion, 2);
  PutLe(&out, 0, 2);
  PutLe(&out, beat.generation, 8);
  PutLe(&out, beat.incarnation, 8);
  PutLe(&out, beat.seq, 8);
  PutLe(&out, beat.job.size(), 1);
  out += beat.job;
  PutLe(&out, beat.node.size(), 1);
  out += beat.node;
  PutLe(&out, SipHash24(key.k0, key.k1, out), 8);
  return out;
}

Result<Beat> DecodeBeat(const Key& key, std::string_view d) {
  auto bad = [&](const std::string& why) {
    return Status::Corruption("heartbeat datagram of " + std::to_string(d.size()) + " bytes: " + why);
  };
  if (d.size() < kMinDatagramBytes || d.size() > kMaxDatagramBytes) return bad("bad size");
  if (GetLe(d, 0, 4) != kMagic) return bad("bad magic");
  if (GetLe(d, 4, 2) != kVersion) return bad("unsupported version " + std::to_string(GetLe(d, 4, 2)));
  if (GetLe(d, 6, 2) != 0) return bad("reserved bits set");
  size_t pos = kFixedBytes;
  size_t job_len = GetLe(d, pos, 1);
  pos += 1;
  if (pos + job_len + 1 + kTagBytes > d.size()) return bad("job name past the end");
  std::string_view job = d.substr(pos, job_len);
  pos += job_len;
  size_t node_len = GetLe(d, pos, 1);
  pos += 1;
  if (pos + node_len + kTagBytes != d.size()) return bad("node name length does not match the size");
  std::string_view node = d.substr(pos, node_len);
  pos += node_len;
  uint64_t want = SipHash24(key.k0, key.k1, d.substr(0, pos));
  // Constant time in the tag's bytes.
  uint64_t diff = want ^ GetLe(d, pos, 8);
  if (diff != 0) return Status::Error(EACCES, "heartbeat datagram: authentication tag mismatch");
  if (!ValidName(job) || !ValidName(node)) return bad("bad job or node name");
  Beat b;
  b.generation = GetLe(d, 8, 8);
  b.incarnation = GetLe(d, 16, 8);
  b.seq = GetLe(d, 24, 8);
  b.job = std::string(job);
  b.node = std::string(node);
  return b;
}

Status ParseAddress(std::string_view text, std::string* host, uint16_t* port) {
  std::string t(text);
  auto bad = [&](const char* why) {
    return Status::InvalidArgument("heartbeat address '" + t.substr(0, 300) + "': " + why);
  };
  size_t colon;
  if (!t.empty() && t[0] == '[') {
    size_t close = t.find(']');
    if (close == std::string::npos || close + 1 >= t.size() || t[close + 1] != ':') {
      return bad("want [IPV6]:PORT");
    }
    *host = t.substr(1, close - 1);
    colon = close + 1;
  } else {
    colon = t.rfind(':');
    if (colon == std::string::npos) return bad("want HOST:PORT");
    *host = t.substr(0, colon);
    if (host->find(':') != std::string::npos) return bad("write an IPv6 address as [ADDR]:PORT");
  }
  if (host->empty()) return bad("empty host");
  long p = 0;
  Status s = ParseIntOption("port", t.substr(colon + 1), 1, 65535, &p);
  if (!s.ok()) return bad("port is not 1..65535");
  *port = static_cast<uint16_t>(p);
  return Status::OK();
}

Result<std::string> LocalAddressToward(const std::string& peer_host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(peer_host.c_str(), "9", &hints, &res);
  if (rc != 0) {
    return Status::Error(rc == EAI_SYSTEM ? errno : EHOSTUNREACH, "resolve " + peer_host + ": " + gai_strerror(rc));
  }
  int fd = socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int err = errno;
  if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
    err = errno;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd < 0) return Status::FromErrno(err, "route to " + peer_host);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  rc = getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  err = errno;
  close(fd);
  if (rc != 0) return Status::FromErrno(err, "local address toward " + peer_host);
  char host[INET6_ADDRSTRLEN] = "";
  const void* a = ss.ss_family == AF_INET6 ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr)
                                            : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&ss)->sin_addr);
  if (inet_ntop(ss.ss_family, a, host, sizeof host) == nullptr) {
    return Status::FromErrno(errno, "local address toward " + peer_host);
  }
  return std::string(host);
}

// ---- Sender ----------------------------------------------------------------------

Result<SenderOptions> SenderOptionsFromEnv(std::string job, std::string node, uint64_t generation) {
  const char* addr = std::getenv(kEnvAddress);
  if (addr == nullptr || *addr == '\0') {
    return Status::NotFound(std::string(kEnvAddress) + " is not set: no heartbeat monitor");
  }
  SenderOptions o;
  Status s = ParseAddress(addr, &o.monitor_host, &o.monitor_port);
  if (!s.ok()) return s.Prefixed(kEnvAddress);
  const char* key = std::getenv(kEnvKey);
  if (key == nullptr || *key == '\0') {
    return Status::InvalidArgument(std::string(kEnvAddress) + " is set but " + kEnvKey + " is not");
  }
  o.key_hex = key;
  DLCKPT_ASSIGN_OR_RETURN(Key parsed, ParseKey(o.key_hex));
  (void)parsed;
  if (const char* p = std::getenv(kEnvPeriod); p != nullptr && *p != '\0') {
    long v = 0;
    DLCKPT_RETURN_IF_ERROR(ParseIntOption(kEnvPeriod, p, 1, 60000, &v));
    o.period_ms = static_cast<int>(v);
  }
  o.job = std::move(job);
  o.node = std::move(node);
  o.generation = generation;
  return o;
}

struct Sender::Impl {
  ~Impl() {
    if (fd >= 0) close(fd);
  }
  void Loop();

  int fd = -1;
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  Key key;
  Beat beat;  // the template; seq advances
  std::chrono::milliseconds period{kDefaultPeriodMs};

  std::mutex control_mu;  // serialises Start/Stop; taken before mu
  std::thread thread;     // guarded by control_mu

  mutable std::mutex mu;  // guards what follows
  std::condition_variable cv;
  bool stop = false;
  Stats stats;
};

void Sender::Impl::Loop() {
  std::unique_lock<std::mutex> lk(mu);
  auto next = std::chrono::steady_clock::now();
  while (!stop) {
    ++beat.seq;
    Result<std::string> d = EncodeBeat(key, beat);  // names were checked at Create
    lk.unlock();
    int err = 0;
    if (d.ok()) {
      ssize_t n = sendto(fd, d->data(), d->size(), MSG_DONTWAIT | MSG_NOSIGNAL,
                         reinterpret_cast<const sockaddr*>(&addr), addr_len);
      if (n < 0) err = errno;
    } else {
      err = d.status().code();
    }
    lk.lock();
    if (err == 0) {
      ++stats.sent;
    } else {
      ++stats.send_errors;
      stats.last_errno = err;
    }
    next += period;
    auto now = std::chrono::steady_clock::now();
    if (next < now) next = now;  // late (descheduled, stopped): no burst of catch-up beats
    cv.wait_until(lk, next, [this] { return stop; });
  }
}

Result<std::unique_ptr<Sender>> Sender::Create(SenderOptions o) {
  DLCKPT_ASSIGN_OR_RETURN(Key key, ParseKey(o.key_hex));
  DLCKPT_RETURN_IF_ERROR(CheckName("job", o.job));
  DLCKPT_RETURN_IF_ERROR(CheckName("node", o.node));
  if (o.period_ms < 1 || o.period_ms > 60000) {
    return Status::InvalidArgument("heartbeat period " + std::to_string(o.period_ms) + " ms: want 1..60000");
  }
  if (o.monitor_host.empty() || o.monitor_port == 0) {
    return Status::InvalidArgument("heartbeat sender: no monitor address");
  }
  std::string where = o.monitor_host + ":" + std::to_string(o.monitor_port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(o.monitor_host.c_str(), std::to_string(o.monitor_port).c_str(), &hints, &res);
  if (rc != 0) {
    return Status::Error(rc == EAI_SYSTEM ? errno : EHOSTUNREACH,
                         "heartbeat monitor " + where + ": " + gai_strerror(rc));
  }
  auto impl = std::make_unique<Impl>();
  impl->fd = socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int err = errno;
  if (impl->fd >= 0) {
    std::memcpy(&impl->addr, res->ai_addr, res->ai_addrlen);
    impl->addr_len = res->ai_addrlen;
  }
  freeaddrinfo(res);
  if (impl->fd < 0) return Status::FromErrno(err, "heartbeat sender socket for " + where);
  impl->key = key;
  impl->beat.job = o.job;
  impl->beat.node = o.node;
  impl->beat.generation = o.generation;
  impl->beat.incarnation = static_cast<uint64_t>(Env::Default()->WallNanos());
  impl->period = std::chrono::milliseconds(o.period_ms);
  return std::unique_ptr<Sender>(new Sender(std::move(o), std::move(impl)));
}

Sender::Sender(SenderOptions options, std::unique_ptr<Impl> impl)
    : options_(std::move(options)), impl_(std::move(impl)) {}

Sender::~Sender() { Stop(); }

Status Sender::Start() {
  std::lock_guard<std::mutex> control(impl_->control_mu);
  if (impl_->thread.joinable()) return Status::OK();
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->stop = false;
  }
  try {
    impl_->thread = std::thread([impl = impl_.get()] { impl->Loop(); });
  } catch (const std::system_error& e) {
    return Status::Error(e.code().value() > 0 ? e.code().value() : EAGAIN,
                         "heartbeat sender thread for node " + options_.node + ": " + e.what());
  }
  return Status::OK();
}

void Sender::Stop() {
  std::lock_guard<std::mutex> control(impl_->control_mu);
  if (!impl_->thread.joinable()) return;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  impl_->thread.join();
}

Sender::Stats Sender::stats() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->stats;
}

std::string Sender::monitor_address() const {
  return SockaddrText(reinterpret_cast<const sockaddr*>(&impl_->addr));
}

// ---- Monitor -------------------------------------------------------------------------

namespace {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct Entry {
  std::string name;
  bool heard = false;
  int64_t last_heard_ns = 0;  // or the Expect() time while !heard
  uint64_t beats = 0;
  uint64_t incarnation = 0;
  uint64_t seq = 0;
};

constexpr unsigned kBatch = 64;

}  // namespace

struct Monitor::Impl {
  ~Impl() {
    if (fd >= 0) close(fd);
    if (wake_fd >= 0) close(wake_fd);
  }
  void Loop();
  // Applies one received datagram that arrived at `now`; requires mu.
  void Accept(std::string_view d, int64_t now);

  int fd = -1;
  int wake_fd = -1;  // eventfd: the destructor's stop signal
  Key key;
  std::string job;
  int64_t timeout_ns = 0, startup_ns = 0;
  std::thread thread;
  clockid_t cpu_clock{};
  bool cpu_clock_ok = false;  // written before the thread starts receiving; see Loop

  mutable std::mutex mu;  // guards what follows
  uint64_t generation = 0;
  std::vector<Entry> entries;  // the expected nodes (a vector: Suspects() scans it every tick)
  std::unordered_map<std::string, size_t, StringHash, std::equal_to<>> index;  // name -> entries[i]
  Stats stats;
};

void Monitor::Impl::Accept(std::string_view d, int64_t now) {
  ++stats.received;
  Result<Beat> b = DecodeBeat(key, d);
  if (!b.ok()) {
    ++(b.status().code() == EACCES ? stats.unauthenticated : stats.malformed);
    return;
  }
  if (b->job != job) {
    ++stats.wrong_job;
    return;
  }
  if (b->generation != generation) {
    ++stats.wrong_generation;
    return;
  }
  auto it = index.find(std::string_view(b->node));
  if (it == index.end()) {
    ++stats.unknown_node;
    return;
  }
  Entry& e = entries[it->second];
  if (e.heard && (b->incarnation < e.incarnation || (b->incarnation == e.incarnation && b->seq <= e.seq))) {
    ++stats.replayed;
    return;
  }
  e.heard = true;
  e.last_heard_ns = now;
  e.incarnation = b->incarnation;
  e.seq = b->seq;
  ++e.beats;
  ++stats.accepted;
}

void Monitor::Impl::Loop() {
  char bufs[kBatch][kMaxDatagramBytes + 1];
  iovec iov[kBatch];
  mmsghdr msgs[kBatch];
  pollfd fds[2] = {{fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
  for (;;) {
    int n = poll(fds, 2, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      {
        std::lock_guard<std::mutex> lk(mu);
        ++stats.receive_errors;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // e.g. ENOMEM: retry, never spin
      continue;
    }
    if (fds[1].revents != 0) return;
    if (fds[0].revents == 0) continue;
    // Drain the socket in batches.
    for (;;) {
      for (unsigned i = 0; i < kBatch; ++i) {
        iov[i] = {bufs[i], sizeof bufs[i]};
        msgs[i] = {};
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
      }
      int got = recvmmsg(fd, msgs, kBatch, MSG_DONTWAIT, nullptr);
      if (got < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        if (errno == EINTR) continue;
        {
          std::lock_guard<std::mutex> lk(mu);
          ++stats.receive_errors;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));  // e.g. ENOMEM: retry, never spin
        break;
      }
      int64_t now = MonoNow();
      std::lock_guard<std::mutex> lk(mu);
      for (int i = 0; i < got; ++i) {
        size_t len = msgs[i].msg_len;
        if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) len = sizeof bufs[i];  // too long: malformed
        Accept(std::string_view(bufs[i], len), now);
      }
      if (got < static_cast<int>(kBatch)) break;
    }
  }
}

Result<std::unique_ptr<Monitor>> Monitor::Create(MonitorOptions o) {
  DLCKPT_ASSIGN_OR_RETURN(Key key, ParseKey(o.key_hex));
  DLCKPT_RETURN_IF_ERROR(CheckName("job", o.job));
  if (o.timeout_ms < 10 || o.timeout_ms > 600000) {
    return Status::InvalidArgument("heartbeat timeout " + std::to_string(o.timeout_ms) + " ms: want 10..600000");
  }
  if (o.startup_timeout_ms < o.timeout_ms || o.startup_timeout_ms > 3600000) {
    return Status::InvalidArgument("heartbeat startup timeout " + std::to_string(o.startup_timeout_ms) +
                                   " ms: want timeout (" + std::to_string(o.timeout_ms) + ")..3600000");
  }
  std::string where = o.bind_host + ":" + std::to_string(o.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(o.bind_host.c_str(), std::to_string(o.port).c_str(), &hints, &res);
  if (rc != 0) {
    return Status::InvalidArgument("heartbeat monitor address " + where + ": " + gai_strerror(rc) +
                                   " (want a numeric address)");
  }
  auto impl = std::make_unique<Impl>();
  impl->fd = socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int err = errno;
  if (impl->fd >= 0) {
    // Room for bursts while the thread is descheduled (capped by net.core.rmem_max).
    int want = 4 << 20;
    setsockopt(impl->fd, SOL_SOCKET, SO_RCVBUF, &want, sizeof want);
    if (bind(impl->fd, res->ai_addr, res->ai_addrlen) != 0) {
      err = errno;
      close(impl->fd);
      impl->fd = -1;
    }
  }
  freeaddrinfo(res);
  if (impl->fd < 0) return Status::FromErrno(err, "heartbeat monitor: bind UDP " + where);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(impl->fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return Status::FromErrno(errno, "heartbeat monitor: getsockname " + where);
  }
  uint16_t port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                            : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  impl->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (impl->wake_fd < 0) return Status::FromErrno(errno, "heartbeat monitor: eventfd");
  impl->key = key;
  impl->job = o.job;
  impl->timeout_ns = static_cast<int64_t>(o.timeout_ms) * 1000000;
  impl->startup_ns = static_cast<int64_t>(o.startup_timeout_ms) * 1000000;
  try {
    impl->thread = std::thread([p = impl.get()] { p->Loop(); });
  } catch (const std::system_error& e) {
    return Status::Error(e.code().value() > 0 ? e.code().value() : EAGAIN,
                         std::string("heartbeat monitor thread: ") + e.what());
  }
  // The thread's CPU clock, for Stats (read by this thread only while it runs).
  impl->cpu_clock_ok = pthread_getcpuclockid(impl->thread.native_handle(), &impl->cpu_clock) == 0;
  return std::unique_ptr<Monitor>(new Monitor(std::move(o), port, std::move(impl)));
}

Monitor::Monitor(MonitorOptions options, uint16_t port, std::unique_ptr<Impl> impl)
    : options_(std::move(options)), port_(port), impl_(std::move(impl)) {}

Monitor::~Monitor() {
  uint64_t one = 1;
  ssize_t w = write(impl_->wake_fd, &one, sizeof one);
  (void)w;  // an eventfd write of 1 cannot fail short of overflow
  impl_->thread.join();
}

void Monitor::Expect(uint64_t generation, const std::vector<std::string>& nodes, int64_t now_ns) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  std::vector<Entry> entries;
  decltype(impl_->index) index;
  for (const auto& n : nodes) {
    if (index.count(n)) continue;
    index.emplace(n, entries.size());
    auto it = impl_->index.find(n);
    if (generation == impl_->generation && it != impl_->index.end()) {
      entries.push_back(impl_->entries[it->second]);  // same generation: a node kept keeps its state
    } else {
      Entry e;
      e.name = n;
      e.last_heard_ns = now_ns;
      entries.push_back(std::move(e));
    }
  }
  impl_->generation = generation;
  impl_->entries = std::move(entries);
  impl_->index = std::move(index);
}

std::vector<std::string> Monitor::Suspects(int64_t now_ns) const {
  std::vector<std::string> out;
  std::lock_guard<std::mutex> lk(impl_->mu);
  for (const Entry& e : impl_->entries) {
    int64_t limit = e.heard ? impl_->timeout_ns : impl_->startup_ns;
    if (now_ns - e.last_heard_ns > limit) out.push_back(e.name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {
Monitor::NodeState ToState(const Entry& e) {
  Monitor::NodeState s;
  s.node = e.name;
  s.heard = e.heard;
  s.last_heard_ns = e.last_heard_ns;
  s.beats = e.beats;
  s.last_seq = e.seq;
  return s;
}
}  // namespace

std::optional<Monitor::NodeState> Monitor::Node(const std::string& node) const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  auto it = impl_->index.find(node);
  if (it == impl_->index.end()) return std::nullopt;
  return ToState(impl_->entries[it->second]);
}

std::vector<Monitor::NodeState> Monitor::Nodes() const {
  std::vector<NodeState> out;
  std::lock_guard<std::mutex> lk(impl_->mu);
  for (const Entry& e : impl_->entries) out.push_back(ToState(e));
  std::sort(out.begin(), out.end(), [](const NodeState& a, const NodeState& b) { return a.node < b.node; });
  return out;
}

uint64_t Monitor::generation() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->generation;
}

Monitor::Stats Monitor::stats() const {
  Stats s;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    s = impl_->stats;
  }
  struct timespec ts;
  if (impl_->cpu_clock_ok && clock_gettime(impl_->cpu_clock, &ts) == 0) {
    s.receiver_cpu_ns = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  }
  return s;
}

}  // namespace dlckpt::control::heartbeat

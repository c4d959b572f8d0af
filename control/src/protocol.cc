#include "dlckpt/control/protocol.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <type_traits>

#include "dlckpt/base/crc32c.h"
#include "dlckpt/base/env.h"

namespace dlckpt::control::protocol {

const char* MsgTypeName(MsgType t) {
  switch (t) {
    case MsgType::kHello: return "HELLO";
    case MsgType::kHelloOk: return "HELLO_OK";
    case MsgType::kEncode: return "ENCODE";
    case MsgType::kDone: return "DONE";
    case MsgType::kSurvey: return "SURVEY";
    case MsgType::kSurveyReply: return "SURVEY_REPLY";
    case MsgType::kRecover: return "RECOVER";
    case MsgType::kStatus: return "STATUS";
    case MsgType::kStatusReply: return "STATUS_REPLY";
    case MsgType::kShutdown: return "SHUTDOWN";
    case MsgType::kError: return "ERROR";
  }
  return "UNKNOWN";
}

// ---- Writer / Reader ----------------------------------------------------------

namespace {

// Appends v in the wire format: little-endian, sizeof(T) bytes.
template <class T>
void AppendFixed(std::string* buf, T v) {
  char b[sizeof(T)];
  for (size_t i = 0; i < sizeof(T); ++i) b[i] = static_cast<char>(v >> (8 * i));
  buf->append(b, sizeof(T));
}

}  // namespace

void Writer::U32(uint32_t v) { AppendFixed(&buf_, v); }
void Writer::U64(uint64_t v) { AppendFixed(&buf_, v); }

void Writer::F64(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  U64(bits);
}

void Writer::Str(std::string_view s) {
  U32(static_cast<uint32_t>(s.size()));
  buf_.append(s.data(), s.size());
}

Status Reader::Need(size_t n) const {
  if (data_.size() - pos_ < n) {
    return Status::Corruption(what_ + ": truncated payload (need " + std::to_string(n) +
                              " bytes at offset " + std::to_string(pos_) + ", have " +
                              std::to_string(data_.size() - pos_) + ")");
  }
  return Status::OK();
}

Status Reader::U8(uint8_t* v) {
  DLCKPT_RETURN_IF_ERROR(Need(1));
  *v = static_cast<uint8_t>(data_[pos_++]);
  return Status::OK();
}

template <class T>
Status Reader::Fixed(T* v) {
  using U = std::make_unsigned_t<T>;
  DLCKPT_RETURN_IF_ERROR(Need(sizeof(U)));
  U r = 0;
  for (size_t i = 0; i < sizeof(U); ++i) r |= U{static_cast<uint8_t>(data_[pos_ + i])} << (8 * i);
  pos_ += sizeof(U);
  *v = static_cast<T>(r);
  return Status::OK();
}

Status Reader::U32(uint32_t* v) { return Fixed(v); }
Status Reader::U64(uint64_t* v) { return Fixed(v); }
Status Reader::I32(int32_t* v) { return Fixed(v); }
Status Reader::I64(int64_t* v) { return Fixed(v); }

Status Reader::F64(double* v) {
  uint64_t u;
  DLCKPT_RETURN_IF_ERROR(U64(&u));
  std::memcpy(v, &u, sizeof *v);
  return Status::OK();
}

Status Reader::Str(std::string* s) {
  uint32_t n;
  DLCKPT_RETURN_IF_ERROR(U32(&n));
  if (n > kMaxString) {
    return Status::Corruption(what_ + ": string of " + std::to_string(n) + " bytes exceeds " +
                              std::to_string(kMaxString));
  }
  DLCKPT_RETURN_IF_ERROR(Need(n));
  s->assign(data_.substr(pos_, n));
  pos_ += n;
  return Status::OK();
}

Status Reader::Count(uint32_t* n, size_t min_bytes) {
  DLCKPT_RETURN_IF_ERROR(U32(n));
  if (min_bytes > 0 && *n > (data_.size() - pos_) / min_bytes) {
    return Status::Corruption(what_ + ": list of " + std::to_string(*n) +
                              " elements does not fit in the payload");
  }
  return Status::OK();
}

Status Reader::End() const {
  if (pos_ != data_.size()) {
    return Status::Corruption(what_ + ": " + std::to_string(data_.size() - pos_) +
                              " unexpected bytes after the message");
  }
  return Status::OK();
}

// ---- messages ------------------------------------------------------------------

// ---- messages ----------------------------------------------------------------
//
// The wire layout of each message is written once, as Fields(io, m): `io` is
// an Out (encoding into a Writer) or an In (decoding from a Reader), and both
// take the same calls in the same order. A list is a u32 count, then its
// elements; In checks the count against the bytes left (min_bytes each).

namespace {

class Out {
 public:
  Status operator()(const uint8_t& v) { w_.U8(v); return Status::OK(); }
  Status operator()(const uint32_t& v) { w_.U32(v); return Status::OK(); }
  Status operator()(const uint64_t& v) { w_.U64(v); return Status::OK(); }
  Status operator()(const int32_t& v) { w_.I32(v); return Status::OK(); }
  Status operator()(const double& v) { w_.F64(v); return Status::OK(); }
  Status operator()(const std::string& v) { w_.Str(v); return Status::OK(); }
  Status operator()(const bool& v) { w_.U8(v ? 1 : 0); return Status::OK(); }
  Status operator()(const Role& v) { w_.U8(static_cast<uint8_t>(v)); return Status::OK(); }
  Status operator()(const MemberRecord& m) { PutMember(w_, m); return Status::OK(); }
  Status operator()(const ParityReport& p) { PutParity(w_, p); return Status::OK(); }
  template <class T, class Fn>
  Status List(const std::vector<T>& v, size_t /*min_bytes*/, Fn&& each) {
    w_.U32(static_cast<uint32_t>(v.size()));
    for (const T& x : v) DLCKPT_RETURN_IF_ERROR(each(*this, const_cast<T&>(x)));
    return Status::OK();
  }
  std::string Take() { return w_.Take(); }
  Out() = default;
  explicit Out(Writer& w) : w_(w) {}

 private:
  Writer own_;
  Writer& w_ = own_;
};

class In {
 public:
  In(std::string_view payload, const char* what) : own_(payload, what), r_(own_) {}
  explicit In(Reader& r) : own_("", ""), r_(r) {}
  Status operator()(uint8_t& v) { return r_.U8(&v); }
  Status operator()(uint32_t& v) { return r_.U32(&v); }
  Status operator()(uint64_t& v) { return r_.U64(&v); }
  Status operator()(int32_t& v) { return r_.I32(&v); }
  Status operator()(double& v) { return r_.F64(&v); }
  Status operator()(std::string& v) { return r_.Str(&v); }
  Status operator()(bool& v) {
    uint8_t b = 0;
    DLCKPT_RETURN_IF_ERROR(r_.U8(&b));
    v = b != 0;
    return Status::OK();
  }
  Status operator()(Role& v) {
    uint8_t b = 0;
    DLCKPT_RETURN_IF_ERROR(r_.U8(&b));
    if (b != static_cast<uint8_t>(Role::kApplication) && b != static_cast<uint8_t>(Role::kSupervisor)) {
      return Status::Corruption("HELLO: unknown role " + std::to_string(b));
    }
    v = static_cast<Role>(b);
    return Status::OK();
  }
  Status operator()(MemberRecord& m) { return GetMember(r_, &m); }
  Status operator()(ParityReport& p) { return GetParity(r_, &p); }
  template <class T, class Fn>
  Status List(std::vector<T>& v, size_t min_bytes, Fn&& each) {
    uint32_t n = 0;
    DLCKPT_RETURN_IF_ERROR(r_.Count(&n, min_bytes));
    v.resize(n);
    for (T& x : v) DLCKPT_RETURN_IF_ERROR(each(*this, x));
    return Status::OK();
  }
  Status End() const { return r_.End(); }

 private:
  Reader own_;
  Reader& r_;
};

// io(a), io(b), ... in order, up to the first error.
template <class IO, class... T>
Status Each(IO& io, T&... fields) {
  Status s;
  ((s.ok() ? (void)(s = io(fields)) : (void)0), ...);
  return s;
}

template <class IO>
Status Fields(IO& io, Hello& m) {
  DLCKPT_RETURN_IF_ERROR(Each(io, m.token, m.role, m.job));
  return io.List(m.layout, 12, [](IO& io, RankEntry& e) {
    DLCKPT_RETURN_IF_ERROR(Each(io, e.rank, e.node, e.store));
    return e.rank < 0 ? Status::Corruption("HELLO: negative rank in layout") : Status::OK();
  });
}

template <class IO>
Status Fields(IO& io, Encode& m) {
  return Each(io, m.epoch, m.keep);
}

template <class IO>
Status Fields(IO& io, Done& m) {
  return Each(io, m.epoch, m.code, m.message, m.seconds, m.bytes);
}

template <class IO>
Status Fields(IO& io, SurveyReply& m) {
  return io.List(m.nodes, 12, [](IO& io, NodeReport& n) {
    DLCKPT_RETURN_IF_ERROR(io(n.node));
    DLCKPT_RETURN_IF_ERROR(io.List(n.stores, 38, [](IO& io, StoreReport& s) {
      return Each(io, s.name, s.job, s.rank, s.acked, s.pending, s.error, s.acked_ok, s.pending_ok, s.damage);
    }));
    DLCKPT_RETURN_IF_ERROR(io.List(n.parities, 42, [](IO& io, ParityReport& p) { return Each(io, p.name, p); }));
    return io.List(n.parity_damage, 4, [](IO& io, std::string& why) { return io(why); });
  });
}

template <class IO>
Status Fields(IO& io, Recover& m) {
  DLCKPT_RETURN_IF_ERROR(Each(io, m.epoch, m.generation));
  DLCKPT_RETURN_IF_ERROR(io.List(m.rebuilds, 12, [](IO& io, RebuildTask& t) {
    return Each(io, t.group, t.member, t.target_node);
  }));
  DLCKPT_RETURN_IF_ERROR(io.List(m.lost_nodes, 4, [](IO& io, std::string& n) { return io(n); }));
  return io.List(m.groups, 17, [](IO& io, RebuildGroup& g) {
    DLCKPT_RETURN_IF_ERROR(Each(io, g.group, g.scheme, g.k, g.layout));
    DLCKPT_RETURN_IF_ERROR(io.List(g.members, 8, [](IO& io, MemberRecord& mem) { return io(mem); }));
    DLCKPT_RETURN_IF_ERROR(io.List(g.sources, 4, [](IO& io, std::string& n) { return io(n); }));
    const size_t n = g.members.size();
    if (g.layout > 1) {
      return Status::Corruption("RECOVER: group " + std::to_string(g.group) + ": unknown parity layout " +
                                std::to_string(g.layout));
    }
    if (g.layout == 1 && (g.k == 0 || g.k >= n)) {
      return Status::Corruption("RECOVER: group " + std::to_string(g.group) + ": spread parity with k = " +
                                std::to_string(g.k) + " over " + std::to_string(n) + " members");
    }
    const size_t want = g.layout == 1 ? n * n : n + g.k;
    if (g.sources.size() != want) {
      return Status::Corruption("RECOVER: group " + std::to_string(g.group) + " names " +
                                std::to_string(g.sources.size()) + " chunk sources for " +
                                std::to_string(n) + " members and " + std::to_string(g.k) +
                                " parity (" + (g.layout == 1 ? "spread" : "spares") + " layout: " +
                                std::to_string(want) + ")");
    }
    return Status::OK();
  });
}

template <class IO>
Status Fields(IO& io, StatusReply& m) {
  return io(m.text);
}

template <class IO>
Status Fields(IO& io, ErrorMsg& m) {
  return Each(io, m.code, m.message);
}

template <class M>
std::string EncodeMessage(const M& m) {
  Out out;
  (void)Fields(out, const_cast<M&>(m));  // Out only reads m
  return out.Take();
}

template <class M>
Result<M> DecodeMessage(std::string_view payload, const char* what) {
  In in(payload, what);
  M m;
  DLCKPT_RETURN_IF_ERROR(Fields(in, m));
  DLCKPT_RETURN_IF_ERROR(in.End());
  return m;
}

}  // namespace

void PutMember(Writer& w, const MemberRecord& m) {
  w.Str(m.node);
  w.U32(static_cast<uint32_t>(m.ranks.size()));
  for (size_t i = 0; i < m.ranks.size(); ++i) {
    w.I32(m.ranks[i]);
    w.U64(i < m.sizes.size() ? m.sizes[i] : 0);
  }
}

Status GetMember(Reader& r, MemberRecord* m) {
  DLCKPT_RETURN_IF_ERROR(r.Str(&m->node));
  uint32_t n;
  DLCKPT_RETURN_IF_ERROR(r.Count(&n, 12));
  m->ranks.resize(n);
  m->sizes.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    DLCKPT_RETURN_IF_ERROR(r.I32(&m->ranks[i]));
    DLCKPT_RETURN_IF_ERROR(r.U64(&m->sizes[i]));
  }
  return Status::OK();
}

namespace {

template <class IO>
Status ParityFields(IO& io, ParityReport& p) {
  DLCKPT_RETURN_IF_ERROR(
      Each(io, p.group, p.index, p.k, p.ngroups, p.scheme, p.layout, p.epoch, p.generation, p.complete));
  return io.List(p.members, 8, [](IO& io, MemberRecord& mem) { return io(mem); });
}

}  // namespace

void PutParity(Writer& w, const ParityReport& p) {
  Out out(w);
  (void)ParityFields(out, const_cast<ParityReport&>(p));  // Out only reads p
}

Status GetParity(Reader& r, ParityReport* p) {
  In in(r);
  return ParityFields(in, *p);
}

std::string EncodeHello(const Hello& m) { return EncodeMessage(m); }
std::string EncodeEncode(const Encode& m) { return EncodeMessage(m); }
std::string EncodeDone(const Done& m) { return EncodeMessage(m); }
std::string EncodeSurveyReply(const SurveyReply& m) { return EncodeMessage(m); }
std::string EncodeRecover(const Recover& m) { return EncodeMessage(m); }
std::string EncodeStatusReply(const StatusReply& m) { return EncodeMessage(m); }
std::string EncodeError(const ErrorMsg& m) { return EncodeMessage(m); }

Result<Hello> DecodeHello(std::string_view payload) { return DecodeMessage<Hello>(payload, "HELLO"); }

Result<Encode> DecodeEncode(std::string_view payload) {
  DLCKPT_ASSIGN_OR_RETURN(Encode m, DecodeMessage<Encode>(payload, "ENCODE"));
  if (m.epoch == 0) return Status::Corruption("ENCODE: epoch 0");
  if (m.keep >= m.epoch) return Status::Corruption("ENCODE: the epoch to keep is not older than the one to encode");
  return m;
}

Result<Done> DecodeDone(std::string_view payload) { return DecodeMessage<Done>(payload, "DONE"); }
Result<SurveyReply> DecodeSurveyReply(std::string_view payload) {
  return DecodeMessage<SurveyReply>(payload, "SURVEY_REPLY");
}
Result<Recover> DecodeRecover(std::string_view payload) { return DecodeMessage<Recover>(payload, "RECOVER"); }
Result<StatusReply> DecodeStatusReply(std::string_view payload) {
  return DecodeMessage<StatusReply>(payload, "STATUS_REPLY");
}
Result<ErrorMsg> DecodeError(std::string_view payload) { return DecodeMessage<ErrorMsg>(payload, "ERROR"); }

// ---- frames --------------------------------------------------------------------

std::string EncodeFrame(MsgType type, std::string_view payload) {
  Writer w;
  w.U32(kMagic);
  w.U32(uint32_t{kVersion} | (uint32_t{static_cast<uint16_t>(type)} << 16));
  w.U32(static_cast<uint32_t>(payload.size()));
  w.U32(Crc32c(payload.data(), payload.size()));
  std::string out = w.Take();
  out.append(payload.data(), payload.size());
  return out;
}

Result<uint32_t> ParseHeader(const uint8_t (&h)[kHeaderBytes], MsgType* type, uint32_t* crc) {
  Reader r(std::string_view(reinterpret_cast<const char*>(h), kHeaderBytes), "frame header");
  uint32_t magic, vt, len;
  DLCKPT_RETURN_IF_ERROR(r.U32(&magic));
  DLCKPT_RETURN_IF_ERROR(r.U32(&vt));
  DLCKPT_RETURN_IF_ERROR(r.U32(&len));
  DLCKPT_RETURN_IF_ERROR(r.U32(crc));
  if (magic != kMagic) return Status::Corruption("frame header: bad magic (not a dlckpt peer?)");
  uint16_t version = static_cast<uint16_t>(vt & 0xffff);
  uint16_t t = static_cast<uint16_t>(vt >> 16);
  if (version != kVersion) {
    return Status::Corruption("frame header: protocol version " + std::to_string(version) +
                              " (this side speaks " + std::to_string(kVersion) + ")");
  }
  if (t < static_cast<uint16_t>(MsgType::kHello) || t > static_cast<uint16_t>(MsgType::kError)) {
    return Status::Corruption("frame header: unknown message type " + std::to_string(t));
  }
  if (len > kMaxPayload) {
    return Status::Error(EMSGSIZE, "frame header: payload of " + std::to_string(len) +
                                       " bytes exceeds the limit of " +
                                       std::to_string(kMaxPayload));
  }
  *type = static_cast<MsgType>(t);
  return len;
}

Status CheckPayload(std::string_view payload, uint32_t crc) {
  if (Crc32c(payload.data(), payload.size()) != crc) {
    return Status::Corruption("frame: payload checksum mismatch");
  }
  return Status::OK();
}

Result<Frame> ParseFrame(std::string_view bytes) {
  if (bytes.size() < kHeaderBytes) return Status::Corruption("frame: shorter than its header");
  uint8_t h[kHeaderBytes];
  std::memcpy(h, bytes.data(), kHeaderBytes);
  Frame f;
  uint32_t crc;
  DLCKPT_ASSIGN_OR_RETURN(uint32_t len, ParseHeader(h, &f.type, &crc));
  if (bytes.size() - kHeaderBytes != len) {
    return Status::Corruption("frame: length field says " + std::to_string(len) + " bytes, got " +
                              std::to_string(bytes.size() - kHeaderBytes));
  }
  f.payload.assign(bytes.substr(kHeaderBytes));
  DLCKPT_RETURN_IF_ERROR(CheckPayload(f.payload, crc));
  return f;
}

Status ValidatePayload(const Frame& f) {
  switch (f.type) {
    case MsgType::kHello: return DecodeHello(f.payload).status();
    case MsgType::kEncode: return DecodeEncode(f.payload).status();
    case MsgType::kDone: return DecodeDone(f.payload).status();
    case MsgType::kSurveyReply: return DecodeSurveyReply(f.payload).status();
    case MsgType::kRecover: return DecodeRecover(f.payload).status();
    case MsgType::kStatusReply: return DecodeStatusReply(f.payload).status();
    case MsgType::kError: return DecodeError(f.payload).status();
    case MsgType::kHelloOk:
    case MsgType::kSurvey:
    case MsgType::kStatus:
    case MsgType::kShutdown:
      if (!f.payload.empty()) {
        return Status::Corruption(std::string(MsgTypeName(f.type)) + ": unexpected payload");
      }
      return Status::OK();
  }
  return Status::Corruption("unknown message type");
}

// ---- Connection ----------------------------------------------------------------

namespace {

int64_t NowMs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// Waits for `events` on fd; returns 1 ready, 0 timeout.
Result<int> WaitFd(int fd, short events, int timeout_ms) {
  struct pollfd p{fd, events, 0};
  for (;;) {
    int rc = poll(&p, 1, timeout_ms);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return Status::FromErrno(errno, "poll");
    return rc;
  }
}

}  // namespace

Connection::~Connection() {
  if (fd_ >= 0) close(fd_);
}

Result<std::unique_ptr<Connection>> Connection::Connect(const std::string& host, int port,
                                                        int timeout_ms) {
  std::string peer = host + ":" + std::to_string(port);
  struct addrinfo hints {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) {
    return Status::Error(EHOSTUNREACH, "resolve " + host + ": " + gai_strerror(rc));
  }
  Status last = Status::Error(ECONNREFUSED, "connect " + peer + ": no address");
  for (struct addrinfo* a = res; a != nullptr; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      last = Status::FromErrno(errno, "socket for " + peer);
      continue;
    }
    rc = connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      auto ready = WaitFd(fd, POLLOUT, timeout_ms);
      int err = 0;
      socklen_t len = sizeof err;
      if (!ready.ok() || *ready == 0) {
        err = ETIMEDOUT;
      } else {
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      }
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc != 0) {
      last = Status::FromErrno(errno, "connect " + peer);
      close(fd);
      continue;
    }
    int flags = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    freeaddrinfo(res);
    return std::make_unique<Connection>(fd, peer);
  }
  freeaddrinfo(res);
  return last;
}

Status Connection::Send(MsgType type, std::string_view payload) {
  if (payload.size() > kMaxPayload) {
    return Status::Error(EMSGSIZE, "send to " + peer_ + ": payload too large");
  }
  std::string frame = EncodeFrame(type, payload);
  size_t done = 0;
  while (done < frame.size()) {
    ssize_t n = send(fd_, frame.data() + done, frame.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, "send to " + peer_);
    done += static_cast<size_t>(n);
  }
  return Status::OK();
}

Status Connection::ReadFully(uint8_t* buf, size_t n, int timeout_ms, bool* got_any) {
  int64_t deadline = timeout_ms < 0 ? -1 : NowMs() + timeout_ms;
  size_t done = 0;
  while (done < n) {
    int wait = -1;
    if (deadline >= 0) {
      int64_t left = deadline - NowMs();
      if (left <= 0) return Status::Timeout("receive from " + peer_ + ": timed out");
      wait = static_cast<int>(left);
    }
    DLCKPT_ASSIGN_OR_RETURN(int ready, WaitFd(fd_, POLLIN, wait));
    if (ready == 0) return Status::Timeout("receive from " + peer_ + ": timed out");
    ssize_t r = recv(fd_, buf + done, n - done, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Status::FromErrno(errno, "receive from " + peer_);
    if (r == 0) {
      return Status::Error(ECONNRESET, "receive from " + peer_ + ": connection closed" +
                                           (done > 0 || *got_any ? " in the middle of a frame" : ""));
    }
    done += static_cast<size_t>(r);
    *got_any = true;
  }
  return Status::OK();
}

Result<Frame> Connection::Receive(int timeout_ms) {
  uint8_t h[kHeaderBytes];
  bool got_any = false;
  DLCKPT_RETURN_IF_ERROR(ReadFully(h, sizeof h, timeout_ms, &got_any));
  Frame f;
  uint32_t crc;
  auto len = ParseHeader(h, &f.type, &crc);
  if (!len.ok()) return len.status().Prefixed("from " + peer_);
  f.payload.resize(*len);
  // The rest of a frame whose header arrived must follow promptly.
  DLCKPT_RETURN_IF_ERROR(ReadFully(reinterpret_cast<uint8_t*>(f.payload.data()), *len,
                                   timeout_ms < 0 ? 30000 : std::max(timeout_ms, 30000),
                                   &got_any));
  Status s = CheckPayload(f.payload, crc);
  if (!s.ok()) return s.Prefixed("from " + peer_);
  return f;
}

Result<Frame> Connection::Call(MsgType type, std::string_view payload, int timeout_ms) {
  DLCKPT_RETURN_IF_ERROR(Send(type, payload));
  DLCKPT_ASSIGN_OR_RETURN(Frame f, Receive(timeout_ms));
  if (f.type == MsgType::kError) {
    auto e = DecodeError(f.payload);
    if (!e.ok()) return e.status().Prefixed("from " + peer_);
    return Status::Error(e->code > 0 ? e->code : EPROTO, peer_ + " refused " +
                                                             MsgTypeName(type) + ": " + e->message);
  }
  return f;
}

// ---- Listener --------------------------------------------------------------------

Listener::~Listener() {
  if (fd_ >= 0) close(fd_);
}

std::string ListenAddressFor(std::string_view host) {
  struct in_addr a4 {};
  struct in6_addr a6 {};
  const std::string h(host);
  if (inet_pton(AF_INET, h.c_str(), &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127) return h;
  if (inet_pton(AF_INET6, h.c_str(), &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6)) return h;
  return "";
}

Result<std::unique_ptr<Listener>> Listener::Listen(int port, const std::string& address, int backlog) {
  struct sockaddr_in6 a6 {};
  struct sockaddr_in a4 {};
  a6.sin6_family = AF_INET6;
  a6.sin6_addr = in6addr_any;
  a6.sin6_port = htons(static_cast<uint16_t>(port));
  a4.sin_family = AF_INET;
  a4.sin_addr.s_addr = htonl(INADDR_ANY);
  a4.sin_port = htons(static_cast<uint16_t>(port));
  // An IPv4 address binds an IPv4 socket; an IPv6 one or none, an IPv6
  // socket that also takes IPv4 (IPv4 only when the host has no IPv6).
  bool v4_only = false;
  if (!address.empty()) {
    if (inet_pton(AF_INET, address.c_str(), &a4.sin_addr) == 1) {
      v4_only = true;
    } else if (inet_pton(AF_INET6, address.c_str(), &a6.sin6_addr) != 1) {
      return Status::InvalidArgument("listen: '" + address + "' is not a numeric IPv4 or IPv6 address");
    }
  }
  int fd = v4_only ? -1 : socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  bool v6 = fd >= 0;
  if (!v6 && !address.empty() && !v4_only) return Status::FromErrno(errno, "socket for " + address);
  if (!v6) fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno(errno, "socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc;
  if (v6) {
    int zero = 0;
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    rc = bind(fd, reinterpret_cast<struct sockaddr*>(&a6), sizeof a6);
  } else {
    rc = bind(fd, reinterpret_cast<struct sockaddr*>(&a4), sizeof a4);
  }
  if (rc != 0 || listen(fd, backlog) != 0) {
    int err = errno;
    close(fd);
    return Status::FromErrno(err, "listen on " + (address.empty() ? "" : address + " ") + "port " +
                                      std::to_string(port));
  }
  struct sockaddr_storage ss {};
  socklen_t len = sizeof ss;
  getsockname(fd, reinterpret_cast<struct sockaddr*>(&ss), &len);
  int bound = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                       : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return std::unique_ptr<Listener>(new Listener(fd, bound));
}

Result<std::unique_ptr<Connection>> Listener::Accept() {
  struct sockaddr_storage ss {};
  socklen_t len = sizeof ss;
  int fd;
  do {
    fd = accept4(fd_, reinterpret_cast<struct sockaddr*>(&ss), &len, SOCK_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return Status::FromErrno(errno, "accept");
  char host[NI_MAXHOST] = "?", serv[NI_MAXSERV] = "?";
  getnameinfo(reinterpret_cast<struct sockaddr*>(&ss), len, host, sizeof host, serv, sizeof serv,
              NI_NUMERICHOST | NI_NUMERICSERV);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return std::make_unique<Connection>(fd, std::string(host) + ":" + serv);
}

// ---- rendezvous --------------------------------------------------------------------

Result<std::string> NewToken() {
  uint8_t raw[32];
  size_t got = 0;
  while (got < sizeof raw) {
    ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, "getrandom");
    got += static_cast<size_t>(n);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : raw) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

Status WriteRendezvous(const std::string& path, const Rendezvous& r) {
  std::ostringstream os;
  os << "dlckpt-rendezvous 1\nhost " << r.host << "\nport " << r.port << "\ntoken " << r.token
     << "\njob " << r.job << "\n";
  return Env::Default()->WriteFileAtomic(path, os.str(), 0600);
}

Result<Rendezvous> ReadRendezvous(const std::string& path, int timeout_ms) {
  int64_t deadline = NowMs() + std::max(timeout_ms, 0);
  for (;;) {
    struct stat st;
    if (stat(path.c_str(), &st) == 0) {
      if (st.st_mode & 077) {
        char mode[16];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        return Status::Error(EACCES, "rendezvous file " + path + " is readable by others (mode " +
                                         mode + "); refusing it");
      }
      // Regular files only, and small: a FIFO or /dev/zero must not hang the caller.
      constexpr size_t kMaxRendezvousBytes = 64 << 10;
      auto read = Env::Default()->ReadFile(path, kMaxRendezvousBytes);
      if (!read.ok()) return read.status().Prefixed("rendezvous file");
      std::string text = std::move(read).value();
      std::istringstream is(text);
      std::string magic, key;
      int version = 0;
      Rendezvous r;
      is >> magic >> version;
      if (magic != "dlckpt-rendezvous" || version != 1) {
        return Status::Corruption("rendezvous file " + path + " is not a dlckpt rendezvous file");
      }
      while (is >> key) {
        if (key == "host") is >> r.host;
        else if (key == "port") is >> r.port;
        else if (key == "token") is >> r.token;
        else if (key == "job") is >> r.job;
        else return Status::Corruption("rendezvous file " + path + ": unknown key " + key);
      }
      if (r.host.empty() || r.port <= 0 || r.port > 65535 || r.token.size() != 64) {
        return Status::Corruption("rendezvous file " + path + " is incomplete or malformed");
      }
      return r;
    }
    if (errno != ENOENT) return Status::FromErrno(errno, "rendezvous file " + path);
    if (NowMs() >= deadline) {
      return Status::Error(timeout_ms > 0 ? ETIMEDOUT : ENOENT,
                           "rendezvous file " + path + " does not exist" +
                               (timeout_ms > 0 ? " (waited " + std::to_string(timeout_ms / 1000) +
                                                     " s): is the codec service running?"
                                               : ""));
    }
    struct timespec ts{0, 50 * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
}

}  // namespace dlckpt::control::protocol

// dlckpt/control/protocol.h — the control protocol between the application, the
// dlckpt-run supervisor and the codec service.
//
// Frames: a 16-byte header {magic "DLCK", version, type, payload length,
// CRC32C of the payload} followed by the payload. A payload is a sequence of
// little-endian integers and length-prefixed strings/lists (Writer/Reader).
// Every frame is checked before use: wrong magic or version, a payload longer
// than kMaxPayload, a CRC mismatch, an unknown type, a truncated or
// over-long payload, or counts beyond the payload are errors (EBADMSG or
// EMSGSIZE) naming the peer — never undefined behaviour. The first message on
// every connection must be a HELLO carrying the job's secret token.
//
// Messages (client → service unless noted):
//   HELLO(token, role, job, layout rank -> node -> store)  → HELLO_OK | ERROR
//   ENCODE(epoch, keep)                                      → DONE(epoch, status)
//   SURVEY()                                                 → SURVEY_REPLY(nodes)
//   RECOVER(plan)                                            → DONE(epoch, status)
//   STATUS()                                                 → STATUS_REPLY(text)
//   SHUTDOWN()                                               → DONE(0, OK), then exit
//   ERROR(code, message): service → client, for a rejected request.
// Thread safety: values only; Connection objects are used by one thread.
#ifndef DLCKPT_CODEC_PROTOCOL_H_
#define DLCKPT_CODEC_PROTOCOL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlckpt/base/status.h"

namespace dlckpt::control::protocol {

inline constexpr uint32_t kMagic = 0x4B434C44;  // "DLCK" in little-endian bytes
inline constexpr uint16_t kVersion = 1;
inline constexpr uint32_t kMaxPayload = 16u << 20;
inline constexpr size_t kHeaderBytes = 16;
inline constexpr size_t kMaxString = 1u << 16;

enum class MsgType : uint16_t {
  kHello = 1,
  kHelloOk = 2,
  kEncode = 3,
  kDone = 4,
  kSurvey = 5,
  kSurveyReply = 6,
  kRecover = 7,
  kStatus = 8,
  kStatusReply = 9,
  kShutdown = 10,
  kError = 11,
};
const char* MsgTypeName(MsgType t);

// ---- payload encoding ------------------------------------------------------

class Writer {
 public:
  void U8(uint8_t v) { buf_.push_back(static_cast<char>(v)); }
  void U32(uint32_t v);
  void U64(uint64_t v);
  void I32(int32_t v) { U32(static_cast<uint32_t>(v)); }
  void I64(int64_t v) { U64(static_cast<uint64_t>(v)); }
  void F64(double v);
  void Str(std::string_view s);
  const std::string& data() const { return buf_; }
  std::string Take() { return std::move(buf_); }

 private:
  std::string buf_;
};

// Reads a payload; every accessor fails (EBADMSG) past the end. `what`
// names the message in errors.
class Reader {
 public:
  Reader(std::string_view data, std::string what) : data_(data), what_(std::move(what)) {}
  Status U8(uint8_t* v);
  Status U32(uint32_t* v);
  Status U64(uint64_t* v);
  Status I32(int32_t* v);
  Status I64(int64_t* v);
  Status F64(double* v);
  Status Str(std::string* s);
  // A list count, checked against the bytes left (each element >= min_bytes).
  Status Count(uint32_t* n, size_t min_bytes);
  // Fails unless every byte was consumed.
  Status End() const;

 private:
  Status Need(size_t n) const;
  // A little-endian integer of sizeof(T) bytes.
  template <class T>
  Status Fixed(T* v);
  std::string_view data_;
  size_t pos_ = 0;
  std::string what_;
};

// ---- messages ----------------------------------------------------------------

struct RankEntry {
  int32_t rank = 0;
  std::string node;
  std::string store;  // shared memory name of the rank's store
};

enum class Role : uint8_t { kApplication = 1, kSupervisor = 2 };

struct Hello {
  std::string token;
  Role role = Role::kApplication;
  std::string job;
  std::vector<RankEntry> layout;  // empty for the supervisor
};

struct Encode {
  uint64_t epoch = 0;
  // The epoch whose parity must survive this encode (the acknowledged one;
  // 0: none). The spares write the new parity into the other slot, so a
  // failure while encoding, or an encode that fails in some group, never
  // costs the acknowledged checkpoint its parity.
  uint64_t keep = 0;
};

struct Done {
  uint64_t epoch = 0;
  int32_t code = 0;  // errno value; 0 = success
  std::string message;
  double seconds = 0;   // wall time of the operation in the service
  uint64_t bytes = 0;   // data bytes encoded or rebuilt
};

// One store found on a node.
struct StoreReport {
  std::string name;
  std::string job;
  int32_t rank = -1;
  uint64_t acked = 0;    // acknowledged epoch, 0 = none
  uint64_t pending = 0;  // pending epoch, 0 = none
  std::string error;     // non-empty: the store is damaged (and unusable)
  bool acked_ok = true;    // the acknowledged epoch passed verification
  bool pending_ok = true;  // the pending epoch passed verification
  std::string damage;      // why an epoch failed verification; "" when none did
};

// One member of an encoded group, as recorded in the parity.
struct MemberRecord {
  std::string node;            // node at encode time
  std::vector<int32_t> ranks;  // its stores, in image order
  std::vector<uint64_t> sizes; // image size of each store
};

// One parity object found on a spare node.
struct ParityReport {
  std::string name;
  uint32_t group = 0;
  uint32_t index = 0;     // which parity: 0..k-1 (spares), the holding member (spread)
  uint32_t k = 0;
  uint32_t ngroups = 0;   // groups in this encoding (all groups' parity = DONE)
  uint8_t scheme = 0;     // 0 = xor, 1 = Reed-Solomon
  uint8_t layout = 0;     // ParityLayout (dlckpt/control/stripes.h): 0 spares, 1 spread
  uint64_t epoch = 0;
  uint64_t generation = 0;  // distinguishes encodings of one epoch
  bool complete = false;
  std::vector<MemberRecord> members;
};

struct NodeReport {
  std::string node;
  std::vector<StoreReport> stores;
  std::vector<ParityReport> parities;
  // Parity objects left out of `parities`, and why (a damaged header, bytes
  // that fail their checksums, an object that is not this uid's).
  std::vector<std::string> parity_damage;
};

struct SurveyReply {
  std::vector<NodeReport> nodes;
};

// What a recovery does, decided once by dlckpt-run from its survey (see
// dlckpt/control/recovery.h): every surviving store is restored to `epoch`;
// every lost member of a group is rebuilt on `target_node` from the parity of
// `epoch` (generation `generation`).
struct RebuildTask {
  uint32_t group = 0;
  uint32_t member = 0;       // index in the group's member list
  std::string target_node;
};

// A group with members to rebuild, as the surviving parity recorded it, and
// which node gives each chunk of its stripes to the rebuild (stripes.h).
// Spares layout, one stripe: sources[i] for data member i (0..n-1),
// sources[n + j] for parity j. Spread layout, n stripes of n chunks:
// sources[s * n + c] for chunk c of stripe s (data chunks 0..n-k-1, then
// parity). "" for a chunk that is lost or not used. Every stripe with a
// chunk to rebuild has enough. A node may give several chunks of one stripe
// only when that stripe rebuilds one chunk: it then sends their combination,
// computed locally, as one source (codec RebuildSpec); the codec refuses a
// node named twice in a stripe that rebuilds more.
struct RebuildGroup {
  uint32_t group = 0;
  uint8_t scheme = 0;  // 0 = xor, 1 = Reed-Solomon
  uint32_t k = 0;
  uint8_t layout = 0;  // ParityLayout: 0 spares, 1 spread
  std::vector<MemberRecord> members;
  std::vector<std::string> sources;
};

struct Recover {
  uint64_t epoch = 0;
  uint64_t generation = 0;
  std::vector<RebuildTask> rebuilds;
  std::vector<std::string> lost_nodes;
  std::vector<RebuildGroup> groups;  // every group named by `rebuilds`
};

struct StatusReply {
  std::string text;
};

struct ErrorMsg {
  int32_t code = 0;
  std::string message;
};

// Pieces shared by messages and by the parity objects' self-describing
// headers (codec/src/parity.cc).
void PutMember(Writer& w, const MemberRecord& m);
Status GetMember(Reader& r, MemberRecord* m);
// The parity's identity and group, without its name.
void PutParity(Writer& w, const ParityReport& p);
Status GetParity(Reader& r, ParityReport* p);

std::string EncodeHello(const Hello& m);
std::string EncodeEncode(const Encode& m);
std::string EncodeDone(const Done& m);
std::string EncodeSurveyReply(const SurveyReply& m);
std::string EncodeRecover(const Recover& m);
std::string EncodeStatusReply(const StatusReply& m);
std::string EncodeError(const ErrorMsg& m);

Result<Hello> DecodeHello(std::string_view payload);
Result<Encode> DecodeEncode(std::string_view payload);
Result<Done> DecodeDone(std::string_view payload);
Result<SurveyReply> DecodeSurveyReply(std::string_view payload);
Result<Recover> DecodeRecover(std::string_view payload);
Result<StatusReply> DecodeStatusReply(std::string_view payload);
Result<ErrorMsg> DecodeError(std::string_view payload);

// ---- frames ----------------------------------------------------------------

struct Frame {
  MsgType type = MsgType::kError;
  std::string payload;
};

// Header + payload bytes of one frame.
std::string EncodeFrame(MsgType type, std::string_view payload);

// Parses a frame header. On success returns the payload length to read next.
Result<uint32_t> ParseHeader(const uint8_t (&header)[kHeaderBytes], MsgType* type, uint32_t* crc);
// Checks a payload against its header's CRC.
Status CheckPayload(std::string_view payload, uint32_t crc);
// Parses one whole frame from bytes (header + payload, nothing more): the
// entry point of the fuzz target and of tests.
Result<Frame> ParseFrame(std::string_view bytes);
// Decodes the payload of any known message type completely (used to reject
// malformed messages before acting on them).
Status ValidatePayload(const Frame& frame);

// ---- connections -----------------------------------------------------------

// A connected TCP stream. Owns the descriptor. Sends and receives whole
// frames; waiting blocks in poll(2) (never spins). Errors name the peer.
class Connection final {
 public:
  explicit Connection(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  static Result<std::unique_ptr<Connection>> Connect(const std::string& host, int port,
                                                     int timeout_ms);

  Status Send(MsgType type, std::string_view payload);
  // Waits up to timeout_ms (-1: forever) for a whole frame. ETIMEDOUT when no
  // frame arrived, ECONNRESET when the peer closed.
  Result<Frame> Receive(int timeout_ms);
  // Sends a request and waits for its reply; an ERROR reply becomes a Status.
  Result<Frame> Call(MsgType type, std::string_view payload, int timeout_ms);

  int fd() const { return fd_; }
  const std::string& peer() const { return peer_; }

 private:
  Status ReadFully(uint8_t* buf, size_t n, int timeout_ms, bool* got_any);
  int fd_;
  std::string peer_;
};

// The address a service that publishes `host` (a numeric address, as in
// the rendezvous) listens on: `host` itself when it is a loopback address
// (127.0.0.0/8, ::1: every client is on this machine), else "" (all
// interfaces: clients on other hosts reach it by any of this host's addresses).
std::string ListenAddressFor(std::string_view host);

// A listening TCP socket (port 0: any free port) on `address` (numeric IPv4
// or IPv6), or on all interfaces when `address` is empty.
class Listener final {
 public:
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  // `backlog`: connections the kernel queues before they are accepted.
  static Result<std::unique_ptr<Listener>> Listen(int port, const std::string& address = "", int backlog = 64);
  int port() const { return port_; }
  int fd() const { return fd_; }
  // Accepts one pending connection (the caller polled fd() first).
  Result<std::unique_ptr<Connection>> Accept();

 private:
  Listener(int fd, int port) : fd_(fd), port_(port) {}
  int fd_;
  int port_;
};

// ---- rendezvous --------------------------------------------------------------

// What the service publishes for its clients: where to connect and the
// secret token that proves a client belongs to the job.
struct Rendezvous {
  std::string host;
  int port = 0;
  std::string token;
  std::string job;
};

// A fresh random token (64 hex digits from getrandom).
Result<std::string> NewToken();
// Writes the rendezvous file atomically with mode 0600.
Status WriteRendezvous(const std::string& path, const Rendezvous& r);
// Reads it, waiting up to timeout_ms for it to appear (the service may start
// after its clients). ENOENT/ETIMEDOUT with the path when it never does;
// EBADMSG when it is malformed; EACCES when its mode lets others read it.
Result<Rendezvous> ReadRendezvous(const std::string& path, int timeout_ms);

}  // namespace dlckpt::control::protocol

#endif  // DLCKPT_CODEC_PROTOCOL_H_

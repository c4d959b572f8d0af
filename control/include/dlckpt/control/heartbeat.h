// dlckpt/control/heartbeat.h — node failure detection by heartbeats.
//
// Hydra notices a node whose processes die with its link up (a crash), never a
// node whose link goes first (a power-off): dlckpt detects both with its own
// heartbeats. Every node's codec process runs a Sender that sends a small
// authenticated UDP datagram every `period` to the Monitor inside dlckpt-run;
// the Monitor suspects every expected node it has not heard from for longer
// than `timeout`. The Monitor's poll-style API never blocks, for the
// supervisor's 10 ms Tick().
//
// Topology: a star (every node -> dlckpt-run), not the thesis' ring (§5.3):
// at 10,000 nodes and the default 200 ms period the head receives 50,000
// datagrams/s of about 100 bytes on the wire (5 MB/s, 40 Mbit/s) and its
// receiver thread spends under 2 µs of CPU on each (0.09 of a core, measured
// by `dlckpt-heartbeat bench`; tests/vhost/README.md). The star needs no ring
// repair after failures, sees adjacent failures (which the thesis' ring
// cannot), and the supervisor, which must act on a failure, sees it first-hand.
//
// Datagram (little-endian):
//   magic "DLHB" u32 | version u16 | 0 u16 | generation u64 | incarnation u64 |
//   seq u64 | job length u8 | job | node length u8 | node | tag u64
// The tag is SipHash-2-4 of every byte before it, keyed with the job's
// 256-bit heartbeat key (64 hex digits, e.g. protocol::NewToken()) folded to
// SipHash's 128 bits. The Monitor accepts a datagram only if it is well
// formed, its tag verifies, its job is the monitor's job, its generation is
// the current one, its node is expected, and its (incarnation, seq) is newer
// than the last accepted one of that node: replays and reordered datagrams
// are ignored. Everything else is counted (Monitor::Stats) and dropped.
//
// Threat model. Stopped: accidental confusion between jobs or generations
// (another job's or an earlier codec launch's heartbeats aimed at this port),
// stray and corrupted datagrams, and forgery by other local users: without the
// key nobody can make a dead node look alive (which would stall recovery) or
// inject heartbeats for it. The key must therefore travel only in 0600 files
// or in the environment of the job's processes (/proc/PID/environ is readable
// by the same user and root only), never on a command line (visible to every
// user in ps). Not stopped: root or the job's own user on any node (they can
// read the key), denial of service (a flood of datagrams, or a network that
// drops or delays heartbeats, makes nodes look dead: a false suspicion, which
// the supervisor turns into a fenced and recovered node), and eavesdropping
// (heartbeats are not secret). A blind forgery of the 64-bit tag succeeds
// with probability 2^-64 per datagram.
//
// Thread safety: Sender and Monitor are thread-safe; each owns one background
// thread that its destructor stops and joins. Errors are Status values naming
// the address, the node or the option; nothing aborts or throws at runtime.
#ifndef DLCKPT_CODEC_HEARTBEAT_H_
#define DLCKPT_CODEC_HEARTBEAT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlckpt/base/status.h"

namespace dlckpt::control::heartbeat {

inline constexpr int kDefaultPeriodMs = 200;
inline constexpr int kDefaultTimeoutMs = 1500;
inline constexpr int kDefaultStartupTimeoutMs = 10000;
inline constexpr size_t kMaxNameBytes = 255;  // job and node names
inline constexpr size_t kMaxDatagramBytes = 4 + 2 + 2 + 8 + 8 + 8 + 1 + kMaxNameBytes + 1 +
                                            kMaxNameBytes + 8;

// Environment of the codec processes (see SenderOptionsFromEnv):
inline constexpr char kEnvAddress[] = "DLCKPT_HEARTBEAT";         // monitor "HOST:PORT"
inline constexpr char kEnvKey[] = "DLCKPT_HEARTBEAT_KEY";         // 64 hex digits
inline constexpr char kEnvPeriod[] = "DLCKPT_HEARTBEAT_PERIOD_MS";  // optional

// The authentication key: SipHash-2-4's 128-bit key, folded from 256 bits.
struct Key {
  uint64_t k0 = 0, k1 = 0;
};
// 64 hex digits (either case) -> Key; EINVAL otherwise (the message never
// repeats the text, which may be a secret).
Result<Key> ParseKey(std::string_view hex);

// SipHash-2-4 (Aumasson and Bernstein, 2012) of `data` under (k0, k1).
uint64_t SipHash24(uint64_t k0, uint64_t k1, std::string_view data);

// One heartbeat.
struct Beat {
  std::string job;
  std::string node;
  uint64_t generation = 0;   // the codec launch it belongs to
  uint64_t incarnation = 0;  // the sender's start time (wall ns): orders restarts
  uint64_t seq = 0;          // per incarnation, from 1
};

// The datagram for `beat`; EINVAL if the job or node name is empty, longer
// than kMaxNameBytes, or holds bytes outside '!'..'~'.
Result<std::string> EncodeBeat(const Key& key, const Beat& beat);

// Why a datagram was rejected (DecodeBeat's error codes).
//   EBADMSG: malformed (size, magic, version, lengths, names);
//   EACCES:  well formed but the tag does not verify.
Result<Beat> DecodeBeat(const Key& key, std::string_view datagram);

// "HOST:PORT" or "[V6ADDR]:PORT" -> host and port (1..65535).
Status ParseAddress(std::string_view text, std::string* host, uint16_t* port);

// The address of this machine that `peer_host` (a name or numeric address)
// reaches it at, as routing sees it (a UDP connect(), nothing sent): what the
// monitor should advertise to nodes, e.g. the head's bridge address for
// virtual hosts. The resolver's or socket's error naming the peer otherwise.
Result<std::string> LocalAddressToward(const std::string& peer_host);

// ---- Sender ---------------------------------------------------------------------

struct SenderOptions {
  std::string monitor_host;  // numeric address or name of the head node
  uint16_t monitor_port = 0;
  std::string key_hex;       // 64 hex digits
  std::string job;
  std::string node;          // node identity: the host name (or DLCKPT_NODE)
  uint64_t generation = 0;
  int period_ms = kDefaultPeriodMs;  // 1..60000
};

// Sender options from the environment of a codec process: the monitor's
// address from DLCKPT_HEARTBEAT, the key from DLCKPT_HEARTBEAT_KEY, the period
// from DLCKPT_HEARTBEAT_PERIOD_MS if set. ENOENT if DLCKPT_HEARTBEAT is unset
// or empty (heartbeats not wanted); EINVAL if a variable is malformed or the
// key is missing.
Result<SenderOptions> SenderOptionsFromEnv(std::string job, std::string node, uint64_t generation);

// Sends heartbeats from a background thread. Start() sends the first one at
// once, then one every period (scheduled on the monotonic clock, so a late
// wake-up does not shift later beats). A failing send (no route, link down)
// is counted and retried at the next period; it never stops the thread.
class Sender final {
 public:
  // Resolves the monitor's address and opens the socket (close-on-exec);
  // the thread starts with Start(). EINVAL for bad options, the resolver's
  // or socket's error naming the address otherwise.
  static Result<std::unique_ptr<Sender>> Create(SenderOptions options);
  ~Sender();  // Stop()
  Sender(const Sender&) = delete;
  Sender& operator=(const Sender&) = delete;

  // Starts the thread; no-op if running. Sequence numbers continue after a
  // Stop(). Fails only if the thread cannot be created.
  Status Start();
  // Stops and joins the thread; no-op if not running. Returns within one
  // wake-up (it never waits out the period).
  void Stop();

  struct Stats {
    uint64_t sent = 0;         // datagrams handed to the kernel
    uint64_t send_errors = 0;  // failed sendto() calls
    int last_errno = 0;        // errno of the last failure, 0 if none
  };
  Stats stats() const;
  const SenderOptions& options() const { return options_; }
  std::string monitor_address() const;  // "ADDR:PORT" as resolved

 private:
  struct Impl;
  Sender(SenderOptions options, std::unique_ptr<Impl> impl);
  SenderOptions options_;
  std::unique_ptr<Impl> impl_;
};

// ---- Monitor --------------------------------------------------------------------

struct MonitorOptions {
  std::string bind_host = "0.0.0.0";  // numeric address to bind ("::" for IPv6)
  uint16_t port = 0;                  // 0: any free port (see Monitor::port())
  std::string key_hex;
  std::string job;
  // A node heard in this generation is suspected once silent for longer than
  // timeout_ms (100..600000). One never heard since Expect() gets
  // startup_timeout_ms (>= timeout_ms): the codec job needs time to launch.
  int timeout_ms = kDefaultTimeoutMs;
  int startup_timeout_ms = kDefaultStartupTimeoutMs;
};

// Receives heartbeats on a background thread (woken by the socket, never
// polling) and keeps, per expected node, the last time it was heard on the
// monotonic clock (CLOCK_MONOTONIC nanoseconds, as Env::NowNanos()). Queries
// never block on the network; they take the monitor's mutex briefly.
class Monitor final {
 public:
  // Binds the UDP socket (with a large receive buffer) and starts the
  // thread. EINVAL for bad options; the bind error naming the address.
  static Result<std::unique_ptr<Monitor>> Create(MonitorOptions options);
  ~Monitor();  // stops and joins the thread, closes the socket
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;

  uint16_t port() const { return port_; }
  const MonitorOptions& options() const { return options_; }

  // Replaces the expected nodes: from now on only heartbeats of `generation`
  // from `nodes` count, and each node's silence is measured from `now_ns`
  // until its first heartbeat. Call it before launching the codec job of
  // that generation. With the current generation, nodes already expected
  // keep their state (e.g. to stop watching a node declared dead).
  // Duplicate names count once.
  void Expect(uint64_t generation, const std::vector<std::string>& nodes, int64_t now_ns);

  // Expected nodes silent for longer than their timeout at `now_ns`, sorted.
  // No side effects: a suspect that is heard again leaves the set (the
  // supervisor should fence a node on its first suspicion regardless).
  std::vector<std::string> Suspects(int64_t now_ns) const;

  struct NodeState {
    std::string node;
    bool heard = false;         // heard in the current generation
    int64_t last_heard_ns = 0;  // arrival of the last accepted beat (or the Expect() time)
    uint64_t beats = 0;         // accepted in the current generation
    uint64_t last_seq = 0;
  };
  // The state of `node`, if expected.
  std::optional<NodeState> Node(const std::string& node) const;
  // Every expected node, sorted by name.
  std::vector<NodeState> Nodes() const;
  uint64_t generation() const;

  struct Stats {
    uint64_t received = 0;       // datagrams read from the socket
    uint64_t accepted = 0;
    uint64_t malformed = 0;
    uint64_t unauthenticated = 0;
    uint64_t wrong_job = 0;
    uint64_t wrong_generation = 0;  // older (stale) or not yet expected
    uint64_t unknown_node = 0;
    uint64_t replayed = 0;       // not newer than the node's last accepted beat
    uint64_t receive_errors = 0;
    int64_t receiver_cpu_ns = 0;  // CPU time of the receiver thread so far
  };
  Stats stats() const;

 private:
  struct Impl;
  Monitor(MonitorOptions options, uint16_t port, std::unique_ptr<Impl> impl);
  MonitorOptions options_;
  uint16_t port_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dlckpt::control::heartbeat

#endif  // DLCKPT_CODEC_HEARTBEAT_H_

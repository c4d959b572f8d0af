// dlckpt-heartbeat: the heartbeat failure detector from the command line —
// a sender (as a node's codec process would run it), a monitor (as dlckpt-run
// would run it, printing each suspicion with its timing), a key generator and
// a benchmark of the star topology. Used by tests/vhost/heartbeat_test.sh.
#include <signal.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dlckpt/base/cli.h"
#include "dlckpt/base/env.h"
#include "dlckpt/base/node.h"
#include "dlckpt/base/version.h"
#include "dlckpt/control/heartbeat.h"

namespace hb = dlckpt::control::heartbeat;
using dlckpt::Env;
using dlckpt::Result;
using dlckpt::Status;

namespace {

const char kUsage[] =
    "Usage: dlckpt-heartbeat COMMAND [OPTIONS]\n"
    "Node failure detection by authenticated UDP heartbeats (see dlckpt/control/heartbeat.h).\n"
    "\n"
    "  key                       print a new random key (64 hex digits)\n"
    "  send    --job J --generation G [--node N] [--to HOST:PORT] [--key-file F]\n"
    "          [--period-ms P] [--seconds S]\n"
    "          send heartbeats until SIGTERM/SIGINT (or S seconds). The node defaults to\n"
    "          $DLCKPT_NODE, else the host name; the address and the key to $DLCKPT_HEARTBEAT\n"
    "          and $DLCKPT_HEARTBEAT_KEY (and the period to $DLCKPT_HEARTBEAT_PERIOD_MS)\n"
    "  monitor --job J --nodes A,B,... [--generation G] [--key-file F] [--bind ADDR]\n"
    "          [--port P] [--port-file F] [--timeout-ms T] [--startup-timeout-ms T]\n"
    "          [--seconds S]\n"
    "          watch the nodes every 10 ms until SIGTERM/SIGINT (or S seconds); prints\n"
    "            listening ADDR:PORT\n"
    "            heard NODE at WALL                     (first heartbeat)\n"
    "            suspect NODE at WALL last_heard WALL silent_ms MS\n"
    "            alive NODE at WALL                     (heard again after a suspicion)\n"
    "            stats received N accepted N ...        (at exit)\n"
    "          WALL: seconds since the epoch (as date +%s.%N). The key comes from the\n"
    "          key file or $DLCKPT_HEARTBEAT_KEY; --port-file receives the port.\n"
    "  bench   [--nodes N] [--period-ms P] [--timeout-ms T] [--seconds S] [--threads K]\n"
    "          N simulated nodes (default 10000) send to one monitor on 127.0.0.1 from K\n"
    "          threads (default 2) for S seconds (default 5): the monitor's CPU and losses\n"
    "\n"
    "Key files must not be readable by group or others (mode 0600). Exit status: 0, 1 on\n"
    "errors, 2 on bad usage.\n";

int Usage(const std::string& msg) {
  std::fprintf(stderr, "dlckpt-heartbeat: %s (try --help)\n", msg.c_str());
  return 2;
}

int Fail(const Status& s) {
  std::fprintf(stderr, "dlckpt-heartbeat: %s\n", s.ToString().c_str());
  return 1;
}

double WallSeconds() { return static_cast<double>(Env::Default()->WallNanos()) / 1e9; }
int64_t Mono() { return Env::Default()->NowNanos(); }

// A command's options ("--name VALUE"), by name without the dashes.
struct Args {
  std::map<std::string, std::string> kv;
  std::string Get(const std::string& k, const std::string& def = "") const {
    auto it = kv.find(k);
    return it == kv.end() ? def : it->second;
  }
  bool Has(const std::string& k) const { return kv.count(k) != 0; }
};

// Declares `names` as the options of `command`, each kept in `out` when given.
void AddOptions(CLI::App* command, std::initializer_list<const char*> names, Args* out) {
  for (const char* name : names) {
    const std::string key = name;
    command->add_option_function<std::string>("--" + key, [out, key](const std::string& v) { out->kv[key] = v; });
  }
}

Status ToLong(const Args& a, const std::string& k, long lo, long hi, long def, long* out) {
  if (!a.Has(k)) {
    *out = def;
    return Status::OK();
  }
  std::string v = a.Get(k);
  char* end = nullptr;
  errno = 0;
  long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || errno || *end || x < lo || x > hi) {
    return Status::InvalidArgument("--" + k + " " + v + ": want an integer in " + std::to_string(lo) + ".." +
                                   std::to_string(hi));
  }
  *out = x;
  return Status::OK();
}

Result<std::string> LoadKey(const Args& a) {
  if (!a.Has("key-file")) {
    const char* env = std::getenv(hb::kEnvKey);
    if (env == nullptr || *env == '\0') {
      return Status::InvalidArgument(std::string("no key: give --key-file or set ") + hb::kEnvKey);
    }
    return std::string(env);
  }
  std::string path = a.Get("key-file");
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return Status::FromErrno(errno, "key file " + path);
  if (st.st_mode & 077) {
    return Status::Error(EACCES, "key file " + path + " is readable by group or others; chmod 600 it");
  }
  DLCKPT_ASSIGN_OR_RETURN(std::string text, Env::Default()->ReadFile(path));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r')) text.pop_back();
  return text;
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

// SIGINT/SIGTERM are blocked in every thread and taken synchronously.
sigset_t BlockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

// Sleeps up to `ms`; true if a stop signal arrived.
bool WaitStop(const sigset_t& set, int64_t ms) {
  struct timespec ts{static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1000000};
  for (;;) {
    int sig = sigtimedwait(&set, nullptr, &ts);
    if (sig > 0) return true;
    if (errno == EINTR) continue;
    return false;  // EAGAIN: the time is up
  }
}

int CmdKey() {
  unsigned char raw[32];
  if (getrandom(raw, sizeof raw, 0) != static_cast<ssize_t>(sizeof raw)) {
    return Fail(Status::FromErrno(errno, "getrandom"));
  }
  for (unsigned char b : raw) std::printf("%02x", b);
  std::printf("\n");
  return 0;
}

int CmdSend(const Args& a) {
  sigset_t stop = BlockStopSignals();
  Status s;
  if (!a.Has("job") || !a.Has("generation")) return Usage("send: --job and --generation are required");
  long gen = 0, seconds = 0;
  if (!(s = ToLong(a, "generation", 0, 1L << 62, 0, &gen)).ok()) return Usage(s.message());
  if (!(s = ToLong(a, "seconds", 0, 86400 * 365, 0, &seconds)).ok()) return Usage(s.message());
  std::string node = a.Get("node");
  if (node.empty()) node = dlckpt::ThisNode();
  hb::SenderOptions o;
  if (a.Has("to")) {
    if (!(s = hb::ParseAddress(a.Get("to"), &o.monitor_host, &o.monitor_port)).ok()) return Usage(s.message());
    auto key = LoadKey(a);
    if (!key.ok()) return Fail(key.status());
    o.key_hex = *key;
    o.job = a.Get("job");
    o.node = node;
    o.generation = static_cast<uint64_t>(gen);
    if (const char* p = std::getenv(hb::kEnvPeriod)) o.period_ms = std::atoi(p);
  } else {
    auto env = hb::SenderOptionsFromEnv(a.Get("job"), node, static_cast<uint64_t>(gen));
    if (!env.ok()) return Fail(env.status().Prefixed("send (no --to)"));
    o = std::move(*env);
    if (a.Has("key-file")) {
      auto key = LoadKey(a);
      if (!key.ok()) return Fail(key.status());
      o.key_hex = *key;
    }
  }
  long period = 0;
  if (!(s = ToLong(a, "period-ms", 1, 60000, o.period_ms, &period)).ok()) return Usage(s.message());
  o.period_ms = static_cast<int>(period);
  auto sender = hb::Sender::Create(o);
  if (!sender.ok()) return Fail(sender.status());
  if (!(s = (*sender)->Start()).ok()) return Fail(s);
  std::printf("sending node %s job %s generation %ld to %s every %d ms\n", o.node.c_str(), o.job.c_str(), gen,
              (*sender)->monitor_address().c_str(), o.period_ms);
  std::fflush(stdout);
  WaitStop(stop, seconds > 0 ? seconds * 1000 : INT64_MAX / 2000000);
  (*sender)->Stop();
  auto st = (*sender)->stats();
  std::printf("sent %" PRIu64 " errors %" PRIu64 "%s%s\n", st.sent, st.send_errors,
              st.last_errno ? " last " : "", st.last_errno ? std::strerror(st.last_errno) : "");
  return 0;
}

void PrintStats(const hb::Monitor::Stats& s) {
  std::printf("stats received %" PRIu64 " accepted %" PRIu64 " malformed %" PRIu64 " unauthenticated %" PRIu64
              " wrong_job %" PRIu64 " wrong_generation %" PRIu64 " unknown_node %" PRIu64 " replayed %" PRIu64
              " receive_errors %" PRIu64 " receiver_cpu_ms %.1f\n",
              s.received, s.accepted, s.malformed, s.unauthenticated, s.wrong_job, s.wrong_generation,
              s.unknown_node, s.replayed, s.receive_errors, static_cast<double>(s.receiver_cpu_ns) / 1e6);
}

int CmdMonitor(const Args& a) {
  sigset_t stop = BlockStopSignals();
  Status s;
  if (!a.Has("job") || !a.Has("nodes")) return Usage("monitor: --job and --nodes are required");
  long gen = 0, port = 0, timeout = 0, startup = 0, seconds = 0;
  if (!(s = ToLong(a, "generation", 0, 1L << 62, 1, &gen)).ok() ||
      !(s = ToLong(a, "port", 0, 65535, 0, &port)).ok() ||
      !(s = ToLong(a, "timeout-ms", 10, 600000, hb::kDefaultTimeoutMs, &timeout)).ok() ||
      !(s = ToLong(a, "startup-timeout-ms", 10, 3600000, std::max<long>(timeout, hb::kDefaultStartupTimeoutMs),
                   &startup)).ok() ||
      !(s = ToLong(a, "seconds", 0, 86400 * 365, 0, &seconds)).ok()) {
    return Usage(s.message());
  }
  std::vector<std::string> nodes = Split(a.Get("nodes"));
  if (nodes.empty()) return Usage("monitor: --nodes lists no node");
  auto key = LoadKey(a);
  if (!key.ok()) return Fail(key.status());
  hb::MonitorOptions o;
  o.bind_host = a.Get("bind", "0.0.0.0");
  o.port = static_cast<uint16_t>(port);
  o.key_hex = *key;
  o.job = a.Get("job");
  o.timeout_ms = static_cast<int>(timeout);
  o.startup_timeout_ms = static_cast<int>(startup);
  auto m = hb::Monitor::Create(o);
  if (!m.ok()) return Fail(m.status());
  hb::Monitor& mon = **m;
  mon.Expect(static_cast<uint64_t>(gen), nodes, Mono());
  std::printf("listening %s:%u job %s generation %ld nodes %zu timeout_ms %ld startup_timeout_ms %ld\n",
              o.bind_host.c_str(), mon.port(), o.job.c_str(), gen, nodes.size(), timeout, startup);
  std::fflush(stdout);
  if (a.Has("port-file")) {
    s = Env::Default()->WriteFileAtomic(a.Get("port-file"), std::to_string(mon.port()) + "\n", 0644);
    if (!s.ok()) return Fail(s);
  }
  // The supervisor's loop: poll every 10 ms.
  std::set<std::string> heard, suspected;
  int64_t end = seconds > 0 ? Mono() + seconds * 1000000000LL : INT64_MAX;
  auto to_wall = [](int64_t mono_ns, int64_t now_mono, double now_wall) {
    return now_wall - static_cast<double>(now_mono - mono_ns) / 1e9;
  };
  while (Mono() < end) {
    if (WaitStop(stop, 10)) break;
    int64_t now = Mono();
    double wall = WallSeconds();
    for (const auto& n : mon.Nodes()) {
      if (n.heard && !heard.count(n.node)) {
        heard.insert(n.node);
        std::printf("heard %s at %.6f\n", n.node.c_str(), to_wall(n.last_heard_ns, now, wall));
      }
      if (suspected.count(n.node) && n.heard && now - n.last_heard_ns <= o.timeout_ms * 1000000LL) {
        suspected.erase(n.node);
        std::printf("alive %s at %.6f\n", n.node.c_str(), wall);
      }
    }
    for (const auto& n : mon.Suspects(now)) {
      if (suspected.insert(n).second) {
        auto st = mon.Node(n);
        std::printf("suspect %s at %.6f last_heard %.6f silent_ms %.1f%s\n", n.c_str(), wall,
                    to_wall(st->last_heard_ns, now, wall), static_cast<double>(now - st->last_heard_ns) / 1e6,
                    st->heard ? "" : " never_heard");
      }
    }
    std::fflush(stdout);
  }
  PrintStats(mon.stats());
  return 0;
}

// ---- bench ----------------------------------------------------------------------------

int CmdBench(const Args& a) {
  Status s;
  long nodes = 0, period = 0, timeout = 0, seconds = 0, threads = 0;
  if (!(s = ToLong(a, "nodes", 1, 1000000, 10000, &nodes)).ok() ||
      !(s = ToLong(a, "period-ms", 10, 60000, hb::kDefaultPeriodMs, &period)).ok() ||
      !(s = ToLong(a, "timeout-ms", 10, 600000, hb::kDefaultTimeoutMs, &timeout)).ok() ||
      !(s = ToLong(a, "seconds", 1, 3600, 5, &seconds)).ok() ||
      !(s = ToLong(a, "threads", 1, 64, 2, &threads)).ok()) {
    return Usage(s.message());
  }
  char keyhex[65];
  unsigned char raw[32];
  if (getrandom(raw, sizeof raw, 0) != static_cast<ssize_t>(sizeof raw)) {
    return Fail(Status::FromErrno(errno, "getrandom"));
  }
  for (int i = 0; i < 32; ++i) std::snprintf(keyhex + 2 * i, 3, "%02x", raw[i]);
  hb::MonitorOptions mo;
  mo.bind_host = "127.0.0.1";
  mo.key_hex = keyhex;
  mo.job = "bench";
  mo.timeout_ms = static_cast<int>(timeout);
  mo.startup_timeout_ms = std::max<int>(static_cast<int>(timeout), hb::kDefaultStartupTimeoutMs);
  auto m = hb::Monitor::Create(mo);
  if (!m.ok()) return Fail(m.status());
  hb::Monitor& mon = **m;
  std::vector<std::string> names;
  for (long i = 0; i < nodes; ++i) names.push_back("node" + std::to_string(i));
  mon.Expect(1, names, Mono());
  hb::Key key = *hb::ParseKey(keyhex);

  // Fleet: thread t sends for nodes t, t+K, ...; node j's phase in the period is
  // j/N of it; each thread wakes every 5 ms and sends what is due (sendmmsg).
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> offered{0}, send_errors{0};
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(mon.port());
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int64_t period_ns = period * 1000000;
  int64_t t0 = Mono();
  std::vector<std::thread> fleet;
  for (long t = 0; t < threads; ++t) {
    fleet.emplace_back([&, t] {
      int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      if (fd < 0) return;
      std::vector<long> mine;
      for (long j = t; j < nodes; j += threads) mine.push_back(j);
      std::vector<uint64_t> seq(mine.size(), 0);
      uint64_t incarnation = static_cast<uint64_t>(Env::Default()->WallNanos());
      size_t next = 0;          // index into mine of the next beat due
      int64_t round_start = t0;  // start of the current period
      std::vector<std::string> dgrams;
      std::vector<mmsghdr> msgs;
      std::vector<iovec> iovs;
      while (!stop.load(std::memory_order_relaxed)) {
        int64_t now = Mono();
        dgrams.clear();
        for (;;) {
          if (next == mine.size()) {
            next = 0;
            round_start += period_ns;
          }
          int64_t due = round_start + period_ns * mine[next] / nodes;
          if (due > now) break;
          hb::Beat b;
          b.job = "bench";
          b.node = names[mine[next]];
          b.generation = 1;
          b.incarnation = incarnation;
          b.seq = ++seq[next];
          dgrams.push_back(*hb::EncodeBeat(key, b));
          ++next;
        }
        for (size_t i = 0; i < dgrams.size(); i += 256) {
          size_t n = std::min<size_t>(256, dgrams.size() - i);
          msgs.assign(n, mmsghdr{});
          iovs.resize(n);
          for (size_t k = 0; k < n; ++k) {
            iovs[k] = {dgrams[i + k].data(), dgrams[i + k].size()};
            msgs[k].msg_hdr.msg_name = &to;
            msgs[k].msg_hdr.msg_namelen = sizeof to;
            msgs[k].msg_hdr.msg_iov = &iovs[k];
            msgs[k].msg_hdr.msg_iovlen = 1;
          }
          int sent = sendmmsg(fd, msgs.data(), static_cast<unsigned>(n), 0);
          if (sent < 0) {
            send_errors += n;
          } else {
            offered += static_cast<uint64_t>(sent);
            send_errors += n - static_cast<size_t>(sent);
          }
        }
        struct timespec ts{0, 5 * 1000 * 1000};
        nanosleep(&ts, nullptr);
      }
      close(fd);
    });
  }
  // The supervisor side: Suspects() every 10 ms; count false suspicions and its cost.
  int64_t end = t0 + seconds * 1000000000LL;
  uint64_t polls = 0, false_suspicions = 0;
  int64_t poll_ns = 0;
  std::set<std::string> suspected;
  auto cpu0 = mon.stats().receiver_cpu_ns;
  while (Mono() < end) {
    struct timespec ts{0, 10 * 1000 * 1000};
    nanosleep(&ts, nullptr);
    int64_t a0 = Mono();
    auto sus = mon.Suspects(a0);
    poll_ns += Mono() - a0;
    ++polls;
    for (auto& n : sus) {
      if (suspected.insert(n).second) ++false_suspicions;
    }
  }
  // Stop the fleet, let the monitor drain what is queued, then count.
  double elapsed = static_cast<double>(Mono() - t0) / 1e9;
  stop = true;
  for (auto& th : fleet) th.join();
  struct timespec drain{0, 100 * 1000 * 1000};
  nanosleep(&drain, nullptr);
  auto st = mon.stats();
  double cpu = static_cast<double>(st.receiver_cpu_ns - cpu0) / 1e9;
  uint64_t off = offered.load();
  double lost = off ? 100.0 * (1.0 - static_cast<double>(st.received) / static_cast<double>(off)) : 0;
  size_t bytes = hb::EncodeBeat(key, hb::Beat{"bench", names.back(), 1, 1, 1})->size();
  std::printf("nodes %ld period %ld ms timeout %ld ms for %.1f s, %ld sender threads\n", nodes, period, timeout,
              elapsed, threads);
  std::printf("offered %.0f datagrams/s (%zu bytes each, %.2f MB/s of payload); received %" PRIu64
              " accepted %" PRIu64 " (lost %.2f %%, send errors %" PRIu64 ")\n",
              static_cast<double>(off) / elapsed, bytes, static_cast<double>(off) * bytes / elapsed / 1e6,
              st.received, st.accepted, lost, send_errors.load());
  std::printf("monitor receiver thread: %.3f s CPU in %.1f s = %.3f of a core, %.2f us per datagram\n", cpu,
              elapsed, cpu / elapsed, st.received ? cpu * 1e6 / static_cast<double>(st.received) : 0.0);
  std::printf("Suspects() at %ld nodes: %.1f us per call (%" PRIu64 " calls, every 10 ms = %.3f of a core)\n", nodes,
              static_cast<double>(poll_ns) / 1e3 / static_cast<double>(polls), polls,
              static_cast<double>(poll_ns) / 1e9 / elapsed);
  std::printf("false suspicions: %" PRIu64 "\n", false_suspicions);
  std::printf("METRIC heartbeat_monitor_cpu %.3f cores target < 0.25 (%ld nodes, %ld ms period)\n",
              cpu / elapsed, nodes, period);
  return false_suspicions == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (dlckpt_version_requested(argc, argv)) return 0;
  CLI::App app{"", "dlckpt-heartbeat"};
  app.formatter_fn([](const CLI::App*, const std::string&, CLI::AppFormatMode) { return std::string(kUsage); });
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.require_subcommand(0, 1);
  std::vector<std::string> unknown_command;
  app.add_option("COMMAND", unknown_command);
  Args a;
  CLI::App* key = app.add_subcommand("key");
  key->allow_extras();  // anything after it is refused below
  CLI::App* send = app.add_subcommand("send");
  AddOptions(send, {"job", "node", "generation", "to", "key-file", "period-ms", "seconds"}, &a);
  CLI::App* monitor = app.add_subcommand("monitor");
  AddOptions(monitor,
             {"job", "nodes", "generation", "key-file", "bind", "port", "port-file", "timeout-ms",
              "startup-timeout-ms", "seconds"},
             &a);
  CLI::App* bench = app.add_subcommand("bench");
  AddOptions(bench, {"nodes", "period-ms", "timeout-ms", "seconds", "threads"}, &a);
  bool help = false;
  const Status parsed = dlckpt::cli::ParseArgs(app, std::vector<std::string>(argv + 1, argv + argc), &help);
  if (help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (argc < 2) return Usage("no command");
  if (!unknown_command.empty()) return Usage("unknown command '" + unknown_command[0] + "'");
  if (!parsed.ok()) return Usage(parsed.message());
  if (key->parsed()) return key->remaining().empty() ? CmdKey() : Usage("key takes no options");
  if (send->parsed()) return CmdSend(a);
  if (monitor->parsed()) return CmdMonitor(a);
  if (bench->parsed()) return CmdBench(a);
  return Usage("no command");
}

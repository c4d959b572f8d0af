// dlckpt-codec: the codec service, one MPI process per node. Usually started
// by dlckpt-run; see --help.
#include <mpi.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "codec_service.h"
#include "dlckpt/base/node.h"
#include "dlckpt/control/heartbeat.h"
#include "dlckpt/base/units.h"
#include "dlckpt/base/version.h"

namespace {

constexpr const char* kUsage = R"(usage: mpiexec -n P dlckpt-codec --rendezvous PATH [OPTIONS]
       mpiexec -n P dlckpt-codec --mode encode --epoch E [OPTIONS]
       mpiexec -n P dlckpt-codec --mode recover --lost NODE[,NODE] [--epoch E] [OPTIONS]

The dlckpt codec service: start exactly one process per node, on the nodes of
the application and on the spare nodes (dlckpt-run does this). Rank 0 listens
on TCP and writes the rendezvous file (host, port, secret token; mode 0600)
that the application and dlckpt-run read. The application's HELLO forms the
groups; each ENCODE computes XOR (one spare per group) or Reed-Solomon parity
of the committed epoch of every store onto the spares; RECOVER rebuilds lost
stores on spare nodes.

The one-shot modes need no network: --mode encode computes the parity of
epoch E of every store of the job found on the nodes; --mode recover surveys
the nodes, decides as dlckpt-run does (the newest epoch recoverable in every
group, or E), rebuilds the stores of the lost nodes on spare nodes and prints
where every rank now lives. Run them with one process per surviving node.

options:
  --mode service|encode|recover   (default service)
  --epoch E               the epoch to encode (encode) or to insist on (recover)
  --lost NODE[,NODE]      nodes that are gone (recover)
  --rendezvous PATH       rendezvous file to write (required for the service)
  --job ID                job id (default $DLCKPT_JOB)
  --group-size G          data nodes per group (default: all in one group)
  --spares-per-group K    parity chunks per stripe: parity nodes per group
                          with --parity spares (default 1)
  --parity spares|spread|auto
                          parity on spare nodes, spread over each group's data
                          nodes, or on spares while a group has them and
                          spread after (default spares)
  --scheme xor|rs         erasure code (default xor for K = 1, rs otherwise)
  --generation N          this launch's number, recorded in the parity (default 1)
  --host ADDRESS          address to publish (default: this host's address)
  --port N                TCP port (default: any free port)
  --chunk SIZE            pipeline chunk (default 512K)
  --nice N                run the encode and rebuild work at nice N (0-19,
                          default 0), so that an application computing on the
                          same cores meanwhile (asynchronous encode) keeps its
                          share of the CPU; the heartbeat thread keeps its
                          priority, so a busy node does not look lost
  --cleanup-on-shutdown   remove the job's stores and parity at SHUTDOWN
  -h, --help              this help
The node is $DLCKPT_NODE when set (virtual nodes on one machine), else the
host name.
)";

int Usage(const std::string& why) {
  std::fprintf(stderr, "dlckpt-codec: %s\n(try dlckpt-codec --help)\n", why.c_str());
  return 2;
}


}  // namespace

int main(int argc, char** argv) {
  if (dlckpt_version_requested(argc, argv)) return 0;
  dlckpt::codec::ServiceConfig cfg;
  if (const char* j = std::getenv("DLCKPT_JOB")) cfg.job = j;
  std::string scheme, mode = "service";
  uint64_t epoch = 0;
  std::vector<std::string> lost;
  int nice_level = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--cleanup-on-shutdown") {
      cfg.cleanup_on_shutdown = true;
      continue;
    }
    if (i + 1 >= argc) return Usage(a + " needs a value");
    std::string v = argv[++i];
    auto number = [&](long lo, long hi, long* out) {
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || n < lo || n > hi) return false;
      *out = n;
      return true;
    };
    long n = 0;
    if (a == "--mode") {
      if (v != "service" && v != "encode" && v != "recover") return Usage("--mode: service, encode or recover");
      mode = v;
    } else if (a == "--epoch") {
      if (!number(1, 1L << 62, &n)) return Usage("--epoch: bad value " + v);
      epoch = static_cast<uint64_t>(n);
    } else if (a == "--lost") {
      size_t start = 0;
      while (start <= v.size()) {
        size_t comma = v.find(',', start);
        std::string item = v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (!item.empty()) lost.push_back(item);
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    } else if (a == "--rendezvous") {
      cfg.rendezvous = v;
    } else if (a == "--job") {
      cfg.job = v;
    } else if (a == "--group-size") {
      if (!number(1, 1 << 20, &n)) return Usage("--group-size: bad value " + v);
      cfg.group_size = static_cast<int>(n);
    } else if (a == "--spares-per-group") {
      if (!number(1, 32, &n)) return Usage("--spares-per-group: bad value " + v);
      cfg.spares_per_group = static_cast<int>(n);
    } else if (a == "--parity") {
      auto mode_or = dlckpt::codec::ParseParityMode(v);
      if (!mode_or.ok()) return Usage("--parity: " + mode_or.status().message());
      cfg.parity = *mode_or;
    } else if (a == "--scheme") {
      scheme = v;
    } else if (a == "--generation") {
      if (!number(1, 1L << 40, &n)) return Usage("--generation: bad value " + v);
      cfg.generation = static_cast<uint64_t>(n);
    } else if (a == "--host") {
      cfg.rendezvous_host = v;
    } else if (a == "--port") {
      if (!number(0, 65535, &n)) return Usage("--port: bad value " + v);
      cfg.port = static_cast<int>(n);
    } else if (a == "--nice") {
      if (!number(0, 19, &n)) return Usage("--nice: want 0 to 19, not " + v);
      nice_level = static_cast<int>(n);
    } else if (a == "--chunk") {
      auto s = dlckpt::ParseSize(v);
      if (!s.ok()) return Usage(s.status().message());
      cfg.transport.chunk_bytes = *s;
    } else {
      return Usage("unknown option " + a);
    }
  }
  if (mode == "service" && cfg.rendezvous.empty()) return Usage("--rendezvous PATH is required");
  if (mode == "encode" && epoch == 0) return Usage("--mode encode needs --epoch E");
  if (mode == "recover" && lost.empty()) return Usage("--mode recover needs --lost NODE[,NODE]");
  if (cfg.job.empty()) return Usage("no job id (--job or $DLCKPT_JOB)");
  cfg.scheme = scheme.empty() ? (cfg.spares_per_group == 1 ? "xor" : "rs") : scheme;
  cfg.node = dlckpt::ThisNode();

  // Heartbeats to dlckpt-run's failure detector, when it asked for them
  // (DLCKPT_HEARTBEAT / DLCKPT_HEARTBEAT_KEY in the environment).
  std::unique_ptr<dlckpt::control::heartbeat::Sender> heartbeat;
  auto hb = dlckpt::control::heartbeat::SenderOptionsFromEnv(cfg.job, cfg.node, cfg.generation);
  if (hb.ok()) {
    auto sender = dlckpt::control::heartbeat::Sender::Create(*hb);
    dlckpt::Status started = sender.ok() ? (*sender)->Start() : sender.status();
    if (!started.ok()) {
      std::fprintf(stderr, "dlckpt-codec[%s]: heartbeat: %s\n", cfg.node.c_str(), started.ToString().c_str());
      return 1;
    }
    heartbeat = std::move(*sender);
  } else if (hb.status().code() != ENOENT) {
    std::fprintf(stderr, "dlckpt-codec[%s]: heartbeat: %s\n", cfg.node.c_str(), hb.status().ToString().c_str());
    return 1;
  }

  // Linux keeps a nice value per thread: this lowers the main thread (and
  // every thread MPI creates from now on), not the heartbeat sender's.
  if (nice_level > 0 && setpriority(PRIO_PROCESS, 0, nice_level) != 0) {
    std::fprintf(stderr, "dlckpt-codec[%s]: --nice %d: setpriority: %s\n", cfg.node.c_str(), nice_level,
                 std::strerror(errno));
  }

  // Short sleeps in the wait loops (10 us and up) should last about what they
  // ask for, not the default 50 us timer slack.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  dlckpt::Status s = mode == "encode"    ? dlckpt::codec::RunEncodeOnce(MPI_COMM_WORLD, cfg, epoch)
                     : mode == "recover" ? dlckpt::codec::RunRecoverOnce(MPI_COMM_WORLD, cfg, lost, epoch)
                                         : dlckpt::codec::RunService(MPI_COMM_WORLD, cfg);
  if (!s.ok()) {
    std::fflush(stdout);
    std::fprintf(stderr, "dlckpt-codec[%s]: %s\n", cfg.node.c_str(), s.ToString().c_str());
    // MPI_Abort ends Hydra's output forwarding at once: let the message out.
    struct timespec ts = {0, 300 * 1000 * 1000};
    nanosleep(&ts, nullptr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return 0;
}

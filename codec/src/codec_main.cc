// dlckpt-codec: the codec service, one MPI process per node. Usually started
// by dlckpt-run; see --help.
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <cstdlib>
#include <cstring>
#include <string>

#include "codec_service.h"
#include "dlckpt/heartbeat.h"
#include "dlckpt/units.h"

namespace {

constexpr const char* kUsage = R"(usage: mpiexec -n P dlckpt-codec --rendezvous PATH [OPTIONS]

The dlckpt codec service: start exactly one process per node, on the nodes of
the application and on the spare nodes (dlckpt-run does this). Rank 0 listens
on TCP and writes the rendezvous file (host, port, secret token; mode 0600)
that the application and dlckpt-run read. The application's HELLO forms the
groups; each ENCODE computes XOR (one spare per group) or Reed-Solomon parity
of the committed epoch of every store onto the spares; RECOVER rebuilds lost
stores on spare nodes.

options:
  --rendezvous PATH       rendezvous file to write (required)
  --job ID                job id (default $DLCKPT_JOB)
  --group-size G          data nodes per group (default: all in one group)
  --spares-per-group K    parity nodes per group (default 1)
  --scheme xor|rs         erasure code (default xor for K = 1, rs otherwise)
  --generation N          this launch's number, recorded in the parity (default 1)
  --host ADDRESS          address to publish (default: this host's address)
  --port N                TCP port (default: any free port)
  --chunk SIZE            pipeline chunk (default 512K)
  --cleanup-on-shutdown   remove the job's stores and parity at SHUTDOWN
  -h, --help              this help
The node is $DLCKPT_NODE when set (virtual nodes on one machine), else the
host name.
)";

int Usage(const std::string& why) {
  std::fprintf(stderr, "dlckpt-codec: %s\n(try dlckpt-codec --help)\n", why.c_str());
  return 2;
}

std::string HostNode() {
  const char* env = std::getenv("DLCKPT_NODE");
  if (env && *env) return env;
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  std::string out;
  for (char* p = name; *p; ++p) {
    char c = *p;
    out += (isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  dlckpt::codec::ServiceConfig cfg;
  if (const char* j = std::getenv("DLCKPT_JOB")) cfg.job = j;
  std::string scheme;
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
    if (a == "--rendezvous") {
      cfg.rendezvous = v;
    } else if (a == "--job") {
      cfg.job = v;
    } else if (a == "--group-size") {
      if (!number(1, 1 << 20, &n)) return Usage("--group-size: bad value " + v);
      cfg.group_size = static_cast<int>(n);
    } else if (a == "--spares-per-group") {
      if (!number(1, 32, &n)) return Usage("--spares-per-group: bad value " + v);
      cfg.spares_per_group = static_cast<int>(n);
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
    } else if (a == "--chunk") {
      auto s = dlckpt::ParseSize(v);
      if (!s.ok()) return Usage(s.status().message());
      cfg.transport.chunk_bytes = *s;
    } else {
      return Usage("unknown option " + a);
    }
  }
  if (cfg.rendezvous.empty()) return Usage("--rendezvous PATH is required");
  if (cfg.job.empty()) return Usage("no job id (--job or $DLCKPT_JOB)");
  cfg.scheme = scheme.empty() ? (cfg.spares_per_group == 1 ? "xor" : "rs") : scheme;
  cfg.node = HostNode();

  // Heartbeats to dlckpt-run's failure detector, when it asked for them
  // (DLCKPT_HEARTBEAT / DLCKPT_HEARTBEAT_KEY in the environment).
  std::unique_ptr<dlckpt::heartbeat::Sender> heartbeat;
  auto hb = dlckpt::heartbeat::SenderOptionsFromEnv(cfg.job, cfg.node, cfg.generation);
  if (hb.ok()) {
    auto sender = dlckpt::heartbeat::Sender::Create(*hb);
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

  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  dlckpt::Status s = dlckpt::codec::RunService(MPI_COMM_WORLD, cfg);
  if (!s.ok()) {
    std::fprintf(stderr, "dlckpt-codec[%s]: %s\n", cfg.node.c_str(), s.ToString().c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return 0;
}

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
#include "dlckpt/base/cli.h"
#include "dlckpt/base/node.h"
#include "dlckpt/base/strings.h"
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
  std::string scheme, mode = "service";
  uint64_t epoch = 0;
  std::vector<std::string> lost;
  int nice_level = 0;
  CLI::App app{"", "dlckpt-codec"};
  app.formatter_fn([](const CLI::App*, const std::string&, CLI::AppFormatMode) { return std::string(kUsage); });
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  auto bad = [](const std::string& why) { throw CLI::ValidationError(why); };
  // An integer option in [lo, hi]; `why` is the error's text before the value.
  auto number = [&](const char* name, long lo, long hi, const std::string& why, auto store) {
    app.add_option_function<std::string>(name, [=](const std::string& v) {
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || n < lo || n > hi) bad(why + v);
      store(n);
    });
  };
  app.add_option_function<std::string>("--mode", [&](const std::string& v) {
    if (v != "service" && v != "encode" && v != "recover") bad("--mode: service, encode or recover");
    mode = v;
  });
  number("--epoch", 1, 1L << 62, "--epoch: bad value ", [&](long n) { epoch = static_cast<uint64_t>(n); });
  app.add_option_function<std::string>("--lost", [&](const std::string& v) {
    for (std::string_view item : dlckpt::Split(v, ',')) {
      if (!item.empty()) lost.emplace_back(item);
    }
  })->trigger_on_parse();  // each --lost adds its nodes
  app.add_option("--rendezvous", cfg.rendezvous);
  app.add_option("--job", cfg.job)->envname("DLCKPT_JOB");
  number("--group-size", 1, 1 << 20, "--group-size: bad value ", [&](long n) { cfg.group_size = static_cast<int>(n); });
  number("--spares-per-group", 1, 32, "--spares-per-group: bad value ",
         [&](long n) { cfg.spares_per_group = static_cast<int>(n); });
  app.add_option_function<std::string>("--parity", [&](const std::string& v) {
    auto parity = dlckpt::codec::ParseParityMode(v);
    if (!parity.ok()) bad("--parity: " + parity.status().message());
    cfg.parity = *parity;
  });
  app.add_option("--scheme", scheme);
  number("--generation", 1, 1L << 40, "--generation: bad value ",
         [&](long n) { cfg.generation = static_cast<uint64_t>(n); });
  app.add_option("--host", cfg.rendezvous_host);
  number("--port", 0, 65535, "--port: bad value ", [&](long n) { cfg.port = static_cast<int>(n); });
  number("--nice", 0, 19, "--nice: want 0 to 19, not ", [&](long n) { nice_level = static_cast<int>(n); });
  app.add_option_function<std::string>("--chunk", [&](const std::string& v) {
    auto size = dlckpt::ParseSize(v);
    if (!size.ok()) bad(size.status().message());
    cfg.transport.chunk_bytes = *size;
  });
  app.add_flag("--cleanup-on-shutdown", cfg.cleanup_on_shutdown);
  bool help = false;
  const dlckpt::Status parsed = dlckpt::cli::ParseArgs(app, std::vector<std::string>(argv + 1, argv + argc), &help);
  if (help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (!parsed.ok()) return Usage(parsed.message());
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

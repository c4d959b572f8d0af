#include "run_options.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <map>

#include <gtest/gtest.h>

namespace dlckpt::run {
namespace {

Result<Options> Parse(std::vector<std::string> args, bool* help = nullptr) {
  static std::vector<std::string> store;
  store = args;
  store.insert(store.begin(), "dlckpt-run");
  std::vector<char*> argv;
  for (auto& s : store) argv.push_back(s.data());
  bool h = false;
  return ParseOptions(static_cast<int>(argv.size()), argv.data(), help ? help : &h);
}

TEST(RunOptionsTest, DefaultsAndLayout) {
  auto o = Parse({"--nodes", "4", "--ranks-per-node", "2", "--spares", "2", "--group-size", "2", "--", "./app", "-x"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->nodes, 4);
  EXPECT_EQ(o->spares_per_group, 1);
  EXPECT_EQ(o->scheme, "xor");
  EXPECT_EQ(o->program, (std::vector<std::string>{"./app", "-x"}));
  auto rs = Parse({"--nodes", "4", "--spares", "2", "--scheme", "rs", "--", "a"});
  ASSERT_TRUE(rs.ok());
  EXPECT_EQ(rs->spares_per_group, 2);
  EXPECT_EQ(rs->group_size, 4);
  EXPECT_EQ(o->parity, "auto");
  // Spread parity needs no spare node; spares alone need k per group.
  auto spread = Parse({"--nodes", "4", "--spares", "0", "--parity", "spread", "--", "a"});
  ASSERT_TRUE(spread.ok()) << spread.status().ToString();
  EXPECT_EQ(spread->parity, "spread");
  EXPECT_FALSE(Parse({"--nodes", "4", "--spares", "0", "--parity", "spares", "--", "a"}).ok());
}

TEST(RunOptionsTest, KillSpecs) {
  auto o = Parse({"--nodes", "3", "--kill-node", "vn1", "--at", "checkpoint:3", "--kill-node", "vn2,vn3", "--at",
                  "phase:encode:4+0.05", "--kill-node", "vn0", "--at", "phase:recover", "--",
                  "a"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  ASSERT_EQ(o->kills.size(), 3u);
  EXPECT_EQ(o->kills[0].at.kind, KillTrigger::kCheckpoint);
  EXPECT_EQ(o->kills[0].at.epoch, 3u);
  EXPECT_EQ(o->kills[1].nodes, (std::vector<std::string>{"vn2", "vn3"}));
  EXPECT_EQ(o->kills[1].at.kind, KillTrigger::kEncode);
  EXPECT_EQ(o->kills[1].at.epoch, 4u);
  EXPECT_DOUBLE_EQ(o->kills[1].at.delay, 0.05);
  EXPECT_EQ(o->kills[2].at.kind, KillTrigger::kRecover);
  EXPECT_EQ(o->kills[2].at.occurrence, 1);
  EXPECT_EQ(ParseTrigger("time:2.5")->seconds, 2.5);
  EXPECT_EQ(ParseTrigger("phase:write:2")->kind, KillTrigger::kWrite);
}

TEST(RunOptionsTest, ImpossibleLayoutsAndTargetsAreRefused) {
  auto o = Parse({"--nodes", "2", "--group-size", "3", "--", "a"});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("--group-size 3 is larger than --nodes 2"), std::string::npos);
  o = Parse({"--nodes", "2", "--kill-node", "vn3", "--at", "checkpoint:1", "--", "a"});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("vn0 to vn2"), std::string::npos) << o.status().message();
  EXPECT_FALSE(Parse({"--kill-node", "node1", "--at", "checkpoint:1", "--", "a"}).ok());
  EXPECT_FALSE(Parse({"--kill-node", "vn1x", "--at", "checkpoint:1", "--", "a"}).ok());
  o = Parse({"--nodes", "2", "--ranks-per-node", "2", "--crash-rank", "4", "--at", "checkpoint:1", "--", "a"});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("ranks 0 to 3"), std::string::npos) << o.status().message();
  EXPECT_TRUE(Parse({"--nodes", "2", "--ranks-per-node", "2", "--crash-rank", "3", "--at", "checkpoint:1", "--",
                     "a"}).ok());
  EXPECT_FALSE(Parse({"--hosts", "h0,h1,h2", "--kill-command", "k", "--kill-node", "h9", "--at", "checkpoint:1",
                      "--", "a"}).ok());
}

// docs/environment.md: the configuration file's errors name FILE:LINE, whatever
// went wrong on that line (a bad value, a kill without --at, an unknown name,
// its syntax).
TEST(RunOptionsTest, ConfigFileErrorsNameFileAndLine) {
  char path[] = "/tmp/dlckpt_run_options_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  EnvFn env = [&](const char* name) -> const char* { return std::string(name) == "DLCKPT_CONFIG" ? path : nullptr; };
  auto error = [&](const std::string& text) {
    int f = open(path, O_WRONLY | O_TRUNC);
    EXPECT_GE(f, 0);
    EXPECT_EQ(write(f, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    close(f);
    bool help = false;
    auto o = ParseOptions({"--", "app"}, &help, env);
    return o.ok() ? std::string("(accepted)") : o.status().message();
  };
  const std::string at = std::string(path) + ":";
  std::string m = error("# layout\nnodes 4\n\nencode later\nkeep\n");
  EXPECT_NE(m.find("configuration file " + at + "4: --encode: want sync or async, not 'later'"), std::string::npos)
      << m;
  m = error("nodes = 4\nspares = many\n");
  EXPECT_NE(m.find(at + "2: --spares"), std::string::npos) << m;
  m = error("nodes 4\nkill-node vn1\nkeep\n");
  EXPECT_NE(m.find(at + "2: --kill-node, --poweroff-node or --crash-rank without --at"), std::string::npos) << m;
  m = error("kill-node vn1\nat someday\n");
  EXPECT_NE(m.find(at + "2: --at 'someday'"), std::string::npos) << m;
  m = error("at checkpoint:1\n");
  EXPECT_NE(m.find(at + "1: --at must follow"), std::string::npos) << m;
  m = error("nodes 2\n\n\nbogus-option 3\n");
  EXPECT_NE(m.find(at + "4: unknown option --bogus-option"), std::string::npos) << m;
  m = error("nodes 2\npreload = maybe\n");
  EXPECT_NE(m.find(at + "2: preload is a flag"), std::string::npos) << m;
  m = error("nodes 2\nhalt myjob\n");
  EXPECT_NE(m.find(at + "2: 'halt' cannot be set"), std::string::npos) << m;
  m = error("capacity 1K\n");
  EXPECT_NE(m.find(at + "1: --capacity 1K"), std::string::npos) << m;
  unlink(path);
}

TEST(RunOptionsTest, ConfigFileThenEnvironmentThenCommandLine) {
  char path[] = "/tmp/dlckpt_run_options_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string text =
      "# a comment\n nodes = 4\nspares 2   # two spares\nscheme=rs\nencode async\nkeep\npreload = false\n"
      "kill-node vn1\nat checkpoint:2\nparity = spread\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  std::map<std::string, std::string> vars = {{"DLCKPT_CONFIG", path}, {"DLCKPT_SPARES", "3"},
                                             {"DLCKPT_STORE_CAPACITY", "64M"}};
  EnvFn env = [&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  bool help = false;
  auto o = ParseOptions({"--nodes", "5", "--", "app", "--nodes", "9"}, &help, env);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->config, path);
  EXPECT_EQ(o->nodes, 5);        // command line over the file
  EXPECT_EQ(o->spares, 3);       // environment over the file
  EXPECT_EQ(o->scheme, "rs");    // the file
  EXPECT_EQ(o->parity, "spread");
  EXPECT_EQ(o->encode, "async");
  EXPECT_TRUE(o->keep);
  EXPECT_FALSE(o->preload);
  EXPECT_EQ(o->capacity, 64u << 20);
  ASSERT_EQ(o->kills.size(), 1u);
  EXPECT_EQ(o->program, (std::vector<std::string>{"app", "--nodes", "9"}));
  // --config on the command line wins over DLCKPT_CONFIG; errors name their source.
  vars["DLCKPT_ENCODE"] = "later";
  o = ParseOptions({"--", "app"}, &help, env);
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("DLCKPT_ENCODE"), std::string::npos) << o.status().message();
  vars.erase("DLCKPT_ENCODE");
  o = ParseOptions({"--config", "/nonexistent/dlckpt.conf", "--", "app"}, &help, env);
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("/nonexistent/dlckpt.conf"), std::string::npos) << o.status().message();
  // An unknown name is refused, naming the file.
  const std::string bogus = "nodes 2\nbogus-option 3\n";
  fd = open(path, O_WRONLY | O_TRUNC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, bogus.data(), bogus.size()), static_cast<ssize_t>(bogus.size()));
  close(fd);
  o = ParseOptions({"--", "app"}, &help, env);
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find(std::string("configuration file ") + path), std::string::npos)
      << o.status().message();
  EXPECT_NE(o.status().message().find("--bogus-option"), std::string::npos) << o.status().message();
  unlink(path);
  EXPECT_FALSE(ConfigTokens("f.conf", "keep = maybe\n").ok());
  auto missing = ConfigTokens("f.conf", "\n\nnodes\n");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("f.conf:3"), std::string::npos) << missing.status().message();
  EXPECT_FALSE(ConfigTokens("f.conf", "config other.conf\n").ok());
  // SCR's names for the group layout, below DLCKPT_*.
  o = ParseOptions({"--nodes", "4", "--spares", "4", "--", "app"}, &help, [](const char* n) -> const char* {
    std::string v = n;
    return v == "SCR_SET_SIZE" ? "2" : v == "SCR_SET_FAILURES" ? "2" : v == "SCR_COPY_TYPE" ? "RS" : nullptr;
  });
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->group_size, 2);
  EXPECT_EQ(o->spares_per_group, 2);
  EXPECT_EQ(o->scheme, "rs");
  o = ParseOptions({"--", "app"}, &help, [](const char* n) -> const char* {
    return std::string(n) == "SCR_COPY_TYPE" ? "PARTNER" : nullptr;
  });
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("SCR_COPY_TYPE=PARTNER"), std::string::npos) << o.status().message();
  // Every option with a variable is one dlckpt-run accepts.
  for (const auto& [var, option] : EnvOptions()) {
    EXPECT_EQ(var.rfind("DLCKPT_", 0), 0u) << var;
    EXPECT_FALSE(option.empty());
  }
}

TEST(RunOptionsTest, EncodeModeAndCodecNice) {
  auto o = Parse({"--", "a"});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->encode, "sync");
  EXPECT_EQ(o->codec_nice, -1);
  o = Parse({"--encode", "async", "--codec-nice", "19", "--kill-node", "vn1", "--at", "commit:3", "--", "a"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->encode, "async");
  EXPECT_EQ(o->codec_nice, 19);
  EXPECT_EQ(o->kills[0].at.kind, KillTrigger::kCommit);
  EXPECT_EQ(o->kills[0].at.epoch, 3u);
  auto bad = Parse({"--encode", "later", "--", "a"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("want sync or async"), std::string::npos);
  EXPECT_FALSE(Parse({"--codec-nice", "20", "--", "a"}).ok());
  EXPECT_FALSE(Parse({"--codec-nice", "-1", "--", "a"}).ok());
}

TEST(RunOptionsTest, SecondLevel) {
  auto o = Parse({"--", "a"});
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->persist.empty());
  EXPECT_EQ(o->persist_every, 10);
  EXPECT_EQ(o->persist_keep, 2);
  o = Parse({"--persist", "/pfs/ckpt", "--persist-every", "3", "--persist-keep", "4", "--persist-bandwidth", "200M",
             "--restart-from", "/pfs/old", "--halt-seconds", "3600", "--kill-node", "vn0,vn1", "--at", "drain:6+0.5",
             "--", "a"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->persist, "/pfs/ckpt");
  EXPECT_EQ(o->persist_every, 3);
  EXPECT_EQ(o->persist_keep, 4);
  EXPECT_EQ(o->persist_bandwidth, 200u << 20);
  EXPECT_EQ(o->restart_from, "/pfs/old");
  EXPECT_EQ(o->halt_seconds, 3600);
  EXPECT_EQ(o->kills[0].at.kind, KillTrigger::kDrain);
  EXPECT_EQ(o->kills[0].at.epoch, 6u);
  EXPECT_EQ(o->kills[0].at.delay, 0.5);
  EXPECT_FALSE(Parse({"--persist-every", "0", "--", "a"}).ok());
  EXPECT_FALSE(Parse({"--persist-keep", "0", "--", "a"}).ok());
  auto bad = Parse({"--persist-bandwidth", "fast", "--", "a"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("is not a byte rate"), std::string::npos);
  // From the environment, as every layout option.
  bool help = false;
  EnvFn env = [](const char* name) -> const char* {
    if (std::string(name) == "DLCKPT_PERSIST") return "/pfs/env";
    if (std::string(name) == "DLCKPT_PERSIST_EVERY") return "5";
    return nullptr;
  };
  auto e = ParseOptions(std::vector<std::string>{"--", "app"}, &help, env);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->persist, "/pfs/env");
  EXPECT_EQ(e->persist_every, 5);
  // SCR's flush: below DLCKPT_*.
  EnvFn scr = [](const char* name) -> const char* {
    if (std::string(name) == "SCR_FLUSH") return "4";
    if (std::string(name) == "SCR_PREFIX") return "/lustre/run7";
    return nullptr;
  };
  e = ParseOptions(std::vector<std::string>{"--", "app"}, &help, scr);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->persist, "/lustre/run7/.dlckpt");
  EXPECT_EQ(e->persist_every, 4);
}

TEST(RunOptionsTest, HostsPowerOffAndMpiexecArgs) {
  auto o = Parse({"--hosts", "c-0,c-1,c-2", "--nodes", "2", "--kill-command", "vh {how} {node}",
                  "--mpiexec-args", " -iface  dvb-c -genv LD_PRELOAD /x.so ", "--poweroff-node", "c-1",
                  "--at", "checkpoint:2", "--kill-node", "c-0", "--at", "phase:recover", "--", "a"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->mpiexec_args, (std::vector<std::string>{"-iface", "dvb-c", "-genv", "LD_PRELOAD", "/x.so"}));
  ASSERT_EQ(o->kills.size(), 2u);
  EXPECT_TRUE(o->kills[0].poweroff);
  EXPECT_EQ(o->kills[0].nodes, (std::vector<std::string>{"c-1"}));
  EXPECT_FALSE(o->kills[1].poweroff);
  EXPECT_FALSE(o->kills[1].ranks);
  // Virtual nodes power off without a kill command.
  EXPECT_TRUE(Parse({"--poweroff-node", "vn1", "--at", "time:1", "--", "a"}).ok());
  // Hosts cannot be killed without one.
  auto msg = [](std::vector<std::string> a) { return Parse(a).status().message(); };
  EXPECT_NE(msg({"--hosts", "c-0,c-1,c-2", "--poweroff-node", "c-1", "--at", "time:1", "--", "a"})
                .find("needs --kill-command"),
            std::string::npos);
  EXPECT_NE(msg({"--hosts", "c-0,c-1,c-2", "--mtbf", "10", "--", "a"}).find("needs --kill-command"),
            std::string::npos);
  EXPECT_TRUE(Parse({"--hosts", "c-0,c-1,c-2", "--crash-rank", "1", "--at", "time:1", "--", "a"}).ok());
  EXPECT_NE(msg({"--poweroff-node", "vn1", "--", "a"}).find("without --at"), std::string::npos);
}

TEST(RunOptionsTest, Launchers) {
  auto o = Parse({"--launcher", "srun", "--srun", "/opt/slurm/bin/srun", "--srun-args", " -p debug  --time=5 ",
                  "--hosts", "slurm", "--nodes", "3", "--spares", "1", "--", "a"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->launcher, "srun");
  EXPECT_EQ(o->srun, "/opt/slurm/bin/srun");
  EXPECT_EQ(o->srun_args, (std::vector<std::string>{"-p", "debug", "--time=5"}));
  EXPECT_EQ(o->hosts, (std::vector<std::string>{"slurm"}));  // resolved at setup, any count
  EXPECT_EQ(Parse({"--", "a"})->launcher, "mpiexec");
  auto msg = [](std::vector<std::string> a) { return Parse(a).status().message(); };
  EXPECT_NE(msg({"--launcher", "aprun", "--", "a"}).find("want mpiexec or srun"), std::string::npos);
  EXPECT_NE(msg({"--launcher", "srun", "--mpiexec-args", "-iface x", "--", "a"}).find("--srun-args"),
            std::string::npos);
}

TEST(RunOptionsTest, BadInputIsNamed) {
  auto msg = [](std::vector<std::string> a) { return Parse(a).status().message(); };
  EXPECT_NE(msg({"--nodes", "x", "--", "a"}).find("--nodes"), std::string::npos);
  EXPECT_NE(msg({"--nodes", "2"}).find("no program"), std::string::npos);
  EXPECT_NE(msg({"--bogus", "1", "--", "a"}).find("unknown option --bogus"), std::string::npos);
  EXPECT_NE(msg({"--at", "time:1", "--", "a"}).find("--at must follow"), std::string::npos);
  EXPECT_NE(msg({"--crash-rank", "x", "--at", "time:1", "--", "a"}).find("--crash-rank"), std::string::npos);
  EXPECT_NE(msg({"--kill-node", "vn1", "--", "a"}).find("without --at"), std::string::npos);
  EXPECT_NE(msg({"--kill-node", "vn1", "--at", "soon", "--", "a"}).find("checkpoint:E"), std::string::npos);
  EXPECT_NE(msg({"--nodes", "4", "--group-size", "2", "--spares", "1", "--parity", "spares", "--", "a"})
                .find("--parity spares needs 2 spare nodes (1 per group for 2 groups of at most 2 data nodes); "
                      "--spares is 1: give --spares 2, a larger --group-size, or --parity auto"),
            std::string::npos);
  EXPECT_NE(msg({"--nodes", "2", "--group-size", "1", "--spares", "0", "--", "a"})
                .find("parity spread over a group needs more than 1 data node(s) per group"),
            std::string::npos);
  EXPECT_NE(msg({"--parity", "raid", "--", "a"}).find("--parity: want spares, spread or auto, not 'raid'"),
            std::string::npos);
  EXPECT_NE(msg({"--on-spares-exhausted", "halt", "--", "a"}).find("give one"), std::string::npos);
  EXPECT_NE(msg({"--on-spares-exhausted", "stop", "--", "a"}).find("want continue or halt"), std::string::npos);
  EXPECT_NE(msg({"--scheme", "xor", "--spares-per-group", "2", "--spares", "2", "--", "a"}).find("--scheme rs"),
            std::string::npos);
  EXPECT_NE(msg({"--job", "a.b", "--", "a"}).find("--job"), std::string::npos);
  EXPECT_NE(msg({"--job", "", "--", "a"}).find("--job"), std::string::npos);
  bool help = false;
  EXPECT_TRUE(Parse({"--help"}, &help).ok());
  EXPECT_TRUE(help);
}

TEST(RunOptionsTest, CapacityIsCheckedAtParseTime) {
  auto msg = [](std::vector<std::string> a) { return Parse(a).status().message(); };
  EXPECT_NE(msg({"--capacity", "0", "--", "a"}).find("--capacity 0: a store's capacity must be between 1M and 1T"),
            std::string::npos);
  EXPECT_NE(msg({"--capacity", "18446744073709551615", "--", "a"}).find("between 1M and 1T"), std::string::npos);
  EXPECT_NE(msg({"--capacity", "1048575", "--", "a"}).find("between 1M and 1T"), std::string::npos);
  EXPECT_NE(msg({"--capacity", "2T", "--", "a"}).find("between 1M and 1T"), std::string::npos);
  EXPECT_NE(msg({"--capacity", "lots", "--", "a"}).find("--capacity"), std::string::npos);
  EXPECT_EQ(Parse({"--capacity", "1M", "--", "a"})->capacity, kMinCapacity);
  EXPECT_EQ(Parse({"--capacity", "1T", "--", "a"})->capacity, kMaxCapacity);
  EXPECT_EQ(Parse({"--", "a"})->capacity, 256ull << 20);
}

TEST(RunOptionsTest, JobIdIsAValidName) {
  auto msg = [](std::vector<std::string> a) { return Parse(a).status().message(); };
  EXPECT_TRUE(Parse({"--job", std::string(63, 'j'), "--", "a"}).ok());
  EXPECT_NE(msg({"--job", std::string(64, 'j'), "--", "a"}).find("want 1-63 of [A-Za-z0-9_-]"), std::string::npos);
  EXPECT_NE(msg({"--job", "../x", "--", "a"}).find("--job '../x'"), std::string::npos);
  EXPECT_NE(msg({"--job", "a/b", "--", "a"}).find("--job"), std::string::npos);
  EXPECT_TRUE(Parse({"--job", "A-z_9", "--", "a"}).ok());
}

TEST(RunOptionsTest, SignalGraceAndOversubscribe) {
  auto o = Parse({"--term-grace", "2.5", "--oversubscribe", "--", "a"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_DOUBLE_EQ(o->term_grace, 2.5);
  EXPECT_TRUE(o->oversubscribe);
  EXPECT_DOUBLE_EQ(Parse({"--", "a"})->term_grace, 1.0);
  EXPECT_FALSE(Parse({"--", "a"})->oversubscribe);
  EXPECT_FALSE(Parse({"--term-grace", "-1", "--", "a"}).ok());
  EXPECT_FALSE(Parse({"--term-grace", "7200", "--", "a"}).ok());
}

TEST(RunOptionsTest, MachineLimits) {
  MachineLimits two_cpus;
  two_cpus.online_cpus = 2;
  two_cpus.shm_bytes = 24ull << 30;
  auto check = [&](std::vector<std::string> a, const MachineLimits& m) {
    auto o = Parse(a);
    EXPECT_TRUE(o.ok()) << o.status().ToString();
    return o.ok() ? CheckMachineLimits(*o, m) : o.status();
  };
  // --nodes 5000 on 2 CPUs: 5000 ranks + 5001 codec processes.
  Status s = check({"--nodes", "5000", "--", "a"}, two_cpus);
  EXPECT_EQ(s.code(), EINVAL);
  EXPECT_NE(s.message().find("= 10001 processes on this machine, more than it can run (64 per online CPU x 2 = 128)"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("--oversubscribe"), std::string::npos);
  EXPECT_TRUE(check({"--nodes", "5000", "--oversubscribe", "--", "a"}, two_cpus).ok());
  // The bound itself: 128 processes pass, 129 do not.
  EXPECT_TRUE(check({"--nodes", "63", "--spares", "2", "--capacity", "1M", "--", "a"}, two_cpus).ok());
  EXPECT_FALSE(check({"--nodes", "63", "--spares", "3", "--capacity", "1M", "--", "a"}, two_cpus).ok());
  EXPECT_FALSE(check({"--nodes", "8", "--ranks-per-node", "16", "--", "a"}, two_cpus).ok());
  // Hosts: the processes are elsewhere.
  EXPECT_TRUE(check({"--hosts", "slurm", "--nodes", "5000", "--", "a"}, two_cpus).ok());
  // RLIMIT_NPROC.
  MachineLimits nproc = two_cpus;
  nproc.max_processes = 10;
  EXPECT_TRUE(check({"--nodes", "4", "--spares", "1", "--capacity", "1M", "--", "a"}, nproc).ok());  // 9
  s = check({"--nodes", "5", "--spares", "1", "--capacity", "1M", "--", "a"}, nproc);  // 11
  EXPECT_NE(s.message().find("more than RLIMIT_NPROC (10)"), std::string::npos) << s.message();
  EXPECT_TRUE(check({"--nodes", "4", "--spares", "1", "--", "a"}, two_cpus).ok());
  // Stores are allocated up front: 8 ranks x 4 GiB do not fit in 24 GiB of /dev/shm.
  s = check({"--nodes", "8", "--capacity", "4G", "--", "a"}, two_cpus);
  EXPECT_NE(s.message().find("8 store(s) of --capacity"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("need more than /dev/shm holds"), std::string::npos) << s.message();
  EXPECT_TRUE(check({"--nodes", "4", "--capacity", "4G", "--", "a"}, two_cpus).ok());
  MachineLimits unknown_shm = two_cpus;
  unknown_shm.shm_bytes = 0;
  EXPECT_TRUE(check({"--nodes", "8", "--capacity", "4G", "--", "a"}, unknown_shm).ok());
  // This machine's limits are sane.
  MachineLimits here = ThisMachine();
  EXPECT_GE(here.online_cpus, 1);
}

// An unknown option is refused with the closest known one, on the command
// line and in the configuration file (there with FILE:LINE).
TEST(RunOptionsTest, UnknownOptionsGetASuggestion) {
  auto msg = [](std::vector<std::string> a) { return Parse(a).status().message(); };
  std::string m = msg({"--node", "4", "--", "true"});
  EXPECT_NE(m.find("unknown option --node; did you mean --nodes?"), std::string::npos) << m;
  m = msg({"--nodes", "4", "--kep", "--", "true"});
  EXPECT_NE(m.find("unknown option --kep; did you mean --keep?"), std::string::npos) << m;
  m = msg({"--spraes=2", "--", "true"});
  EXPECT_NE(m.find("did you mean --spares?"), std::string::npos) << m;
  m = msg({"--persist-bandwith", "1M", "--", "true"});
  EXPECT_NE(m.find("did you mean --persist-bandwidth?"), std::string::npos) << m;
  m = msg({"--frobnicate", "--", "true"});
  EXPECT_NE(m.find("unknown option --frobnicate"), std::string::npos) << m;
  EXPECT_EQ(m.find("did you mean"), std::string::npos) << m;
  // The unknown option is reported, not a bad value after it.
  m = msg({"--kep", "--nodes", "x", "--", "true"});
  EXPECT_NE(m.find("unknown option --kep"), std::string::npos) << m;
  // The program's own options are not dlckpt-run's.
  EXPECT_TRUE(Parse({"--", "./app", "--node", "4", "--help"}).ok());

  auto config = ConfigTokens("site.conf", "nodes 4\n# the spares\nspraes = 2\n");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("site.conf:3: unknown option --spraes; did you mean --spares?"),
            std::string::npos)
      << config.status().message();
  config = ConfigTokens("site.conf", "kep\n");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("site.conf:1: unknown option --kep; did you mean --keep?"),
            std::string::npos)
      << config.status().message();
}

// The forms of the command line the tests, the benchmarks and the documents
// use keep their meaning.
TEST(RunOptionsTest, CommandLineForms) {
  // The program after "--", or from the first word that is not an option's value.
  auto o = Parse({"--nodes", "3", "-v", "./app", "--nodes", "9", "--", "x"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->nodes, 3);
  EXPECT_TRUE(o->verbose);
  EXPECT_EQ(o->program, (std::vector<std::string>{"./app", "--nodes", "9", "--", "x"}));
  // Values that look like options are values; "--name=value" works too.
  o = Parse({"--mpiexec-args", "-genv X 1", "--srun-args=--time=5", "--nodes=4", "--job", "j-1", "--", "a"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->mpiexec_args, (std::vector<std::string>{"-genv", "X", "1"}));
  EXPECT_EQ(o->srun_args, (std::vector<std::string>{"--time=5"}));
  EXPECT_EQ(o->nodes, 4);
  // A later value wins; --mpiexec-args add up.
  o = Parse({"--nodes", "3", "--nodes", "4", "--mpiexec-args", "-a", "--mpiexec-args", "-b c", "--", "a"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->nodes, 4);
  EXPECT_EQ(o->mpiexec_args, (std::vector<std::string>{"-a", "-b", "c"}));
  // --halt JOB runs nothing.
  o = Parse({"--halt", "myjob", "--run-dir", "/tmp/x"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->halt, "myjob");
  EXPECT_FALSE(Parse({"--halt", "myjob", "--", "a"}).ok());
  // Help, short or long, anywhere among the options.
  bool help = false;
  EXPECT_TRUE(Parse({"-h"}, &help).ok());
  EXPECT_TRUE(help);
  help = false;
  EXPECT_TRUE(Parse({"--nodes", "2", "--help", "--", "a"}, &help).ok());
  EXPECT_TRUE(help);
  help = false;
  EXPECT_TRUE(Parse({"--", "a", "--help"}, &help).ok());
  EXPECT_FALSE(help);
  // A missing value is named.
  EXPECT_EQ(Parse({"--nodes"}).status().message(), "--nodes needs a value");
}

// The help documents every option (and its variable's scheme and the
// configuration file).
TEST(RunOptionsTest, HelpNamesEveryOption) {
  const std::string help = Usage();
  EXPECT_EQ(help.rfind("usage: dlckpt-run [OPTIONS] -- PROGRAM [ARGS...]\n", 0), 0u) << help;
  for (const char* option :
       {"--nodes N", "--ranks-per-node R", "--spares S", "--group-size G", "--spares-per-group K", "--scheme xor|rs",
        "--parity spares|spread|auto", "--on-spares-exhausted continue|halt", "--capacity SIZE", "--max-files N",
        "--compress none|lz4", "--encode sync|async", "--codec-nice N", "--hosts H1,H2,...", "--launcher mpiexec|srun",
        "--srun PATH", "--srun-args \"ARGS\"", "--launcher-exec PATH", "--mpiexec-args \"ARGS\"",
        "--kill-command CMD", "--persist DIR", "--persist-every N", "--persist-keep K", "--persist-bandwidth R",
        "--restart-from DIR", "--halt-seconds S", "--kill-node N1[,N2] --at WHEN", "--poweroff-node N1[,N2] --at WHEN",
        "--crash-rank R1[,R2] --at WHEN", "--at WHEN", "--mtbf SECONDS", "--weibull-shape K", "--max-failures N",
        "--seed S", "--heartbeat-timeout S", "--heartbeat-address A", "--max-recoveries M", "--timeout SECONDS",
        "--job ID", "--run-dir DIR", "--codec PATH", "--mpiexec PATH", "--preload", "--keep", "--resume",
        "--oversubscribe", "--term-grace SECONDS", "-v,--verbose", "--config FILE", "--veloc-config FILE", "--halt JOB",
        "-h,--help"}) {
    EXPECT_NE(help.find(std::string("\n  ") + option), std::string::npos) << option;
  }
  for (const auto& [var, option] : EnvOptions()) {
    const std::string name = "--" + option;
    EXPECT_TRUE(help.find("\n  " + name) != std::string::npos || help.find("," + name) != std::string::npos) << var;
  }
  for (const char* text : {"DLCKPT_STORE_CAPACITY", "DLCKPT_<OPTION>", "configuration\nfile", "SCR_FLUSH",
                           "$DLCKPT_CONFIG", "2 for bad options", "layout:", "control:",
                           "VeloC's configuration file", "$DLCKPT_VELOC_CONFIG"}) {
    EXPECT_NE(help.find(text), std::string::npos) << text;
  }
}

// Where a value comes from, lowest precedence first: the configuration file,
// the environment, the command line; flags and kills add up.
TEST(RunOptionsTest, PrecedenceOfTheSources) {
  char path[] = "/tmp/dlckpt_run_options_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string text = "nodes = 3\nspares 2\nencode async\nkeep\nkill-node vn1\nat checkpoint:2\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  std::map<std::string, std::string> vars = {{"DLCKPT_CONFIG", path}};
  EnvFn env = [&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  bool help = false;
  auto o = ParseOptions({"--", "app"}, &help, env);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->nodes, 3);  // the file over the default
  EXPECT_EQ(o->encode, "async");
  vars["DLCKPT_NODES"] = "4";
  vars["DLCKPT_KEEP"] = "0";  // a flag's 0 adds nothing, and takes nothing away
  o = ParseOptions({"--", "app"}, &help, env);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->nodes, 4);  // the environment over the file
  EXPECT_EQ(o->spares, 2);
  EXPECT_TRUE(o->keep);
  o = ParseOptions({"--nodes", "5", "--encode=sync", "--kill-node", "vn2", "--at", "time:3", "--", "app"}, &help, env);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->nodes, 5);  // the command line over both
  EXPECT_EQ(o->encode, "sync");
  ASSERT_EQ(o->kills.size(), 2u);  // the file's kill and the command line's
  EXPECT_EQ(o->kills[0].nodes, (std::vector<std::string>{"vn1"}));
  EXPECT_EQ(o->kills[1].nodes, (std::vector<std::string>{"vn2"}));
  // A typo in the file names the file, the line and the closest option.
  const std::string typo = "nodes 3\nencdoe async\n";
  fd = open(path, O_WRONLY | O_TRUNC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, typo.data(), typo.size()), static_cast<ssize_t>(typo.size()));
  close(fd);
  o = ParseOptions({"--", "app"}, &help, env);
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("configuration file " + std::string(path) +
                                      ":2: unknown option --encdoe; did you mean --encode?"),
            std::string::npos)
      << o.status().message();
  unlink(path);
}

// A temporary file holding `text`, removed at the end of the test.
class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    int fd = mkstemp(path_);
    EXPECT_GE(fd, 0);
    if (fd >= 0) {
      EXPECT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
      close(fd);
    }
  }
  ~TempFile() { unlink(path_); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  std::string path() const { return path_; }

 private:
  char path_[40] = "/tmp/dlckpt_run_options_XXXXXX";
};

// VeloC's configuration file (veloc/README.md): its second level and mode map
// onto dlckpt-run's options; every other key is one line saying it is ignored.
TEST(RunOptionsTest, VelocConfigMapsTheSecondLevelAndReportsTheRest) {
  TempFile cfg(
      "# VeloC\nscratch = /dev/shm\npersistent = /pfs/ckpt\npersistent_interval = 0\nmax_versions = 3\n"
      "mode = async\nec_interval = 0\nfailure_domain = rack1\n[extra]\nchksum = true\nsomething_new = 1\n");
  bool help = false;
  auto none = [](const char*) -> const char* { return nullptr; };
  auto o = ParseOptions({"--veloc-config", cfg.path(), "--", "app"}, &help, none);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->veloc_config, cfg.path());
  EXPECT_EQ(o->persist, "/pfs/ckpt");
  EXPECT_EQ(o->persist_every, 1);  // persistent_interval = 0: every checkpoint
  EXPECT_EQ(o->persist_keep, 3);
  EXPECT_EQ(o->encode, "async");
  // scratch (VELOC_Init's) and ec_interval = 0 (what dlckpt does) say nothing.
  ASSERT_EQ(o->notes.size(), 3u) << ::testing::PrintToString(o->notes);
  EXPECT_EQ(o->notes[0], "VeloC configuration file " + cfg.path() +
                             ":8: failure_domain = rack1 is ignored by dlckpt: dlckpt's failure domain is the node (a "
                             "virtual node or a --hosts entry); parity groups are --group-size data nodes "
                             "(veloc/README.md)");
  EXPECT_NE(o->notes[1].find(":10: chksum = true is ignored by dlckpt: always on"), std::string::npos) << o->notes[1];
  EXPECT_NE(o->notes[2].find(":11: something_new = 1 is ignored by dlckpt: not a VeloC setting dlckpt knows"),
            std::string::npos)
      << o->notes[2];
  // Without --veloc-config nothing is read.
  o = ParseOptions({"--", "app"}, &help, none);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_TRUE(o->persist.empty());
  EXPECT_TRUE(o->notes.empty());
  EXPECT_TRUE(o->veloc_config.empty());
  // Values that cannot be mapped, and what turns a feature off.
  std::vector<std::string> notes;
  auto t = VelocConfigTokens("v.cfg", "persistent = /p\npersistent_interval = 60\nec_interval = -1\nmax_versions = 0\n",
                             &notes);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->size(), 1u);
  EXPECT_EQ((*t)[0].tokens, (std::vector<std::string>{"--persist", "/p"}));
  EXPECT_EQ((*t)[0].line, 1u);
  ASSERT_EQ(notes.size(), 3u) << ::testing::PrintToString(notes);
  EXPECT_NE(notes[0].find("v.cfg:2: persistent_interval = 60 is ignored by dlckpt: it is seconds between flushes; "
                          "dlckpt drains every Nth checkpoint (--persist-every N"),
            std::string::npos)
      << notes[0];
  EXPECT_NE(notes[1].find("v.cfg:3: ec_interval = -1 is ignored by dlckpt: dlckpt encodes every checkpoint"),
            std::string::npos)
      << notes[1];
  EXPECT_NE(notes[2].find("v.cfg:4: max_versions = 0 is ignored by dlckpt:"), std::string::npos) << notes[2];
  notes.clear();
  t = VelocConfigTokens("v.cfg", "persistent = /p\npersistent_interval = -1\n", &notes);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(t->empty());  // flushes off: no --persist
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("v.cfg:1: persistent = /p is ignored by dlckpt: persistent_interval = -1"),
            std::string::npos)
      << notes[0];
}

// VeloC's file sits above the configuration file and below the environment
// and the command line; DLCKPT_VELOC_CONFIG or the configuration file's
// veloc-config names it when --veloc-config does not.
TEST(RunOptionsTest, VelocConfigPrecedence) {
  TempFile veloc("persistent = /pfs/a\npersistent_interval = 0\nmax_versions = 4\nmode = async\n");
  TempFile other("persistent = /pfs/other\n");
  TempFile config("persist-every 7\npersist-keep 9\nnodes 3\nveloc-config = " + veloc.path() + "\n");
  std::map<std::string, std::string> vars;
  EnvFn env = [&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  bool help = false;
  // The configuration file names the VeloC file, whose values win over its own.
  vars["DLCKPT_CONFIG"] = config.path();
  auto o = ParseOptions({"--", "app"}, &help, env);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->veloc_config, veloc.path());
  EXPECT_EQ(o->nodes, 3);
  EXPECT_EQ(o->persist, "/pfs/a");
  EXPECT_EQ(o->persist_every, 1);
  EXPECT_EQ(o->persist_keep, 4);
  // The environment over the VeloC file.
  vars["DLCKPT_PERSIST_KEEP"] = "5";
  vars["DLCKPT_ENCODE"] = "sync";
  o = ParseOptions({"--", "app"}, &help, env);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->persist_keep, 5);
  EXPECT_EQ(o->encode, "sync");
  EXPECT_EQ(o->persist, "/pfs/a");
  // The command line over both.
  o = ParseOptions({"--persist", "/pfs/b", "--persist-every", "4", "--persist-keep", "2", "--encode", "async", "--",
                    "app"},
                   &help, env);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->persist, "/pfs/b");
  EXPECT_EQ(o->persist_every, 4);
  EXPECT_EQ(o->persist_keep, 2);
  EXPECT_EQ(o->encode, "async");
  // Which file: --veloc-config over DLCKPT_VELOC_CONFIG over the configuration file's.
  vars["DLCKPT_VELOC_CONFIG"] = other.path();
  o = ParseOptions({"--", "app"}, &help, env);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->veloc_config, other.path());
  EXPECT_EQ(o->persist, "/pfs/other");
  EXPECT_EQ(o->persist_every, 7);  // the configuration file's: the other VeloC file sets none
  o = ParseOptions({"--veloc-config", veloc.path(), "--", "app"}, &help, env);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->veloc_config, veloc.path());
  EXPECT_EQ(o->persist, "/pfs/a");
}

TEST(RunOptionsTest, VelocConfigErrorsNameFileAndLine) {
  bool help = false;
  auto none = [](const char*) -> const char* { return nullptr; };
  auto error = [&](const std::string& text, std::string* path) {
    TempFile f(text);
    *path = f.path();
    auto o = ParseOptions({"--veloc-config", f.path(), "--", "app"}, &help, none);
    return o.ok() ? std::string("(accepted)") : o.status().message();
  };
  std::string path;
  std::string m = error("scratch = /dev/shm\npersistent /pfs\n", &path);
  EXPECT_NE(m.find("VeloC configuration file " + path + ":2: not a \"key = value\" line: persistent /pfs"),
            std::string::npos)
      << m;
  m = error("scratch = /dev/shm\n\nmode = later\n", &path);
  EXPECT_NE(m.find("VeloC configuration file " + path + ":3: --encode: want sync or async, not 'later'"),
            std::string::npos)
      << m;
  m = error("persistent_interval = soon\n", &path);
  EXPECT_NE(m.find("VeloC configuration file " + path + ":1: persistent_interval = soon: want a number of seconds"),
            std::string::npos)
      << m;
  m = error("ec_interval = -2\n", &path);
  EXPECT_NE(m.find(path + ":1: ec_interval = -2"), std::string::npos) << m;
  m = error("max_versions = many\n", &path);
  EXPECT_NE(m.find(path + ":1: max_versions = many"), std::string::npos) << m;
  // An unreadable file: its path and the reason (errno's).
  auto o = ParseOptions({"--veloc-config", "/nonexistent/veloc.cfg", "--", "app"}, &help, none);
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), ENOENT);
  EXPECT_NE(
      o.status().message().find("VeloC configuration file: open /nonexistent/veloc.cfg: No such file or directory"),
      std::string::npos)
      << o.status().message();
}

}  // namespace
}  // namespace dlckpt::run

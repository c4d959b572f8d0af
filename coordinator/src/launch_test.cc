#include "launch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

namespace dlckpt::run {
namespace {

bool Has(const std::vector<std::string>& v, const std::string& w) {
  return std::find(v.begin(), v.end(), w) != v.end();
}

JobSpec App(bool virtual_nodes) {
  JobSpec j;
  j.name = "app";
  j.virtual_nodes = virtual_nodes;
  j.segments = {{"n0", 2}, {"n1", 2}, {"n2", 1}};
  j.program = {"/bin/app", "--size", "a b"};
  j.env = {{"DLCKPT_JOB", "j1"}, {"DLCKPT_EVENTS", "/r/events"}};
  return j;
}

TEST(LaunchTest, HostListGroupsRuns) {
  EXPECT_EQ(HostList({"a", "a", "b", "a"}), "a:2,b:1,a:1");
  EXPECT_EQ(HostList({}), "");
}

TEST(LaunchTest, MpiexecVirtualNodesAreSegments) {
  Options o;
  o.mpiexec = "mpiexec";
  Launch l = MpiexecLaunch(o, App(true));
  std::vector<std::string> want{"mpiexec", "-launcher", "fork", "-genv", "DLCKPT_JOB", "j1", "-genv",
                                "DLCKPT_EVENTS", "/r/events", "-n", "2", "-env", "DLCKPT_NODE", "n0",
                                "/bin/app", "--size", "a b", ":", "-n", "2", "-env", "DLCKPT_NODE", "n1",
                                "/bin/app", "--size", "a b", ":", "-n", "1", "-env", "DLCKPT_NODE", "n2",
                                "/bin/app", "--size", "a b"};
  EXPECT_EQ(l.argv, want);
  EXPECT_TRUE(l.env.empty());
  EXPECT_TRUE(l.files.empty());
}

TEST(LaunchTest, MpiexecHostsAndPreloadMerge) {
  Options o;
  o.mpiexec = "mpiexec";
  o.mpiexec_args = {"-iface", "eth1", "-genv", "LD_PRELOAD", "/x.so"};
  JobSpec j = App(false);
  j.preload = "/lib/p.so";
  Launch l = MpiexecLaunch(o, j);
  EXPECT_EQ(std::vector<std::string>(l.argv.begin(), l.argv.begin() + 6),
            (std::vector<std::string>{"mpiexec", "-iface", "eth1", "-genv", "LD_PRELOAD", "/lib/p.so:/x.so"}));
  auto h = std::find(l.argv.begin(), l.argv.end(), "-hosts");
  ASSERT_NE(h, l.argv.end());
  EXPECT_EQ(*(h + 1), "n0:2,n1:2,n2:1");
  EXPECT_EQ(*(h + 3), "5");
  EXPECT_FALSE(Has(l.argv, "-launcher"));  // Hydra picks ssh or the resource manager's
}

TEST(LaunchTest, OmpiVirtualNodesAreAppContextsWithTheirEnvironment) {
  Options o;
  o.mpiexec = "mpirun";
  JobSpec j = App(true);
  j.forward = {"DLCKPT_HEARTBEAT_KEY"};  // local ranks inherit mpirun's environment
  Launch l = OmpiLaunch(o, j, /*as_root=*/false);
  // -x applies to the app context it stands in: the job's environment is in each.
  std::vector<std::string> want{"mpirun", "--oversubscribe",
                                "-np", "2", "-x", "DLCKPT_NODE=n0", "-x", "DLCKPT_JOB=j1", "-x",
                                "DLCKPT_EVENTS=/r/events", "/bin/app", "--size", "a b", ":",
                                "-np", "2", "-x", "DLCKPT_NODE=n1", "-x", "DLCKPT_JOB=j1", "-x",
                                "DLCKPT_EVENTS=/r/events", "/bin/app", "--size", "a b", ":",
                                "-np", "1", "-x", "DLCKPT_NODE=n2", "-x", "DLCKPT_JOB=j1", "-x",
                                "DLCKPT_EVENTS=/r/events", "/bin/app", "--size", "a b"};
  EXPECT_EQ(l.argv, want);
  EXPECT_TRUE(l.env.empty());
  EXPECT_TRUE(l.files.empty());
}

TEST(LaunchTest, OmpiAsRootSetsTheDocumentedConsent) {
  Options o;
  Launch l = OmpiLaunch(o, App(true), /*as_root=*/true);
  EXPECT_EQ(l.env, (std::vector<std::string>{"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"}));
  EXPECT_FALSE(Has(l.argv, "--allow-run-as-root"));
}

TEST(LaunchTest, OmpiHostsArgsPreloadMergeAndAgent) {
  Options o;
  o.mpiexec = "/usr/bin/mpirun.openmpi";
  o.mpiexec_args = {"--mca", "btl_tcp_if_include", "eth1", "-x", "LD_PRELOAD=/x.so", "-x", "A=b c"};
  o.launcher_exec = "/t/agent";
  JobSpec j = App(false);
  j.segments = {{"h0", 2}, {"h1", 1}, {"h0", 1}};  // h0 again after h1: 3 slots, in order
  j.env = {{"DLCKPT_JOB", "j1"}};
  j.preload = "/lib/p.so";
  j.forward = {"DLCKPT_HEARTBEAT_KEY"};  // from mpirun's environment: no value on the command line
  Launch l = OmpiLaunch(o, j, /*as_root=*/false);
  std::vector<std::string> ctx{"-x", "LD_PRELOAD=/lib/p.so:/x.so", "-x", "DLCKPT_JOB=j1", "-x", "A=b c",
                               "-x", "DLCKPT_HEARTBEAT_KEY", "/bin/app", "--size", "a b"};
  std::vector<std::string> want{"/usr/bin/mpirun.openmpi", "--mca", "btl_tcp_if_include", "eth1",
                                "--mca", "plm_rsh_agent", "/t/agent", "-np", "2", "--host", "h0:3"};
  want.insert(want.end(), ctx.begin(), ctx.end());
  want.insert(want.end(), {":", "-np", "1", "--host", "h1:1"});
  want.insert(want.end(), ctx.begin(), ctx.end());
  want.insert(want.end(), {":", "-np", "1", "--host", "h0:3"});
  want.insert(want.end(), ctx.begin(), ctx.end());
  EXPECT_EQ(l.argv, want);
  EXPECT_FALSE(Has(l.argv, "--oversubscribe"));  // hosts give their slots
}

TEST(LaunchTest, OmpiLdPreloadOfArgsStaysWithoutAJobPreload) {
  Options o;
  o.mpiexec = "mpirun";
  o.mpiexec_args = {"-x", "LD_PRELOAD=/x.so"};
  JobSpec j = App(true);
  j.segments = {{"n0", 1}};
  j.env.clear();
  Launch l = OmpiLaunch(o, j, false);
  EXPECT_EQ(l.argv, (std::vector<std::string>{"mpirun", "--oversubscribe", "-np", "1", "-x", "DLCKPT_NODE=n0",
                                              "-x", "LD_PRELOAD=/x.so", "/bin/app", "--size", "a b"}));
}

TEST(LaunchTest, MpiLaunchFollowsTheFlavour) {
  Options o;
  o.mpiexec = "launcher";
  o.mpi_flavor = "openmpi";
  EXPECT_TRUE(Has(MpiLaunch(o, App(true), false).argv, "--oversubscribe"));
  o.mpi_flavor = "mpich";
  EXPECT_TRUE(Has(MpiLaunch(o, App(true), false).argv, "-launcher"));
}

TEST(LaunchTest, SrunVirtualNodesUseMultiProgOnThisHost) {
  Options o;
  o.job = "j1";
  o.srun_args = {"--partition=p"};
  JobSpec j = App(true);
  j.preload = "/lib/p.so";
  auto l = SrunLaunch(o, j, "/r", "vm");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->argv[0], "srun");
  for (const char* w : {"--mpi=pmi2", "--kill-on-bad-exit=1", "--overlap", "--ntasks=5", "--nodes=1",
                        "--nodelist=vm", "--overcommit", "--job-name=dlckpt-j1-app", "--partition=p"}) {
    EXPECT_TRUE(Has(l->argv, w)) << w;
  }
  EXPECT_EQ(std::vector<std::string>(l->argv.end() - 2, l->argv.end()),
            (std::vector<std::string>{"--multi-prog", "/r/app.multi-prog"}));
  ASSERT_EQ(l->files.size(), 1u);
  EXPECT_EQ(l->files[0].first, "/r/app.multi-prog");
  EXPECT_EQ(l->files[0].second,
            "0-1 env 'DLCKPT_NODE=n0' 'LD_PRELOAD=/lib/p.so' '/bin/app' '--size' 'a b'\n"
            "2-3 env 'DLCKPT_NODE=n1' 'LD_PRELOAD=/lib/p.so' '/bin/app' '--size' 'a b'\n"
            "4-4 env 'DLCKPT_NODE=n2' 'LD_PRELOAD=/lib/p.so' '/bin/app' '--size' 'a b'\n");
  // The job's environment reaches the ranks through srun's own.
  EXPECT_EQ(l->env, (std::vector<std::string>{"DLCKPT_JOB=j1", "DLCKPT_EVENTS=/r/events"}));
}

TEST(LaunchTest, SrunHostsArePlacedRankByRank) {
  Options o;
  o.job = "j1";
  o.ranks_per_node = 2;
  auto l = SrunLaunch(o, App(false), "/r", "vm");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_TRUE(Has(l->argv, "--distribution=arbitrary"));
  EXPECT_FALSE(Has(l->argv, "--overcommit"));
  // One rank per node, and a host now runs two (a relaunch on a survivor):
  // the step must be allowed to overcommit the allocation's CPUs.
  o.ranks_per_node = 1;
  auto over = SrunLaunch(o, App(false), "/r", "vm");
  ASSERT_TRUE(over.ok()) << over.status().ToString();
  EXPECT_TRUE(Has(over->argv, "--overcommit"));
  EXPECT_FALSE(Has(l->argv, "--nodelist=vm"));
  ASSERT_EQ(l->files.size(), 2u);
  EXPECT_EQ(l->files[0], (std::pair<std::string, std::string>{"/r/app.hosts", "n0\nn0\nn1\nn1\nn2\n"}));
  EXPECT_EQ(l->files[1].second, "0-4 env '/bin/app' '--size' 'a b'\n");
  EXPECT_TRUE(Has(l->env, "SLURM_HOSTFILE=/r/app.hosts"));
}

TEST(LaunchTest, SrunRefusesWhatMultiProgCannotCarry) {
  Options o;
  JobSpec j = App(true);
  j.program.push_back("it's");
  auto l = SrunLaunch(o, j, "/r", "vm");
  EXPECT_EQ(l.status().code(), EINVAL);
  EXPECT_NE(l.status().ToString().find("it's"), std::string::npos);
}

TEST(LaunchTest, SlurmHostsOutsideAnAllocation) {
  unsetenv("SLURM_JOB_NODELIST");
  auto h = SlurmAllocationHosts();
  EXPECT_EQ(h.status().code(), ENOENT);
  EXPECT_NE(h.status().ToString().find("salloc"), std::string::npos);
}

}  // namespace
}  // namespace dlckpt::run

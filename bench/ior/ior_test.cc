// Unit tests of dlckpt-ior's option parser, reduction and reports.
#include "ior.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace dlckpt::ior {
namespace {

Result<Options> Parse(std::vector<std::string> args) { return ParseOptions(args); }

TEST(IorOptions, Defaults) {
  auto o = Parse({});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->block_size, 1u << 20);
  EXPECT_EQ(o->transfer_size, 256u << 10);
  EXPECT_EQ(o->segments, 1u);
  EXPECT_TRUE(o->write);
  EXPECT_TRUE(o->read);  // neither -w nor -r: both
  EXPECT_FALSE(o->file_per_proc);
  EXPECT_EQ(o->repetitions, 1);
  EXPECT_EQ(o->test_file, "testFile");
  EXPECT_EQ(o->format, Format::kDefault);
}

TEST(IorOptions, TheIssueCommandLine) {
  auto o = Parse({"-a", "POSIX", "-b", "16m", "-t", "1m", "-s", "2", "-F", "-w", "-r", "-e", "-C", "-i",
                  "3", "-o", "/dlckpt/testFile", "-k", "-W", "-R", "-O", "summaryFormat=JSON"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->block_size, 16u << 20);
  EXPECT_EQ(o->transfer_size, 1u << 20);
  EXPECT_EQ(o->segments, 2u);
  EXPECT_TRUE(o->file_per_proc && o->write && o->read && o->fsync && o->reorder && o->keep_file);
  EXPECT_TRUE(o->check_write && o->check_read);
  EXPECT_EQ(o->repetitions, 3);
  EXPECT_EQ(o->test_file, "/dlckpt/testFile");
  EXPECT_EQ(o->format, Format::kJson);
}

TEST(IorOptions, AttachedValuesEqualsAndBundles) {
  auto o = Parse({"-b=256m", "-t64m", "-wFe", "-i=5", "-O", "summaryFormat=default,summaryFile=/tmp/x.json"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->block_size, 256u << 20);
  EXPECT_EQ(o->transfer_size, 64u << 20);
  EXPECT_TRUE(o->write && o->file_per_proc && o->fsync);
  EXPECT_FALSE(o->read);  // -w alone: write only
  EXPECT_EQ(o->repetitions, 5);
  EXPECT_EQ(o->summary_file, "/tmp/x.json");
  auto v = Parse({"-vvw", "--dlckpt.checkpoint"});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->verbose, 2);
  EXPECT_TRUE(v->dlckpt_checkpoint);
  EXPECT_TRUE(Parse({"-h"})->help);
  EXPECT_TRUE(Parse({"--help"})->help);
}

TEST(IorOptions, Errors) {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  } cases[] = {
      {{"-a", "MPIIO"}, "only the POSIX API"},
      {{"-b", "1m", "-t", "3k"}, "multiple of the transfer size"},
      {{"-t", "12"}, "multiple of 8"},
      {{"-b", "lots"}, "-b: 'lots' is not a size"},
      {{"-i", "0"}, "-i: '0' is not an integer"},
      {{"-y"}, "unknown option -y"},
      {{"-B"}, "option -B is not supported: O_DIRECT"},
      {{"-T", "60"}, "option -T is not supported"},
      {{"-b"}, "-b: 1 required"},
      {{"file"}, "not expected: file"},
      {{"-O", "summaryFormat=CSV"}, "supported are default and JSON"},
      {{"-O", "stoneWallingWearOut=1"}, "needs -D"},
      {{"-O", "hintsFileName=x"}, "-O hintsFileName: unsupported"},
      {{"-u"}, "-u (unique directory per task) needs -F"},
      {{"-C", "-Z"}, "give one"},
      {{"-l", "zeros"}, "-l zeros: supported data packet types"},
      {{"-D", "-1"}, "-D: '-1' is not an integer"},
      {{"--posix.odirect"}, "unknown option --posix.odirect"},
      // A typo of a long option gets the closest one.
      {{"--dlckpt.checkpiont"}, "unknown option --dlckpt.checkpiont; did you mean --dlckpt.checkpoint?"},
  };
  for (const auto& c : cases) {
    auto o = Parse(c.args);
    ASSERT_FALSE(o.ok()) << c.args[0];
    EXPECT_EQ(o.status().code(), EINVAL);
    EXPECT_NE(o.status().message().find(c.says), std::string::npos) << o.status().message();
  }
}

TEST(IorOptions, UnreadableScriptNamesPathAndErrno) {
  auto o = Parse({"-f", "/nonexistent/dir/script"});
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), ENOENT);
  EXPECT_NE(o.status().ToString().find("-f /nonexistent/dir/script: cannot read the script"), std::string::npos)
      << o.status().ToString();
}

TEST(IorFormat, HumanReadableAndPrettyDouble) {
  EXPECT_EQ(HumanReadable(1 << 20), "1 MiB");
  EXPECT_EQ(HumanReadable(262144), "262144 bytes");
  EXPECT_EQ(HumanReadable(4ull << 30), "4 GiB");
  EXPECT_EQ(HumanReadable(3ull << 29), "1.50 GiB");
  EXPECT_EQ(PrettyDouble(0.000244), "0.000244   ");
  EXPECT_EQ(PrettyDouble(584.49), "584.49     ");
  EXPECT_EQ(PrettyDouble(16384), "16384      ");
  EXPECT_EQ(PrettyDouble(-1), "   -       ");
}

TEST(IorFormat, ReduceUsesFirstStartAndLastEnd) {
  Timers t = {1.0, 1.5, 2.0, 6.0, 6.0, 7.0};
  PhaseResult p = Reduce(Access::kWrite, 2, t, 0.01, 4ull << 30, 1 << 20);
  EXPECT_DOUBLE_EQ(p.open, 0.5);
  EXPECT_DOUBLE_EQ(p.xfer, 4.0);
  EXPECT_DOUBLE_EQ(p.close, 1.0);
  EXPECT_DOUBLE_EQ(p.total, 6.0);
  EXPECT_DOUBLE_EQ(p.bw, static_cast<double>(4ull << 30) / 6.0);
  EXPECT_DOUBLE_EQ(p.iops, 4096.0 / 4.0);  // transfers over the access time
  EXPECT_DOUBLE_EQ(p.latency, 0.01);
  EXPECT_EQ(p.iteration, 2);
}

RunInfo TwoIterations() {
  RunInfo info;
  info.command_line = "dlckpt-ior -a POSIX -b 16m -t 1m -F -w -r -i 2 -o /dlckpt/t";
  info.machine = "Linux host";
  info.began = info.start_time = info.finished = "Tue May  9 12:14:07 2023";
  info.path = "/dlckpt/t.00000000";
  info.target = "memfs";
  info.tasks = 4;
  info.nodes = 4;
  info.tasks_per_node = 1;
  uint64_t agg = 64ull << 20;
  // write 1 s and 2 s, read 0.5 s and 0.25 s
  info.phases.push_back(Reduce(Access::kWrite, 0, {0, 0, 0, 1, 1, 1}, 0.01, agg, 1 << 20));
  info.phases.push_back(Reduce(Access::kRead, 0, {0, 0, 0, 0.5, 0.5, 0.5}, 0.01, agg, 1 << 20));
  info.phases.push_back(Reduce(Access::kWrite, 1, {0, 0, 0, 2, 2, 2}, 0.01, agg, 1 << 20));
  info.phases.push_back(Reduce(Access::kRead, 1, {0, 0, 0, 0.25, 0.25, 0.25}, 0.01, agg, 1 << 20));
  info.removes.push_back({0, 0.001});
  info.removes.push_back({1, 0.002});
  return info;
}

TEST(IorFormat, SummaryStatistics) {
  auto o = Parse({"-b", "16m", "-t", "1m", "-F", "-i", "2"});
  ASSERT_TRUE(o.ok());
  RunInfo info = TwoIterations();
  Summary w = Summarize(*o, info, Access::kWrite);
  EXPECT_EQ(w.count, 2);
  EXPECT_DOUBLE_EQ(w.bw_max, 64.0 * (1 << 20));
  EXPECT_DOUBLE_EQ(w.bw_min, 32.0 * (1 << 20));
  EXPECT_DOUBLE_EQ(w.bw_mean, 48.0 * (1 << 20));
  EXPECT_DOUBLE_EQ(w.bw_sd, 16.0 * (1 << 20));  // population deviation, as IOR
  EXPECT_DOUBLE_EQ(w.ops_max, 64.0);
  EXPECT_DOUBLE_EQ(w.mean_time, 1.5);
}

TEST(IorFormat, TextReportHasIorsLines) {
  auto o = Parse({"-b", "16m", "-t", "1m", "-F", "-i", "2", "-o", "/dlckpt/t"});
  ASSERT_TRUE(o.ok());
  std::string r = FormatReport(*o, TwoIterations());
  for (const char* line : {
           "Began               : Tue May  9 12:14:07 2023\n",
           "\nOptions: \napi                 : POSIX\n",
           "access              : file-per-process\n",
           "ordering inter file : no tasks offsets\n",
           "tasks               : 4\n",
           "clients per node    : 1\n",
           "xfersize            : 1 MiB\n",
           "aggregate filesize  : 64 MiB\n",
           "\nResults: \n\naccess    bw(MiB/s)  IOPS       Latency(s)  block(KiB) xfer(KiB)  open(s)    wr/rd(s)   close(s)   total(s)   iter\n",
           "write     64.00      64.00      0.010000   16384      1024.00    0.000000   1.00       0.000000   1.00       0   \n",
           "read      256.00     256.00     0.010000   16384      1024.00    0.000000   0.250000   0.000000   0.250000   1   \n",
           "remove    -          -          -           -          -          -          -          -          0.002000   1   \n",
           "Max Write: 64.00 MiB/sec (67.11 MB/sec)\nMax Read:  256.00 MiB/sec (268.44 MB/sec)\n\nSummary of all tests:\n",
           "Operation   Max(MiB)   Min(MiB)  Mean(MiB)     StdDev   Max(OPs)   Min(OPs)  Mean(OPs)     StdDev    Mean(s) Stonewall(s) Stonewall(MiB) Test# #Tasks tPN reps fPP reord reordoff reordrand seed segcnt   blksiz    xsize aggs(MiB)   API RefNum\n",
           "write          64.00      32.00      48.00      16.00      64.00      32.00      48.00      16.00    1.50000         NA            NA     0      4   1    2   1     0        1         0    0      1 16777216  1048576      64.0 POSIX      0\n",
           "Finished            : Tue May  9 12:14:07 2023\n",
       }) {
    EXPECT_NE(r.find(line), std::string::npos) << "missing:\n" << line << "\nin:\n" << r;
  }
  // Rows come in execution order, each iteration's remove line after it.
  EXPECT_LT(r.find("0.001000   0"), r.find("write     32.00"));
}

TEST(IorFormat, JsonReportHasIorsKeys) {
  auto o = Parse({"-b", "16m", "-t", "1m", "-F", "-i", "2", "-C", "-O", "summaryFormat=JSON"});
  ASSERT_TRUE(o.ok());
  RunInfo info = TwoIterations();
  info.command_line = "dlckpt-ior \"quoted\"\tand tab";
  std::string r = FormatReport(*o, info);
  for (const char* key : {"\"tests\": [", "\"Results\": [", "\"access\": \"write\"", "\"bwMiB\": 64.0",
                          "\"max\": {", "\"writeMiB\": 64.0", "\"readMB\": 268.4355", "\"summary\": [",
                          "\"operation\": \"read\"", "\"bwMeanMIB\": 192.0", "\"reorderTasks\": 1",
                          "\"ordering inter file\": \"constant task offset\"", "\"task offset\": 1",
                          "\"Command line\": \"dlckpt-ior \\\"quoted\\\"\\tand tab\"",
                          "\"access\": \"remove\""}) {
    EXPECT_NE(r.find(key), std::string::npos) << "missing " << key << " in:\n" << r;
  }
  // Balanced brackets, nothing after the document.
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < r.size(); ++i) {
    char c = r[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '{' || c == '[') ++depth;
    if (c == '}' || c == ']') --depth;
    ASSERT_GE(depth, 0);
  }
  EXPECT_EQ(depth, 0);
  EXPECT_EQ(r.back(), '\n');
  EXPECT_EQ(r.substr(r.size() - 2), "}\n");
}


TEST(IorOptions, Issue21Options) {
  auto o = Parse({"-z", "-D", "10", "-m", "-Y", "-E", "-F", "-u", "-x", "-q", "-l", "offset", "-c", "-Z", "-X", "7",
                  "-O", "stoneWallingWearOut=1"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_TRUE(o->random_offset && o->multi_file && o->fsync_per_write && o->use_existing && o->unique_dir);
  EXPECT_TRUE(o->single_xfer && o->quit_on_error && o->collective && o->reorder_random && o->wear_out);
  EXPECT_EQ(o->deadline, 10);
  EXPECT_EQ(o->random_seed, 7);
  EXPECT_EQ(o->packet, DataPacket::kOffset);
  // Bundled, IOR's one-letter packet names, -l=VALUE.
  auto b = Parse({"-zmYEqxcw", "-l=t", "-D5"});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE(b->random_offset && b->multi_file && b->fsync_per_write && b->use_existing && b->quit_on_error);
  EXPECT_TRUE(b->single_xfer && b->collective && b->write);
  EXPECT_FALSE(b->read);
  EXPECT_EQ(b->packet, DataPacket::kTimestamp);
  EXPECT_EQ(b->deadline, 5);
  EXPECT_EQ(Parse({"-l", "i"})->packet, DataPacket::kIncompressible);
  EXPECT_EQ(Parse({"-l", "incompressible"})->packet, DataPacket::kIncompressible);
}

TEST(IorOptions, DirectivesAreIorsLongNamesCaseInsensitive) {
  auto o = Parse({"-O", "blockSize=4m,transferSize=64k, segmentCount=3 ,filePerProc=1", "-O",
                  "RANDOMOFFSET=1,deadlineForStonewalling=2,stoneWallingWearOut=1,dataPacketType=offset"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->block_size, 4u << 20);
  EXPECT_EQ(o->transfer_size, 64u << 10);
  EXPECT_EQ(o->segments, 3u);
  EXPECT_TRUE(o->file_per_proc && o->random_offset && o->wear_out);
  EXPECT_EQ(o->deadline, 2);
  EXPECT_EQ(o->packet, DataPacket::kOffset);
  Options x;
  Status s = ApplyDirective("keepFile=2", "-O", &x);
  EXPECT_NE(s.message().find("-O keepFile: '2' is not an integer in [0, 1]"), std::string::npos) << s.message();
}

TEST(IorOptions, Script) {
  Options o;
  Status s = ApplyScript(
      "comment before the start\nIOR START\n  # a comment\n  blockSize=2m, transferSize=1m\n\n"
      "  writeFile=1\n  filePerProc=1\nRUN\nIOR STOP\nafter the stop\n",
      "s.ior", &o);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(o.block_size, 2u << 20);
  EXPECT_EQ(o.transfer_size, 1u << 20);
  EXPECT_TRUE(o.write && o.file_per_proc);
  Options two;
  s = ApplyScript("IOR START\nblockSize=2m\nRUN\nblockSize=4m\nRUN\nIOR STOP\n", "two.ior", &two);
  EXPECT_NE(s.message().find("two.ior:4: a second test after RUN"), std::string::npos) << s.message();
  Options bad;
  s = ApplyScript("IOR START\nnoSuchKey=1\nIOR STOP\n", "bad.ior", &bad);
  EXPECT_NE(s.message().find("bad.ior:2 noSuchKey: unsupported"), std::string::npos) << s.message();
  EXPECT_FALSE(ApplyScript("blockSize=1m\n", "x", &bad).ok());              // no IOR START
  EXPECT_FALSE(ApplyScript("IOR START\nblockSize=1m\n", "x", &bad).ok());  // no IOR STOP
}

TEST(IorOptions, ScriptFileAppliedWhereDashFStands) {
  std::string path = testing::TempDir() + "/dlckpt_ior_test_script.ior";
  {
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("IOR START\nblockSize=8m\ntransferSize=2m\nrepetitions=4\nRUN\nIOR STOP\n", f);
    std::fclose(f);
  }
  auto o = Parse({"-b", "1m", "-f", path, "-i", "2"});  // -b before: overridden; -i after: wins
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->block_size, 8u << 20);
  EXPECT_EQ(o->transfer_size, 2u << 20);
  EXPECT_EQ(o->repetitions, 2);
  EXPECT_EQ(o->script, path);
  std::remove(path.c_str());
}

TEST(IorPatterns, TransferOrderIsAPermutationSharedBySeed) {
  auto seq = TransferOrder(100, false, 3);
  for (uint64_t k = 0; k < 100; ++k) EXPECT_EQ(seq[k], k);
  auto r1 = TransferOrder(100, true, 3), r2 = TransferOrder(100, true, 3), r3 = TransferOrder(100, true, 4);
  EXPECT_EQ(r1, r2);  // every rank draws the same order from the same seed
  EXPECT_NE(r1, seq);
  EXPECT_NE(r1, r3);
  std::vector<uint64_t> sorted = r1;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, seq);
  EXPECT_TRUE(TransferOrder(0, true, 1).empty());
}

TEST(IorPatterns, RandomReadOwnerIsOnAnotherNode) {
  // 4 nodes x 2 tasks: the owner is at least Q nodes away, same slot on its node.
  for (uint64_t seed = 0; seed < 20; ++seed) {
    for (int rank = 0; rank < 8; ++rank) {
      int owner = RandomReadOwner(rank, 8, 2, 1, seed);
      EXPECT_NE(owner / 2, rank / 2) << rank;
      EXPECT_EQ(owner % 2, rank % 2);
      EXPECT_EQ(owner, RandomReadOwner(rank, 8, 2, 1, seed));  // deterministic
    }
  }
  EXPECT_EQ(RandomReadOwner(3, 4, 4, 1, 5), 3);  // one node: own data
  EXPECT_EQ(RandomReadOwner(1, 4, 1, 4, 5), 1);  // -Q 4 with 4 nodes: none far enough
}

TEST(IorPatterns, DataPackets) {
  std::vector<uint64_t> w(4), v(4);
  FillTransfer(DataPacket::kOffset, 1, 0, 4096, 0, std::span<uint64_t>(w));
  EXPECT_EQ(w, (std::vector<uint64_t>{4096, 4104, 4112, 4120}));
  FillTransfer(DataPacket::kTimestamp, 3, 0, 0, 0x12345678u, std::span<uint64_t>(w));
  EXPECT_EQ(w[0], 0x1234567800000003ull);
  EXPECT_EQ(w[3], w[0]);
  FillTransfer(DataPacket::kGeneric, 2, 1, 8192, 0, std::span<uint64_t>(w));
  EXPECT_EQ(w[0], 8192u);  // the offset first, as before -l existed
  FillTransfer(DataPacket::kGeneric, 2, 1, 0, 0, std::span<uint64_t>(v));
  EXPECT_EQ(w[1], v[1]);  // the rest is the same in every transfer
  FillTransfer(DataPacket::kGeneric, 3, 1, 0, 0, std::span<uint64_t>(v));
  EXPECT_NE(w[1], v[1]);  // and differs between owners
  FillTransfer(DataPacket::kIncompressible, 2, 1, 0, 0, std::span<uint64_t>(w));
  FillTransfer(DataPacket::kIncompressible, 2, 1, 32, 0, std::span<uint64_t>(v));
  EXPECT_NE(w, v);  // no two transfers alike
  EXPECT_STREQ(DataPacketName(DataPacket::kOffset), "o");
}

TEST(IorFormat, BannerStonewallAndReorderRandom) {
  auto o = Parse({"-b", "16m", "-t", "1m", "-F", "-i", "2", "-z", "-Z", "-X", "5", "-D", "3", "-O",
                  "stoneWallingWearOut=1"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  RunInfo info = TwoIterations();
  info.phases[0].stonewalled = true;
  info.phases[0].pairs_min = 10;
  info.phases[0].pairs_max = 16;
  info.phases[0].pairs_sum = 52;
  info.phases[0].stonewall_time = 3.0;
  std::string r = FormatReport(*o, info);
  EXPECT_EQ(r.rfind("IOR-3.3.0+dlckpt: MPI Coordinated Test of Parallel I/O\nBegan               : ", 0), 0u) << r;
  for (const char* line : {
           "ordering in a file  : random\n", "ordering inter file : random task offset\n",
           "task offset         : 1\n", "reorder random seed : 5\n", "stonewallingTime    : 3\n",
           "stoneWallingWearOut : 1\n",
           "stonewalling pairs accessed min: 10 max: 16 -- min data: 0.0 GiB mean data: 0.0 GiB time: 3.0s\n",
       }) {
    EXPECT_NE(r.find(line), std::string::npos) << "missing:\n" << line << "\nin:\n" << r;
  }
  // Summary: Stonewall(s) and Stonewall(MiB) of the stonewalled write, reordrand 1, seed 5.
  EXPECT_NE(r.find("      3.00         52.00     0      4   1    2   1     0        1         1    5 "),
            std::string::npos)
      << r;
  o->format = Format::kJson;
  std::string j = FormatReport(*o, info);
  for (const char* key : {"\"Version\": \"3.3.0+dlckpt\"", "\"randomOffset\": 1", "\"reorderTasksRandom\": 1",
                          "\"reorderTasksRandomSeed\": 5", "\"deadlineForStonewalling\": 3",
                          "\"stoneWallingWearOut\": 1", "\"stonewallPairsMax\": 16", "\"StoneWallTime\": 3.0",
                          "\"dataPacketType\": \"g\""}) {
    EXPECT_NE(j.find(key), std::string::npos) << "missing " << key << " in:\n" << j;
  }
}

TEST(IorFormat, JsonFileSystemKeysAreIors) {
  auto o = Parse({"-O", "summaryFormat=JSON"});
  ASSERT_TRUE(o.ok());
  RunInfo info = TwoIterations();
  info.fs = {true, 80ull << 30, 60ull << 30, 4ull << 20, 3ull << 20};
  std::string j = FormatReport(*o, info);
  for (const char* key : {"\"Capacity\": \"80.0 GiB\"", "\"Used Capacity\": \"25.0%\"", "\"Inodes\": \"4.0 Mi\"",
                          "\"Used Inodes\": \"25.0%\""}) {
    EXPECT_NE(j.find(key), std::string::npos) << "missing " << key << " in:\n" << j;
  }
  FsStrings none = FsJson(FsStats{});
  EXPECT_TRUE(none.capacity.empty());
}

}  // namespace
}  // namespace dlckpt::ior

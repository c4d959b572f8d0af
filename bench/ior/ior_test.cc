// Unit tests of dlckpt-ior's option parser, reduction and reports.
#include "ior.h"

#include <gtest/gtest.h>

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
      {{"-x"}, "unknown option -x"},
      {{"-b"}, "-b needs a value"},
      {{"file"}, "unexpected argument 'file'"},
      {{"-O", "summaryFormat=CSV"}, "supported are default and JSON"},
      {{"-O", "stoneWallingWearOut=1"}, "unsupported"},
      {{"--posix.odirect"}, "unexpected argument"},
  };
  for (const auto& c : cases) {
    auto o = Parse(c.args);
    ASSERT_FALSE(o.ok()) << c.args[0];
    EXPECT_EQ(o.status().code(), EINVAL);
    EXPECT_NE(o.status().message().find(c.says), std::string::npos) << o.status().message();
  }
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
  for (const char* key : {"\"tests\": [", "\"Results\": [", "\"access\": \"write\"", "\"bwMiB\": 64.0000",
                          "\"max\": {", "\"writeMiB\": 64.0000", "\"readMB\": 268.4355", "\"summary\": [",
                          "\"operation\": \"read\"", "\"bwMeanMIB\": 192.0000", "\"reorderTasks\": 1",
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

}  // namespace
}  // namespace dlckpt::ior

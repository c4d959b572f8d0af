// Unit tests of the SCR API's pure parts: SCR_Config parsing and layering,
// the SCR_Need_checkpoint policy, path normalisation and the dataset record.
#include "scr_core.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "scr.h"

namespace dlckpt::scr {
namespace {

TEST(ScrConfig, ParsesSetUnsetGetAndDescriptors) {
  auto set = ParseConfig("scr_checkpoint_seconds=30");
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(set->kind, ConfigOp::kSet);
  EXPECT_EQ(set->key, "SCR_CHECKPOINT_SECONDS");
  EXPECT_EQ(set->value, "30");
  auto unset = ParseConfig("SCR_FLUSH=");
  ASSERT_TRUE(unset.ok());
  EXPECT_EQ(unset->kind, ConfigOp::kUnset);
  auto get = ParseConfig("  SCR_FLUSH ");
  ASSERT_TRUE(get.ok());
  EXPECT_EQ(get->kind, ConfigOp::kGet);
  EXPECT_EQ(get->key, "SCR_FLUSH");
  auto desc = ParseConfig("CKPT=0 TYPE=XOR SET_SIZE=8");
  ASSERT_TRUE(desc.ok());
  EXPECT_EQ(desc->kind, ConfigOp::kSet);
  EXPECT_EQ(desc->key, "CKPT");
  EXPECT_EQ(desc->value, "CKPT=0 TYPE=XOR SET_SIZE=8");
  auto sub = ParseConfig("CKPT=0 TYPE");
  ASSERT_TRUE(sub.ok());
  EXPECT_EQ(sub->kind, ConfigOp::kGet);
  EXPECT_EQ(sub->sub_key, "TYPE");
  EXPECT_FALSE(ParseConfig("").ok());
  EXPECT_FALSE(ParseConfig("A-B=1").ok());
  EXPECT_FALSE(ParseConfig("CKPT TYPE=XOR").ok());
}

TEST(ScrConfig, EnvironmentOverridesAppOverridesFile) {
  std::map<std::string, std::string> env{{"SCR_DEBUG", "2"}};
  Config c([&](const char* k) -> const char* {
    auto it = env.find(k);
    return it == env.end() ? nullptr : it->second.c_str();
  });
  char path[] = "/tmp/scr_core_test.XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  {
    std::ofstream f(path);
    f << "# comment\nSCR_DEBUG=1\nSCR_CHECKPOINT_SECONDS = 5\n\nSCR_FLUSH=3  # trailing\n";
  }
  // "KEY = VALUE" is not KEY=VALUE: the file is refused, naming the line.
  Status bad = c.LoadFile(path);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find(":3:"), std::string::npos) << bad.ToString();
  {
    std::ofstream f(path);
    f << "# comment\nSCR_DEBUG=1\nSCR_CHECKPOINT_SECONDS=5\n\nSCR_FLUSH=3  # trailing\n";
  }
  ASSERT_TRUE(c.LoadFile(path).ok());
  std::remove(path);
  EXPECT_EQ(*c.Get("SCR_FLUSH"), "3");
  EXPECT_EQ(*c.Get("SCR_DEBUG"), "2");  // environment wins
  c.Set("SCR_FLUSH", "7");
  EXPECT_EQ(*c.Get("SCR_FLUSH"), "7");  // SCR_Config over the file
  c.Unset("SCR_FLUSH");
  EXPECT_EQ(*c.Get("SCR_FLUSH"), "3");
  EXPECT_FALSE(c.Get("SCR_PREFIX").has_value());
  EXPECT_EQ(*c.Int("SCR_CHECKPOINT_INTERVAL", 4), 4);
  EXPECT_DOUBLE_EQ(*c.Double("SCR_CHECKPOINT_SECONDS", 0), 5.0);
  c.Set("SCR_CHECKPOINT_INTERVAL", "ten");
  EXPECT_FALSE(c.Int("SCR_CHECKPOINT_INTERVAL", 0).ok());
  EXPECT_FALSE(c.LoadFile("/nonexistent/scr.conf").ok());
}

// SCR_CONF_FILE names something that is not a small regular file: a FIFO
// (no writer: opening it would wait forever), a device, a directory, a file
// larger than the bound. Each is refused at once, naming the path.
TEST(ScrConfig, AConfigurationFileThatIsNotASmallRegularFileIsRefusedWithoutBlocking) {
  alarm(20);  // a hang ends the test (SIGALRM) instead of the suite's timeout
  char dir[] = "/tmp/scr_core_test.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string fifo = std::string(dir) + "/fifo", big = std::string(dir) + "/big";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  {
    std::ofstream f(big);
    f << std::string(Config::kMaxConfigBytes + 1, '#');
  }
  Config c([](const char*) -> const char* { return nullptr; });
  for (const std::string& path : {fifo, std::string("/dev/zero"), std::string(dir), big}) {
    Status s = c.LoadFile(path);
    EXPECT_FALSE(s.ok()) << path;
    EXPECT_NE(s.message().find("SCR_CONF_FILE"), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find(path), std::string::npos) << s.ToString();
  }
  EXPECT_EQ(c.LoadFile(fifo).code(), EINVAL);
  EXPECT_EQ(c.LoadFile(big).code(), EFBIG);
  std::remove(fifo.c_str());
  std::remove(big.c_str());
  rmdir(dir);
  alarm(0);
}

TEST(ScrMessages, ShownQuotesAtMostTwoHundredBytes) {
  EXPECT_EQ(Shown(""), "");
  EXPECT_EQ(Shown("step.1"), "step.1");
  const std::string exact(kShownBytes, 'a');
  EXPECT_EQ(Shown(exact), exact);
  const std::string huge = "ckpt/" + std::string(size_t{1} << 20, 'x');
  const std::string shown = Shown(huge);
  EXPECT_EQ(shown, huge.substr(0, kShownBytes) + "... (" + std::to_string(huge.size()) + " bytes)");
}

// A 1 MiB argument gives messages of bounded size, not 1 or 2 MiB each.
TEST(ScrMessages, MessagesQuoteHugeArgumentsTruncated) {
  const std::string huge(size_t{1} << 20, 'n');
  Status too_long = NormalizePath(huge, "/prefix").status();
  ASSERT_FALSE(too_long.ok());
  EXPECT_LT(too_long.ToString().size(), 400u);
  EXPECT_NE(too_long.message().find("(1048576 bytes)"), std::string::npos) << too_long.message().substr(0, 400);
  Status bad_key = ParseConfig(huge + "-=1").status();
  ASSERT_FALSE(bad_key.ok());
  EXPECT_LT(bad_key.ToString().size(), 400u);
  Config c([](const char*) -> const char* { return nullptr; });
  Status conf = c.LoadFile("/nonexistent/" + huge);
  ASSERT_FALSE(conf.ok());
  EXPECT_LT(conf.ToString().size(), 600u) << conf.ToString().substr(0, 600);
  c.Set("SCR_CHECKPOINT_INTERVAL", huge);
  Status value = c.Int("SCR_CHECKPOINT_INTERVAL", 0).status();
  ASSERT_FALSE(value.ok());
  EXPECT_LT(value.ToString().size(), 400u);
}

TEST(ScrNeedCheckpoint, NoParameterMeansAlways) {
  NeedCheckpoint n(CheckpointPolicy{}, 0);
  EXPECT_TRUE(n.Ask(0));
  EXPECT_TRUE(n.Ask(0));
}

TEST(ScrNeedCheckpoint, IntervalCountsCallsSinceTheLastCheckpoint) {
  NeedCheckpoint n(CheckpointPolicy{3, 0, 0}, 0);
  EXPECT_FALSE(n.Ask(1));
  EXPECT_FALSE(n.Ask(2));
  EXPECT_TRUE(n.Ask(3));
  n.Started(3);
  n.Completed(4);
  EXPECT_FALSE(n.Ask(5));
  EXPECT_FALSE(n.Ask(6));
  EXPECT_TRUE(n.Ask(7));
}

TEST(ScrNeedCheckpoint, SecondsSinceTheLastCheckpointEnded) {
  NeedCheckpoint n(CheckpointPolicy{0, 10, 0}, 100);
  EXPECT_FALSE(n.Ask(105));
  EXPECT_TRUE(n.Ask(110));
  n.Started(110);
  n.Completed(112);
  EXPECT_FALSE(n.Ask(121));
  EXPECT_TRUE(n.Ask(122));
}

TEST(ScrNeedCheckpoint, OverheadBoundsTheFractionOfTimeCheckpointing) {
  NeedCheckpoint n(CheckpointPolicy{0, 0, 10}, 0);
  EXPECT_TRUE(n.Ask(0));  // nothing timed yet
  n.Started(0);
  n.Completed(1);         // a checkpoint costs 1 s
  EXPECT_FALSE(n.Ask(5));   // 1 / (4 + 1) = 20% > 10%
  EXPECT_TRUE(n.Ask(10));   // 1 / (9 + 1) = 10%
}

TEST(ScrNeedCheckpoint, AnyCriterionSuffices) {
  NeedCheckpoint n(CheckpointPolicy{100, 10, 0}, 0);
  EXPECT_FALSE(n.Ask(1));
  EXPECT_TRUE(n.Ask(11));
}

TEST(ScrPaths, NormalizesAgainstThePrefix) {
  EXPECT_EQ(*NormalizePath("ckpt/rank_0.dat", "/home/u/run"), "/home/u/run/ckpt/rank_0.dat");
  EXPECT_EQ(*NormalizePath("./a//b/../c", "/p"), "/p/a/c");
  EXPECT_EQ(*NormalizePath("/abs/file", "/p"), "/abs/file");
  EXPECT_EQ(*NormalizePath("../../../x", "/p/q"), "/x");
  EXPECT_EQ(*NormalizePath("dir/", "/p"), "/p/dir");
  EXPECT_FALSE(NormalizePath("", "/p").ok());
  EXPECT_FALSE(NormalizePath("..", "/").ok());
  EXPECT_FALSE(NormalizePath("a\nb", "/p").ok());
  EXPECT_FALSE(NormalizePath(std::string(SCR_MAX_FILENAME, 'x'), "/p").ok());
  EXPECT_EQ(BaseName("/p/a/c"), "c");
}

TEST(ScrDataset, RoundTripsAndRejectsDamage) {
  Dataset d{7, "timestep 42", SCR_FLAG_CHECKPOINT | SCR_FLAG_OUTPUT, {"/p/a", "/p/dir/b c"}};
  std::string text = SerializeDataset(d);
  auto back = ParseDataset(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->id, 7u);
  EXPECT_EQ(back->name, "timestep 42");
  EXPECT_EQ(back->flags, SCR_FLAG_CHECKPOINT | SCR_FLAG_OUTPUT);
  EXPECT_EQ(back->files, d.files);
  EXPECT_FALSE(ParseDataset(text.substr(0, text.size() - 4)).ok());  // truncated
  EXPECT_FALSE(ParseDataset("").ok());
  EXPECT_FALSE(ParseDataset("dlckpt-scr-dataset 2\nend\n").ok());
  std::string bad = text;
  bad.replace(bad.find("id 7"), 4, "id x");
  EXPECT_FALSE(ParseDataset(bad).ok());
  EXPECT_EQ(DefaultDatasetName(3), "scr.dataset.3");
}

TEST(ScrDataset, FindsFilesByPathOrUniqueBaseName) {
  Dataset d{1, "c", SCR_FLAG_CHECKPOINT, {"/p/a/x.dat", "/p/b/x.dat", "/p/b/y.dat"}};
  bool ambiguous = true;
  EXPECT_EQ(FindFile(d, "/p/a/x.dat", &ambiguous), "/p/a/x.dat");  // exact, although x.dat is in two places
  EXPECT_FALSE(ambiguous);
  EXPECT_EQ(FindFile(d, "/q/y.dat"), "/p/b/y.dat");  // a bare name
  EXPECT_EQ(FindFile(d, "/q/x.dat", &ambiguous), "");  // two files named x.dat
  EXPECT_TRUE(ambiguous);
  EXPECT_EQ(FindFile(d, "/q/z.dat", &ambiguous), "");  // none
  EXPECT_FALSE(ambiguous);
}

// SCR 3.1 matches a restart file by its base name whatever the directory
// part: SCR's examples restart from "<checkpoint name>/rank_NNNNN.ckpt"
// although they wrote the file elsewhere.
TEST(ScrDataset, RestartMatchesTheBaseNameWhateverTheDirectory) {
  Dataset d{1, "scr.dataset.1", SCR_FLAG_CHECKPOINT, {"/w/ckpt.4/rank_00000.ckpt", "/w/ckpt.4/rank_00001.ckpt"}};
  EXPECT_EQ(FindFile(d, "/w/scr.dataset.1/rank_00000.ckpt"), "/w/ckpt.4/rank_00000.ckpt");
  EXPECT_EQ(FindFile(d, "/elsewhere/deep/rank_00001.ckpt"), "/w/ckpt.4/rank_00001.ckpt");
  EXPECT_EQ(FindFile(d, "/w/scr.dataset.1/rank_00002.ckpt"), "");
}

Config ConfigOf(std::map<std::string, std::string> env) {
  return Config([env = std::move(env)](const char* k) -> const char* {
    auto it = env.find(k);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

// Every line of ParameterNotes that names `key`.
std::vector<std::string> NotesOf(const Config& c, const std::string& key) {
  std::vector<std::string> out;
  for (const std::string& l : ParameterNotes(c)) {
    if (l.compare(0, key.size(), key) == 0 && (l.size() == key.size() || l[key.size()] == ' ' || l[key.size()] == '=')) {
      out.push_back(l);
    }
  }
  return out;
}

TEST(ScrParameters, NothingSetSaysNothing) { EXPECT_TRUE(ParameterNotes(ConfigOf({})).empty()); }

TEST(ScrParameters, EachIgnoredParameterSetPrintsOneLine) {
  for (const char* key : {"SCR_LOG_ENABLE", "SCR_JOB_NAME", "SCR_DB_NAME", "SCR_FLUSH_POSTSTAGE", "SCR_CACHE_SIZE",
                          "SCR_HALT_SECONDS", "CKPT"}) {
    SCOPED_TRACE(key);
    auto env = ConfigOf({{key, "1"}});
    EXPECT_EQ(NotesOf(env, key).size(), 1u);
    EXPECT_EQ(ParameterNotes(env).size(), 1u);
    Config app = ConfigOf({});
    app.Set(key, "1");
    ASSERT_EQ(NotesOf(app, key).size(), 1u);
    EXPECT_NE(NotesOf(app, key)[0].find("ignored"), std::string::npos) << NotesOf(app, key)[0];
  }
}

TEST(ScrParameters, FlushNamesPersistEveryOnly) {
  Config app = ConfigOf({});
  app.Set("SCR_FLUSH", "4");
  auto lines = NotesOf(app, "SCR_FLUSH");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("--persist-every"), std::string::npos) << lines[0];
  for (const char* wrong : {"--group-size", "--spares", "--scheme"}) {
    EXPECT_EQ(lines[0].find(wrong), std::string::npos) << lines[0];
  }
  // Each layout parameter names its own option.
  Config all = ConfigOf({});
  all.Set("SCR_SET_SIZE", "8");
  all.Set("SCR_SET_FAILURES", "2");
  all.Set("SCR_COPY_TYPE", "RS");
  ASSERT_EQ(NotesOf(all, "SCR_SET_SIZE").size(), 1u);
  EXPECT_NE(NotesOf(all, "SCR_SET_SIZE")[0].find("--group-size"), std::string::npos);
  EXPECT_NE(NotesOf(all, "SCR_SET_FAILURES")[0].find("--spares-per-group"), std::string::npos);
  EXPECT_NE(NotesOf(all, "SCR_COPY_TYPE")[0].find("--scheme"), std::string::npos);
  EXPECT_EQ(ParameterNotes(all).size(), 3u);
}

// dlckpt-run reads the layout parameters from the job's environment: set
// there, they are honoured and say nothing at SCR_Init.
TEST(ScrParameters, LayoutFromTheEnvironmentSaysNothing) {
  auto env = ConfigOf({{"SCR_FLUSH", "4"}, {"SCR_SET_SIZE", "8"}, {"SCR_COPY_TYPE", "XOR"}});
  EXPECT_TRUE(ParameterNotes(env).empty());
}

TEST(ScrParameters, EveryIgnoredParameterIsListedInTheReadme) {
  std::ifstream in(DLCKPT_SCR_README);
  ASSERT_TRUE(in.good()) << DLCKPT_SCR_README;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const IgnoredParameter& p : IgnoredParameters()) {
    EXPECT_NE(text.find("`" + std::string(p.name) + "`"), std::string::npos) << p.name << " is not in scr/README.md";
  }
}

}  // namespace
}  // namespace dlckpt::scr

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dlckpt/fuse/mount.h"

namespace dlckpt::fusefs {
namespace {

struct Env {
  std::map<std::string, std::string> vars;
  std::function<const char*(const char*)> fn() {
    return [this](const char* k) -> const char* {
      auto it = vars.find(k);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

Result<MountOptions> Parse(std::vector<const char*> args, Env* env = nullptr) {
  static Env empty;
  args.insert(args.begin(), "dlckpt-fuse");
  return ParseMountArgs(static_cast<int>(args.size()), args.data(), (env ? env : &empty)->fn());
}

TEST(MountArgs, StoreByName) {
  for (auto args : std::vector<std::vector<const char*>>{{"/mnt", "--store", "/dlckpt.j.n.r1"},
                                                         {"--store=dlckpt.j.n.r1", "/mnt"},
                                                         {"-o", "store=dlckpt.j.n.r1", "/mnt"},
                                                         {"-ostore=/dlckpt.j.n.r1", "/mnt"}}) {
    auto o = Parse(args);
    ASSERT_TRUE(o.ok()) << o.status().ToString();
    EXPECT_EQ(o->store, "/dlckpt.j.n.r1");
    EXPECT_EQ(o->mountpoint, "/mnt");
  }
}

TEST(MountArgs, StoreFromJobNodeRankAndEnvironment) {
  Env env;
  env.vars = {{"DLCKPT_JOB", "job7"}, {"DLCKPT_NODE", "nodeA"}, {"DLCKPT_RANK", "3"}};
  auto o = Parse({"/mnt"}, &env);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->store, "/dlckpt.job7.nodeA.r3");
  EXPECT_EQ(o->create.job, "job7");
  EXPECT_EQ(o->create.rank, 3);
  o = Parse({"/mnt", "--job", "j2", "-o", "node=n9,rank=4"}, &env);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->store, "/dlckpt.j2.n9.r4");
  env.vars.erase("DLCKPT_NODE");
  env.vars.erase("DLCKPT_RANK");
  o = Parse({"/mnt"}, &env);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  EXPECT_EQ(o->store, "/dlckpt.job7." + std::string(host) + ".r0");
}

TEST(MountArgs, GeometryAndFuseOptions) {
  auto o = Parse({"/mnt", "--store", "s", "--capacity", "1G", "-o",
                  "block_size=1M,allow_other,max_files=4096,cache=writeback", "-f", "-s",
                  "-o", "max_threads=4"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->create.capacity, 1ull << 30);
  EXPECT_EQ(o->create.block_size, 1u << 20);
  EXPECT_EQ(o->create.max_files, 4096u);
  EXPECT_TRUE(o->create_geometry_given);
  EXPECT_EQ(o->cache, CacheMode::kWriteback);
  EXPECT_TRUE(o->foreground);
  EXPECT_TRUE(o->single_thread);
  EXPECT_EQ(o->fuse_options, (std::vector<std::string>{"allow_other", "max_threads=4"}));
  o = Parse({"/mnt", "--store", "s", "-d"});
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->debug);
  EXPECT_TRUE(o->foreground);
  EXPECT_EQ(o->cache, CacheMode::kAuto);
  EXPECT_FALSE(o->create_geometry_given);
  auto c = Parse({"/mnt", "--store", "s"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->create.compression, memfs::Compression::kNone);
  c = Parse({"/mnt", "--store", "s", "-o", "compress=lz4"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->create.compression, memfs::Compression::kLz4);
  Env lz4;
  lz4.vars = {{"DLCKPT_COMPRESS", "lz4"}};
  c = Parse({"/mnt", "--store", "s"}, &lz4);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->create.compression, memfs::Compression::kLz4);
  c = Parse({"/mnt", "--store", "s", "--compress", "none"}, &lz4);  // the option wins
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->create.compression, memfs::Compression::kNone);
  Env bad;
  bad.vars = {{"DLCKPT_COMPRESS", "zip"}};
  EXPECT_NE(Parse({"/mnt", "--store", "s"}, &bad).status().message().find("$DLCKPT_COMPRESS 'zip'"),
            std::string::npos);
}

TEST(MountArgs, MountpointAloneServesTheDefaultStore) {
  Env env;
  env.vars = {{"DLCKPT_NODE", "vn3"}};
  auto o = Parse({"/mnt"}, &env);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->store, "/dlckpt.local.vn3.r0");  // the preload library's default job
  EXPECT_FALSE(o->store_named);
  EXPECT_EQ(o->create.job, "local");
  EXPECT_EQ(o->create.node, "vn3");
  env.vars["DLCKPT_JOB"] = "j7";
  o = Parse({"/mnt"}, &env);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->store, "/dlckpt.j7.vn3.r0");
  o = Parse({"/mnt", "--store", "/dlckpt.x.y.r0"}, &env);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_TRUE(o->store_named);
}

TEST(MountArgs, HelpAndVersionNeedNothingElse) {
  auto o = Parse({"--help"});
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->help);
  o = Parse({"-V"});
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->version);
}

TEST(MountArgs, BadInputNamesTheArgument) {
  struct Case {
    std::vector<const char*> args;
    const char* needle;
  };
  Env env;
  env.vars = {{"DLCKPT_RANK", "x"}};
  std::vector<Case> cases = {
      {{}, "no MOUNTPOINT"},
      {{"/a", "/b", "--store", "s"}, "more than one MOUNTPOINT"},
      {{"/mnt", "--store", "a/b"}, "bad store name 'a/b'"},
      {{"/mnt", "--store", "s", "--capacity", "12Q"}, "bad capacity '12Q'"},
      {{"/mnt", "--store", "s", "--block-size", "32M"}, "bad block size '32M'"},
      {{"/mnt", "--store", "s", "--max-files", "-1"}, "bad max files '-1'"},
      {{"/mnt", "--store", "s", "--rank", "x1"}, "bad rank 'x1'"},
      {{"/mnt", "--job", "bad.job"}, "invalid job id 'bad.job'"},
      {{"/mnt", "--store", "s", "--frob", "1"}, "unknown option --frob"},
      {{"/mnt", "--store", "s", "-x"}, "unknown option -x"},
      {{"/mnt", "--store"}, "--store: 1 required"},
      {{"/mnt", "--store", "s", "-o"}, "-o: 1 required"},
      {{"/mnt", "--store", "s", "-o", "capacity"}, "-o capacity needs =VALUE"},
      {{"/mnt", "--store", "s", "-o", "cache=none"}, "bad -o cache='none'"},
      {{"/mnt", "--store", "s", "--compress", "gzip"}, "bad compression 'gzip'"},
  };
  for (const auto& c : cases) {
    auto o = Parse(c.args);
    ASSERT_FALSE(o.ok()) << c.needle;
    EXPECT_EQ(o.status().code(), EINVAL);
    EXPECT_NE(o.status().message().find(c.needle), std::string::npos)
        << o.status().message() << " lacks " << c.needle;
  }
  auto o = Parse({"/mnt", "--job", "j"}, &env);
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("$DLCKPT_RANK"), std::string::npos) << o.status().message();
}

TEST(MountArgs, TypoGetsTheClosestOption) {
  auto o = Parse({"/mnt", "--store", "s", "--capacty", "1G"});
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), EINVAL);
  EXPECT_NE(o.status().message().find("unknown option --capacty; did you mean --capacity?"), std::string::npos)
      << o.status().message();
}

TEST(MountArgs, LaterValueWins) {
  auto o = Parse({"/mnt", "--store", "s", "-o", "compress=lz4", "--compress", "none", "-fs"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->create.compression, memfs::Compression::kNone);
  EXPECT_TRUE(o->foreground);
  EXPECT_TRUE(o->single_thread);
  o = Parse({"/mnt", "--store", "s", "--compress", "none", "-o", "compress=lz4"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->create.compression, memfs::Compression::kLz4);
}

TEST(MountArgs, CheckpointMode) {
  auto o = Parse({"/mnt", "--store", "s"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->checkpoint, CheckpointMode::kLocal);
  EXPECT_TRUE(o->coordinator.empty());
  o = Parse({"/mnt", "--store", "s", "--checkpoint", "coordinated"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->checkpoint, CheckpointMode::kCoordinated);
  o = Parse({"/mnt", "--store", "s", "-o", "checkpoint=coordinated,coordinator=/run/c.sock"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->coordinator, "/run/c.sock");
  o = Parse({"/mnt", "--store", "s", "--coordinator", "/run/c.sock"});  // implies coordinated
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->checkpoint, CheckpointMode::kCoordinated);
  for (auto args : std::vector<std::vector<const char*>>{
           {"/mnt", "--store", "s", "--checkpoint", "parity"},
           {"/mnt", "--store", "s", "--coordinator", "relative.sock"},
           {"/mnt", "--store", "s", "--checkpoint", "local", "--coordinator", "/c"}}) {
    auto bad = Parse(args);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().code(), EINVAL);
  }
}

TEST(MountPoint, RefusesMissingFileAndMountPoint) {
  char tmpl[] = "/tmp/dlckpt_mp_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  EXPECT_TRUE(CheckMountPoint(dir).ok());
  Status s = CheckMountPoint(dir + "/missing");
  EXPECT_EQ(s.code(), ENOENT);
  EXPECT_NE(s.message().find(dir + "/missing"), std::string::npos);
  std::string file = dir + "/file";
  int fd = open(file.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  close(fd);
  s = CheckMountPoint(file);
  EXPECT_EQ(s.code(), ENOTDIR);
  s = CheckMountPoint("/proc");  // a mount point on every Linux
  EXPECT_EQ(s.code(), EBUSY);
  EXPECT_NE(s.message().find("already a mount point (proc)"), std::string::npos) << s.message();
  unlink(file.c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace dlckpt::fusefs

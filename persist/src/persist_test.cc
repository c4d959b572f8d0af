// The drain format end to end on real stores and real files: drain two
// ranks, list, verify, detect a flipped byte and a torn manifest, restore,
// prune, cancel.
#include "dlckpt/persist/persist.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace dlckpt::persist {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

class PersistTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dlckpt-persist-test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    job_dir_ = JobDir(dir_, "jobP");
  }
  void TearDown() override {
    owners_.clear();
    for (const auto& n : names_) (void)memfs::Store::Destroy(n);
    fs::remove_all(dir_);
  }

  memfs::Store& NewStore(int rank, memfs::Compression c = memfs::Compression::kNone) {
    std::string name = "/dlckpt-test.persist." + std::to_string(getpid()) + "." + std::to_string(names_.size());
    names_.push_back(name);
    memfs::StoreOptions o;
    o.capacity = 8 << 20;
    o.block_size = 4096;
    o.max_files = 64;
    o.job = "jobP";
    o.node = "n0";
    o.rank = rank;
    o.compression = c;
    auto s = memfs::Store::Create(name, o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    owners_.push_back(std::move(*s));
    return *owners_.back();
  }

  static void Write(memfs::Store& s, const std::string& path, const std::vector<uint8_t>& data) {
    auto fd = s.Open(path, O_WRONLY | O_CREAT | O_TRUNC, 0640);
    ASSERT_TRUE(fd.ok()) << fd.status().ToString();
    ASSERT_EQ(*s.Write(*fd, data.data(), data.size()), data.size());
    ASSERT_TRUE(s.Close(*fd).ok());
  }
  static std::vector<uint8_t> Read(memfs::Store& s, const std::string& path) {
    auto fd = s.Open(path, O_RDONLY);
    EXPECT_TRUE(fd.ok()) << fd.status().ToString();
    if (!fd.ok()) return {};
    std::vector<uint8_t> out(s.Fstat(*fd)->size);
    EXPECT_EQ(*s.Read(*fd, out.data(), out.size()), out.size());
    EXPECT_TRUE(s.Close(*fd).ok());
    return out;
  }

  // Rank r's store with two files (and a directory) committed as `epoch`.
  memfs::Store& Filled(int rank, uint64_t epoch, memfs::Compression c = memfs::Compression::kNone) {
    memfs::Store& s = NewStore(rank, c);
    EXPECT_TRUE(s.Mkdir("/ckpt", 0755).ok());
    Write(s, "/ckpt/state.bin", Pattern(300000 + static_cast<size_t>(rank), static_cast<uint32_t>(epoch * 10 + rank)));
    Write(s, "/ckpt/meta file.txt", std::vector<uint8_t>(100, static_cast<uint8_t>('a' + rank)));
    EXPECT_TRUE(s.Commit(epoch).ok());
    EXPECT_TRUE(s.Acknowledge(epoch).ok());
    return s;
  }

  Result<DrainResult> Drain(memfs::Store& owner, uint64_t epoch, int rank, int ranks,
                            const DrainOptions& o = {}) {
    auto view = memfs::Store::Attach(owner.name(), memfs::AttachMode::kReadOnly);
    if (!view.ok()) return view.status();
    DLCKPT_RETURN_IF_ERROR((*view)->View(epoch));
    return DrainRank(**view, job_dir_, "jobP", epoch, rank, ranks, o);
  }

  std::string dir_, job_dir_;
  std::vector<std::string> names_;
  std::vector<std::unique_ptr<memfs::Store>> owners_;
};

// A read-only view is read in place; an owner's store (its files could
// change under a pointer) through the buffer, with the same result.
TEST_F(PersistTest, AnOwnersStoreDrainsThroughTheBuffer) {
  memfs::Store& a = Filled(0, 3);
  DrainOptions o;
  o.buffer = 4096;  // many writes per file
  auto r = DrainRank(a, job_dir_, "jobP", 3, 0, 1, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->published);
  EXPECT_EQ(r->bytes, 300000u + 100u);
  ASSERT_TRUE(VerifyEpoch(EpochDir(job_dir_, 3)).ok());
}

TEST_F(PersistTest, DrainTwoRanksPublishesOnlyWhenBothAreThere) {
  memfs::Store& a = Filled(0, 4);
  memfs::Store& b = Filled(1, 4, memfs::Compression::kLz4);
  auto r0 = Drain(a, 4, 0, 2);
  ASSERT_TRUE(r0.ok()) << r0.status().ToString();
  EXPECT_FALSE(r0->published);
  EXPECT_EQ(r0->files, 2u);
  auto l = ListEpochs(job_dir_);
  ASSERT_TRUE(l.ok());
  ASSERT_EQ(l->size(), 1u);
  EXPECT_EQ((*l)[0].state, EpochState::kIncomplete);
  EXPECT_NE((*l)[0].problem.find("1 rank part"), std::string::npos) << (*l)[0].problem;

  auto r1 = Drain(b, 4, 1, 2);
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  EXPECT_TRUE(r1->published);
  l = ListEpochs(job_dir_);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ((*l)[0].state, EpochState::kComplete);
  EXPECT_EQ((*l)[0].ranks, 2);
  EXPECT_EQ((*l)[0].files, 4u);
  EXPECT_EQ((*l)[0].bytes, 300000u + 300001u + 200u);
  ASSERT_TRUE(VerifyEpoch(EpochDir(job_dir_, 4)).ok());
  // The copy is a plain file under the path the application used.
  std::ifstream f(DataPath(EpochDir(job_dir_, 4), 1, "/ckpt/meta file.txt"));
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, std::string(100, 'b'));
}

TEST_F(PersistTest, FlippedByteIsNamedAndRestoreRefusesIt) {
  memfs::Store& a = Filled(0, 2);
  ASSERT_TRUE(Drain(a, 2, 0, 1).ok());
  const std::string edir = EpochDir(job_dir_, 2);
  const std::string victim = DataPath(edir, 0, "/ckpt/state.bin");
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1234);
    char c = 0;
    f.read(&c, 1);
    f.seekp(1234);
    c = static_cast<char>(c ^ 0x10);
    f.write(&c, 1);
  }
  Status v = VerifyEpoch(edir);
  EXPECT_EQ(v.code(), EBADMSG);
  EXPECT_NE(v.message().find(victim), std::string::npos) << v.ToString();
  auto m = ReadManifest(edir);
  ASSERT_TRUE(m.ok());
  memfs::Store& fresh = NewStore(0);
  Status r = RestoreRank(edir, *m, 0, fresh);
  EXPECT_EQ(r.code(), EBADMSG);
  EXPECT_NE(r.message().find("state.bin"), std::string::npos) << r.ToString();
  EXPECT_EQ(fresh.epochs().acknowledged, 0u);  // nothing committed from wrong data
}

TEST_F(PersistTest, RestoreRebuildsTheFilesAndTheEpoch) {
  memfs::Store& a = Filled(0, 6, memfs::Compression::kLz4);
  auto want = Read(a, "/ckpt/state.bin");
  ASSERT_TRUE(Drain(a, 6, 0, 1).ok());
  auto m = ReadManifest(EpochDir(job_dir_, 6));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  memfs::Store& fresh = NewStore(0);
  ASSERT_TRUE(RestoreRank(EpochDir(job_dir_, 6), *m, 0, fresh).ok());
  EXPECT_EQ(fresh.epochs().acknowledged, 6u);
  EXPECT_EQ(fresh.epochs().next, 7u);
  EXPECT_EQ(Read(fresh, "/ckpt/state.bin"), want);
  auto st = fresh.Stat("/ckpt");
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(S_ISDIR(st->mode));
  EXPECT_EQ(fresh.Stat("/ckpt/state.bin")->mode & 0777, 0640u);
}

TEST_F(PersistTest, TornOrEditedManifestIsCorrupt) {
  memfs::Store& a = Filled(0, 3);
  ASSERT_TRUE(Drain(a, 3, 0, 1).ok());
  const std::string mpath = EpochDir(job_dir_, 3) + "/MANIFEST";
  std::string text;
  {
    std::ifstream f(mpath);
    text.assign((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }
  ASSERT_TRUE(ParseManifest(text, "m").ok());
  EXPECT_EQ(ParseManifest(text.substr(0, text.size() / 2), "m").status().code(), EBADMSG);
  std::string edited = text;
  edited[edited.find("file 0 ") + 7] = '9';
  EXPECT_EQ(ParseManifest(edited, "m").status().code(), EBADMSG);
  { std::ofstream(mpath) << text.substr(0, text.size() - 5); }
  auto l = ListEpochs(job_dir_);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ((*l)[0].state, EpochState::kCorrupt);
}

TEST_F(PersistTest, PruneKeepsTheNewestCompleteEpochs) {
  for (uint64_t e : {2, 4, 6, 8}) {
    memfs::Store& s = Filled(0, e);
    ASSERT_TRUE(Drain(s, e, 0, 1).ok());
  }
  memfs::Store& half = Filled(0, 5);
  ASSERT_TRUE(Drain(half, 5, 0, 2).ok());   // one of two ranks: incomplete
  memfs::Store& late = Filled(0, 10);
  ASSERT_TRUE(Drain(late, 10, 0, 2).ok());  // incomplete and newer: kept
  auto removed = Prune(job_dir_, 2);
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(*removed, (std::vector<uint64_t>{5, 4, 2}));
  auto l = ListEpochs(job_dir_);
  ASSERT_EQ(l->size(), 3u);
  EXPECT_EQ((*l)[0].epoch, 10u);
  EXPECT_EQ((*l)[1].epoch, 8u);
  EXPECT_EQ((*l)[2].epoch, 6u);
}

TEST_F(PersistTest, CancelledDrainLeavesNoPart) {
  memfs::Store& a = Filled(0, 2);
  std::atomic<bool> cancel{true};
  DrainOptions o;
  o.cancel = &cancel;
  auto r = Drain(a, 2, 0, 1, o);
  EXPECT_EQ(r.status().code(), ECANCELED);
  auto l = ListEpochs(job_dir_);
  ASSERT_TRUE(l.ok());
  ASSERT_EQ(l->size(), 1u);
  EXPECT_EQ((*l)[0].state, EpochState::kIncomplete);
}

TEST_F(PersistTest, UnwritableDirectoryIsAClearError) {
  memfs::Store& a = Filled(0, 2);
  job_dir_ = "/proc/dlckpt-no/jobP";
  auto r = Drain(a, 2, 0, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/proc/dlckpt-no"), std::string::npos) << r.status().ToString();
}

TEST_F(PersistTest, FindJobDirAcceptsTheJobDirOrItsParent) {
  memfs::Store& a = Filled(0, 2);
  ASSERT_TRUE(Drain(a, 2, 0, 1).ok());
  EXPECT_EQ(*FindJobDir(dir_, "other"), job_dir_);
  EXPECT_EQ(*FindJobDir(job_dir_, ""), job_dir_);
  fs::create_directories(dir_ + "/empty");
  EXPECT_EQ(FindJobDir(dir_ + "/empty", "").status().code(), ENOENT);
  EXPECT_FALSE(FindJobDir(dir_ + "/missing", "").ok());
}

}  // namespace
}  // namespace dlckpt::persist

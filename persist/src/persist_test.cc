// The drain format end to end on real stores and real files: drain two
// ranks, list, verify, detect a flipped byte and a torn manifest, restore,
// prune, cancel.
#include "dlckpt/persist/persist.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "persist_test_util.h"

namespace dlckpt::persist {
namespace {

class PersistTest : public PersistFixture {};

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

// --- A persistent directory other users can write (issue: trust the second
// level). These run as any user; the ones that need another uid's files
// (chown) run only as root.

constexpr uid_t kNobody = 65534;

// A test that regresses into a blocking open or read is killed by SIGALRM
// instead of hanging the suite.
class Deadline {
 public:
  explicit Deadline(unsigned seconds) { alarm(seconds); }
  ~Deadline() { alarm(0); }
};

mode_t ModeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST_F(PersistTest, EverythingDrainedIsPrivate) {
  ::umask(0);  // whatever the user's umask
  memfs::Store& a = Filled(0, 3);
  ASSERT_TRUE(Drain(a, 3, 0, 1).ok());
  ::umask(022);
  const std::string edir = EpochDir(job_dir_, 3);
  for (const std::string& d : {job_dir_, edir, edir + "/r0", edir + "/r0/ckpt"}) EXPECT_EQ(ModeOf(d), 0700u) << d;
  for (const std::string& f : {edir + "/MANIFEST", edir + "/rank.0.list", edir + "/r0/ckpt/state.bin"}) {
    EXPECT_EQ(ModeOf(f), 0600u) << f;
  }
}

TEST_F(PersistTest, AJobDirOthersCanWriteIsRefused) {
  ASSERT_EQ(::mkdir(job_dir_.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(job_dir_.c_str(), 0777), 0);
  memfs::Store& a = Filled(0, 2);
  auto r = Drain(a, 2, 0, 1);
  EXPECT_EQ(r.status().code(), EPERM);
  EXPECT_NE(r.status().message().find(job_dir_), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find("writable by group or others"), std::string::npos) << r.status().ToString();
  EXPECT_EQ(PrepareJobDir(job_dir_).code(), EPERM);
  EXPECT_EQ(ListEpochs(job_dir_).status().code(), EPERM);
  EXPECT_FALSE(fs::exists(EpochDir(job_dir_, 2)));
}

TEST_F(PersistTest, AnotherUsersJobDirIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to play another user";
  ASSERT_EQ(::mkdir(job_dir_.c_str(), 0755), 0);
  ASSERT_EQ(::chown(job_dir_.c_str(), kNobody, kNobody), 0);
  Status s = PrepareJobDir(job_dir_);
  EXPECT_EQ(s.code(), EPERM);
  EXPECT_NE(s.message().find("owned by uid 65534"), std::string::npos) << s.ToString();
  memfs::Store& a = Filled(0, 2);
  EXPECT_EQ(Drain(a, 2, 0, 1).status().code(), EPERM);
}

TEST_F(PersistTest, ALinkedJobDirIsNeverFollowedNorPruned) {
  // The victim holds epoch.* directories the job never wrote.
  const std::string victim = dir_ + "/victim";
  fs::create_directories(victim + "/epoch.1");
  fs::create_directories(victim + "/epoch.2");
  ASSERT_EQ(::symlink(victim.c_str(), job_dir_.c_str()), 0);
  memfs::Store& a = Filled(0, 5);
  auto r = Drain(a, 5, 0, 1);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("symbolic link"), std::string::npos) << r.status().ToString();
  EXPECT_FALSE(Prune(job_dir_, 1).ok());
  EXPECT_TRUE(fs::exists(victim + "/epoch.1"));
  EXPECT_TRUE(fs::exists(victim + "/epoch.2"));
  EXPECT_FALSE(fs::exists(victim + "/epoch.5"));
}

TEST_F(PersistTest, ALinkedEpochDirReceivesNothingAndIsNotRemoved) {
  memfs::Store& a = Filled(0, 2);
  ASSERT_TRUE(Drain(a, 2, 0, 1).ok());
  const std::string elsewhere = dir_ + "/elsewhere";
  fs::create_directories(elsewhere + "/r0");
  ASSERT_EQ(::symlink(elsewhere.c_str(), EpochDir(job_dir_, 4).c_str()), 0);
  memfs::Store& b = Filled(0, 4);
  auto r = Drain(b, 4, 0, 1);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(fs::is_empty(elsewhere + "/r0"));
  auto l = ListEpochs(job_dir_);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_EQ(l->size(), 2u);
  EXPECT_EQ((*l)[0].state, EpochState::kRefused);
  EXPECT_NE((*l)[0].problem.find("symbolic link"), std::string::npos) << (*l)[0].problem;
  auto removed = Prune(job_dir_, 1);
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_TRUE(removed->empty());
  EXPECT_TRUE(fs::exists(elsewhere + "/r0"));
}

// A planted data file or MANIFEST of another uid, a link in the tree, or a
// file others can write is refused, naming it: a restore uses none of them.
TEST_F(PersistTest, ARestoreUsesOnlyThisUsersFiles) {
  memfs::Store& a = Filled(0, 2);
  ASSERT_TRUE(Drain(a, 2, 0, 1).ok());
  const std::string edir = EpochDir(job_dir_, 2);
  const std::string data = DataPath(edir, 0, "/ckpt/state.bin");
  auto m = ReadManifest(edir);
  ASSERT_TRUE(m.ok());
  auto restore = [&] {
    memfs::Store& fresh = NewStore(0);
    Status s = RestoreRank(edir, *m, 0, fresh);
    EXPECT_EQ(fresh.epochs().acknowledged, 0u);
    return s;
  };
  ASSERT_EQ(::chmod(data.c_str(), 0666), 0);
  Status s = restore();
  EXPECT_EQ(s.code(), EPERM);
  EXPECT_NE(s.message().find(data), std::string::npos) << s.ToString();
  EXPECT_EQ(VerifyEpoch(edir).code(), EPERM);
  ASSERT_EQ(::chmod(data.c_str(), 0600), 0);
  ASSERT_EQ(::chmod((edir + "/r0/ckpt").c_str(), 0777), 0);
  EXPECT_EQ(restore().code(), EPERM);
  ASSERT_EQ(::chmod((edir + "/r0/ckpt").c_str(), 0700), 0);
  ASSERT_TRUE(VerifyEpoch(edir).ok());
  // The same bytes behind a link: still refused.
  ASSERT_EQ(::rename(data.c_str(), (dir_ + "/moved").c_str()), 0);
  ASSERT_EQ(::symlink((dir_ + "/moved").c_str(), data.c_str()), 0);
  s = restore();
  EXPECT_EQ(s.code(), ELOOP);
  EXPECT_NE(s.message().find("symbolic link"), std::string::npos) << s.ToString();
  ASSERT_EQ(::unlink(data.c_str()), 0);
  ASSERT_EQ(::rename((dir_ + "/moved").c_str(), data.c_str()), 0);
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(data.c_str(), kNobody, kNobody), 0);
    s = restore();
    EXPECT_EQ(s.code(), EPERM);
    EXPECT_NE(s.message().find("owned by uid 65534"), std::string::npos) << s.ToString();
    ASSERT_EQ(::chown(data.c_str(), 0, 0), 0);
    ASSERT_EQ(::chown((edir + "/MANIFEST").c_str(), kNobody, kNobody), 0);
    auto l = ListEpochs(job_dir_);
    ASSERT_TRUE(l.ok());
    EXPECT_EQ((*l)[0].state, EpochState::kRefused);
    EXPECT_NE((*l)[0].problem.find("MANIFEST is owned by uid 65534"), std::string::npos) << (*l)[0].problem;
    EXPECT_EQ(ReadManifest(edir).status().code(), EPERM);
  }
}

// A FIFO, a link to a device or a huge sparse file where a MANIFEST or a data
// file should be: answered at once, never read whole.
TEST_F(PersistTest, FifosDevicesAndHugeFilesAreRefusedWithoutBlocking) {
  Deadline deadline(20);
  memfs::Store& a = Filled(0, 2);
  ASSERT_TRUE(Drain(a, 2, 0, 1).ok());
  const std::string edir = EpochDir(job_dir_, 2);
  const std::string mpath = edir + "/MANIFEST";
  ASSERT_EQ(::rename(mpath.c_str(), (dir_ + "/M").c_str()), 0);
  auto state_of = [&] {
    auto l = ListEpochs(job_dir_);
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    return l.ok() && !l->empty() ? (*l)[0] : DrainedEpoch{};
  };
  ASSERT_EQ(::mkfifo(mpath.c_str(), 0600), 0);
  DrainedEpoch e = state_of();
  EXPECT_EQ(e.state, EpochState::kRefused);
  EXPECT_NE(e.problem.find("FIFO"), std::string::npos) << e.problem;
  EXPECT_FALSE(VerifyEpoch(edir).ok());
  ASSERT_EQ(::unlink(mpath.c_str()), 0);
  ASSERT_EQ(::symlink("/dev/zero", mpath.c_str()), 0);
  EXPECT_NE(state_of().state, EpochState::kComplete);
  EXPECT_EQ(ReadManifest(edir).status().code(), ELOOP);
  ASSERT_EQ(::unlink(mpath.c_str()), 0);
  {
    int fd = ::open(mpath.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, off_t{2} << 30), 0);  // 2 GiB, sparse
    ::close(fd);
  }
  e = state_of();
  EXPECT_EQ(e.state, EpochState::kCorrupt);
  EXPECT_NE(e.problem.find("bytes expected"), std::string::npos) << e.problem;
  ASSERT_EQ(::unlink(mpath.c_str()), 0);
  ASSERT_EQ(::rename((dir_ + "/M").c_str(), mpath.c_str()), 0);
  ASSERT_TRUE(VerifyEpoch(edir).ok());
  // A data file: a FIFO, then a sparse file larger than the manifest says.
  const std::string data = DataPath(edir, 0, "/ckpt/state.bin");
  ASSERT_EQ(::rename(data.c_str(), (dir_ + "/D").c_str()), 0);
  ASSERT_EQ(::mkfifo(data.c_str(), 0600), 0);
  Status v = VerifyEpoch(edir);
  EXPECT_EQ(v.code(), EPERM);
  EXPECT_NE(v.message().find("FIFO"), std::string::npos) << v.ToString();
  ASSERT_EQ(::unlink(data.c_str()), 0);
  {
    int fd = ::open(data.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, off_t{4} << 30), 0);
    ::close(fd);
  }
  v = VerifyEpoch(edir);
  EXPECT_EQ(v.code(), EBADMSG);
  EXPECT_NE(v.message().find("the manifest says"), std::string::npos) << v.ToString();
}

// A manifest is checked before its paths are used: one that climbs out of
// its rank directory is refused.
TEST_F(PersistTest, AManifestPathCannotLeaveItsRankDirectory) {
  memfs::Store& a = Filled(0, 2);
  ASSERT_TRUE(Drain(a, 2, 0, 1).ok());
  const std::string edir = EpochDir(job_dir_, 2);
  auto m = ReadManifest(edir);
  ASSERT_TRUE(m.ok());
  m->files.back().path = "/../../../etc/passwd";
  memfs::Store& fresh = NewStore(0);
  Status s = RestoreRank(edir, *m, 0, fresh);
  EXPECT_EQ(s.code(), EINVAL);
  EXPECT_NE(s.message().find("'..'"), std::string::npos) << s.ToString();
}

TEST_F(PersistTest, AMissingPersistDirIsCreatedPrivate) {
  job_dir_ = dir_ + "/new/deeper/jobP";
  ASSERT_TRUE(PrepareJobDir(job_dir_).ok());
  EXPECT_EQ(ModeOf(dir_ + "/new"), 0700u);
  EXPECT_EQ(ModeOf(job_dir_), 0700u);
}

// What dlckpt-store drained shows of a complete epoch: when it was drained,
// and one small file read back checked against the manifest.
TEST_F(PersistTest, ACompleteEpochHasATimeAndItsFilesReadBackChecked) {
  const int64_t before = static_cast<int64_t>(::time(nullptr));
  memfs::Store& a = Filled(0, 5);
  ASSERT_TRUE(Drain(a, 5, 0, 1).ok());
  auto list = ListEpochs(job_dir_);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].state, EpochState::kComplete);
  EXPECT_GE((*list)[0].time, before - 1);
  EXPECT_LE((*list)[0].time, static_cast<int64_t>(::time(nullptr)) + 1);
  const std::string edir = EpochDir(job_dir_, 5);
  auto text = ReadDrainedFile(edir, 0, "/ckpt/meta file.txt", 1000);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, std::string(100, 'a'));
  EXPECT_EQ(ReadDrainedFile(edir, 0, "/ckpt/none", 1000).status().code(), ENOENT);
  EXPECT_EQ(ReadDrainedFile(edir, 1, "/ckpt/meta file.txt", 1000).status().code(), ENOENT);  // no rank 1
  EXPECT_EQ(ReadDrainedFile(edir, 0, "/ckpt/state.bin", 1000).status().code(), EFBIG);
  {
    std::fstream f(DataPath(edir, 0, "/ckpt/meta file.txt"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(7);
    f.put('z');
  }
  Status bad = ReadDrainedFile(edir, 0, "/ckpt/meta file.txt", 1000).status();
  EXPECT_EQ(bad.code(), EBADMSG) << bad.ToString();
}

}  // namespace
}  // namespace dlckpt::persist

// A store another local user planted under the job's name is never adopted:
// Attach refuses it (whatever the mode), Create refuses the name, and the
// owner still re-attaches its own store after a crash. And: damage the
// tools must report (VerifyFile, CheckSlots).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dlckpt/memfs/memfs.h"

namespace dlckpt::memfs {
namespace {

constexpr uid_t kNobody = 65534;

class StoreSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    job_ = "sectest" + std::to_string(getpid());
    name_ = *StoreName(job_, "n0", 0);
    path_ = "/dev/shm" + name_;
  }
  void TearDown() override { unlink(path_.c_str()); }

  StoreOptions Options() {
    StoreOptions o;
    o.capacity = 1 << 20;
    o.block_size = 4096;
    o.max_files = 16;
    o.job = job_;
    o.node = "n0";
    return o;
  }

  // A complete store with epoch 7 acknowledged: what an attacker would plant
  // (made by this process, then given away).
  void MakeStoreWithEpoch7() {
    auto s = Store::Create(name_, Options());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto fd = (*s)->Open("/dlckpt/app/ckpt", O_WRONLY | O_CREAT, 0644);
    ASSERT_TRUE(fd.ok());
    ASSERT_TRUE((*s)->Write(*fd, "planted", 7).ok());
    ASSERT_TRUE((*s)->Close(*fd).ok());
    ASSERT_EQ(*(*s)->Commit(7), 7u);
    ASSERT_TRUE((*s)->Acknowledge(7).ok());
  }

  std::string job_, name_, path_;
};

TEST_F(StoreSecurityTest, AttachRefusesAStoreOfAnotherUid) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a store to uid 65534";
  MakeStoreWithEpoch7();
  ASSERT_EQ(chown(path_.c_str(), kNobody, static_cast<gid_t>(-1)), 0);
  for (AttachMode mode : {AttachMode::kOwner, AttachMode::kReadOnly, AttachMode::kReadAll}) {
    auto r = Store::Attach(name_, mode);
    ASSERT_FALSE(r.ok()) << "the planted store's epoch 7 was adopted";
    EXPECT_EQ(r.status().code(), EPERM);
    EXPECT_EQ(r.status().message(),
              "store " + path_ + " is owned by uid 65534, not by uid 0 (this process); refusing to "
              "attach: remove it or choose another --job");
  }
}

TEST_F(StoreSecurityTest, AttachRefusesAStoreWithAnotherMode) {
  MakeStoreWithEpoch7();
  for (mode_t mode : {0666, 0644, 0660, 0400, 0700}) {
    ASSERT_EQ(chmod(path_.c_str(), mode), 0);
    for (AttachMode am : {AttachMode::kOwner, AttachMode::kReadOnly}) {
      auto r = Store::Attach(name_, am);
      ASSERT_FALSE(r.ok()) << std::oct << mode;
      EXPECT_EQ(r.status().code(), EACCES);
      char want[32];
      std::snprintf(want, sizeof want, "has mode %04o, expected 0600", static_cast<unsigned>(mode));
      EXPECT_NE(r.status().message().find("store " + path_ + " " + want), std::string::npos)
          << r.status().ToString();
    }
  }
}

// The libintercept and dlckpt-fuse path: attach, else create, else attach.
TEST_F(StoreSecurityTest, CreateRefusesAPlantedNameAndLeavesItAlone) {
  int fd = shm_open(name_.c_str(), O_RDWR | O_CREAT | O_EXCL, 0666);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(fchmod(fd, 0666), 0);
  ASSERT_EQ(ftruncate(fd, 12345), 0);
  if (geteuid() == 0) {
    ASSERT_EQ(fchown(fd, kNobody, static_cast<gid_t>(-1)), 0);
  }
  close(fd);
  auto attached = Store::Attach(name_, AttachMode::kOwner);
  ASSERT_FALSE(attached.ok());
  EXPECT_EQ(attached.status().code(), geteuid() == 0 ? EPERM : EACCES);
  auto created = Store::Create(name_, Options());
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), EEXIST);
  EXPECT_NE(created.status().message().find(name_), std::string::npos);
  struct stat st;
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 12345);
  EXPECT_EQ(st.st_mode & 07777, 0666u);
}

TEST_F(StoreSecurityTest, OwnerReattachesItsStoreAfterACrash) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    umask(0);  // the store is 0600 regardless
    auto s = Store::Create(name_, Options());
    if (!s.ok()) _exit(1);
    auto fd = (*s)->Open("/ckpt", O_WRONLY | O_CREAT, 0644);
    if (!fd.ok() || !(*s)->Write(*fd, "mine", 4).ok() || !(*s)->Close(*fd).ok()) _exit(2);
    auto e = (*s)->Commit();
    if (!e.ok() || !(*s)->Acknowledge(*e).ok()) _exit(3);
    _exit(0);  // dies holding the store: no destructor runs
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  struct stat st;
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  auto s = Store::Attach(name_, AttachMode::kOwner);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->epochs().acknowledged, 1u);
  auto fi = (*s)->Stat("/ckpt");
  ASSERT_TRUE(fi.ok());
  EXPECT_EQ(fi->size, 4u);
}

TEST_F(StoreSecurityTest, VerifyFileChecksCommittedAndUnchangedWorkingBytes) {
  auto s = Store::Create(name_, Options());
  ASSERT_TRUE(s.ok());
  std::vector<char> data(10000, 'a');
  auto fd = (*s)->Open("/f", O_WRONLY | O_CREAT, 0644);
  ASSERT_TRUE((*s)->Write(*fd, data.data(), data.size()).ok());
  ASSERT_TRUE((*s)->Close(*fd).ok());
  EXPECT_EQ(*(*s)->VerifyFile("/f"), 0u);  // never committed: nothing vouches for it
  ASSERT_EQ(*(*s)->Commit(), 1u);
  ASSERT_TRUE((*s)->Acknowledge(1).ok());
  EXPECT_EQ(*(*s)->VerifyFile("/f"), 1u);  // working file, unchanged since epoch 1
  auto img = (*s)->GetImage(1);
  ASSERT_TRUE(img.ok());
  auto* byte = const_cast<uint8_t*>(img->extents.back().data) + 100;
  *byte ^= 1;
  auto ro = Store::Attach(name_, AttachMode::kReadOnly);
  ASSERT_TRUE(ro.ok());
  ASSERT_TRUE((*ro)->View(1).ok());
  for (Store* st : {s->get(), ro->get()}) {  // the owner's working file, epoch 1's view
    auto v = st->VerifyFile("/f");
    ASSERT_FALSE(v.ok());
    EXPECT_EQ(v.status().code(), EBADMSG);
    EXPECT_NE(v.status().message().find("store " + name_ + " epoch 1: /f: checksum mismatch"),
              std::string::npos)
        << v.status().ToString();
  }
  *byte ^= 1;
  // A working file changed since: no commit vouches for it.
  fd = (*s)->Open("/f", O_WRONLY, 0644);
  ASSERT_TRUE((*s)->Pwrite(*fd, "b", 1, 0).ok());
  ASSERT_TRUE((*s)->Close(*fd).ok());
  EXPECT_EQ(*(*s)->VerifyFile("/f"), 0u);
  EXPECT_EQ((*s)->VerifyFile("/none").status().code(), ENOENT);
}

TEST_F(StoreSecurityTest, VerifyFileInACompressedStore) {
  StoreOptions o = Options();
  o.compression = Compression::kLz4;
  auto s = Store::Create(name_, o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  std::vector<char> data(300000, 0);
  for (size_t i = 0; i < data.size(); i += 7) data[i] = static_cast<char>(i);
  auto fd = (*s)->Open("/z", O_WRONLY | O_CREAT, 0644);
  ASSERT_TRUE((*s)->Write(*fd, data.data(), data.size()).ok());
  ASSERT_TRUE((*s)->Close(*fd).ok());
  ASSERT_EQ(*(*s)->Commit(), 1u);
  EXPECT_EQ(*(*s)->VerifyFile("/z"), 1u);
  auto ro = Store::Attach(name_, AttachMode::kReadOnly);
  ASSERT_TRUE(ro.ok());
  EXPECT_EQ(*(*ro)->VerifyFile("/z"), 1u);
  fd = (*s)->Open("/z", O_WRONLY, 0644);
  ASSERT_TRUE((*s)->Pwrite(*fd, "b", 1, 200000).ok());
  ASSERT_TRUE((*s)->Close(*fd).ok());
  EXPECT_EQ(*(*s)->VerifyFile("/z"), 0u);
}

TEST_F(StoreSecurityTest, CheckSlotsReportsADamagedVersionTheViewDoesNotShow) {
  {
    auto s = Store::Create(name_, Options());
    ASSERT_TRUE(s.ok());
    auto fd = (*s)->Open("/f", O_WRONLY | O_CREAT, 0644);
    ASSERT_TRUE((*s)->Write(*fd, "x", 1).ok());
    ASSERT_TRUE((*s)->Close(*fd).ok());
    ASSERT_EQ(*(*s)->Commit(), 1u);
    ASSERT_TRUE((*s)->Acknowledge(1).ok());
  }  // saves the working files: a read-only attach views them, not epoch 1
  auto ro = Store::Attach(name_, AttachMode::kReadOnly);
  ASSERT_TRUE(ro.ok());
  EXPECT_TRUE((*ro)->CheckSlots().ok());
  int fd = open(path_.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  uint8_t b = 0;
  ASSERT_EQ(pread(fd, &b, 1, 4096 + 216 + 3), 1);  // epoch 1's file table (slot 0)
  b ^= 0x40;
  ASSERT_EQ(pwrite(fd, &b, 1, 4096 + 216 + 3), 1);
  close(fd);
  ro = Store::Attach(name_, AttachMode::kReadOnly);
  ASSERT_TRUE(ro.ok()) << ro.status().ToString();  // the view (the working files) is whole
  Status c = (*ro)->CheckSlots();
  EXPECT_EQ(c.code(), EBADMSG);
  EXPECT_NE(c.message().find("store " + name_ + ": version slot 0 (epoch 1) is damaged"), std::string::npos)
      << c.ToString();
}

}  // namespace
}  // namespace dlckpt::memfs

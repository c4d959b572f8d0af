#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "dlckpt/base/crc32c.h"
#include "dlckpt/memfs/memfs.h"
#include "dlckpt/memfs/store.h"
#include "store_test_util.h"
#include "dlckpt/base/units.h"

namespace dlckpt::memfs {
namespace {

using testing::Pattern;
using testing::ReadFile;
using testing::UniqueName;
using testing::WriteFile;

uint64_t BlocksOf(size_t bytes) { return (bytes + 4095) / 4096; }

// Every StoreTest runs on an uncompressed and an LZ4-compressed store (with
// the default threshold and chunk size: 16 blocks). Pattern() data does not
// compress, so these tests see compressed stores keep raw chunks; the
// CompressedStoreTest cases below exercise compressed chunks.
class StoreTest : public ::testing::TestWithParam<Compression> {
 protected:
  void SetUp() override { name_ = UniqueName(); }
  void TearDown() override { (void)Store::Destroy(name_); }

  std::unique_ptr<Store> Make(uint64_t capacity = 4 << 20, uint32_t block = 4096,
                              uint32_t max_files = 64, uint32_t max_open = 64) {
    StoreOptions o;
    o.capacity = capacity;
    o.block_size = block;
    o.max_files = max_files;
    o.max_open = max_open;
    o.job = "job1";
    o.node = "node0";
    o.rank = 3;
    o.compression = GetParam();
    auto r = Store::Create(name_, o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(*r) : nullptr;
  }

  std::string name_;
};

TEST_P(StoreTest, NameCarriesJobNodeRank) {
  auto n = StoreName("job42", "node-3.cluster", 17);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, "/dlckpt.job42.node-3.cluster.r17");
  EXPECT_EQ(StoreName("bad.job", "n", 0).status().code(), EINVAL);
  EXPECT_EQ(StoreName("j", "bad/node", 0).status().code(), EINVAL);
  EXPECT_EQ(StoreName("j", "n", -1).status().code(), EINVAL);
}

TEST_P(StoreTest, CreateWriteReadStatList) {
  auto s = Make();
  auto data = Pattern(10000, 1);
  WriteFile(*s, "/dlckpt/a/ckpt.0", data);
  WriteFile(*s, "/dlckpt/a/ckpt.1", Pattern(5, 2));
  WriteFile(*s, "/dlckpt/b", {});
  EXPECT_EQ(ReadFile(*s, "/dlckpt/a/ckpt.0"), data);
  auto st = s->Stat("/dlckpt/a/ckpt.0");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->size, 10000u);
  EXPECT_TRUE(S_ISREG(st->mode));
  EXPECT_EQ(st->mode & 0777, 0644u);
  auto list = s->List("/dlckpt/a/");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].path, "/dlckpt/a/ckpt.0");
  EXPECT_EQ((*list)[1].path, "/dlckpt/a/ckpt.1");
  EXPECT_EQ(s->List("")->size(), 3u);
  StoreStats stats = s->stats();
  EXPECT_EQ(stats.job, "job1");
  EXPECT_EQ(stats.node, "node0");
  EXPECT_EQ(stats.rank, 3);
}

TEST_P(StoreTest, WritePastEofZeroFillsHole) {
  auto s = Make();
  auto fd = s->Open("/f", O_RDWR | O_CREAT, 0600);
  ASSERT_TRUE(fd.ok());
  ASSERT_EQ(*s->Pwrite(*fd, "abc", 3, 0), 3u);
  ASSERT_EQ(*s->Pwrite(*fd, "xyz", 3, 9000), 3u);
  std::vector<uint8_t> buf(9003);
  ASSERT_EQ(*s->Pread(*fd, buf.data(), buf.size(), 0), 9003u);
  EXPECT_EQ(std::memcmp(buf.data(), "abc", 3), 0);
  for (size_t i = 3; i < 9000; ++i) ASSERT_EQ(buf[i], 0) << i;
  EXPECT_EQ(std::memcmp(buf.data() + 9000, "xyz", 3), 0);
  // Shrink then grow: the old bytes must not reappear.
  ASSERT_TRUE(s->Ftruncate(*fd, 1).ok());
  ASSERT_TRUE(s->Ftruncate(*fd, 8).ok());
  ASSERT_EQ(*s->Pread(*fd, buf.data(), 8, 0), 8u);
  EXPECT_EQ(buf[0], 'a');
  for (size_t i = 1; i < 8; ++i) EXPECT_EQ(buf[i], 0);
  // lseek past the end and write.
  ASSERT_EQ(*s->Seek(*fd, 100, SEEK_END), 108u);
  ASSERT_EQ(*s->Write(*fd, "z", 1), 1u);
  EXPECT_EQ(s->Fstat(*fd)->size, 109u);
  ASSERT_TRUE(s->Close(*fd).ok());
}

TEST_P(StoreTest, SeveralHandlesShareOneFile) {
  auto s = Make();
  auto a = s->Open("/f", O_RDWR | O_CREAT, 0600);
  auto b = s->Open("/f", O_RDONLY);
  auto c = s->Open("/f", O_WRONLY | O_APPEND);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  ASSERT_EQ(*s->Write(*a, "hello", 5), 5u);
  ASSERT_EQ(*s->Write(*c, "!", 1), 1u);
  char buf[16] = {};
  ASSERT_EQ(*s->Read(*b, buf, sizeof buf), 6u);
  EXPECT_STREQ(buf, "hello!");
  // Unlinked while open: still readable through the handle, gone by name.
  ASSERT_TRUE(s->Unlink("/f").ok());
  EXPECT_EQ(s->Stat("/f").status().code(), ENOENT);
  ASSERT_EQ(*s->Pread(*b, buf, 5, 0), 5u);
  for (int fd : {*a, *b, *c}) ASSERT_TRUE(s->Close(fd).ok());
  EXPECT_EQ(s->stats().blocks_free, s->stats().blocks_total);
}

// Regression (differential test, seed 70): a zero-length write through an
// O_APPEND descriptor moved its offset to the end of file; Linux leaves it.
TEST_P(StoreTest, EmptyAppendWriteKeepsTheOffset) {
  auto s = Make();
  WriteFile(*s, "/f", Pattern(100, 1));
  auto fd = s->Open("/f", O_WRONLY | O_APPEND);
  ASSERT_TRUE(fd.ok());
  ASSERT_EQ(*s->Seek(*fd, 500, SEEK_SET), 500u);
  ASSERT_EQ(*s->Write(*fd, "", 0), 0u);
  EXPECT_EQ(*s->Seek(*fd, 0, SEEK_CUR), 500u);
  ASSERT_EQ(*s->Write(*fd, "x", 1), 1u);
  EXPECT_EQ(*s->Seek(*fd, 0, SEEK_CUR), 101u);
  EXPECT_EQ(s->Fstat(*fd)->size, 101u);
  ASSERT_TRUE(s->Close(*fd).ok());
}

// Regression: Rollback dropped the descriptors of an unlinked file without
// releasing its blocks.
TEST_P(StoreTest, RollbackReleasesUnlinkedOpenFiles) {
  auto s = Make();
  WriteFile(*s, "/keep", Pattern(5000, 1));
  ASSERT_EQ(*s->Commit(), 1u);
  ASSERT_TRUE(s->Acknowledge(1).ok());
  WriteFile(*s, "/tmp", Pattern(50000, 2));
  auto a = s->Open("/tmp", O_RDONLY);
  auto b = s->Open("/tmp", O_RDONLY);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(s->Unlink("/tmp").ok());
  ASSERT_TRUE(s->Rollback().ok());
  EXPECT_EQ(s->stats().blocks_free, s->stats().blocks_total - 2);  // /keep's 5000 bytes
  EXPECT_EQ(s->Close(*a).code(), EBADF);
}

TEST_P(StoreTest, ErrorsAreErrnoValued) {
  auto s = Make(1 << 20, 4096, 4, 3);
  EXPECT_EQ(s->Open("/missing", O_RDONLY).status().code(), ENOENT);
  EXPECT_EQ(s->Open("", O_RDONLY).status().code(), ENOENT);
  EXPECT_EQ(s->Open(std::string(300, 'x'), O_RDWR | O_CREAT).status().code(), ENAMETOOLONG);
  auto fd = s->Open("/f", O_WRONLY | O_CREAT | O_EXCL, 0600);
  ASSERT_TRUE(fd.ok());
  EXPECT_EQ(s->Open("/f", O_WRONLY | O_CREAT | O_EXCL, 0600).status().code(), EEXIST);
  char buf[4];
  EXPECT_EQ(s->Read(*fd, buf, 4).status().code(), EBADF);  // write-only
  ASSERT_TRUE(s->Close(*fd).ok());
  EXPECT_EQ(s->Close(*fd).code(), EBADF);
  EXPECT_EQ(s->Write(*fd, "x", 1).status().code(), EBADF);
  EXPECT_EQ(s->Write(12345, "x", 1).status().code(), EBADF);
  EXPECT_EQ(s->Write(-1, "x", 1).status().code(), EBADF);
  auto ro = s->Open("/f", O_RDONLY);
  ASSERT_TRUE(ro.ok());
  EXPECT_EQ(s->Write(*ro, "x", 1).status().code(), EBADF);
  EXPECT_EQ(s->Ftruncate(*ro, 0).code(), EINVAL);
  EXPECT_EQ(s->Seek(*ro, -1, SEEK_SET).status().code(), EINVAL);
  EXPECT_EQ(s->Seek(*ro, 0, 99).status().code(), EINVAL);
  // EMFILE: three handles allowed.
  auto h2 = s->Open("/f", O_RDONLY);
  auto h3 = s->Open("/f", O_RDONLY);
  ASSERT_TRUE(h2.ok() && h3.ok());
  EXPECT_EQ(s->Open("/f", O_RDONLY).status().code(), EMFILE);
  for (int f : {*ro, *h2, *h3}) ASSERT_TRUE(s->Close(f).ok());
  // The file table holds four files.
  for (int i = 0; i < 3; ++i) WriteFile(*s, "/g" + std::to_string(i), {1});
  EXPECT_EQ(s->Open("/g9", O_WRONLY | O_CREAT).status().code(), ENOSPC);
  EXPECT_EQ(s->Rename("/nope", "/x").code(), ENOENT);
  EXPECT_EQ(s->Unlink("/nope").code(), ENOENT);
  ASSERT_TRUE(s->Unlink("/g2").ok());
  ASSERT_TRUE(s->Mkdir("/d", 0755).ok());
  EXPECT_EQ(s->Open("/d", O_WRONLY).status().code(), EISDIR);
  EXPECT_EQ(s->Open("/f", O_RDONLY | O_DIRECTORY).status().code(), ENOTDIR);
  EXPECT_EQ(s->Rmdir("/f").code(), ENOTDIR);
  EXPECT_EQ(s->Unlink("/d").code(), EISDIR);
}

TEST_P(StoreTest, FullStoreGivesEnospcAndStaysUsable) {
  auto s = Make(64 * 4096, 4096);
  auto fd = s->Open("/big", O_RDWR | O_CREAT, 0600);
  ASSERT_TRUE(fd.ok());
  auto data = Pattern(100 * 4096, 7);
  auto n = s->Write(*fd, data.data(), data.size());
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 64u * 4096);  // a partial write fills the store
  auto again = s->Write(*fd, data.data(), 10);
  EXPECT_EQ(again.status().code(), ENOSPC);
  EXPECT_EQ(s->Fstat(*fd)->size, 64u * 4096);
  EXPECT_EQ(s->Open("/other", O_WRONLY | O_CREAT).ok(), true);
  EXPECT_EQ(s->Truncate("/other", 4096).code(), ENOSPC);
  EXPECT_EQ(s->Stat("/other")->size, 0u);
  // Everything written is intact; freeing space makes the store usable again.
  std::vector<uint8_t> back(64 * 4096);
  ASSERT_EQ(*s->Pread(*fd, back.data(), back.size(), 0), back.size());
  EXPECT_EQ(0, std::memcmp(back.data(), data.data(), back.size()));
  ASSERT_TRUE(s->Ftruncate(*fd, 32 * 4096).ok());
  WriteFile(*s, "/small", Pattern(16 * 4096, 8));
  EXPECT_EQ(ReadFile(*s, "/small"), Pattern(16 * 4096, 8));
  ASSERT_TRUE(s->Close(*fd).ok());
}

TEST_P(StoreTest, CommittedBytesSurviveOverwriteUntilAcknowledged) {
  auto s = Make(1 << 20, 4096);
  auto v1 = Pattern(50000, 1), v2 = Pattern(30000, 2);
  WriteFile(*s, "/ckpt", v1);
  auto e1 = s->Commit();
  ASSERT_TRUE(e1.ok());
  EXPECT_EQ(*e1, 1u);
  ASSERT_TRUE(s->Acknowledge(1).ok());
  auto img1 = s->GetImage(1);
  ASSERT_TRUE(img1.ok());
  std::vector<uint8_t> before(img1->size);
  CopyFromImage(*img1, 0, before.data(), before.size());

  // Overwrite in place (no truncate), then partially, then truncate.
  auto fd = s->Open("/ckpt", O_RDWR);
  ASSERT_TRUE(fd.ok());
  ASSERT_EQ(*s->Pwrite(*fd, v2.data(), v2.size(), 0), v2.size());
  ASSERT_EQ(*s->Pwrite(*fd, "Q", 1, 45000), 1u);
  ASSERT_TRUE(s->Close(*fd).ok());
  std::vector<uint8_t> after(img1->size);
  CopyFromImage(*img1, 0, after.data(), after.size());
  EXPECT_EQ(before, after);
  EXPECT_TRUE(s->Verify(1).ok());

  auto e2 = s->Commit();
  ASSERT_TRUE(e2.ok());
  EXPECT_EQ(*e2, 2u);
  EXPECT_EQ(s->Commit().status().code(), EBUSY);
  // While epoch 2 is pending, epoch 1 stays intact even if we keep writing.
  WriteFile(*s, "/ckpt", Pattern(40000, 3));
  CopyFromImage(*img1, 0, after.data(), after.size());
  EXPECT_EQ(before, after);
  EXPECT_TRUE(s->Verify(1).ok());
  EXPECT_TRUE(s->Verify(2).ok());
  ASSERT_TRUE(s->Acknowledge(2).ok());
  EXPECT_EQ(s->GetImage(1).status().code(), ENOENT);
  EXPECT_EQ(s->epochs().acknowledged, 2u);

  // Rollback returns to epoch 2's content.
  ASSERT_TRUE(s->Rollback().ok());
  auto expect = v1;
  std::memcpy(expect.data(), v2.data(), v2.size());
  expect[45000] = 'Q';
  EXPECT_EQ(ReadFile(*s, "/ckpt"), expect);
}

TEST_P(StoreTest, EpochNumbersAreNeverReused) {
  auto s = Make();
  WriteFile(*s, "/a", {1, 2, 3});
  ASSERT_EQ(*s->Commit(), 1u);
  ASSERT_TRUE(s->AbortPending().ok());
  EXPECT_EQ(s->Commit(1).status().code(), EINVAL);
  ASSERT_EQ(*s->Commit(), 2u);
  ASSERT_TRUE(s->Acknowledge(2).ok());
  ASSERT_EQ(*s->Commit(7), 7u);
  EXPECT_EQ(s->Acknowledge(6).code(), EINVAL);
  ASSERT_TRUE(s->Acknowledge(7).ok());
}

TEST_P(StoreTest, RestoreChoosesPendingOrAcknowledged) {
  auto s = Make();
  WriteFile(*s, "/a", {1});
  ASSERT_EQ(*s->Commit(), 1u);
  ASSERT_TRUE(s->Acknowledge(1).ok());
  WriteFile(*s, "/a", {2});
  ASSERT_EQ(*s->Commit(), 2u);
  WriteFile(*s, "/a", {3});
  // Recovery decided on the acknowledged epoch 1.
  ASSERT_TRUE(s->Restore(1).ok());
  EXPECT_EQ(ReadFile(*s, "/a"), std::vector<uint8_t>{1});
  EXPECT_EQ(s->epochs().pending, 0u);
  WriteFile(*s, "/a", {4});
  ASSERT_EQ(*s->Commit(), 3u);
  // Recovery decided on the pending epoch 3.
  ASSERT_TRUE(s->Restore(3).ok());
  EXPECT_EQ(ReadFile(*s, "/a"), std::vector<uint8_t>{4});
  EXPECT_EQ(s->epochs().acknowledged, 3u);
  EXPECT_EQ(s->Restore(2).code(), ENOENT);
}

TEST_P(StoreTest, MemoryCostIsAboutTwiceTheCheckpoint) {
  auto s = Make(8 << 20, 65536);
  uint64_t total = s->stats().blocks_total;
  auto data = Pattern(3 << 20, 1);
  for (int epoch = 1; epoch <= 4; ++epoch) {
    WriteFile(*s, "/ckpt", data);  // rewrite with truncate, as apps do
    uint64_t used = total - s->stats().blocks_free;
    // acknowledged + working copy of 48 blocks each
    EXPECT_LE(used, 2u * 48u) << "epoch " << epoch;
    auto e = s->Commit();
    ASSERT_TRUE(e.ok());
    ASSERT_TRUE(s->Acknowledge(*e).ok());
    EXPECT_EQ(total - s->stats().blocks_free, 48u);
  }
}

TEST_P(StoreTest, ReadOnlyAttachSeesCommittedEpoch) {
  auto s = Make();
  WriteFile(*s, "/x", Pattern(1000, 1));
  ASSERT_EQ(*s->Commit(), 1u);
  ASSERT_TRUE(s->Acknowledge(1).ok());
  WriteFile(*s, "/x", Pattern(2000, 2));  // uncommitted
  WriteFile(*s, "/y", Pattern(10, 3));
  auto ro = Store::Attach(name_, AttachMode::kReadOnly);
  ASSERT_TRUE(ro.ok()) << ro.status().ToString();
  EXPECT_EQ(ReadFile(**ro, "/x"), Pattern(1000, 1));
  EXPECT_EQ((*ro)->Stat("/y").status().code(), ENOENT);
  EXPECT_EQ((*ro)->Open("/x", O_RDWR).status().code(), EROFS);
  EXPECT_EQ((*ro)->Commit().status().code(), EROFS);
  EXPECT_TRUE((*ro)->Verify(1).ok());
  EXPECT_EQ((*ro)->epochs().acknowledged, 1u);
  // A second owner is refused while the first lives.
  EXPECT_EQ(Store::Attach(name_, AttachMode::kOwner).status().code(), EBUSY);
}

TEST_P(StoreTest, ReadAllAttachIsReadOnlyAndSeesCommittedEpoch) {
  auto s = Make();
  WriteFile(*s, "/x", Pattern(300000, 4));
  ASSERT_EQ(*s->Commit(), 1u);
  auto ra = Store::Attach(name_, AttachMode::kReadAll);
  ASSERT_TRUE(ra.ok()) << ra.status().ToString();
  EXPECT_EQ(ReadFile(**ra, "/x"), Pattern(300000, 4));
  EXPECT_EQ((*ra)->Open("/x", O_RDWR).status().code(), EROFS);
  EXPECT_EQ((*ra)->Commit().status().code(), EROFS);
  EXPECT_TRUE((*ra)->Verify(1).ok());
}

TEST_P(StoreTest, CleanDetachKeepsWorkingFilesForNextOwner) {
  {
    auto s = Make();
    WriteFile(*s, "/committed", Pattern(100, 1));
    ASSERT_EQ(*s->Commit(), 1u);
    ASSERT_TRUE(s->Acknowledge(1).ok());
    WriteFile(*s, "/working", Pattern(5000, 2));
  }
  auto s = Store::Attach(name_, AttachMode::kOwner);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(ReadFile(**s, "/working"), Pattern(5000, 2));
  EXPECT_EQ(ReadFile(**s, "/committed"), Pattern(100, 1));
  EXPECT_EQ((*s)->epochs().acknowledged, 1u);
  // The blocks are accounted: nothing leaked, nothing double-used.
  WriteFile(**s, "/more", Pattern(8000, 3));
  EXPECT_EQ(ReadFile(**s, "/working"), Pattern(5000, 2));
  ASSERT_TRUE((*s)->Rollback().ok());
  EXPECT_EQ((*s)->Stat("/working").status().code(), ENOENT);
  EXPECT_EQ((*s)->stats().blocks_free, (*s)->stats().blocks_total - 1);
}

TEST_P(StoreTest, ImageRoundTripRebuildsStoreByteForByte) {
  auto s = Make(2 << 20, 4096);
  WriteFile(*s, "/dlckpt/app/rank3.ckpt", Pattern(123457, 1));
  WriteFile(*s, "/dlckpt/app/meta", Pattern(17, 2));
  WriteFile(*s, "/dlckpt/empty", {});
  ASSERT_TRUE(s->Mkdir("/dlckpt/dir", 0750).ok());
  ASSERT_EQ(*s->Commit(), 1u);
  ASSERT_TRUE(s->Acknowledge(1).ok());
  // Fragment the store so the image has several extents.
  WriteFile(*s, "/dlckpt/app/meta", Pattern(9000, 3));
  ASSERT_EQ(*s->Commit(), 2u);
  auto img = s->GetImage(2);
  ASSERT_TRUE(img.ok());
  std::vector<uint8_t> bytes(img->size);
  CopyFromImage(*img, 0, bytes.data(), bytes.size());

  std::string rebuilt = UniqueName();
  {
    auto b = ImageBuilder::Begin(rebuilt, "spare7");
    ASSERT_TRUE(b.ok());
    // Odd-sized pieces plus zero padding, as the codec delivers them.
    bytes.resize(bytes.size() + 5000, 0);
    size_t off = 0, step = 1;
    while (off < bytes.size()) {
      size_t n = std::min(step, bytes.size() - off);
      ASSERT_TRUE((*b)->Append(bytes.data() + off, n).ok());
      off += n;
      step = step * 3 + 1;
    }
    EXPECT_EQ((*b)->image_size(), img->size);
    auto e = (*b)->Finish();
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    EXPECT_EQ(*e, 2u);
  }
  auto r = Store::Attach(rebuilt, AttachMode::kReadOnly);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->epochs().acknowledged, 2u);
  EXPECT_TRUE((*r)->Verify(2).ok());
  EXPECT_EQ((*r)->stats().node, "spare7");
  EXPECT_EQ((*r)->stats().rank, 3);
  EXPECT_EQ(ReadFile(**r, "/dlckpt/app/rank3.ckpt"), Pattern(123457, 1));
  EXPECT_EQ(ReadFile(**r, "/dlckpt/app/meta"), Pattern(9000, 3));
  EXPECT_TRUE(S_ISDIR((*r)->Stat("/dlckpt/dir")->mode));
  auto img2 = (*r)->GetImage(2);
  ASSERT_TRUE(img2.ok());
  std::vector<uint8_t> bytes2(img2->size);
  CopyFromImage(*img2, 0, bytes2.data(), bytes2.size());
  bytes.resize(img->size);
  EXPECT_EQ(bytes, bytes2);  // byte-identical image
  // The rebuilt store can be owned and continue epochs.
  r->reset();
  auto o = Store::Attach(rebuilt, AttachMode::kOwner);
  ASSERT_TRUE(o.ok());
  WriteFile(**o, "/dlckpt/app/meta", {9});
  EXPECT_EQ(*(*o)->Commit(), 3u);
  o->reset();
  (void)Store::Destroy(rebuilt);
}

TEST_P(StoreTest, CorruptImageIsRefusedAndLeavesNothing) {
  auto s = Make();
  WriteFile(*s, "/f", Pattern(10000, 1));
  ASSERT_EQ(*s->Commit(), 1u);
  auto img = s->GetImage(1);
  std::vector<uint8_t> bytes(img->size);
  CopyFromImage(*img, 0, bytes.data(), bytes.size());
  std::string rebuilt = UniqueName();
  {
    auto flipped = bytes;
    flipped[flipped.size() - 10] ^= 1;  // file data
    auto b = ImageBuilder::Begin(rebuilt, "n");
    ASSERT_TRUE((*b)->Append(flipped.data(), flipped.size()).ok());
    EXPECT_EQ((*b)->Finish().status().code(), EBADMSG);
  }
  EXPECT_EQ(Store::Attach(rebuilt, AttachMode::kReadOnly).status().code(), ENOENT);
  {
    auto flipped = bytes;
    flipped[40] ^= 1;  // header
    auto b = ImageBuilder::Begin(rebuilt, "n");
    EXPECT_EQ((*b)->Append(flipped.data(), flipped.size()).code(), EBADMSG);
  }
  {
    auto b = ImageBuilder::Begin(rebuilt, "n");
    ASSERT_TRUE((*b)->Append(bytes.data(), bytes.size() / 2).ok());
    EXPECT_EQ((*b)->Finish().status().code(), ENODATA);
  }
  EXPECT_EQ(Store::Attach(rebuilt, AttachMode::kReadOnly).status().code(), ENOENT);
}

TEST_P(StoreTest, DamagedStoreIsRefusedNotRead) {
  auto s = Make();
  WriteFile(*s, "/f", Pattern(10000, 1));
  ASSERT_EQ(*s->Commit(), 1u);
  ASSERT_TRUE(s->Acknowledge(1).ok());
  auto raw = Env::Default()->OpenShm(name_, true);
  ASSERT_TRUE(raw.ok());
  uint8_t* p = (*raw)->data();
  // Damage a file's data: attach works, Verify names the file.
  auto img = s->GetImage(1);
  const_cast<uint8_t*>(img->extents.back().data)[5] ^= 0xff;
  auto ro = Store::Attach(name_, AttachMode::kReadOnly);
  ASSERT_TRUE(ro.ok());
  Status v = (*ro)->Verify(1);
  EXPECT_EQ(v.code(), EBADMSG);
  EXPECT_NE(v.message().find("/f"), std::string::npos);
  const_cast<uint8_t*>(img->extents.back().data)[5] ^= 0xff;
  // Damage the version slot's file table.
  p[4096 + 216 + 3] ^= 0x40;
  EXPECT_EQ(Store::Attach(name_, AttachMode::kReadOnly).status().code(), EBADMSG);
  p[4096 + 216 + 3] ^= 0x40;
  // Damage the geometry.
  p[20] ^= 1;
  auto bad = Store::Attach(name_, AttachMode::kReadOnly);
  EXPECT_EQ(bad.status().code(), EBADMSG);
  EXPECT_NE(bad.status().message().find(name_), std::string::npos);
  p[20] ^= 1;
  EXPECT_TRUE(Store::Attach(name_, AttachMode::kReadOnly).ok());
  // Not a store at all.
  std::string junk = UniqueName();
  auto j = Env::Default()->CreateShm(junk, 8192, false);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(Store::Attach(junk, AttachMode::kReadOnly).status().code(), EBADMSG);
  (void)Env::Default()->UnlinkShm(junk);
}

TEST_P(StoreTest, ShmIsMode0600) {
  auto s = Make();
  struct stat st;
  ASSERT_EQ(stat(("/dev/shm" + name_).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

class FailingEnv final : public Env {
 public:
  Result<std::unique_ptr<MappedShm>> CreateShm(const std::string& name, size_t, bool) override {
    return Status::FromErrno(ENOSPC, "fallocate " + name);
  }
};

TEST_P(StoreTest, CreationFailureIsReportedAndLeavesNothing) {
  FailingEnv env;
  StoreOptions o;
  auto r = Store::Create(name_, o, &env);
  EXPECT_EQ(r.status().code(), ENOSPC);
  EXPECT_EQ(Store::Attach(name_, AttachMode::kReadOnly).status().code(), ENOENT);
  o.block_size = 1000;
  EXPECT_EQ(Store::Create(name_, o).status().code(), EINVAL);
  o.block_size = 4096;
  o.capacity = 0;
  EXPECT_EQ(Store::Create(name_, o).status().code(), EINVAL);
}

TEST_P(StoreTest, ConcurrentWritersOnDifferentFiles) {
  auto s = Make(16 << 20, 4096, 64, 64);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto data = Pattern(300000, t);
      auto fd = s->Open("/t" + std::to_string(t), O_WRONLY | O_CREAT, 0600);
      ASSERT_TRUE(fd.ok());
      for (size_t off = 0; off < data.size(); off += 1000) {
        ASSERT_TRUE(s->Write(*fd, data.data() + off, std::min<size_t>(1000, data.size() - off)).ok());
      }
      ASSERT_TRUE(s->Close(*fd).ok());
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(ReadFile(*s, "/t" + std::to_string(t)), Pattern(300000, t));
  auto e = s->Commit();
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(s->Verify(*e).ok());
}

TEST_P(StoreTest, RenameFilesAndDirectories) {
  auto s = Make();
  WriteFile(*s, "/a", {1});
  WriteFile(*s, "/b", {2});
  ASSERT_TRUE(s->Rename("/a", "/b").ok());  // replaces
  EXPECT_EQ(ReadFile(*s, "/b"), std::vector<uint8_t>{1});
  EXPECT_EQ(s->Stat("/a").status().code(), ENOENT);
  ASSERT_TRUE(s->Mkdir("/d", 0755).ok());
  WriteFile(*s, "/d/x", {3});
  WriteFile(*s, "/d/y/z", {4});
  WriteFile(*s, "/dz", {5});
  ASSERT_TRUE(s->Rename("/d", "/e").ok());
  EXPECT_EQ(ReadFile(*s, "/e/x"), std::vector<uint8_t>{3});
  EXPECT_EQ(ReadFile(*s, "/e/y/z"), std::vector<uint8_t>{4});
  EXPECT_EQ(ReadFile(*s, "/dz"), std::vector<uint8_t>{5});
  EXPECT_EQ(s->Rmdir("/e").code(), ENOTEMPTY);
  EXPECT_EQ(s->Rename("/e", "/e/sub").code(), EINVAL);
  EXPECT_EQ(s->Rename("/b", "/e").code(), EISDIR);
}

INSTANTIATE_TEST_SUITE_P(Compression, StoreTest,
                         ::testing::Values(Compression::kNone, Compression::kLz4),
                         [](const auto& info) { return std::string(CompressionName(info.param)); });

TEST(CApiTest, ErrnoAtTheBoundary) {
  std::string name = UniqueName();
  dlckpt_store_options_t o;
  dlckpt_store_options_init(&o);
  o.capacity = 1 << 20;
  o.prefault = 0;
  dlckpt_store_t* s = dlckpt_store_create(name.c_str(), &o);
  ASSERT_NE(s, nullptr) << dlckpt_last_error();
  int fd = dlckpt_open(s, "/dlckpt/x", O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(dlckpt_write(s, fd, "hello", 5), 5);
  struct stat st;
  ASSERT_EQ(dlckpt_fstat(s, fd, &st), 0);
  EXPECT_EQ(st.st_size, 5);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(dlckpt_close(s, fd), 0);
  errno = 0;
  EXPECT_EQ(dlckpt_write(s, fd, "x", 1), -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_NE(std::string(dlckpt_last_error()).find("fd"), std::string::npos);
  EXPECT_EQ(dlckpt_open(s, "/nope", O_RDONLY, 0), -1);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_NE(std::string(dlckpt_last_error()).find("/nope"), std::string::npos);
  EXPECT_EQ(dlckpt_lseek(s, 99, 0, SEEK_SET), -1);
  EXPECT_EQ(errno, EBADF);
  uint64_t epoch = 0;
  ASSERT_EQ(dlckpt_store_commit(s, &epoch), 0);
  EXPECT_EQ(epoch, 1u);
  EXPECT_EQ(dlckpt_store_acknowledge(s, 1), 0);
  EXPECT_EQ(dlckpt_store_verify(s, 1), 0);
  EXPECT_EQ(dlckpt_store_attach(name.c_str(), DLCKPT_ATTACH_OWNER), nullptr);
  EXPECT_EQ(errno, EBUSY);
  EXPECT_EQ(dlckpt_store_destroy(s), 0);
  EXPECT_EQ(dlckpt_store_attach(name.c_str(), DLCKPT_ATTACH_READONLY), nullptr);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(dlckpt_close(nullptr, 0), -1);
  EXPECT_EQ(errno, EBADF);
  char buf[8];
  EXPECT_EQ(dlckpt_store_name("j", "n", 1, buf, sizeof buf), -1);
  EXPECT_EQ(errno, ERANGE);
}

TEST(UnitsTest, ParseAndFormat) {
  EXPECT_EQ(*ParseSize("4096"), 4096u);
  EXPECT_EQ(*ParseSize("64K"), 65536u);
  EXPECT_EQ(*ParseSize("64KiB"), 65536u);
  EXPECT_EQ(*ParseSize("16m"), 16u << 20);
  EXPECT_EQ(*ParseSize("1G"), 1u << 30);
  EXPECT_EQ(ParseSize("").status().code(), EINVAL);
  EXPECT_EQ(ParseSize("12X").status().code(), EINVAL);
  EXPECT_EQ(ParseSize("99999999999999999999").status().code(), EINVAL);
  EXPECT_EQ(FormatSize(1536), "1.5 KiB");
}

TEST(Crc32cTest, KnownVector) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32c("56789", 5, Crc32c("1234", 4)), 0xE3069283u);
}

TEST(Crc32cTest, CombineEqualsTheCrcOfTheConcatenation) {
  EXPECT_EQ(Crc32cCombine(Crc32c("1234", 4), Crc32c("56789", 5), 5), 0xE3069283u);
  auto data = Pattern(3 << 20, 9);
  for (size_t cut : {size_t{0}, size_t{1}, size_t{4096}, size_t{65537}, size_t{1} << 20, data.size()}) {
    uint32_t a = Crc32c(data.data(), cut), b = Crc32c(data.data() + cut, data.size() - cut);
    EXPECT_EQ(Crc32cCombine(a, b, data.size() - cut), Crc32c(data.data(), data.size())) << cut;
  }
  EXPECT_EQ(Crc32cCombine(0, 0, 0), 0u);
}

TEST(Crc32cTest, CopyCopiesAndEqualsTheCrcOfTheBytes) {
  auto data = Pattern((1 << 20) + 777, 5);
  for (size_t n : {size_t{0}, size_t{1}, size_t{8191}, size_t{8192}, size_t{8193}, data.size()}) {
    std::vector<uint8_t> out(n + 2, 0xAB);
    EXPECT_EQ(Crc32cCopy(out.data() + 1, data.data(), n, 0x1234u), Crc32c(data.data(), n, 0x1234u)) << n;
    EXPECT_TRUE(std::equal(data.begin(), data.begin() + static_cast<long>(n), out.begin() + 1)) << n;
    EXPECT_EQ(out[0], 0xAB);
    EXPECT_EQ(out[n + 1], 0xAB);
  }
}

}  // namespace
}  // namespace dlckpt::memfs

// ---- compressed stores ---------------------------------------------------------------

namespace dlckpt::memfs {
namespace {

// Bytes in runs of 8 to 71 equal bytes: LZ4 takes them to a few percent.
std::vector<uint8_t> Runs(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (size_t i = 0; i < n;) {
    size_t len = std::min<size_t>(8 + rng() % 64, n - i);
    std::memset(v.data() + i, static_cast<int>(rng() & 0xff), len);
    i += len;
  }
  return v;
}

// 16 random bytes, then the same 16 again: LZ4 takes them to about 0.6.
std::vector<uint8_t> Halves(size_t n, uint32_t seed) {
  std::vector<uint8_t> v = Pattern(n, seed);
  for (size_t i = 16; i < n; i += 32) std::memcpy(v.data() + i, v.data() + i - 16, std::min<size_t>(16, n - i));
  return v;
}

class CompressedStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { name_ = UniqueName(); }
  void TearDown() override {
    (void)Store::Destroy(name_);
    for (const auto& n : extra_) (void)Store::Destroy(n);
  }

  // 4 KiB blocks, 64 KiB chunks (16 blocks) unless told otherwise.
  std::unique_ptr<Store> Make(uint64_t capacity = 8 << 20, double threshold = 0.875,
                              uint32_t chunk = 64 << 10, const std::string& name = "") {
    StoreOptions o;
    o.capacity = capacity;
    o.block_size = 4096;
    o.max_files = 64;
    o.job = "cjob";
    o.node = "node0";
    o.rank = 5;
    o.compression = Compression::kLz4;
    o.compress_threshold = threshold;
    o.chunk_size = chunk;
    auto r = Store::Create(name.empty() ? name_ : name, o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(*r) : nullptr;
  }

  static uint64_t Used(Store& s) { return s.stats().blocks_total - s.stats().blocks_free; }

  static std::vector<uint8_t> ImageBytes(Store& s, uint64_t epoch) {
    auto img = s.GetImage(epoch);
    EXPECT_TRUE(img.ok()) << img.status().ToString();
    if (!img.ok()) return {};
    std::vector<uint8_t> bytes(img->size);
    CopyFromImage(*img, 0, bytes.data(), bytes.size());
    return bytes;
  }

  // Rebuilds store `name` from `bytes` in pieces of odd sizes plus padding.
  static Status Rebuild(const std::string& name, std::vector<uint8_t> bytes, const char* node) {
    auto b = ImageBuilder::Begin(name, node);
    if (!b.ok()) return b.status();
    bytes.resize(bytes.size() + 777, 0);
    size_t off = 0, step = 5;
    while (off < bytes.size()) {
      size_t n = std::min(step, bytes.size() - off);
      DLCKPT_RETURN_IF_ERROR((*b)->Append(bytes.data() + off, n));
      off += n;
      step = step * 3 + 1;
    }
    return (*b)->Finish().status();
  }

  std::string Other() {
    extra_.push_back(UniqueName());
    return extra_.back();
  }

  std::string name_;
  std::vector<std::string> extra_;
};

TEST_F(CompressedStoreTest, OptionsAreCheckedAndRecorded) {
  StoreOptions o;
  o.capacity = 1 << 20;
  o.block_size = 4096;
  o.compression = Compression::kLz4;
  o.compress_threshold = 0;
  EXPECT_EQ(Store::Create(name_, o).status().code(), EINVAL);
  o.compress_threshold = 1.5;
  EXPECT_EQ(Store::Create(name_, o).status().code(), EINVAL);
  o.compress_threshold = 0.9;
  o.chunk_size = 4096;  // one block: could never save anything
  EXPECT_EQ(Store::Create(name_, o).status().code(), EINVAL);
  o.chunk_size = 3 * 4096;
  EXPECT_EQ(Store::Create(name_, o).status().code(), EINVAL);
  o.chunk_size = 0;  // default: 16 blocks
  auto s = Store::Create(name_, o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  StoreStats st = (*s)->stats();
  EXPECT_EQ(st.compression, Compression::kLz4);
  EXPECT_EQ(st.chunk_size, 16u * 4096);
  EXPECT_DOUBLE_EQ(st.compress_threshold, 0.9);
  s->reset();
  auto ro = Store::Attach(name_, AttachMode::kReadOnly);
  ASSERT_TRUE(ro.ok());
  EXPECT_EQ((*ro)->stats().compression, Compression::kLz4);
  EXPECT_EQ(*ParseCompression("LZ4"), Compression::kLz4);
  EXPECT_EQ(*ParseCompression("none"), Compression::kNone);
  EXPECT_EQ(ParseCompression("zstd").status().code(), EINVAL);
}

TEST_F(CompressedStoreTest, ZerosTakeOneBlockPerChunkWhateverTheRecordSize) {
  auto s = Make();
  const size_t size = 3 << 20;  // 48 chunks
  for (size_t record : {size_t{3} << 20, size_t{64} << 10, size_t{4096}, size_t{1000}}) {
    SCOPED_TRACE(record);
    auto fd = s->Open("/z", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_TRUE(fd.ok());
    std::vector<uint8_t> zeros(record, 0);
    uint64_t peak = 0;
    for (size_t off = 0; off < size; off += record) {
      size_t n = std::min(record, size - off);
      ASSERT_EQ(*s->Write(*fd, zeros.data(), n), n);
      peak = std::max(peak, Used(*s));
    }
    ASSERT_TRUE(s->Close(*fd).ok());
    // At most one raw chunk besides the compressed ones while writing.
    EXPECT_LE(peak, 48u + 16u);
    EXPECT_EQ(s->Stat("/z")->blocks, 48u);
    EXPECT_EQ(Used(*s), 48u);
    EXPECT_EQ(ReadFile(*s, "/z"), std::vector<uint8_t>(size, 0));
  }
  auto e = s->Commit();
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(s->Verify(*e).ok());
  EXPECT_EQ(s->Stat("/z")->crc32c, Crc32c(std::vector<uint8_t>(size, 0).data(), size));
  auto img = s->GetImage(*e);
  ASSERT_TRUE(img.ok());
  EXPECT_LT(img->size, size / 100);  // parity is computed over this
}

TEST_F(CompressedStoreTest, IncompressibleDataCostsWhatItCostsRaw) {
  auto s = Make();
  auto data = Pattern((3 << 20) + 5000, 4);
  WriteFile(*s, "/r", data);
  EXPECT_EQ(s->Stat("/r")->blocks, BlocksOf(data.size()));
  EXPECT_EQ(Used(*s), BlocksOf(data.size()));
  ASSERT_EQ(*s->Commit(), 1u);
  EXPECT_EQ(Used(*s), BlocksOf(data.size()));
  auto img = s->GetImage(1);
  ASSERT_TRUE(img.ok());
  // Metadata: the header, one entry, 49 chunk entries of 8 bytes.
  EXPECT_EQ(img->size, data.size() + 216 + 320 + 49 * 8);
  EXPECT_EQ(ReadFile(*s, "/r"), data);
  EXPECT_TRUE(s->Verify(1).ok());
}

TEST_F(CompressedStoreTest, MixedChunksAndThreshold) {
  const size_t chunk = 64 << 10;
  std::vector<uint8_t> data;
  for (int i = 0; i < 8; ++i) {
    auto part = i % 2 ? Pattern(chunk, i) : (i % 4 ? Halves(chunk, i) : Runs(chunk, i));
    data.insert(data.end(), part.begin(), part.end());
  }
  data.resize(data.size() - 100);  // a partial last chunk (random)
  struct Case {
    double threshold;
    bool halves_compressed;
  };
  for (Case c : {Case{0.875, true}, Case{0.5, false}}) {
    SCOPED_TRACE(c.threshold);
    std::string name = Other();
    auto s = Make(8 << 20, c.threshold, chunk, name);
    WriteFile(*s, "/m", data);
    ASSERT_EQ(*s->Commit(), 1u);
    auto fi = s->Stat("/m");
    // Runs chunks: 1-3 blocks; Halves chunks: about 10 of 16; random: 16.
    uint64_t blocks = fi->blocks;
    if (c.halves_compressed) {
      EXPECT_LE(blocks, 4u * 16 + 2 * 3 + 2 * 12);
      EXPECT_GE(blocks, 4u * 16 + 2 * 1 + 2 * 9);
    } else {
      EXPECT_GE(blocks, 4u * 16 + 2 * 16 + 2 * 1);
      EXPECT_LE(blocks, 4u * 16 + 2 * 16 + 2 * 3);
    }
    EXPECT_EQ(ReadFile(*s, "/m"), data);
    EXPECT_TRUE(s->Verify(1).ok());
    EXPECT_EQ(fi->crc32c, Crc32c(data.data(), data.size()));
    // Reads of any size at any offset agree.
    auto fd = s->Open("/m", O_RDONLY);
    std::mt19937 rng(3);
    for (int i = 0; i < 300; ++i) {
      uint64_t off = rng() % (data.size() + 10);
      size_t len = rng() % 3 ? rng() % 5000 : rng() % 200000;
      std::vector<uint8_t> buf(len);
      auto n = s->Pread(*fd, buf.data(), len, off);
      ASSERT_TRUE(n.ok());
      size_t want = off >= data.size() ? 0 : std::min<size_t>(len, data.size() - off);
      ASSERT_EQ(*n, want);
      ASSERT_EQ(0, std::memcmp(buf.data(), data.data() + std::min<size_t>(off, data.size()), want));
    }
    ASSERT_TRUE(s->Close(*fd).ok());
  }
}

TEST_F(CompressedStoreTest, WritesInsideCompressedChunksCopyOnWrite) {
  auto s = Make();
  auto v1 = Runs(300000, 1);
  WriteFile(*s, "/f", v1);
  ASSERT_EQ(*s->Commit(), 1u);
  ASSERT_TRUE(s->Acknowledge(1).ok());
  auto committed = ImageBytes(*s, 1);
  uint64_t used = Used(*s);
  EXPECT_LT(used, 20u);
  // One byte in the middle of a chunk, one chunk wholly overwritten, a tail
  // cut inside a chunk, then an extension from the compressed tail.
  auto fd = s->Open("/f", O_RDWR);
  ASSERT_TRUE(fd.ok());
  ASSERT_EQ(*s->Pwrite(*fd, "X", 1, 70000), 1u);
  auto whole = Runs(65536, 2);
  ASSERT_EQ(*s->Pwrite(*fd, whole.data(), whole.size(), 131072), whole.size());
  ASSERT_TRUE(s->Ftruncate(*fd, 250000).ok());
  auto expect = v1;
  expect[70000] = 'X';
  std::memcpy(expect.data() + 131072, whole.data(), whole.size());
  expect.resize(250000);
  EXPECT_EQ(ReadFile(*s, "/f"), expect);
  EXPECT_EQ(ImageBytes(*s, 1), committed);  // the committed epoch is untouched
  EXPECT_TRUE(s->Verify(1).ok());
  ASSERT_EQ(*s->Commit(), 2u);
  EXPECT_TRUE(s->Verify(2).ok());
  ASSERT_TRUE(s->Acknowledge(2).ok());
  // The tail chunk (250000 is inside chunk 3) was compressed at commit; an
  // append decompresses it.
  auto more = Pattern(1000, 3);
  ASSERT_EQ(*s->Pwrite(*fd, more.data(), more.size(), 260000), more.size());
  expect.resize(260000, 0);
  expect.insert(expect.end(), more.begin(), more.end());
  EXPECT_EQ(ReadFile(*s, "/f"), expect);
  ASSERT_TRUE(s->Close(*fd).ok());
  ASSERT_EQ(*s->Commit(), 3u);
  EXPECT_TRUE(s->Verify(3).ok());
  EXPECT_EQ(s->Stat("/f")->crc32c, Crc32c(expect.data(), expect.size()));
  // Rollback to epoch 2 and the bytes of epoch 2 are back.
  ASSERT_TRUE(s->Acknowledge(3).ok());
  WriteFile(*s, "/f", {1, 2, 3});
  ASSERT_TRUE(s->Rollback().ok());
  EXPECT_EQ(ReadFile(*s, "/f"), expect);
  EXPECT_EQ(Used(*s), s->Stat("/f")->blocks);
}

TEST_F(CompressedStoreTest, LogicalSizeMayExceedCapacity) {
  auto s = Make(1 << 20);  // 256 blocks, 16 chunks raw
  std::vector<uint8_t> zeros(8 << 20, 0);
  WriteFile(*s, "/big", zeros);  // 128 chunks of 1 block
  EXPECT_EQ(Used(*s), 128u);
  ASSERT_EQ(*s->Commit(), 1u);
  ASSERT_TRUE(s->Acknowledge(1).ok());
  EXPECT_TRUE(s->Verify(1).ok());
  // Truncating far past the end is as cheap.
  ASSERT_TRUE(s->Truncate("/big", 12 << 20).ok());
  EXPECT_EQ(s->Stat("/big")->size, 12u << 20);
  EXPECT_EQ(Used(*s), 192u);
  // Past the largest possible size: nblocks * chunk_size.
  EXPECT_EQ(s->Truncate("/big", (256ull << 16) + 1).code(), ENOSPC);
  zeros.resize(12 << 20);
  EXPECT_EQ(ReadFile(*s, "/big"), zeros);
}

TEST_F(CompressedStoreTest, EnospcLeavesNothingHalfDone) {
  auto s = Make(64 * 4096);  // 64 blocks = 4 raw chunks
  const uint64_t kChunk = 16 * 4096;
  auto rnd = Pattern(100 * 4096, 7);
  auto fd = s->Open("/r", O_RDWR | O_CREAT, 0600);
  ASSERT_TRUE(fd.ok());
  EXPECT_EQ(*s->Write(*fd, rnd.data(), rnd.size()), 64u * 4096);  // as much as fits
  EXPECT_EQ(s->Write(*fd, rnd.data(), 10).status().code(), ENOSPC);
  // An extension by zeros needs a raw block to start with: all or nothing.
  EXPECT_EQ(s->Truncate("/r", 80 * 4096).code(), ENOSPC);
  EXPECT_EQ(s->Stat("/r")->size, 64u * 4096);
  EXPECT_EQ(s->stats().blocks_free, 0u);
  // Two chunks freed: zeros compress chunk by chunk (1 block each); the
  // partial last chunk stays raw (16 blocks) until the commit.
  ASSERT_TRUE(s->Ftruncate(*fd, 2 * kChunk).ok());
  const uint64_t size = 12 * kChunk - 100;
  ASSERT_TRUE(s->Truncate("/r", size).ok());
  EXPECT_EQ(Used(*s), 32u + 9u + 16u);
  std::vector<uint8_t> expect(rnd.begin(), rnd.begin() + 2 * kChunk);
  expect.resize(size, 0);
  EXPECT_EQ(ReadFile(*s, "/r"), expect);
  ASSERT_EQ(*s->Commit(), 1u);
  ASSERT_TRUE(s->Acknowledge(1).ok());
  EXPECT_EQ(Used(*s), 32u + 10u);
  // A hole that cannot be written: the write fails and the file is as it
  // was, its compressed (committed) tail chunk included, which the write had
  // decompressed, filled and compressed again.
  uint64_t free_before = s->stats().blocks_free;
  auto far = s->Pwrite(*fd, rnd.data(), 40 * 4096, size + (2 << 20));
  EXPECT_EQ(far.status().code(), ENOSPC);
  EXPECT_EQ(s->Stat("/r")->size, size);
  EXPECT_EQ(s->stats().blocks_free, free_before);
  EXPECT_EQ(s->Stat("/r")->blocks, 32u + 10u);
  EXPECT_EQ(ReadFile(*s, "/r"), expect);
  // Writing into a compressed chunk needs its raw blocks: ENOSPC when full.
  auto g = s->Open("/fill", O_WRONLY | O_CREAT, 0600);
  ASSERT_EQ(*s->Write(*g, Pattern(free_before * 4096, 9).data(), free_before * 4096),
            free_before * 4096);
  EXPECT_EQ(s->stats().blocks_free, 0u);
  EXPECT_EQ(s->Pwrite(*fd, "X", 1, 2 * kChunk + 5).status().code(), ENOSPC);
  EXPECT_EQ(s->Ftruncate(*fd, 2 * kChunk + 5).code(), ENOSPC);
  EXPECT_EQ(ReadFile(*s, "/r"), expect);
  ASSERT_TRUE(s->Close(*g).ok());
  ASSERT_TRUE(s->Unlink("/fill").ok());
  ASSERT_EQ(*s->Pwrite(*fd, "X", 1, 2 * kChunk + 5), 1u);
  expect[2 * kChunk + 5] = 'X';
  ASSERT_TRUE(s->Close(*fd).ok());
  // The failed writes left /r other than the application asked: no commit
  // until it cuts it where its bytes are still the ones asked for (the first
  // failed write, of the 'X', was at 2 * kChunk + 5).
  EXPECT_EQ(ReadFile(*s, "/r"), expect);
  auto refused = s->Commit();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("/r is incomplete"), std::string::npos) << refused.status().ToString();
  ASSERT_TRUE(s->Truncate("/r", 2 * kChunk + 5).ok());
  expect.resize(2 * kChunk + 5);
  auto e = s->Commit();
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(s->Verify(*e).ok());
  EXPECT_EQ(ReadFile(*s, "/r"), expect);
}

TEST_F(CompressedStoreTest, ImageRoundTripStoresChunksAsTheImageDoes) {
  auto s = Make(4 << 20);
  std::vector<uint8_t> mixed;
  for (int i = 0; i < 6; ++i) {
    auto part = i % 3 == 0 ? Pattern(65536, i) : (i % 3 == 1 ? Runs(65536, i) : Halves(65536, i));
    mixed.insert(mixed.end(), part.begin(), part.end());
  }
  mixed.resize(mixed.size() - 12345);
  WriteFile(*s, "/dlckpt/app/mixed", mixed);
  WriteFile(*s, "/dlckpt/app/zeros", std::vector<uint8_t>(1 << 20, 0));
  WriteFile(*s, "/dlckpt/app/small", Pattern(17, 2));
  WriteFile(*s, "/dlckpt/empty", {});
  ASSERT_TRUE(s->Mkdir("/dlckpt/dir", 0750).ok());
  ASSERT_EQ(*s->Commit(), 1u);
  ASSERT_TRUE(s->Acknowledge(1).ok());
  // Fragment: rewrite one file so chunk blocks are scattered.
  WriteFile(*s, "/dlckpt/app/small", Runs(100000, 3));
  ASSERT_EQ(*s->Commit(), 2u);
  auto bytes = ImageBytes(*s, 2);
  ASSERT_FALSE(bytes.empty());

  std::string r1 = Other(), r2 = Other();
  Status st = Rebuild(r1, bytes, "spare1");
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto a = Store::Attach(r1, AttachMode::kReadOnly);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ((*a)->stats().compression, Compression::kLz4);
  EXPECT_EQ((*a)->stats().chunk_size, 65536u);
  EXPECT_TRUE((*a)->Verify(2).ok());
  EXPECT_EQ(ReadFile(**a, "/dlckpt/app/mixed"), mixed);
  EXPECT_EQ(ReadFile(**a, "/dlckpt/app/zeros"), std::vector<uint8_t>(1 << 20, 0));
  EXPECT_EQ(ReadFile(**a, "/dlckpt/app/small"), Runs(100000, 3));
  EXPECT_EQ(ImageBytes(**a, 2), bytes);  // byte-identical
  // A second failure during recovery: rebuilt again from the rebuilt store.
  st = Rebuild(r2, ImageBytes(**a, 2), "spare2");
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto b = Store::Attach(r2, AttachMode::kReadOnly);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(ImageBytes(**b, 2), bytes);
  // The same blocks as the original's epoch 2 (nothing recompressed).
  uint64_t blocks = 0;
  auto listed = s->List("");
  for (const auto& f : *listed) blocks += f.blocks;
  EXPECT_EQ((*b)->stats().blocks_used, blocks);
  b->reset();
  // The rebuilt store can be owned and continues epochs, compressing.
  auto o = Store::Attach(r2, AttachMode::kOwner);
  ASSERT_TRUE(o.ok());
  WriteFile(**o, "/dlckpt/app/zeros", std::vector<uint8_t>(2 << 20, 0));
  EXPECT_EQ((*o)->Stat("/dlckpt/app/zeros")->blocks, 32u);
  EXPECT_EQ(*(*o)->Commit(), 3u);
  EXPECT_TRUE((*o)->Verify(3).ok());
}

TEST_F(CompressedStoreTest, DamagedCompressedChunkIsRefused) {
  auto s = Make();
  WriteFile(*s, "/f", Runs(200000, 1));
  ASSERT_EQ(*s->Commit(), 1u);
  auto bytes = ImageBytes(*s, 1);
  const size_t meta = 216 + 320 + 4 * 8;
  for (size_t at : {meta + 3, meta + 40, bytes.size() - 1, size_t{216 + 320 + 2}}) {
    SCOPED_TRACE(at);
    auto bad = bytes;
    bad[at] ^= 0x5a;
    std::string r = Other();
    Status st = Rebuild(r, bad, "n");
    EXPECT_EQ(st.code(), EBADMSG) << st.ToString();
    EXPECT_EQ(Store::Attach(r, AttachMode::kReadOnly).status().code(), ENOENT);
  }
  // Damage in the store itself: Verify names the file and the chunk.
  auto img = s->GetImage(1);
  auto* p = const_cast<uint8_t*>(img->extents[2].data);
  p[10] ^= 0x5a;
  Status v = s->Verify(1);
  EXPECT_EQ(v.code(), EBADMSG);
  EXPECT_NE(v.message().find("/f"), std::string::npos) << v.ToString();
  EXPECT_NE(v.message().find("chunk at offset 0"), std::string::npos) << v.ToString();
  p[10] ^= 0x5a;
  EXPECT_TRUE(s->Verify(1).ok());
}

TEST_F(CompressedStoreTest, CleanDetachAndReadOnlyReaders) {
  {
    auto s = Make();
    WriteFile(*s, "/c", Runs(500000, 1));
    ASSERT_EQ(*s->Commit(), 1u);
    ASSERT_TRUE(s->Acknowledge(1).ok());
    WriteFile(*s, "/w", Runs(300000, 2));
    auto fd = s->Open("/c", O_RDWR);
    ASSERT_EQ(*s->Pwrite(*fd, "abc", 3, 1000), 3u);  // a raw, uncommitted chunk
    ASSERT_TRUE(s->Close(*fd).ok());
  }
  auto ro = Store::Attach(name_, AttachMode::kReadOnly);
  ASSERT_TRUE(ro.ok());
  EXPECT_EQ(ReadFile(**ro, "/w"), Runs(300000, 2));  // the saved working set
  ASSERT_TRUE((*ro)->View(1).ok());
  EXPECT_EQ(ReadFile(**ro, "/c"), Runs(500000, 1));
  // Small sequential reads through the one-chunk cache.
  auto fd = (*ro)->Open("/c", O_RDONLY);
  std::vector<uint8_t> got;
  uint8_t buf[333];
  for (;;) {
    auto n = (*ro)->Read(*fd, buf, sizeof buf);
    ASSERT_TRUE(n.ok());
    if (*n == 0) break;
    got.insert(got.end(), buf, buf + *n);
  }
  EXPECT_EQ(got, Runs(500000, 1));
  ro->reset();
  auto s = Store::Attach(name_, AttachMode::kOwner);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto c = Runs(500000, 1);
  std::memcpy(c.data() + 1000, "abc", 3);
  EXPECT_EQ(ReadFile(**s, "/c"), c);
  EXPECT_EQ(ReadFile(**s, "/w"), Runs(300000, 2));
  ASSERT_EQ(*(*s)->Commit(), 2u);
  EXPECT_TRUE((*s)->Verify(2).ok());
  EXPECT_EQ((*s)->Stat("/c")->crc32c, Crc32c(c.data(), c.size()));
  ASSERT_TRUE((*s)->Acknowledge(2).ok());
  uint64_t blocks = 0;
  auto listed = (*s)->List("");
  for (const auto& f : *listed) blocks += f.blocks;
  EXPECT_EQ(Used(**s), blocks);
}

TEST_F(CompressedStoreTest, MemoryCostFollowsTheCompressedSize) {
  auto s = Make(8 << 20, 0.875, 1 << 20);  // 1 MiB chunks of 256 blocks
  auto data = Runs(3 << 20, 1);
  uint64_t acked = 0;
  for (int epoch = 1; epoch <= 4; ++epoch) {
    auto fd = s->Open("/ckpt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    uint64_t peak = 0;
    for (size_t off = 0; off < data.size(); off += 8192) {
      ASSERT_EQ(*s->Write(*fd, data.data() + off, 8192), 8192u);
      peak = std::max(peak, Used(*s));
    }
    ASSERT_TRUE(s->Close(*fd).ok());
    auto e = s->Commit();
    ASSERT_TRUE(e.ok());
    ASSERT_TRUE(s->Acknowledge(*e).ok());
    uint64_t now = Used(*s);
    // The previous epoch + this one, compressed, + one raw chunk being filled.
    EXPECT_LE(peak, acked + now + 256) << "epoch " << epoch;
    EXPECT_LT(now, 768u / 5) << "epoch " << epoch;
    acked = now;
  }
}

TEST_F(CompressedStoreTest, OldFormatIsRefusedClearly) {
  auto s = Make();
  s.reset();
  auto raw = Env::Default()->OpenShm(name_, true);
  ASSERT_TRUE(raw.ok());
  uint32_t v1 = 1;
  std::memcpy((*raw)->data() + 8, &v1, 4);  // format_version
  auto r = Store::Attach(name_, AttachMode::kReadOnly);
  EXPECT_EQ(r.status().code(), EBADMSG);
  EXPECT_NE(r.status().message().find("format version 1"), std::string::npos) << r.status().ToString();
}

// A tiny compressed store (48 blocks, 4-block chunks) under random writes,
// truncates, commits, aborts and rollbacks with a byte model beside it: the
// store runs full all the time, so every ENOSPC path and the undo of
// half-done writes are taken. A failed call must leave the file as it was, a
// short write must have written exactly its count, and after a rollback the
// blocks in use are exactly those of the acknowledged files.
TEST_F(CompressedStoreTest, SmallStoreAgreesWithAModel) {
  uint32_t seeds = 12;  // DLCKPT_MODEL_SEEDS=N for a longer run
  if (const char* env = std::getenv("DLCKPT_MODEL_SEEDS")) seeds = static_cast<uint32_t>(std::atoi(env));
  for (uint32_t seed = 1; seed <= seeds && !HasFatalFailure(); ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::string name = Other();
    auto s = Make(48 * 4096, 0.875, 4 * 4096, name);
    std::mt19937 rng(seed);
    const char* paths[] = {"/a", "/b"};
    std::map<std::string, std::vector<uint8_t>> work, acked, pending;
    bool has_pending = false;
    int enospc = 0;
    // "Failed writes" (memfs.h): per file, the first byte a failed operation
    // left wrong, and how much of [0, size) was rewritten since.
    std::map<std::string, std::pair<uint64_t, uint64_t>> damage;
    auto mark = [&](const std::string& path, uint64_t at) {
      auto it = damage.find(path);
      if (it == damage.end() || at < it->second.first) damage[path] = {at, 0};
      damage[path].second = 0;
    };
    for (int step = 0; step < 600 && !HasFatalFailure(); ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      std::string p = paths[rng() % 2];
      int op = static_cast<int>(rng() % 100);
      if (op < 50) {
        uint64_t off = rng() % 4 ? rng() % 120000 : rng() % 400000;
        size_t len = rng() % 3 ? rng() % 20000 : rng() % 90000;
        auto data = rng() % 2 ? Runs(len, rng()) : Pattern(len, rng());
        auto fd = s->Open(p, O_RDWR | O_CREAT, 0644);
        ASSERT_TRUE(fd.ok()) << fd.status().ToString();
        auto r = s->Pwrite(*fd, data.data(), len, off);
        ASSERT_TRUE(s->Close(*fd).ok());
        auto& m = work[p];
        if (len == 0) continue;
        if (!r.ok()) {
          ASSERT_EQ(r.status().code(), ENOSPC) << r.status().ToString();
          ++enospc;
          mark(p, off);
        } else {
          ASSERT_GT(*r, 0u);
          ASSERT_LE(*r, len);
          if (m.size() < off + *r) m.resize(off + *r, 0);
          std::memcpy(m.data() + off, data.data(), *r);
          if (*r < len) {
            mark(p, off + *r);
          } else if (auto d = damage.find(p); d != damage.end()) {
            if (off <= d->second.second) d->second.second = std::max<uint64_t>(d->second.second, off + *r);
            if (d->second.second >= m.size()) damage.erase(d);
          }
        }
      } else if (op < 65) {
        if (!work.count(p)) continue;
        uint64_t size = rng() % 2 ? rng() % 150000 : rng() % 500000;
        Status st = s->Truncate(p, size);
        if (st.ok()) {
          work[p].resize(size, 0);
          auto d = damage.find(p);
          if (d != damage.end() && (size <= d->second.first || d->second.second >= size)) damage.erase(d);
        } else {
          ASSERT_EQ(st.code(), ENOSPC) << st.ToString();
          ++enospc;
          mark(p, std::min<uint64_t>(work[p].size(), size));
        }
      } else if (op < 80) {
        if (has_pending) {
          if (rng() % 3) {
            ASSERT_TRUE(s->Acknowledge(s->epochs().pending).ok());
            acked = pending;
          } else {
            ASSERT_TRUE(s->AbortPending().ok());
          }
          has_pending = false;
          continue;
        }
        if (!damage.empty()) {
          // Refused while a file is damaged; removing it ends that.
          auto refused = s->Commit();
          ASSERT_FALSE(refused.ok()) << "committed a damaged file";
          ASSERT_EQ(refused.status().code(), ENOSPC) << refused.status().ToString();
          for (const auto& [path, d] : damage) {
            ASSERT_TRUE(s->Unlink(path).ok());
            work.erase(path);
          }
          damage.clear();
        }
        auto e = s->Commit();
        ASSERT_TRUE(e.ok()) << e.status().ToString();
        ASSERT_TRUE(s->Verify(*e).ok());
        pending = work;
        has_pending = true;
      } else if (op < 88) {
        ASSERT_TRUE(s->Rollback().ok());
        work = acked;
        damage.clear();
        has_pending = false;
        uint64_t blocks = 0;
        auto listed = s->List("");
        for (const auto& f : *listed) blocks += f.blocks;
        ASSERT_EQ(Used(*s), blocks);
      }
      for (const auto& [path, bytes] : work) {
        auto fi = s->Stat(path);
        ASSERT_TRUE(fi.ok());
        ASSERT_EQ(fi->size, bytes.size()) << path;
        ASSERT_EQ(ReadFile(*s, path), bytes) << path;
      }
      ASSERT_LE(Used(*s), 48u);
    }
    EXPECT_GT(enospc, 10);
  }
}

TEST(CompressedCApiTest, OptionsReachTheStore) {
  std::string name = UniqueName();
  dlckpt_store_options_t o;
  dlckpt_store_options_init(&o);
  EXPECT_EQ(o.compression, DLCKPT_COMPRESS_NONE);
  o.capacity = 1 << 20;
  o.prefault = 0;
  o.compression = 7;
  EXPECT_EQ(dlckpt_store_create(name.c_str(), &o), nullptr);
  EXPECT_EQ(errno, EINVAL);
  o.compression = DLCKPT_COMPRESS_LZ4;
  dlckpt_store_t* s = dlckpt_store_create(name.c_str(), &o);
  ASSERT_NE(s, nullptr) << dlckpt_last_error();
  std::vector<uint8_t> zeros(1 << 20, 0);
  int fd = dlckpt_open(s, "/z", O_WRONLY | O_CREAT, 0644);
  EXPECT_EQ(dlckpt_write(s, fd, zeros.data(), zeros.size()), static_cast<ssize_t>(zeros.size()));
  EXPECT_EQ(dlckpt_close(s, fd), 0);
  EXPECT_EQ(dlckpt_store_destroy(s), 0);
}

}  // namespace
}  // namespace dlckpt::memfs

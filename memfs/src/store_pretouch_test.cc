// Pre-touch (memfs.h, "Pre-touch"): a created store has written one nonzero
// word into every page of its data area, data written afterwards reads back
// intact (holes and extensions as zeros, though free blocks are not zero),
// and StoreOptions::pretouch = false or $DLCKPT_PRETOUCH=0 turns it off.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dlckpt/memfs/memfs.h"

namespace dlckpt::memfs {
namespace {

class StorePretouchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    name_ = *StoreName("pretouch" + std::to_string(getpid()) + "x" + std::to_string(counter++),
                       "n0", 0);
    unsetenv("DLCKPT_PRETOUCH");
  }
  void TearDown() override {
    unsetenv("DLCKPT_PRETOUCH");
    (void)Store::Destroy(name_);
  }

  static StoreOptions Options() {
    StoreOptions o;
    o.capacity = 8 << 20;
    o.block_size = 64 << 10;
    return o;
  }

  // Pages of the data area (after the store's metadata) that carry their
  // pre-touch word, read through a second, read-only mapping.
  uint64_t TouchedPages(const StoreStats& st) {
    auto raw = Env::Default()->OpenShm(name_, false);
    EXPECT_TRUE(raw.ok()) << raw.status().ToString();
    if (!raw.ok()) return 0;
    const uint8_t* data = (*raw)->data() + (st.shm_bytes - st.capacity);
    uint64_t n = 0;
    for (uint64_t off = 0; off < st.capacity; off += 4096) {
      uint64_t w;
      std::memcpy(&w, data + off, sizeof w);
      if (w == PretouchWord(off)) n++;
    }
    return n;
  }

  std::string name_;
};

TEST_F(StorePretouchTest, WordsAreNonzeroAndDistinct) {
  EXPECT_NE(PretouchWord(0), 0u);
  EXPECT_NE(PretouchWord(0), PretouchWord(4096));
  std::vector<uint8_t> buf(3 * 4096 + 100, 0);
  PretouchPages(buf.data(), buf.size());
  for (uint64_t off : {0u, 4096u, 8192u, 12288u}) {
    uint64_t w;
    std::memcpy(&w, buf.data() + off, sizeof w);
    EXPECT_EQ(w, PretouchWord(off)) << off;
  }
  // Only the first word of each page is written.
  EXPECT_EQ(buf[8], 0);
  EXPECT_EQ(buf[4096 + 4095], 0);
}

TEST_F(StorePretouchTest, CreatedStoreIsPretouchedAndDataReadsBackIntact) {
  auto s = Store::Create(name_, Options());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Store& store = **s;
  StoreStats st = store.stats();
  EXPECT_EQ(st.pretouch_bytes, st.capacity);
  EXPECT_GE(st.pretouch_seconds, 0.0);
  EXPECT_EQ(TouchedPages(st), st.capacity / 4096);

  // A file written over pre-touched blocks: its bytes, then a hole and an
  // extension that must read as zeros, not as the pre-touch words.
  std::vector<uint8_t> data(200000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 1);
  auto fd = store.Open("/ckpt/a", O_CREAT | O_RDWR);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  ASSERT_EQ(*store.Pwrite(*fd, data.data(), data.size(), 0), data.size());
  const uint64_t gap_at = 300000;
  ASSERT_EQ(*store.Pwrite(*fd, data.data(), 100, gap_at), 100u);
  ASSERT_TRUE(store.Ftruncate(*fd, 600000).ok());
  std::vector<uint8_t> back(600000, 0xee);
  ASSERT_EQ(*store.Pread(*fd, back.data(), back.size(), 0), back.size());
  EXPECT_EQ(std::memcmp(back.data(), data.data(), data.size()), 0);
  for (uint64_t i = data.size(); i < gap_at; ++i) ASSERT_EQ(back[i], 0) << "hole byte " << i;
  EXPECT_EQ(std::memcmp(back.data() + gap_at, data.data(), 100), 0);
  for (uint64_t i = gap_at + 100; i < back.size(); ++i) ASSERT_EQ(back[i], 0) << "extension byte " << i;

  // Committed and verified (CRCs over what the file holds), and still intact
  // after copy-on-write moves it into further pre-touched blocks.
  ASSERT_TRUE(store.Close(*fd).ok());
  auto e1 = store.Commit();
  ASSERT_TRUE(e1.ok()) << e1.status().ToString();
  ASSERT_TRUE(store.Acknowledge(*e1).ok());
  ASSERT_TRUE(store.Verify(*e1).ok());
  fd = store.Open("/ckpt/a", O_RDWR);
  ASSERT_TRUE(fd.ok());
  ASSERT_EQ(*store.Pwrite(*fd, "x", 1, 5), 1u);
  ASSERT_TRUE(store.Ftruncate(*fd, 1000).ok());
  ASSERT_TRUE(store.Ftruncate(*fd, 70000).ok());
  std::vector<uint8_t> small(70000, 0xee);
  ASSERT_EQ(*store.Pread(*fd, small.data(), small.size(), 0), small.size());
  EXPECT_EQ(small[5], 'x');
  EXPECT_EQ(std::memcmp(small.data(), data.data(), 5), 0);
  EXPECT_EQ(std::memcmp(small.data() + 6, data.data() + 6, 1000 - 6), 0);
  for (uint64_t i = 1000; i < small.size(); ++i) ASSERT_EQ(small[i], 0) << "re-extended byte " << i;
  ASSERT_TRUE(store.Close(*fd).ok());
  auto e2 = store.Commit();
  ASSERT_TRUE(e2.ok());
  ASSERT_TRUE(store.Verify(*e2).ok());
}

TEST_F(StorePretouchTest, TheOptionTurnsItOff) {
  StoreOptions o = Options();
  o.pretouch = false;
  auto s = Store::Create(name_, o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  StoreStats st = (*s)->stats();
  EXPECT_EQ(st.pretouch_bytes, 0u);
  EXPECT_EQ(TouchedPages(st), 0u);
}

TEST_F(StorePretouchTest, TheEnvironmentTurnsItOff) {
  EXPECT_TRUE(PretouchEnabled());
  for (const char* off : {"0", "off", "No", "false"}) {
    setenv("DLCKPT_PRETOUCH", off, 1);
    EXPECT_FALSE(PretouchEnabled()) << off;
  }
  setenv("DLCKPT_PRETOUCH", "1", 1);
  EXPECT_TRUE(PretouchEnabled());
  setenv("DLCKPT_PRETOUCH", "0", 1);
  auto s = Store::Create(name_, Options());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  StoreStats st = (*s)->stats();
  EXPECT_EQ(st.pretouch_bytes, 0u);
  EXPECT_EQ(TouchedPages(st), 0u);
}

TEST_F(StorePretouchTest, NotWithoutPrefaultNorWhenAttached) {
  StoreOptions o = Options();
  o.prefault = false;  // pages need not exist: touching one could SIGBUS
  auto s = Store::Create(name_, o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->stats().pretouch_bytes, 0u);
  s->reset();
  auto a = Store::Attach(name_, AttachMode::kOwner);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ((*a)->stats().pretouch_bytes, 0u);
}

}  // namespace
}  // namespace dlckpt::memfs

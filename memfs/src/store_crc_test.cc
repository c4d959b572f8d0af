// CRC while writing (blocks.cc): a commit takes the file CRCs the writes
// computed and reads again only what they do not cover. Property: for random
// write patterns (overwrites, holes, truncation, appends, reattach, rollback;
// raw and LZ4 stores), the CRC recorded at every commit equals the CRC32C of
// the file's bytes, which equal a model of the file in process memory. And
// for sequential writes, a commit reads nothing again.
#include <fcntl.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dlckpt/memfs/memfs.h"
#include "store_test_util.h"

namespace dlckpt::memfs {
namespace {

using testing::Pattern;
using testing::ReadFile;
using testing::UniqueName;

StoreOptions Options(Compression c, uint32_t block_size) {
  StoreOptions o;
  o.capacity = 8 << 20;
  o.block_size = block_size;
  o.max_files = 8;
  o.compression = c;
  o.chunk_size = 4 * block_size;
  o.compress_threshold = 0.75;
  return o;
}

// Random writes against a model; checks every commit's CRCs.
class CrcProperty {
 public:
  CrcProperty(uint32_t seed, Compression c, uint32_t block_size)
      : rng_(seed), name_(UniqueName("crc")), opts_(Options(c, block_size)) {
    auto s = Store::Create(name_, opts_);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (s.ok()) store_ = std::move(*s);
  }
  ~CrcProperty() {
    store_.reset();
    (void)Store::Destroy(name_);
  }

  void Run(int steps) {
    ASSERT_TRUE(store_);
    for (int i = 0; i < steps && !::testing::Test::HasFatalFailure(); ++i) Step(i);
    Commit();
  }

 private:
  uint64_t Rand(uint64_t n) { return n == 0 ? 0 : rng_() % n; }

  // A length or offset near block boundaries half of the time.
  uint64_t Near(uint64_t max) {
    const uint64_t bs = opts_.block_size;
    if (rng_() % 2 == 0) return Rand(max + 1);
    uint64_t k = Rand(max / bs + 1) * bs;
    int64_t d = static_cast<int64_t>(Rand(5)) - 2;
    return std::min<uint64_t>(max, static_cast<uint64_t>(std::max<int64_t>(0, static_cast<int64_t>(k) + d)));
  }

  void Write(const std::string& path, uint64_t off, uint64_t len) {
    std::vector<uint8_t> data = rng_() % 3 == 0 ? std::vector<uint8_t>(len, 0x5A)
                                                : Pattern(len, static_cast<uint32_t>(rng_()));
    auto fd = store_->Open(path, O_WRONLY | O_CREAT, 0644);
    ASSERT_TRUE(fd.ok()) << fd.status().ToString();
    // Written in records of random sizes, as stdio or a loop would.
    uint64_t done = 0;
    while (done < len) {
      uint64_t rec = std::min<uint64_t>(len - done, 1 + Near(3 * opts_.block_size));
      uint64_t at = off + done;
      auto n = store_->Pwrite(*fd, data.data() + done, rec, at);
      ASSERT_TRUE(n.ok()) << n.status().ToString();
      ASSERT_EQ(*n, rec);
      done += rec;
    }
    ASSERT_TRUE(store_->Close(*fd).ok());
    auto& m = model_[path];
    if (m.size() < off + len) m.resize(off + len, 0);
    std::copy(data.begin(), data.end(), m.begin() + static_cast<long>(off));
  }

  void Truncate(const std::string& path, uint64_t size) {
    ASSERT_TRUE(store_->Truncate(path, size).ok());
    model_[path].resize(size, 0);
  }

  void Step(int i) {
    const std::string path = "/f" + std::to_string(Rand(3));
    const uint64_t max = 6 * opts_.block_size + 17;
    auto it = model_.find(path);
    uint64_t size = it == model_.end() ? 0 : it->second.size();
    switch (Rand(10)) {
      case 0:
      case 1:  // append
        Write(path, size, 1 + Near(2 * opts_.block_size));
        break;
      case 2:
      case 3:  // overwrite inside
        if (size > 0) {
          uint64_t off = Near(size - 1);
          Write(path, off, 1 + Rand(std::max<uint64_t>(1, size - off + opts_.block_size)));
        }
        break;
      case 4:  // a hole, then data
        Write(path, size + 1 + Near(2 * opts_.block_size), 1 + Near(opts_.block_size));
        break;
      case 5:  // shrink or extend
        if (it != model_.end()) Truncate(path, Near(max));
        break;
      case 6:  // rewrite from the start
        if (it != model_.end()) Truncate(path, 0);
        Write(path, 0, 1 + Near(max));
        break;
      case 7:
        Commit();
        break;
      case 8:  // a clean detach and attach: the CRCs kept while writing are gone
        if (i % 4 == 0) {
          store_.reset();
          auto s = Store::Attach(name_, AttachMode::kOwner);
          ASSERT_TRUE(s.ok()) << s.status().ToString();
          store_ = std::move(*s);
        }
        break;
      case 9:  // back to the acknowledged epoch
        if (acked_ != 0 && i % 3 == 0) {
          ASSERT_TRUE(store_->Rollback().ok());
          model_ = acked_model_;
        }
        break;
    }
  }

  void Commit() {
    auto e = store_->Commit();
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    ASSERT_TRUE(store_->Verify(*e).ok()) << store_->Verify(*e).ToString();
    for (const auto& [path, want] : model_) {
      std::vector<uint8_t> got = ReadFile(*store_, path);
      ASSERT_EQ(got.size(), want.size()) << path;
      ASSERT_TRUE(got == want) << path << ": bytes differ from the model";
      // The CRC recorded at this commit is that of the bytes (VerifyFile
      // recomputes it over them).
      auto v = store_->VerifyFile(path);
      ASSERT_TRUE(v.ok()) << v.status().ToString();
      ASSERT_EQ(*v, *e) << path;
    }
    ASSERT_TRUE(store_->Acknowledge(*e).ok());
    acked_ = *e;
    acked_model_ = model_;
  }

  std::mt19937 rng_;
  std::string name_;
  StoreOptions opts_;
  std::unique_ptr<Store> store_;
  std::map<std::string, std::vector<uint8_t>> model_, acked_model_;
  uint64_t acked_ = 0;
};

TEST(StoreCrc, RandomWritePatternsRaw) {
  for (uint32_t seed = 1; seed <= 12 && !HasFatalFailure(); ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    CrcProperty(seed, Compression::kNone, seed % 2 ? 4096 : 8192).Run(150);
  }
}

TEST(StoreCrc, RandomWritePatternsLz4) {
  for (uint32_t seed = 1; seed <= 6 && !HasFatalFailure(); ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    CrcProperty(seed, Compression::kLz4, 4096).Run(150);
  }
}

// The point of it: sequential writes in any record size leave nothing to read
// at commit; an overwrite inside a block costs that block, not the file.
TEST(StoreCrc, CommitReadsOnlyWhatWritesDidNotCover) {
  const std::string name = UniqueName("crc");
  struct Cleanup {
    std::string name;
    ~Cleanup() { (void)Store::Destroy(name); }
  } cleanup{name};  // also when an assertion ends the test early
  StoreOptions o = Options(Compression::kNone, 4096);
  auto s = Store::Create(name, o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Store& st = **s;
  const std::vector<uint8_t> data = Pattern(1 << 20, 7);
  for (size_t rec : {size_t{1} << 20, size_t{4096}, size_t{1000}, size_t{1}}) {
    SCOPED_TRACE("record " + std::to_string(rec));
    auto fd = st.Open("/seq", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_TRUE(fd.ok());
    for (size_t off = 0; off < data.size(); off += rec) {
      size_t n = std::min(rec, data.size() - off);
      ASSERT_EQ(*st.Write(*fd, data.data() + off, n), n);
      if (rec == 1 && off >= 20000) {  // enough bytes one at a time; the rest at once
        ASSERT_EQ(*st.Write(*fd, data.data() + off + 1, data.size() - off - 1), data.size() - off - 1);
        break;
      }
    }
    ASSERT_TRUE(st.Close(*fd).ok());
    uint64_t before = st.stats().crc_reread_bytes;
    auto e = st.Commit();
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    EXPECT_EQ(st.stats().crc_reread_bytes, before);
    EXPECT_EQ(*st.VerifyFile("/seq"), *e);
    ASSERT_TRUE(st.Acknowledge(*e).ok());
  }
  // One byte changed inside block 3 (after it was committed: copy-on-write).
  auto fd = st.Open("/seq", O_WRONLY);
  ASSERT_TRUE(fd.ok());
  uint8_t x = 0xEE;
  ASSERT_EQ(*st.Pwrite(*fd, &x, 1, 3 * 4096 + 100), 1u);
  ASSERT_TRUE(st.Close(*fd).ok());
  uint64_t before = st.stats().crc_reread_bytes;
  auto e = st.Commit();
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(st.stats().crc_reread_bytes - before, 4096u);
  EXPECT_EQ(*st.VerifyFile("/seq"), *e);
  std::vector<uint8_t> want = data;
  want[3 * 4096 + 100] = x;
  EXPECT_TRUE(ReadFile(st, "/seq") == want);
}

}  // namespace
}  // namespace dlckpt::memfs

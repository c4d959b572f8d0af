// Differential test: one random sequence of file operations is applied to a
// memfs store and to a temporary directory on disk; every return value, errno
// and byte read must agree. Commit/acknowledge/rollback are modelled on the
// disk side by copies of the directory; a clean detach and re-attach must lose
// nothing. After each acknowledged epoch the committed image is compared with
// the disk snapshot, so copy-on-write bugs show up too, and now and then a
// store rebuilt from the image must give the same image back. It runs on an
// uncompressed store and on an LZ4 one with 4-block chunks, where half of the
// writes carry compressible bytes.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dlckpt/memfs/memfs.h"

namespace dlckpt::memfs {
namespace {

namespace fs = std::filesystem;

const char* const kPaths[] = {"/a", "/b", "/c", "/d/e", "/d/f"};
const int kFlags[] = {O_RDONLY,
                      O_WRONLY | O_CREAT,
                      O_RDWR | O_CREAT,
                      O_RDWR | O_CREAT | O_TRUNC,
                      O_WRONLY | O_CREAT | O_APPEND,
                      O_RDWR | O_CREAT | O_EXCL,
                      O_RDWR,
                      O_WRONLY | O_TRUNC};

struct Pair {
  int mfd;
  int ofd;
};

class Differential {
 public:
  Differential(uint32_t seed, Compression compression)
      : rng_(seed), seed_(seed), compressed_(compression != Compression::kNone) {
    char tmpl[] = "/tmp/dlckpt-diff.XXXXXX";
    root_ = mkdtemp(tmpl);
    work_ = root_ / "work";
    snap_ = root_ / "snap";
    pend_ = root_ / "pending";
    fs::create_directories(work_ / "d");
    fs::create_directories(snap_ / "d");
    name_ = "/dlckpt-difftest." + std::to_string(getpid()) + "." + std::to_string(seed);
    rebuilt_ = name_ + ".rebuilt";
    StoreOptions o;
    o.capacity = 16 << 20;
    o.block_size = 4096;  // small blocks: many block boundaries
    o.max_files = 16;
    o.max_open = 64;
    o.compression = compression;
    o.chunk_size = 4 * 4096;  // small chunks: many chunk boundaries
    o.compress_threshold = 0.75;
    store_ = std::move(*Store::Create(name_, o));
  }

  ~Differential() {
    CloseAllOs();
    store_.reset();
    (void)Store::Destroy(name_);
    (void)Store::Destroy(rebuilt_);
    fs::remove_all(root_);
  }

  void Run(int steps) {
    for (step_ = 0; step_ < steps && !::testing::Test::HasFatalFailure(); ++step_) {
      int op = static_cast<int>(rng_() % 104);
      if (op < 12) {
        Open();
      } else if (op < 30) {
        Write(false);
      } else if (op < 40) {
        Write(true);
      } else if (op < 50) {
        Read(false);
      } else if (op < 56) {
        Read(true);
      } else if (op < 62) {
        Seek();
      } else if (op < 68) {
        Truncate();
      } else if (op < 75) {
        Close();
      } else if (op < 79) {
        Rename();
      } else if (op < 82) {
        Unlink();
      } else if (op < 87) {
        Stat();
      } else if (op < 91) {
        Commit();
      } else if (op < 94) {
        Acknowledge();
      } else if (op < 96) {
        Rollback();
      } else if (op < 98) {
        AbortPending();
      } else if (op < 100) {
        Reattach();
      } else {
        Rewrite();
      }
    }
    if (compressed_ && !::testing::Test::HasFatalFailure()) {
      EXPECT_GT(compressed_files_, 0) << "seed " << seed_ << ": no committed file was compressed";
    }
  }
  int compressed_files() const { return compressed_files_; }
  uint64_t kept() const { return kept_; }

 private:
  std::string Ctx() const {
    return "seed " + std::to_string(seed_) + " step " + std::to_string(step_);
  }
  std::string Disk(const char* p) const { return (work_ / (p + 1)).string(); }
  const char* AnyPath() { return kPaths[rng_() % std::size(kPaths)]; }
  size_t AnyLen() {
    switch (rng_() % 4) {
      case 0: return rng_() % 16;
      case 1: return rng_() % 5000;
      case 2: return 4096 * (1 + rng_() % 3);
      default: return rng_() % 20000;
    }
  }
  uint64_t AnyOffset() {
    if (compressed_ && rng_() % 4 == 0) return 16384 * (rng_() % 3);  // chunk-aligned
    return rng_() % 3 ? rng_() % 30000 : rng_() % 9000;
  }
  // Random bytes, or (compressed stores, half the time) runs of equal bytes.
  std::vector<uint8_t> AnyBytes(size_t len) {
    std::vector<uint8_t> buf(len);
    if (compressed_ && rng_() % 2) {
      for (size_t i = 0; i < len;) {
        size_t run = std::min<size_t>(1 + rng_() % 300, len - i);
        std::memset(buf.data() + i, rng_() % 4 ? 0 : static_cast<int>(rng_() & 0xff), run);
        i += run;
      }
    } else {
      for (auto& b : buf) b = static_cast<uint8_t>(rng_());
    }
    return buf;
  }

  // Compares a memfs result with the OS result (-1/errno or a value).
  template <class T>
  void Same(const Result<T>& m, long long os, int os_errno, const char* what) {
    if (os < 0) {
      ASSERT_FALSE(m.ok()) << Ctx() << " " << what << ": disk failed with " << strerror(os_errno)
                           << ", memfs succeeded";
      ASSERT_EQ(m.status().code(), os_errno) << Ctx() << " " << what << ": " << m.status().ToString();
    } else {
      ASSERT_TRUE(m.ok()) << Ctx() << " " << what << ": memfs " << m.status().ToString();
      ASSERT_EQ(static_cast<long long>(*m), os) << Ctx() << " " << what;
    }
  }
  void SameStatus(const Status& m, int os, int os_errno, const char* what) {
    if (os < 0) {
      ASSERT_EQ(m.code(), os_errno) << Ctx() << " " << what << ": " << m.ToString();
    } else {
      ASSERT_TRUE(m.ok()) << Ctx() << " " << what << ": " << m.ToString();
    }
  }

  void Open() {
    if (handles_.size() >= 8) return;
    const char* p = AnyPath();
    int flags = kFlags[rng_() % std::size(kFlags)];
    auto m = store_->Open(p, flags, 0644);
    int ofd = open(Disk(p).c_str(), flags | O_CLOEXEC, 0644);
    int err = errno;
    Same(m.ok() ? Result<int>(0) : m, ofd < 0 ? -1 : 0, err, "open");
    if (m.ok() && ofd >= 0) {
      ASSERT_EQ(*m >= 0, true);
      handles_.push_back({*m, ofd});
    }
  }

  Pair* AnyHandle() { return handles_.empty() ? nullptr : &handles_[rng_() % handles_.size()]; }

  void Write(bool positional) {
    Pair* h = AnyHandle();
    if (!h) return;
    size_t len = AnyLen();
    std::vector<uint8_t> buf = AnyBytes(len);
    if (positional) {
      uint64_t off = AnyOffset();
      auto m = store_->Pwrite(h->mfd, buf.data(), len, off);
      ssize_t o = pwrite(h->ofd, buf.data(), len, static_cast<off_t>(off));
      Same(m, o, errno, "pwrite");
    } else {
      auto m = store_->Write(h->mfd, buf.data(), len);
      ssize_t o = write(h->ofd, buf.data(), len);
      Same(m, o, errno, "write");
    }
  }

  void Read(bool positional) {
    Pair* h = AnyHandle();
    if (!h) return;
    size_t len = AnyLen();
    std::vector<uint8_t> mb(len), ob(len);
    Result<size_t> m = Status::IOError("unset");
    ssize_t o;
    if (positional) {
      uint64_t off = AnyOffset();
      m = store_->Pread(h->mfd, mb.data(), len, off);
      o = pread(h->ofd, ob.data(), len, static_cast<off_t>(off));
    } else {
      m = store_->Read(h->mfd, mb.data(), len);
      o = read(h->ofd, ob.data(), len);
    }
    Same(m, o, errno, positional ? "pread" : "read");
    if (o > 0) {
      ASSERT_EQ(0, std::memcmp(mb.data(), ob.data(), static_cast<size_t>(o)))
          << Ctx() << " read bytes differ";
    }
  }

  void Seek() {
    Pair* h = AnyHandle();
    if (!h) return;
    int whence = std::array{SEEK_SET, SEEK_CUR, SEEK_END}[rng_() % 3];
    int64_t off = static_cast<int64_t>(rng_() % 30000) - 2000;
    auto m = store_->Seek(h->mfd, off, whence);
    off_t o = lseek(h->ofd, off, whence);
    Same(m, o, errno, "lseek");
  }

  void Truncate() {
    Pair* h = AnyHandle();
    if (!h) return;
    uint64_t size = AnyOffset();
    Status m = store_->Ftruncate(h->mfd, size);
    int o = ftruncate(h->ofd, static_cast<off_t>(size));
    SameStatus(m, o, errno, "ftruncate");
  }

  // A file's own bytes written back over it from offset 0, after a cut to 0
  // half the time (an O_TRUNC rewrite), with one byte changed now and then:
  // the equal rewrites that a commit keeps shared with the committed epoch.
  void Rewrite() {
    Pair* h = AnyHandle();
    if (!h) return;
    int rfd = open(("/proc/self/fd/" + std::to_string(h->ofd)).c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(rfd, 0) << Ctx();
    struct stat st;
    ASSERT_EQ(fstat(rfd, &st), 0);
    std::vector<uint8_t> buf(static_cast<size_t>(st.st_size));
    ssize_t got = pread(rfd, buf.data(), buf.size(), 0);
    close(rfd);
    ASSERT_EQ(got, static_cast<ssize_t>(buf.size())) << Ctx();
    if (rng_() % 2) {
      Status m = store_->Ftruncate(h->mfd, 0);
      int o = ftruncate(h->ofd, 0);
      SameStatus(m, o, errno, "rewrite: ftruncate");
      if (o < 0) return;
    }
    if (!buf.empty() && rng_() % 3 == 0) buf[rng_() % buf.size()] ^= 1;
    auto m = store_->Pwrite(h->mfd, buf.data(), buf.size(), 0);
    ssize_t o = pwrite(h->ofd, buf.data(), buf.size(), 0);
    Same(m, o, errno, "rewrite: pwrite");
    rewrites_++;
  }

  void Close() {
    if (handles_.empty()) return;
    size_t i = rng_() % handles_.size();
    Status m = store_->Close(handles_[i].mfd);
    int o = close(handles_[i].ofd);
    SameStatus(m, o, errno, "close");
    handles_.erase(handles_.begin() + static_cast<long>(i));
  }

  void Rename() {
    const char* a = AnyPath();
    const char* b = AnyPath();
    Status m = store_->Rename(a, b);
    int o = rename(Disk(a).c_str(), Disk(b).c_str());
    SameStatus(m, o, errno, "rename");
  }

  void Unlink() {
    const char* p = AnyPath();
    Status m = store_->Unlink(p);
    int o = unlink(Disk(p).c_str());
    SameStatus(m, o, errno, "unlink");
  }

  void Stat() {
    const char* p = AnyPath();
    auto m = store_->Stat(p);
    struct stat st;
    int o = stat(Disk(p).c_str(), &st);
    Same(Result<uint64_t>(m.ok() ? Result<uint64_t>(m->size) : Result<uint64_t>(m.status())),
         o < 0 ? -1 : st.st_size, errno, "stat");
    if (!handles_.empty()) {
      Pair* h = AnyHandle();
      auto mf = store_->Fstat(h->mfd);
      ASSERT_EQ(fstat(h->ofd, &st), 0);
      ASSERT_TRUE(mf.ok());
      ASSERT_EQ(static_cast<off_t>(mf->size), st.st_size) << Ctx() << " fstat";
    }
  }

  static void CopyTree(const fs::path& from, const fs::path& to) {
    fs::remove_all(to);
    fs::copy(from, to, fs::copy_options::recursive);
  }

  void Commit() {
    const uint64_t kept_before = store_->stats().equal_blocks_kept;
    auto e = store_->Commit();
    kept_ += store_->stats().equal_blocks_kept - kept_before;
    if (pending_) {
      ASSERT_EQ(e.status().code(), EBUSY) << Ctx();
      return;
    }
    ASSERT_TRUE(e.ok()) << Ctx() << " " << e.status().ToString();
    pending_ = *e;
    CopyTree(work_, pend_);
  }

  void Acknowledge() {
    if (!pending_) return;
    ASSERT_TRUE(store_->Acknowledge(pending_).ok()) << Ctx();
    CopyTree(pend_, snap_);
    acked_ = pending_;
    pending_ = 0;
    CheckCommittedImage();
  }

  void AbortPending() {
    ASSERT_TRUE(store_->AbortPending().ok()) << Ctx();
    pending_ = 0;
  }

  void CloseAllOs() {
    for (auto& h : handles_) close(h.ofd);
    handles_.clear();
  }

  void Rollback() {
    ASSERT_TRUE(store_->Rollback().ok()) << Ctx();
    CloseAllOs();
    pending_ = 0;
    CopyTree(snap_, work_);
  }

  void Reattach() {
    CloseAllOs();
    store_.reset();  // clean detach: working files survive
    auto s = Store::Attach(name_, AttachMode::kOwner);
    ASSERT_TRUE(s.ok()) << Ctx() << " " << s.status().ToString();
    store_ = std::move(*s);
    // Every file agrees after the re-attach.
    for (const char* p : kPaths) {
      auto m = store_->Stat(p);
      struct stat st;
      int o = stat(Disk(p).c_str(), &st);
      ASSERT_EQ(m.ok(), o == 0) << Ctx() << " after reattach: " << p;
    }
  }

  // The acknowledged epoch, read through a read-only attachment, equals the
  // disk snapshot file for file.
  void CheckCommittedImage() {
    auto ro = Store::Attach(name_, AttachMode::kReadOnly);
    ASSERT_TRUE(ro.ok()) << ro.status().ToString();
    ASSERT_TRUE((*ro)->View(acked_).ok());
    ASSERT_TRUE((*ro)->Verify(acked_).ok()) << Ctx();
    for (const char* p : kPaths) {
      std::string disk = (snap_ / (p + 1)).string();
      auto fi = (*ro)->Stat(p);
      struct stat st;
      bool on_disk = stat(disk.c_str(), &st) == 0;
      ASSERT_EQ(fi.ok(), on_disk) << Ctx() << " committed " << p;
      if (!on_disk) continue;
      ASSERT_EQ(static_cast<off_t>(fi->size), st.st_size) << Ctx() << " committed size " << p;
      if (fi->blocks < (fi->size + 4095) / 4096) ++compressed_files_;
      std::vector<uint8_t> m(fi->size), o(fi->size);
      auto fd = (*ro)->Open(p, O_RDONLY);
      ASSERT_TRUE(fd.ok());
      ASSERT_EQ(*(*ro)->Read(*fd, m.data(), m.size()), m.size());
      int ofd = open(disk.c_str(), O_RDONLY | O_CLOEXEC);
      ASSERT_EQ(read(ofd, o.data(), o.size()), static_cast<ssize_t>(o.size()));
      close(ofd);
      ASSERT_EQ(m, o) << Ctx() << " committed bytes of " << p;
    }
    if (++acks_ % 5 == 0) CheckRebuild(**ro);
  }

  // A store rebuilt from the acknowledged image gives the same image back.
  void CheckRebuild(Store& ro) {
    auto img = ro.GetImage(acked_);
    ASSERT_TRUE(img.ok()) << Ctx() << " " << img.status().ToString();
    std::vector<uint8_t> bytes(img->size);
    CopyFromImage(*img, 0, bytes.data(), bytes.size());
    (void)Store::Destroy(rebuilt_);
    {
      auto b = ImageBuilder::Begin(rebuilt_, "rebuilt");
      ASSERT_TRUE(b.ok());
      ASSERT_TRUE((*b)->Append(bytes.data(), bytes.size()).ok()) << Ctx();
      auto e = (*b)->Finish();
      ASSERT_TRUE(e.ok()) << Ctx() << " " << e.status().ToString();
    }
    auto r = Store::Attach(rebuilt_, AttachMode::kReadOnly);
    ASSERT_TRUE(r.ok()) << Ctx() << " " << r.status().ToString();
    auto img2 = (*r)->GetImage(acked_);
    ASSERT_TRUE(img2.ok());
    std::vector<uint8_t> bytes2(img2->size);
    CopyFromImage(*img2, 0, bytes2.data(), bytes2.size());
    ASSERT_EQ(bytes, bytes2) << Ctx() << " rebuilt image differs";
  }

  std::mt19937 rng_;
  uint32_t seed_;
  int step_ = 0;
  fs::path root_, work_, snap_, pend_;
  bool compressed_;
  int acks_ = 0;
  int compressed_files_ = 0;  // committed files seen holding a compressed chunk
  int rewrites_ = 0;          // Rewrite() calls
  uint64_t kept_ = 0;         // blocks commits kept shared after an equal rewrite
  std::string name_, rebuilt_;
  std::unique_ptr<Store> store_;
  std::vector<Pair> handles_;
  uint64_t pending_ = 0;
  uint64_t acked_ = 0;
};

class StoreDifferentialTest : public ::testing::TestWithParam<Compression> {};

TEST_P(StoreDifferentialTest, RandomOperationsMatchDisk) {
  // DLCKPT_DIFF_SEEDS=N runs seeds 1..N; DLCKPT_DIFF_SEED=S only seed S.
  int first = 1, seeds = 24;
  if (const char* env = std::getenv("DLCKPT_DIFF_SEEDS")) seeds = std::atoi(env);
  if (const char* env = std::getenv("DLCKPT_DIFF_SEED")) first = seeds = std::atoi(env);
  int total = 0;
  uint64_t kept = 0;
  for (int seed = first; seed <= seeds && !HasFatalFailure(); ++seed) {
    Differential d(static_cast<uint32_t>(seed), GetParam());
    d.Run(2500);
    total += d.compressed_files();
    kept += d.kept();
  }
  if (GetParam() != Compression::kNone) std::printf("committed files with compressed chunks: %d\n", total);
  // Uncompressed stores keep blocks rewritten with equal bytes (FileNode::shadow).
  std::printf("blocks kept shared after equal rewrites: %llu\n", static_cast<unsigned long long>(kept));
  if (GetParam() == Compression::kNone && seeds - first >= 3) {
    EXPECT_GT(kept, 0u) << "no equal rewrite was kept: the test does not reach FileNode::shadow";
  }
}

INSTANTIATE_TEST_SUITE_P(Compression, StoreDifferentialTest,
                         ::testing::Values(Compression::kNone, Compression::kLz4),
                         [](const auto& info) { return std::string(CompressionName(info.param)); });

}  // namespace
}  // namespace dlckpt::memfs

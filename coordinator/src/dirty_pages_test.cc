// Dirty-page tracking (dirty_pages.h) against a brute-force comparison of
// snapshots over random write patterns (issue 34, test 4): no changed byte is
// ever missed. The same with the fallback forced (test 5), with the kernel
// parts refused one by one, after munmap + mmap, fork and MADV_DONTNEED.
// Real kernel: userfaultfd and PAGEMAP_SCAN of the machine that runs it.
#include "dirty_pages.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dirty_pages_abi.h"

namespace dlckpt::dirty {
namespace {

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

// Whether this kernel offers what the tracker needs, probed independently of
// the tracker: then the tracker must not fall back.
bool KernelHasAsyncWp();
// Whether a kUffdSync descriptor (one that handles kernel-mode faults) can
// be had here: then "sync" must not fall back.
bool KernelHasSyncWp() {
  long fd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  uffdio_api api{};
  api.api = UFFD_API;
  api.features = UFFD_FEATURE_WP_UNPOPULATED;
  bool ok = ioctl(static_cast<int>(fd), UFFDIO_API, &api) == 0;
  close(static_cast<int>(fd));
  return ok && KernelHasAsyncWp();  // PAGEMAP_SCAN came with WP_ASYNC (6.7)
}

// The tracker the setting asks for, or why this machine cannot test it.
std::string SkipUnless(const std::string& setting) {
  if (setting == "sync" && !KernelHasSyncWp()) return "no userfaultfd for kernel-mode faults (kUffdSync)";
  if (!KernelHasAsyncWp()) return "no userfaultfd WP_ASYNC";
  return "";
}
Tracker::Mode ModeOf(const std::string& setting) {
  return setting == "sync" ? Tracker::Mode::kUffdSync : Tracker::Mode::kUffdAsync;
}

// d reports [off, off + len) of its region: exactly those pages (exact),
// or within blocks of at most Tracker::kMaxBlock around them (kUffdSync).
void ExpectReports(const Dirty& d, uint64_t off, uint64_t len, bool exact, const std::string& what) {
  ASSERT_FALSE(d.whole) << what;
  ASSERT_EQ(d.ranges.size(), 1u) << what;
  if (exact) {
    EXPECT_EQ(d.ranges[0].offset, off) << what;
    EXPECT_EQ(d.ranges[0].len, len) << what;
  } else {
    EXPECT_LE(d.ranges[0].offset, off) << what;
    EXPECT_GE(d.ranges[0].offset + d.ranges[0].len, off + len) << what;
    EXPECT_LE(d.ranges[0].len, len + 2 * Tracker::kMaxBlock) << what;
  }
}
bool KernelHasAsyncWp() {
  long fd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
  if (fd < 0) fd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  uffdio_api api{};
  api.api = UFFD_API;
  bool ok = ioctl(static_cast<int>(fd), UFFDIO_API, &api) == 0 &&
            (api.features & (UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED)) ==
                (UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED);
  close(static_cast<int>(fd));
  return ok;
}

// `len` bytes of fresh private anonymous memory (MAP_FAILED on failure).
uint8_t* MapPrivate(size_t len) {
  return static_cast<uint8_t*>(mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
}

struct Region {
  uint8_t* ptr = nullptr;
  size_t bytes = 0;
  int handle = 0;
  std::string snap;  // the bytes at the last Collect
};

// Checks `d` against the brute-force diff of r's snapshot and its memory;
// returns the bytes reported (whole: r.bytes). Updates the snapshot.
size_t CheckAndSnap(Region* r, const Dirty& d, const std::string& what) {
  size_t reported = r->bytes;
  if (!d.whole) {
    reported = 0;
    uint64_t prev_end = 0;
    std::vector<bool> covered(r->bytes, false);
    for (size_t i = 0; i < d.ranges.size(); ++i) {
      const Range& g = d.ranges[i];
      EXPECT_GT(g.len, 0u) << what;
      EXPECT_LE(g.offset + g.len, r->bytes) << what;
      if (i > 0) {
        EXPECT_GT(g.offset, prev_end) << what << ": ranges not sorted, disjoint, apart";
      }
      prev_end = g.offset + g.len;
      for (uint64_t b = g.offset; b < g.offset + g.len && b < r->bytes; ++b) covered[b] = true;
      reported += g.len;
    }
    for (size_t b = 0; b < r->bytes; ++b) {
      if (static_cast<uint8_t>(r->snap[b]) != r->ptr[b] && !covered[b]) {
        ADD_FAILURE() << what << ": byte " << b << " of " << r->bytes << " changed ("
                      << int(static_cast<uint8_t>(r->snap[b])) << " -> " << int(r->ptr[b]) << ") but was not reported";
        break;
      }
    }
  }
  r->snap.assign(reinterpret_cast<const char*>(r->ptr), r->bytes);
  return reported;
}

// param: the setting ("off": the fallback forced; "on": kUffdAsync;
// "sync": kUffdSync).
class DirtyPagesProperty : public ::testing::TestWithParam<std::string> {};

TEST_P(DirtyPagesProperty, NoChangedByteIsMissed) {
  const bool forced_off = GetParam() == "off";
  const bool exact = GetParam() == "on";  // kUffdSync reports blocks
  auto t = Tracker::Create(GetParam().c_str());
  if (forced_off) {
    ASSERT_EQ(t->mode(), Tracker::Mode::kWhole);
    EXPECT_NE(t->reason().find("DLCKPT_DIRTY_TRACKING=off"), std::string::npos) << t->reason();
  } else if (std::string why = SkipUnless(GetParam()); why.empty()) {
    ASSERT_EQ(t->mode(), ModeOf(GetParam())) << t->reason() << t->sync_refused();
  } else {
    GTEST_SKIP() << why << ": " << t->reason();
  }
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    auto rnd = [&](uint64_t n) { return n == 0 ? 0 : rng() % n; };
    // An arena of private anonymous memory, most of it never touched.
    const size_t arena_pages = 256;
    auto* arena = static_cast<uint8_t*>(
        mmap(nullptr, arena_pages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(arena, MAP_FAILED);
    for (size_t p = 0; p < arena_pages; p += 3) arena[p * kPage + rnd(kPage)] = static_cast<uint8_t>(rng());
    // Regions at unaligned bounds; B starts in the page where A ends; C is
    // tiny; D on the heap; E of 0 bytes.
    std::vector<Region> regs(5);
    regs[0].ptr = arena + 100;
    regs[0].bytes = 10 * kPage + 333;
    regs[1].ptr = regs[0].ptr + regs[0].bytes + 17;
    regs[1].bytes = 40 * kPage + 5;
    regs[2].ptr = arena + 120 * kPage + kPage - 3;
    regs[2].bytes = 7;
    std::vector<uint8_t> heap(3 * kPage + 99, 7);
    regs[3].ptr = heap.data();
    regs[3].bytes = heap.size();
    regs[4].ptr = arena + 200 * kPage;
    regs[4].bytes = 0;
    for (Region& r : regs) {
      r.handle = t->Register(r.ptr, r.bytes);
      EXPECT_EQ(t->untracked_reason(r.handle), forced_off ? t->reason() : "");
    }
    auto first = t->Collect();
    for (Region& r : regs) {
      EXPECT_TRUE(first[r.handle].whole) << "the first Collect after Register is whole";
      CheckAndSnap(&r, first[r.handle], "first");
    }
    for (int round = 0; round < 120; ++round) {
      const std::string what = "round " + std::to_string(round);
      const int kind = static_cast<int>(rnd(8));
      Region& r = regs[rnd(4)];
      switch (kind) {
        case 0:  // single bytes anywhere in the arena (inside or between regions)
          for (int i = 0, n = 1 + static_cast<int>(rnd(20)); i < n; ++i) {
            arena[rnd(arena_pages * kPage)] ^= static_cast<uint8_t>(1 + rnd(255));
          }
          break;
        case 1: {  // a span across pages of one region
          const size_t off = rnd(r.bytes), len = 1 + rnd(std::min<size_t>(r.bytes - off, 5 * kPage));
          for (size_t i = 0; i < len; ++i) r.ptr[off + i] = static_cast<uint8_t>(rng());
          break;
        }
        case 2:  // every region whole (twice in a row makes them hot)
          for (Region& x : regs) {
            for (size_t i = 0; i < x.bytes; ++i) x.ptr[i] += 1;
          }
          break;
        case 3:  // nothing
          break;
        case 4: {  // the first and last byte only (partial pages)
          if (r.bytes > 0) {
            r.ptr[0] ^= 0x5a;
            r.ptr[r.bytes - 1] ^= 0xa5;
          }
          break;
        }
        case 5: {  // discarded pages of the arena (zeros without a write)
          const size_t p = rnd(arena_pages - 4);
          ASSERT_EQ(madvise(arena + p * kPage, (1 + rnd(3)) * kPage, MADV_DONTNEED), 0);
          break;
        }
        case 6: {  // re-protected with another size (and pointer, for A and B)
          if (&r == &regs[3]) break;
          t->Unregister(r.handle);
          if (&r == &regs[0]) r.bytes = 1 + rnd(12 * kPage);
          if (&r == &regs[1]) {
            r.ptr = arena + 60 * kPage + rnd(kPage);
            r.bytes = 1 + rnd(50 * kPage);
          }
          if (&r == &regs[2]) r.bytes = 1 + rnd(kPage);
          r.handle = t->Register(r.ptr, r.bytes);
          r.snap.clear();
          break;
        }
        case 7:  // the same value written again (a write, no change)
          if (r.bytes > 0) r.ptr[rnd(r.bytes)] = r.ptr[rnd(r.bytes)];
          break;
      }
      auto got = t->Collect();
      ASSERT_EQ(got.size(), regs.size()) << what;
      for (Region& x : regs) {
        const Dirty& d = got[x.handle];
        if (x.snap.size() != x.bytes) {  // just re-registered
          EXPECT_TRUE(d.whole) << what << ": re-registered ranges are whole once";
          CheckAndSnap(&x, d, what);
          continue;
        }
        if (forced_off) {
          EXPECT_TRUE(d.whole) << what;
        }
        const size_t reported = CheckAndSnap(&x, d, what + " region " + std::to_string(&x - regs.data()));
        // (The heap region D shares its first and last pages with the
        // allocations of this test itself: those are written every round.)
        if (!forced_off && kind == 3 && &x != &regs[3] && !d.whole) {
          EXPECT_EQ(reported, 0u) << what << ": nothing was written, region " << (&x - regs.data()) << " at " << static_cast<void*>(x.ptr) << " +" << x.bytes << " first range " << (d.ranges.empty() ? 0 : d.ranges[0].offset) << "+" << (d.ranges.empty() ? 0 : d.ranges[0].len);
        }
        if (exact && kind == 4 && &x == &r && x.bytes > 2 * kPage && &x != &regs[1] && !d.whole) {
          EXPECT_LE(reported, 2 * kPage) << what << ": two bytes, at most their two pages";
        }
      }
    }
    for (Region& r : regs) t->Unregister(r.handle);
    munmap(arena, arena_pages * kPage);
  }
}

INSTANTIATE_TEST_SUITE_P(DirtyPages, DirtyPagesProperty, ::testing::Values("on", "off", "sync"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           return i.param == "off" ? std::string("ForcedOff")
                                                   : i.param == "on" ? std::string("Tracking") : std::string("Sync");
                         });

// The tests below run with both mechanisms (param: "on" or "sync").
class DirtyPagesBoth : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (std::string why = SkipUnless(GetParam()); !why.empty()) GTEST_SKIP() << why;
  }
  bool exact() const { return GetParam() == "on"; }
  std::unique_ptr<Tracker> Make() {
    auto t = Tracker::Create(GetParam().c_str());
    EXPECT_EQ(t->mode(), ModeOf(GetParam())) << t->reason() << t->sync_refused();
    return t;
  }
};
INSTANTIATE_TEST_SUITE_P(DirtyPages, DirtyPagesBoth, ::testing::Values("on", "sync"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           return i.param == "on" ? std::string("Async") : std::string("Sync");
                         });

// Memory whose mapping is replaced under a registration (munmap + mmap at
// the same address): reported whole, then tracked again.
TEST_P(DirtyPagesBoth, RemappedMemoryIsWholeThenTrackedAgain) {
  auto t = Make();
  const size_t len = 8 * kPage;
  auto* m = MapPrivate(len);
  ASSERT_NE(m, MAP_FAILED);
  const int h = t->Register(m + 10, len - 20);
  EXPECT_TRUE(t->Collect()[h].whole);
  ASSERT_EQ(munmap(m, len), 0);
  ASSERT_EQ(mmap(m, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0), m);
  m[3 * kPage] = 9;
  EXPECT_TRUE(t->Collect()[h].whole) << "a new mapping at the same address";
  auto quiet = t->Collect()[h];
  EXPECT_FALSE(quiet.whole);
  EXPECT_TRUE(quiet.ranges.empty());
  m[5 * kPage + 1] = 1;
  auto one = t->Collect()[h];
  if (exact()) {
    ExpectReports(one, 5 * kPage - 10, kPage, true, "one page");
  } else {
    ExpectReports(one, 5 * kPage - 10, 2, false, "one page");
  }
  t->Unregister(h);
  munmap(m, len);
}

// Shared memory cannot be registered (only private anonymous memory is):
// that region is whole at every Collect, the others stay tracked.
TEST(DirtyPages, SharedMappingIsCopiedWhole) {
  if (!KernelHasAsyncWp()) GTEST_SKIP() << "no userfaultfd WP_ASYNC";
  auto t = Tracker::Create(nullptr);
  ASSERT_EQ(t->mode(), Tracker::Mode::kUffdAsync) << t->reason();
  auto* s = static_cast<uint8_t*>(mmap(nullptr, 4 * kPage, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(s, MAP_FAILED);
  std::vector<uint8_t> heap(4 * kPage);
  const int hs = t->Register(s, 4 * kPage), hh = t->Register(heap.data(), heap.size());
  EXPECT_NE(t->untracked_reason(hs), "");
  EXPECT_EQ(t->untracked_reason(hh), "");
  t->Collect();
  auto d = t->Collect();
  EXPECT_TRUE(d[hs].whole);
  EXPECT_FALSE(d[hh].whole);
  munmap(s, 4 * kPage);
}

// A child of fork() has no registrations: its first Collect is whole, then
// it tracks on its own; the parent's tracking is unaffected.
TEST_P(DirtyPagesBoth, ForkedChildStartsWhole) {
  auto t = Make();
  const bool exact = this->exact();
  // A mapping of its own: a heap buffer would share its edge pages with
  // allocations that Collect and the test make between the writes.
  const size_t len = 16 * kPage;
  uint8_t* buf = MapPrivate(len);
  ASSERT_NE(buf, MAP_FAILED);
  std::memset(buf, 1, len);
  const int h = t->Register(buf, len);
  t->Collect();
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int bad = 0;
    if (!t->Collect()[h].whole) bad |= 1;
    buf[2 * kPage + 5] = 3;
    auto d = t->Collect()[h];
    if (t->mode() != ModeOf(GetParam())) bad |= 4;
    if (d.whole || d.ranges.size() != 1 || d.ranges[0].offset > 2 * kPage + 5 ||
        d.ranges[0].offset + d.ranges[0].len <= 2 * kPage + 5) {
      bad |= 2;
    }
    _exit(bad);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  buf[7 * kPage] = 4;  // written after the fork (the page is copy-on-write now)
  auto d = t->Collect()[h];
  const uint64_t page_off = 7 * kPage - (reinterpret_cast<uintptr_t>(buf) & (kPage - 1));
  if (exact) {
    ASSERT_FALSE(d.whole);
    ASSERT_EQ(d.ranges.size(), 1u);
    EXPECT_EQ(d.ranges[0].offset, page_off);
  } else {
    ExpectReports(d, 7 * kPage, 1, false, "after the fork");
  }
  t->Unregister(h);
  munmap(buf, len);
}

// Kernel parts refused one by one: the tracker falls back (with a reason)
// and reports every range whole.
class RefusingOs final : public Os {
 public:
  explicit RefusingOs(int what) : what_(what) {}
  Result<int> Userfaultfd(int flags) override {
    if (what_ == 0) return Status::Error(EPERM, "userfaultfd");
    return Os::Default()->Userfaultfd(flags);
  }
  Result<long> Ioctl(int fd, unsigned long request, void* arg) override {
    if (what_ == 1 && request == PAGEMAP_SCAN) return Status::Error(ENOTTY, "ioctl");
    if (what_ == 2 && request == UFFDIO_API) {
      static_cast<uffdio_api*>(arg)->features = 0;  // as a 6.1 kernel answers
      return Status::Error(EINVAL, "ioctl");
    }
    return Os::Default()->Ioctl(fd, request, arg);
  }

 private:
  int what_;
};

TEST(DirtyPages, RefusedKernelPartsFallBack) {
  const char* expect[] = {"vm.unprivileged_userfaultfd", "PAGEMAP_SCAN", "UFFDIO_API"};
  for (int what = 0; what < 3; ++what) {
    RefusingOs os(what);
    auto t = Tracker::Create(nullptr, &os);
    EXPECT_EQ(t->mode(), Tracker::Mode::kWhole) << what;
    EXPECT_NE(t->reason().find(expect[what]), std::string::npos) << t->reason();
    std::vector<uint8_t> buf(3 * kPage);
    const int h = t->Register(buf.data(), buf.size());
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(t->Collect()[h].whole);
  }
}


// Pages discarded with MADV_DONTNEED read as zeros without any write: they
// are reported, once.
TEST_P(DirtyPagesBoth, DiscardedPagesAreReported) {
  auto t = Make();
  const size_t len = 8 * kPage;
  auto* m = MapPrivate(len);
  ASSERT_NE(m, MAP_FAILED);
  std::memset(m, 0x77, len);
  const int h = t->Register(m, len);
  t->Collect();
  EXPECT_TRUE(t->Collect()[h].ranges.empty());
  ASSERT_EQ(madvise(m + 2 * kPage, 2 * kPage, MADV_DONTNEED), 0);
  ASSERT_EQ(m[2 * kPage], 0);
  auto d = t->Collect()[h];
  ASSERT_FALSE(d.whole);
  ASSERT_EQ(d.ranges.size(), 1u);
  EXPECT_EQ(d.ranges[0].offset, 2 * kPage);
  EXPECT_EQ(d.ranges[0].len, 2 * kPage);
  EXPECT_TRUE(t->Collect()[h].ranges.empty()) << "reported once";
  m[3 * kPage] = 1;
  d = t->Collect()[h];
  ExpectReports(d, 3 * kPage, exact() ? kPage : 1, exact(), "a write after the discard");
  t->Unregister(h);
  munmap(m, len);
}


// A range rewritten almost whole twice in a row is left unprotected (whole)
// for kHotCollects Collects, then tracked precisely again.
TEST(DirtyPages, HotRangeIsWholeThenTrackedAgain) {
  if (!KernelHasAsyncWp()) GTEST_SKIP() << "no userfaultfd WP_ASYNC";
  auto t = Tracker::Create(nullptr);
  ASSERT_EQ(t->mode(), Tracker::Mode::kUffdAsync) << t->reason();
  const size_t len = 32 * kPage;
  auto* m = MapPrivate(len);
  ASSERT_NE(m, MAP_FAILED);
  Region r;
  r.ptr = m + 5;
  r.bytes = len - 10;
  r.handle = t->Register(r.ptr, r.bytes);
  CheckAndSnap(&r, t->Collect()[r.handle], "first");
  int whole = 0;
  for (int i = 0; i < 40; ++i) {
    const std::string what = "collect " + std::to_string(i);
    if (i < 2) std::memset(r.ptr, i + 1, r.bytes);              // hot
    if (i >= 2 && i % 3 == 0) r.ptr[(i * 7919) % r.bytes] ^= 1;  // then sparse
    Dirty d = t->Collect()[r.handle];
    whole += d.whole ? 1 : 0;
    const size_t reported = CheckAndSnap(&r, d, what);
    if (i >= 2 + 8 + 1 && !d.whole) {
      EXPECT_LE(reported, kPage) << what << ": tracked precisely again";
    }
  }
  EXPECT_GE(whole, 8);
  EXPECT_LE(whole, 9);
  munmap(m, len);
}


// Writes the kernel makes on the process's behalf (read(2) into the region,
// as an MPI library's shared-memory or socket path does) succeed and count,
// on a present page and on a page never touched.
TEST_P(DirtyPagesBoth, KernelWritesAreReported) {
  auto t = Make();
  const size_t len = 8 * kPage;
  auto* m = MapPrivate(len);
  ASSERT_NE(m, MAP_FAILED);
  std::memset(m, 1, 4 * kPage);  // pages 4..7 never touched
  const int h = t->Register(m, len);
  t->Collect();
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  const char msg[] = "written by the kernel";
  for (size_t page : {2u, 6u}) {
    ASSERT_EQ(write(p[1], msg, sizeof msg), static_cast<ssize_t>(sizeof msg));
    ASSERT_EQ(read(p[0], m + page * kPage + 100, sizeof msg), static_cast<ssize_t>(sizeof msg));
    EXPECT_EQ(std::memcmp(m + page * kPage + 100, msg, sizeof msg), 0);
    auto d = t->Collect()[h];
    ExpectReports(d, exact() ? page * kPage : page * kPage + 100, exact() ? kPage : sizeof msg, exact(),
                  "page " + std::to_string(page));
  }
  close(p[0]);
  close(p[1]);
  t->Unregister(h);
  munmap(m, len);
}

// Threads writing while another checkpoints: a copy kept up to date only
// from what each Collect reports (as a checkpoint's copy is) must equal the
// memory after the writers stop and one last Collect. A write racing a
// Collect may be reported then or at the next one, never not at all.
TEST_P(DirtyPagesBoth, ConcurrentWritersAreNeverMissed) {
  auto t = Make();
  const size_t len = 4 << 20;
  auto* m = MapPrivate(len);
  ASSERT_NE(m, MAP_FAILED);
  std::memset(m, 0, len);
  const int h = t->Register(m + 3, len - 7);
  std::vector<uint8_t> copy(m + 3, m + len - 4);
  auto apply = [&](const Dirty& d) {
    if (d.whole) {
      std::memcpy(copy.data(), m + 3, copy.size());
      return;
    }
    for (const Range& r : d.ranges) std::memcpy(copy.data() + r.offset, m + 3 + r.offset, r.len);
  };
  apply(t->Collect()[h]);
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int w = 0; w < 3; ++w) {
    writers.emplace_back([&, w] {
      std::mt19937_64 rng(static_cast<uint64_t>(w) + 11);
      while (!stop.load(std::memory_order_relaxed)) {
        // Bursts: a span, or single bytes scattered over the region.
        const size_t at = rng() % len;
        if (rng() % 2 == 0) {
          const size_t n = std::min<size_t>(len - at, 1 + rng() % (3 * kPage));
          for (size_t i = 0; i < n; ++i) m[at + i] = static_cast<uint8_t>(rng());
        } else {
          for (int i = 0; i < 16; ++i) m[rng() % len] ^= static_cast<uint8_t>(1 + rng() % 255);
        }
      }
    });
  }
  for (int c = 0; c < 200; ++c) {
    apply(t->Collect()[h]);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  stop = true;
  for (auto& w : writers) w.join();
  apply(t->Collect()[h]);
  size_t first_diff = copy.size();
  for (size_t i = 0; i < copy.size() && first_diff == copy.size(); ++i) {
    if (copy[i] != m[3 + i]) first_diff = i;
  }
  EXPECT_EQ(first_diff, copy.size()) << "byte " << first_diff << " of the region changed and was never reported";
  t->Unregister(h);
  munmap(m, len);
}

// The race of ConcurrentWritersAreNeverMissed made certain: another thread
// writes a protected page right after Collect's scan of written pages, before
// Collect re-protects what it found. The write must be reported by the next
// Collect (it is not protected again unreported).
class RacingOs final : public Os {
 public:
  Result<long> Ioctl(int fd, unsigned long request, void* arg) override {
    auto r = Os::Default()->Ioctl(fd, request, arg);
    if (request == PAGEMAP_SCAN && target != nullptr) {
      volatile uint8_t* p = target;
      target = nullptr;
      std::thread([p] { *p = 42; }).join();  // faults; resolved by the kernel or the handler
    }
    return r;
  }
  uint8_t* target = nullptr;
};

TEST_P(DirtyPagesBoth, WriteBetweenScanAndReprotectIsReportedNext) {
  RacingOs os;
  auto t = Tracker::Create(GetParam().c_str(), &os);
  ASSERT_EQ(t->mode(), ModeOf(GetParam())) << t->reason() << t->sync_refused();
  const size_t len = 1 << 20;
  auto* m = MapPrivate(len);
  ASSERT_NE(m, MAP_FAILED);
  std::memset(m, 1, len);
  const int h = t->Register(m, len);
  t->Collect();
  m[7] = 2;  // something for the scan to find, so that there is a re-protection
  os.target = m + len / 2;
  auto d1 = t->Collect()[h];
  ASSERT_EQ(os.target, nullptr) << "the race was not run";
  ASSERT_EQ(m[len / 2], 42);
  auto d2 = t->Collect()[h];
  bool reported = d1.whole || d2.whole;
  for (const Dirty* d : {&d1, &d2}) {
    for (const Range& r : d->ranges) reported = reported || (r.offset <= len / 2 && len / 2 < r.offset + r.len);
  }
  EXPECT_TRUE(reported) << "a write between the scan and the re-protection was lost";
  EXPECT_TRUE(t->Collect()[h].ranges.empty());
  t->Unregister(h);
  munmap(m, len);
}

// kUffdSync over 16 MiB of fresh memory, registered and armed (nothing to
// report); Sweep writes one byte per page of [from, to) and returns the
// faults it took.
class SyncSweepTest : public ::testing::Test {
 protected:
  static constexpr size_t kLen = 16 << 20;
  void SetUp() override {
    if (std::string why = SkipUnless("sync"); !why.empty()) GTEST_SKIP() << why;
    t_ = Tracker::Create("sync");
    ASSERT_EQ(t_->mode(), Tracker::Mode::kUffdSync) << t_->reason() << t_->sync_refused();
    m_ = MapPrivate(kLen);
    ASSERT_NE(m_, MAP_FAILED);
    std::memset(m_, 1, kLen);
    h_ = t_->Register(m_, kLen);
    t_->Collect();
    ASSERT_TRUE(t_->Collect()[h_].ranges.empty());
  }
  void TearDown() override {
    if (t_ && h_ >= 0) t_->Unregister(h_);
    if (m_ != nullptr && m_ != MAP_FAILED) munmap(m_, kLen);
  }
  uint64_t Sweep(size_t from, size_t to) {
    const uint64_t before = t_->sync_faults();
    for (size_t i = from; i < to; i += kPage) m_[i] = 2;
    return t_->sync_faults() - before;
  }
  std::unique_ptr<Tracker> t_;
  uint8_t* m_ = nullptr;
  int h_ = -1;
};

// A sweep over a region faults once per block, the blocks growing to
// Tracker::kMaxBlock, not once per page; the sweep is reported whole and a
// later single write as one block.
TEST_F(SyncSweepTest, FaultsPerBlock) {
  const uint64_t faults = Sweep(0, kLen);
  EXPECT_GE(faults, kLen / Tracker::kMaxBlock);
  EXPECT_LE(faults, kLen / Tracker::kMaxBlock + 16) << "a fault per block, not per page (" << kLen / kPage << ")";
  auto d = t_->Collect()[h_];
  ExpectReports(d, 0, kLen, true, "the sweep");
  m_[kLen / 2 + 5] = 3;
  d = t_->Collect()[h_];
  ExpectReports(d, kLen / 2 + 5, 1, false, "one byte");
  EXPECT_LE(d.ranges[0].len, Tracker::kMinBlock) << "a lone write unprotects one small block";
}

// Each block of a sweep starts at its fault and is four times the last: a
// 3 MiB sweep takes 64 KiB, 256 KiB, 1 MiB and 2 MiB, 4 faults. Blocks
// aligned down to their size instead would unprotect again pages the earlier
// blocks did and gain only half a block per fault (7 faults here).
TEST_F(SyncSweepTest, BlocksGrowFromTheFault) {
  const size_t start = (1 << 20) + 3 * kPage, stretch = 3 << 20;
  const uint64_t faults = Sweep(start, start + stretch);
  EXPECT_GE(faults, 4u);
  EXPECT_LE(faults, 5u) << "blocks of 64 KiB, 256 KiB, 1 MiB, 2 MiB from the sweep's start";
  ExpectReports(t_->Collect()[h_], start, stretch, false, "the sweep");
}

// A sweep to the end of one region does not unprotect its neighbour: two
// regions of one mapping, each 4 MiB, and a sweep over the last 1.5 MiB of
// the first leave the second with nothing to report (the kernel unprotects
// across registrations; a block past the first's end would report the
// second's pages, unwritten).
TEST(DirtyPagesSync, SweepStopsAtTheNeighbour) {
  if (std::string why = SkipUnless("sync"); !why.empty()) GTEST_SKIP() << why;
  auto t = Tracker::Create("sync");
  ASSERT_EQ(t->mode(), Tracker::Mode::kUffdSync) << t->reason() << t->sync_refused();
  const size_t half = 4 << 20, len = 2 * half + Tracker::kMaxBlock;
  auto* map = MapPrivate(len);
  ASSERT_NE(map, MAP_FAILED);
  // Both regions start on a kMaxBlock boundary.
  auto* m = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(map) + Tracker::kMaxBlock - 1) &
                                       ~(uintptr_t{Tracker::kMaxBlock} - 1));
  std::memset(m, 1, 2 * half);
  const int a = t->Register(m, half), b = t->Register(m + half, half);
  t->Collect();
  auto armed = t->Collect();
  ASSERT_TRUE(armed[a].ranges.empty() && armed[b].ranges.empty());
  for (size_t i = half - (3 << 19); i < half; i += kPage) m[i] = 2;
  auto d = t->Collect();
  ExpectReports(d[a], half - (3 << 19), 3 << 19, false, "the sweep");
  EXPECT_FALSE(d[b].whole);
  EXPECT_TRUE(d[b].ranges.empty()) << "the neighbour reports " << d[b].ranges.size() << " range(s) from offset "
                                   << (d[b].ranges.empty() ? 0 : d[b].ranges[0].offset);
  t->Unregister(a);
  t->Unregister(b);
  munmap(map, len);
}

// An Os whose PAGEMAP_SCAN fails once `fail` is set: Collect turns the
// tracking off (Degrade).
class FailingScanOs final : public Os {
 public:
  bool fail = false;
  Result<long> Ioctl(int fd, unsigned long request, void* arg) override {
    if (fail && request == PAGEMAP_SCAN) return Status::Error(EIO, "PAGEMAP_SCAN");
    return Os::Default()->Ioctl(fd, request, arg);
  }
};

// The tracker's end, and tracking turned off, drop every protection before
// the handler stops. Were it left to the descriptor's close: a forked child
// still holding a copy of the descriptor keeps the registrations alive, and
// a write to a protected page (the region; in ~Tracker, the tracker's own
// heap page) waits for a handler that is gone, for as long as the child
// lives. A regression hangs here (ctest's timeout ends it).
TEST(DirtyPagesSync, EndReleasesProtectionEvenWithAForkedChildHoldingTheDescriptor) {
  if (std::string why = SkipUnless("sync"); !why.empty()) GTEST_SKIP() << why;
  for (const bool degrade : {false, true}) {
    SCOPED_TRACE(degrade ? "tracking turned off" : "tracker destroyed");
    FailingScanOs os;
    auto t = Tracker::Create("sync", &os);
    ASSERT_EQ(t->mode(), Tracker::Mode::kUffdSync) << t->reason() << t->sync_refused();
    const size_t len = 8 * kPage;
    auto* m = MapPrivate(len);
    ASSERT_NE(m, MAP_FAILED);
    std::memset(m, 1, len);
    const int h = t->Register(m, len);
    // The tracker's own page too: protected while it is destroyed.
    (void)t->Register(reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(t.get()) & ~(kPage - 1)), kPage);
    t->Collect();
    t->Collect();
    int go[2];
    ASSERT_EQ(pipe(go), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {  // holds the inherited descriptors until the parent is done
      close(go[1]);
      char c;
      (void)!read(go[0], &c, 1);
      _exit(0);
    }
    close(go[0]);
    if (degrade) {
      os.fail = true;
      EXPECT_TRUE(t->Collect()[h].whole);
      EXPECT_EQ(t->mode(), Tracker::Mode::kWhole);
      m[3 * kPage] = 2;  // was protected: must not wait
      EXPECT_EQ(m[3 * kPage], 2);
    }
    t.reset();
    m[5 * kPage] = 2;
    EXPECT_EQ(m[5 * kPage], 2);
    close(go[1]);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    munmap(m, len);
  }
}

// "sync" where no descriptor for kernel-mode faults is allowed: kUffdAsync,
// and why.
class NoPrivilegeOs final : public Os {
 public:
  Result<int> Userfaultfd(int flags) override {
    if ((flags & UFFD_USER_MODE_ONLY) == 0) return Status::Error(EPERM, "userfaultfd");
    return Os::Default()->Userfaultfd(flags);
  }
};

TEST(DirtyPagesSync, RefusedFallsBackToAsync) {
  if (!KernelHasAsyncWp()) GTEST_SKIP() << "no userfaultfd WP_ASYNC";
  NoPrivilegeOs os;
  auto t = Tracker::Create("sync", &os);
  EXPECT_EQ(t->mode(), Tracker::Mode::kUffdAsync) << t->reason();
  EXPECT_NE(t->sync_refused().find("CAP_SYS_PTRACE"), std::string::npos) << t->sync_refused();
  std::vector<uint8_t> buf(4 * kPage, 1);
  const int h = t->Register(buf.data(), buf.size());
  t->Collect();
  buf[kPage + 1] = 2;
  auto d = t->Collect()[h];
  EXPECT_FALSE(d.whole);
  t->Unregister(h);
}

}  // namespace
}  // namespace dlckpt::dirty

// Dirty-page tracking through userfaultfd's asynchronous write protection and
// PAGEMAP_SCAN (dirty_pages.h).
#include "dirty_pages.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "dirty_pages_abi.h"

namespace dlckpt::dirty {
namespace {

class PosixOs final : public Os {};

// kUffdSync: how much each block of a sweep is larger than the previous one
// (up to Tracker::kMaxBlock). 64 KiB, 256 KiB, 1 MiB, 2 MiB...: a 6.4 MiB
// sweep takes 6 faults instead of 8 (bench/dirty_bench.cc, sparse case).
constexpr uintptr_t kGrowth = 4;

// Pages per PAGEMAP_SCAN output buffer: a run of equal pages is one entry, so
// a scan that fills it continues from walk_end.
constexpr size_t kVecEntries = 1024;

bool SettingOff(const char* v) {
  if (v == nullptr) return false;
  for (const char* off : {"off", "0", "no", "false"}) {
    if (strcasecmp(v, off) == 0) return true;
  }
  return false;
}

std::string Hex(uintptr_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%#llx", static_cast<unsigned long long>(v));
  return buf;
}

// The features the tracker needs from UFFDIO_API (kUffdAsync; kUffdSync
// needs only the markers of unpopulated pages).
constexpr uint64_t kFeatures = UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED;
constexpr uint64_t kSyncFeatures = UFFD_FEATURE_WP_UNPOPULATED;

std::string FeatureNames(uint64_t missing) {
  std::string s;
  if (missing & UFFD_FEATURE_WP_ASYNC) s += "UFFD_FEATURE_WP_ASYNC";
  if (missing & UFFD_FEATURE_WP_UNPOPULATED) s += std::string(s.empty() ? "" : ", ") + "UFFD_FEATURE_WP_UNPOPULATED";
  return s;
}

// [a, b) minus the sorted, disjoint runs `minus`, appended to `out`.
template <class Run>
void Subtract(uintptr_t a, uintptr_t b, const std::vector<Run>& minus, std::vector<Run>* out) {
  for (const Run& m : minus) {
    if (m.end <= a) continue;
    if (m.begin >= b) break;
    if (m.begin > a) out->push_back(Run{a, m.begin});
    a = std::max(a, m.end);
    if (a >= b) return;
  }
  if (a < b) out->push_back(Run{a, b});
}

}  // namespace

Os* Os::Default() {
  static Os* const os = new PosixOs();
  return os;
}

Result<int> Os::Userfaultfd(int flags) {
  long fd = ::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | flags);
  if (fd < 0) return Status::FromErrno(errno, "userfaultfd");
  return static_cast<int>(fd);
}

Result<int> Os::OpenPagemap() {
  int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "/proc/self/pagemap");
  return fd;
}

Result<long> Os::Ioctl(int fd, unsigned long request, void* arg) {
  for (;;) {
    int r = ::ioctl(fd, request, arg);
    if (r >= 0) return static_cast<long>(r);
    if (errno != EINTR) return Status::FromErrno(errno, "ioctl");
  }
}

void Os::Close(int fd) {
  if (fd >= 0) ::close(fd);
}

pid_t Os::Pid() { return ::getpid(); }

Result<std::string> Os::SelfMaps() {
  int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "/proc/self/maps");
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status s = Status::FromErrno(errno, "/proc/self/maps");
      ::close(fd);
      return s;
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

std::string CheckPrivateAnonymous(const std::string& maps, uintptr_t begin, uintptr_t end) {
  uintptr_t at = begin;
  size_t pos = 0;
  while (at < end && pos < maps.size()) {
    size_t eol = maps.find('\n', pos);
    if (eol == std::string::npos) eol = maps.size();
    const std::string line = maps.substr(pos, eol - pos);
    pos = eol + 1;
    unsigned long long lo = 0, hi = 0, off = 0, inode = 0;
    char perms[8] = {0}, dev[32] = {0};
    int name_at = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %31s %llu %n", &lo, &hi, perms, &off, dev, &inode, &name_at) < 6) {
      continue;
    }
    if (hi <= at) continue;
    if (lo > at) break;  // a hole
    std::string name = name_at > 0 && static_cast<size_t>(name_at) <= line.size() ? line.substr(name_at) : "";
    const bool anon_name = name.empty() || name.rfind("[heap]", 0) == 0 || name.rfind("[stack", 0) == 0 ||
                           name.rfind("[anon:", 0) == 0;
    if (perms[3] != 'p' || inode != 0 || !anon_name) {
      return "not private anonymous memory: " + line;
    }
    at = static_cast<uintptr_t>(hi);
  }
  if (at < end) return "not mapped at " + Hex(at);
  return "";
}

namespace {

// Opens a userfaultfd with the features the tracker needs and the pagemap.
// On failure, the reason (for "tracking unavailable (<reason>)").
struct Opened {
  int uffd = -1, pagemap = -1;
  std::string reason;
};

// `sync`: a descriptor for kUffdSync, which must also handle kernel-mode
// faults (no UFFD_USER_MODE_ONLY: the handler resolves those too).
Opened OpenKernelParts(Os* os, bool sync = false) {
  Opened o;
  const uint64_t want = sync ? kSyncFeatures : kFeatures;
  auto fd = os->Userfaultfd(sync ? 0 : UFFD_USER_MODE_ONLY);
  if (!sync && !fd.ok() && fd.status().code() == EINVAL) fd = os->Userfaultfd(0);  // before 5.11
  if (!fd.ok()) {
    o.reason = fd.status().ToString();
    if (fd.status().code() == EPERM) {
      o.reason += sync ? "; a descriptor that handles kernel-mode writes needs CAP_SYS_PTRACE or "
                         "vm.unprivileged_userfaultfd=1"
                       : "; see vm.unprivileged_userfaultfd";
    }
    return o;
  }
  uffdio_api api{};
  api.api = UFFD_API;
  api.features = want;
  auto r = os->Ioctl(*fd, UFFDIO_API, &api);
  if (!r.ok() || (api.features & want) != want) {
    // Which features are missing: ask a second descriptor for all it has.
    std::string why = r.ok() ? "" : r.status().ToString();
    auto probe = os->Userfaultfd(UFFD_USER_MODE_ONLY);
    if (!probe.ok()) probe = os->Userfaultfd(0);
    if (probe.ok()) {
      uffdio_api all{};
      all.api = UFFD_API;
      if (os->Ioctl(*probe, UFFDIO_API, &all).ok() && (all.features & want) != want) {
        why = "the kernel's userfaultfd lacks " + FeatureNames(want & ~all.features) + " (Linux 6.7)";
      }
      os->Close(*probe);
    }
    o.reason = "UFFDIO_API: " + why;
    os->Close(*fd);
    return o;
  }
  auto pm = os->OpenPagemap();
  if (!pm.ok()) {
    o.reason = pm.status().ToString();
    os->Close(*fd);
    return o;
  }
  o.uffd = *fd;
  o.pagemap = *pm;
  return o;
}

std::atomic<bool> g_said{false};
std::atomic<bool> g_said_region{false};

// What kUffdSync's handler shares with the tracker: in a mapping of its own,
// so that the handler's writes can never fault on a registered page.
struct Shared {
  std::atomic<uint64_t> faults{0};
  // Set (to the errno, or -1 for a poll event) when the handler stopped on
  // its own: faults would no longer be resolved. Collect then degrades,
  // which unregisters every range and wakes the waiting threads.
  std::atomic<int> stopped{0};
};

// Removes the write protection of [b, e) (registered pages only: halved,
// keeping the page `at`, until the kernel accepts it) and wakes the threads
// waiting in it. Returns the end of the range unprotected.
uintptr_t Unprotect(int uffd, uintptr_t at, uintptr_t b, uintptr_t e, uintptr_t page) {
  for (;;) {
    uffdio_writeprotect wp{};
    wp.range.start = b;
    wp.range.len = e - b;
    wp.mode = 0;  // unprotect and wake
    int r;
    do {
      r = ::ioctl(uffd, UFFDIO_WRITEPROTECT, &wp);
    } while (r != 0 && errno == EINTR);
    if (r == 0) return e;
    if (e - b <= page) break;
    const uintptr_t half = std::max(page, ((e - b) / 2) & ~(page - 1));
    if (at < b + half) {
      e = b + half;
    } else {
      b += half;
    }
  }
  // The page itself refused (unmapped meanwhile): wake the thread, whose
  // retried access then takes the ordinary path.
  uffdio_range range{at, page};
  (void)::ioctl(uffd, UFFDIO_WAKE, &range);
  return at + page;
}

}  // namespace

// kUffdSync's handler thread. It owns nothing the application could map: a
// stack, the Shared page and two descriptors it does not close.
struct Tracker::Sync {
  pthread_t thread{};
  int uffd = -1;
  int stop = -1;  // eventfd: the destructor's wake-up
  Shared* shared = nullptr;
  uintptr_t page = 4096;

  static void* Main(void* arg) {
    auto* self = static_cast<Sync*>(arg);
    self->Loop();
    return nullptr;
  }
  void Loop() {
    uintptr_t last_end = 0, grow = kMinBlock;
    pollfd fds[2] = {{uffd, POLLIN, 0}, {stop, POLLIN, 0}};
    uffd_msg msgs[16];
    for (;;) {
      int n = ::poll(fds, 2, -1);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == ENOMEM || errno == EAGAIN)) {  // transient: try again shortly
        const timespec ms{0, 1000000};
        ::nanosleep(&ms, nullptr);
        continue;
      }
      if (n < 0) {
        shared->stopped.store(errno != 0 ? errno : -1);
        return;
      }
      if (fds[1].revents & POLLIN) return;
      if ((fds[0].revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) {
        shared->stopped.store(-1);
        return;
      }
      ssize_t got = ::read(uffd, msgs, sizeof msgs);
      if (got <= 0) continue;  // EAGAIN: another reader took it
      for (size_t i = 0; i < static_cast<size_t>(got) / sizeof(uffd_msg); ++i) {
        if (msgs[i].event != UFFD_EVENT_PAGEFAULT) continue;
        const uintptr_t at = static_cast<uintptr_t>(msgs[i].arg.pagefault.address) & ~(page - 1);
        // A sweep (this fault where the last block ended) grows the block
        // kGrowth times and continues from the fault: aligning the larger
        // block down would unprotect again the pages the previous blocks
        // just did (each costs the kernel a PTE update, and the sweep only
        // gained half a block per fault). It ends at the next kMaxBlock
        // boundary: the kernel unprotects across registrations of this
        // tracker, and a block past one region's end would report pages of
        // its neighbour that nobody wrote; so only regions that share a
        // kMaxBlock-aligned window can share a block, as with blocks aligned
        // to their size. A lone fault takes an aligned kMinBlock.
        const bool sweep = at == last_end;
        const uintptr_t block = sweep ? std::min(grow * kGrowth, kMaxBlock) : kMinBlock;
        grow = block;
        const uintptr_t b = sweep ? at : at & ~(block - 1);
        const uintptr_t e = std::min(b + block, (at | (kMaxBlock - 1)) + 1);
        // Counted before the wake-up: the thread sees its own fault counted.
        shared->faults.fetch_add(1, std::memory_order_relaxed);
        last_end = Unprotect(uffd, at, b, e, page);
      }
    }
  }
};

bool Tracker::StartSync(std::string* why) {
  auto sync = std::make_unique<Sync>();
  sync->uffd = uffd_;
  sync->page = page_;
  void* mem = ::mmap(nullptr, page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    *why = Status::FromErrno(errno, "mmap").ToString();
    return false;
  }
  sync->shared = new (mem) Shared();
  sync->stop = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (sync->stop < 0) {
    *why = Status::FromErrno(errno, "eventfd").ToString();
    ::munmap(mem, page_);
    return false;
  }
  // Signals go to the application's threads, never to the handler.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const int rc = pthread_create(&sync->thread, nullptr, &Sync::Main, sync.get());
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc != 0) {
    *why = Status::FromErrno(rc, "pthread_create").ToString();
    ::close(sync->stop);
    ::munmap(mem, page_);
    return false;
  }
  sync_ = std::move(sync);
  return true;
}

void Tracker::StopSync() {
  if (!sync_) return;
  if (os_->Pid() != pid_) {
    (void)sync_.release();  // the parent's thread: not in this process
    return;
  }
  const uint64_t one = 1;
  (void)!::write(sync_->stop, &one, sizeof one);
  pthread_join(sync_->thread, nullptr);
  ::close(sync_->stop);
  ::munmap(sync_->shared, page_);
  sync_.reset();
}

uint64_t Tracker::sync_faults() const {
  return sync_ ? sync_->shared->faults.load(std::memory_order_relaxed) : 0;
}

std::unique_ptr<Tracker> Tracker::Create(const char* setting, Os* os) {
  if (SettingOff(setting)) {
    return std::unique_ptr<Tracker>(
        new Tracker(os, Mode::kWhole, std::string("DLCKPT_DIRTY_TRACKING=") + setting, -1, -1));
  }
  std::string sync_refused;
  Opened o;
  Mode mode = Mode::kUffdAsync;
  if (setting != nullptr && strcasecmp(setting, "sync") == 0) {
    o = OpenKernelParts(os, true);
    if (o.reason.empty()) {
      mode = Mode::kUffdSync;
    } else {
      sync_refused = o.reason;
    }
  }
  if (mode != Mode::kUffdSync) o = OpenKernelParts(os);
  if (!o.reason.empty()) {
    std::unique_ptr<Tracker> t(new Tracker(os, Mode::kWhole, o.reason, -1, -1));
    t->sync_refused_ = sync_refused;
    return t;
  }
  std::unique_ptr<Tracker> t(new Tracker(os, mode, "", o.uffd, o.pagemap));
  t->sync_refused_ = sync_refused;
  if (mode == Mode::kUffdSync && !t->StartSync(&t->sync_refused_)) {
    t->Degrade("kUffdSync: " + t->sync_refused_);
    Opened a = OpenKernelParts(os);
    if (!a.reason.empty()) return std::unique_ptr<Tracker>(new Tracker(os, Mode::kWhole, a.reason, -1, -1));
    t->mode_ = Mode::kUffdAsync;
    t->reason_.clear();
    t->uffd_ = a.uffd;
    t->pagemap_ = a.pagemap;
  }
  // Self-test on two pages of our own: the first Collect after Register is
  // whole; then exactly the written page must come back, once. A kernel that
  // accepts the calls but does not behave (or has no PAGEMAP_SCAN: ENOTTY)
  // turns the tracker off here, not at the first checkpoint.
  const size_t len = 2 * t->page_;
  void* mem = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    t->Degrade("self-test: " + Status::FromErrno(errno, "mmap").ToString());
    return t;
  }
  auto* bytes = static_cast<volatile uint8_t*>(mem);
  bytes[0] = 1;  // one page present, one never touched (WP_UNPOPULATED)
  const int h = t->Register(mem, len);
  std::string failed = t->untracked_reason(h);
  if (failed.empty() && t->tracking()) {
    auto first = t->Collect();
    bytes[t->page_ + 7] = 2;  // the untouched page
    auto second = t->Collect();
    auto third = t->Collect();
    const Dirty& d2 = second[h];
    // kUffdSync unprotects a block: the written page and maybe its neighbour.
    const uint64_t from = t->mode() == Mode::kUffdSync ? 0 : t->page_;
    if (!t->tracking()) {
      failed = t->reason();
    } else if (!first[h].whole || d2.whole || d2.ranges.size() != 1 || d2.ranges[0].offset > t->page_ ||
               d2.ranges[0].offset < from || d2.ranges[0].offset + d2.ranges[0].len != 2 * t->page_ ||
               third[h].whole || !third[h].ranges.empty()) {
      failed = "the kernel did not report the written page alone";
    }
  }
  t->Unregister(h);
  ::munmap(mem, len);
  if (!failed.empty() && t->tracking()) t->Degrade("self-test: " + failed);
  return t;
}

Tracker::Tracker(Os* os, Mode mode, std::string reason, int uffd, int pagemap)
    : os_(os), mode_(mode), reason_(std::move(reason)), uffd_(uffd), pagemap_(pagemap), pid_(os->Pid()) {
  long p = ::sysconf(_SC_PAGESIZE);
  if (p > 0) page_ = static_cast<uintptr_t>(p);
}

Tracker::~Tracker() {
  ReleaseKernel();
  StopSync();
  os_->Close(uffd_);
  os_->Close(pagemap_);
}

void Tracker::ReleaseKernel() {
  if (uffd_ < 0 || os_->Pid() != pid_) return;  // a forked child's copy acts on the parent
  for (const auto& [h, r] : regs_) {
    if (r.page_begin == r.page_end) continue;
    uffdio_range range{r.page_begin, r.page_end - r.page_begin};
    (void)os_->Ioctl(uffd_, UFFDIO_UNREGISTER, &range);
  }
}

void Tracker::SayOnce() const {
  if (mode_ != Mode::kWhole || g_said.exchange(true)) return;
  std::fprintf(stderr, "dlckpt: dirty-page tracking unavailable (%s): regions are copied whole\n", reason_.c_str());
}

void Tracker::Degrade(std::string reason) {
  if (mode_ == Mode::kWhole) return;
  mode_ = Mode::kWhole;
  reason_ = std::move(reason);
  ReleaseKernel();  // wakes any thread waiting in a fault
  StopSync();
  os_->Close(uffd_);
  os_->Close(pagemap_);
  uffd_ = pagemap_ = -1;
}

std::vector<Tracker::PageRun> Tracker::TrackedPages(int skip) const {
  std::vector<PageRun> runs;
  for (const auto& [h, r] : regs_) {
    if (h == skip || !r.untracked.empty() || r.page_begin == r.page_end || r.hot_left > 0) continue;
    runs.push_back(PageRun{r.page_begin, r.page_end});
  }
  return Disjoint(std::move(runs));
}

std::vector<Tracker::PageRun> Tracker::Disjoint(std::vector<PageRun> runs) {
  std::sort(runs.begin(), runs.end(), [](const PageRun& a, const PageRun& b) { return a.begin < b.begin; });
  std::vector<PageRun> merged;
  for (const PageRun& p : runs) {
    if (!merged.empty() && p.begin <= merged.back().end) {
      merged.back().end = std::max(merged.back().end, p.end);
    } else {
      merged.push_back(p);
    }
  }
  return merged;
}

void Tracker::Arm(Reg* r, const std::vector<PageRun>& armed) {
  r->untracked.clear();
  if (r->page_begin == r->page_end) return;
  auto maps = os_->SelfMaps();
  if (!maps.ok()) {
    r->untracked = maps.status().ToString();
  } else {
    r->untracked = CheckPrivateAnonymous(*maps, r->page_begin, r->page_end);
  }
  uffdio_register reg{};
  reg.range.start = r->page_begin;
  reg.range.len = r->page_end - r->page_begin;
  reg.mode = UFFDIO_REGISTER_MODE_WP;
  auto s = r->untracked.empty() ? os_->Ioctl(uffd_, UFFDIO_REGISTER, &reg) : Result<long>(0L);
  if (!r->untracked.empty()) {
    // not registered
  } else if (!s.ok()) {
    r->untracked = "UFFDIO_REGISTER: " + s.status().ToString();
    if (s.status().code() == EINVAL) r->untracked += " (not private anonymous memory?)";
  } else {
    // Pages another registration tracks keep their state (a pending write
    // must not be lost); the others are write-protected now.
    std::vector<PageRun> fresh;
    Subtract(r->page_begin, r->page_end, armed, &fresh);
    for (const PageRun& p : fresh) {
      uffdio_writeprotect wp{};
      wp.range.start = p.begin;
      wp.range.len = p.end - p.begin;
      wp.mode = UFFDIO_WRITEPROTECT_MODE_WP;
      auto w = os_->Ioctl(uffd_, UFFDIO_WRITEPROTECT, &wp);
      if (!w.ok()) {
        r->untracked = "UFFDIO_WRITEPROTECT: " + w.status().ToString();
        break;
      }
    }
  }
  if (!r->untracked.empty() && !g_said_region.exchange(true)) {
    std::fprintf(stderr,
                 "dlckpt: dirty-page tracking unavailable for %zu bytes at %s (%s): that region is copied whole "
                 "(said once)\n",
                 r->bytes, Hex(r->ptr).c_str(), r->untracked.c_str());
  }
}

bool Tracker::AfterFork() {
  // The inherited descriptors act on the parent's address space: never use
  // them (closing our copies leaves the parent's untouched).
  StopSync();  // forgets the parent's handler
  os_->Close(uffd_);
  os_->Close(pagemap_);
  uffd_ = pagemap_ = -1;
  pid_ = os_->Pid();
  Opened o = OpenKernelParts(os_, mode_ == Mode::kUffdSync);
  std::string why;
  if (o.reason.empty() && mode_ == Mode::kUffdSync) {
    uffd_ = o.uffd;
    pagemap_ = o.pagemap;
    if (!StartSync(&why)) o.reason = why;
  }
  if (!o.reason.empty()) {
    os_->Close(uffd_);
    os_->Close(pagemap_);
    uffd_ = pagemap_ = -1;
    mode_ = Mode::kWhole;
    reason_ = "after fork: " + o.reason;
    return false;
  }
  uffd_ = o.uffd;
  pagemap_ = o.pagemap;
  std::vector<PageRun> armed;
  for (auto& [h, r] : regs_) {
    r.fresh = true;
    Arm(&r, armed);
    armed = TrackedPages(-1);
  }
  return true;
}

int Tracker::Register(const void* ptr, size_t bytes) {
  const int h = next_handle_++;
  Reg r;
  r.ptr = reinterpret_cast<uintptr_t>(ptr);
  r.bytes = bytes;
  r.page_begin = r.ptr & ~(page_ - 1);
  r.page_end = bytes == 0 ? r.page_begin : (r.ptr + bytes + page_ - 1) & ~(page_ - 1);
  if (tracking() && os_->Pid() != pid_) AfterFork();
  if (tracking()) Arm(&r, TrackedPages(-1));
  regs_.emplace(h, std::move(r));
  return h;
}

void Tracker::Unregister(int handle) {
  auto it = regs_.find(handle);
  if (it == regs_.end()) return;
  const Reg r = std::move(it->second);
  regs_.erase(it);
  if (!tracking() || r.page_begin == r.page_end) return;
  if (os_->Pid() != pid_) {
    AfterFork();
    return;
  }
  std::vector<PageRun> unused;
  Subtract(r.page_begin, r.page_end, TrackedPages(-1), &unused);
  for (const PageRun& p : unused) {
    uffdio_range range{p.begin, p.end - p.begin};
    (void)os_->Ioctl(uffd_, UFFDIO_UNREGISTER, &range);  // the memory may be gone already
  }
}

std::string Tracker::untracked_reason(int handle) const {
  if (mode_ == Mode::kWhole) return reason_;
  auto it = regs_.find(handle);
  return it == regs_.end() ? "not registered" : it->second.untracked;
}

Status Tracker::Scan(uintptr_t begin, uintptr_t end, uint64_t flags, uint64_t inverted, uint64_t mask,
                     uint64_t anyof, std::vector<PageRun>* out) {
  vec_.resize(kVecEntries * sizeof(page_region));
  auto* vec = reinterpret_cast<page_region*>(vec_.data());
  for (uintptr_t at = begin; at < end;) {
    pm_scan_arg a{};
    a.size = sizeof a;
    a.flags = flags;
    a.start = at;
    a.end = end;
    a.vec = reinterpret_cast<uintptr_t>(vec);
    a.vec_len = kVecEntries;
    a.category_inverted = inverted;
    a.category_mask = mask;
    a.category_anyof_mask = anyof;
    a.return_mask = PAGE_IS_WRITTEN | PAGE_IS_PRESENT | PAGE_IS_SWAPPED;
    auto n = os_->Ioctl(pagemap_, PAGEMAP_SCAN, &a);
    if (!n.ok()) return n.status().Prefixed("PAGEMAP_SCAN [" + Hex(at) + ", " + Hex(end) + ")");
    for (long i = 0; i < *n && i < static_cast<long>(kVecEntries); ++i) {
      const uintptr_t b = std::max<uintptr_t>(vec[i].start, at), e = std::min<uintptr_t>(vec[i].end, end);
      if (b >= e) continue;
      if (!out->empty() && out->back().end == b) {
        out->back().end = e;
      } else {
        out->push_back(PageRun{b, e});
      }
    }
    if (a.walk_end <= at || a.walk_end > end) {
      return Status::IOError("PAGEMAP_SCAN [" + Hex(at) + ", " + Hex(end) + "): the walk ended at " +
                             Hex(a.walk_end));
    }
    at = a.walk_end;
  }
  return Status::OK();
}

std::map<int, Dirty> Tracker::Collect() {
  std::map<int, Dirty> out;
  if (tracking() && os_->Pid() != pid_) AfterFork();
  if (sync_ && sync_->shared->stopped.load() != 0) {
    const int e = sync_->shared->stopped.load();
    Degrade("kUffdSync: the handler thread stopped (" +
            (e > 0 ? Status::FromErrno(e, "poll").ToString() : std::string("an error event on the userfaultfd")) + ")");
  }
  std::vector<PageRun> dirty;
  std::vector<int> hot, rearm;  // ranges that became hot, hot ranges to arm again
  std::vector<std::pair<uintptr_t, uintptr_t>> broken;  // runs whose mapping changed
  if (tracking()) {
    const bool sync = mode_ == Mode::kUffdSync;
    for (const PageRun& run : TrackedPages(-1)) {
      std::vector<PageRun> found;
      // Written since the last scan (no write-protect bit), and, with
      // kUffdAsync, write-protected again in the same walk (kUffdSync
      // protects them below); then the pages that are gone (neither present,
      // nor swapped, nor a write-protect marker): zapped by MADV_DONTNEED.
      Status s = Scan(run.begin, run.end, sync ? 0 : PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC, 0,
                      PAGE_IS_WRITTEN, 0, &found);
      std::vector<PageRun> gone;
      if (s.ok()) {
        s = Scan(run.begin, run.end, 0, PAGE_IS_PRESENT | PAGE_IS_SWAPPED, PAGE_IS_PRESENT | PAGE_IS_SWAPPED, 0,
                 &gone);
      }
      // Those are write-protected again (a marker, WP_UNPOPULATED) so that
      // they are not reported again until written. A write between the scan
      // and this is in the bytes the caller copies after Collect returns.
      const size_t written = found.size();
      for (size_t i = 0; i < gone.size() && s.ok(); ++i) {
        uffdio_writeprotect wp{};
        wp.range.start = gone[i].begin;
        wp.range.len = gone[i].end - gone[i].begin;
        wp.mode = UFFDIO_WRITEPROTECT_MODE_WP;
        s = os_->Ioctl(uffd_, UFFDIO_WRITEPROTECT, &wp).status();
        found.push_back(gone[i]);
      }
      // kUffdSync: what the handler unprotected, protected again. A block
      // it unprotects after the scan stays so until the next one.
      for (size_t i = 0; sync && i < written && s.ok(); ++i) {
        uffdio_writeprotect wp{};
        wp.range.start = found[i].begin;
        wp.range.len = found[i].end - found[i].begin;
        wp.mode = UFFDIO_WRITEPROTECT_MODE_WP;
        s = os_->Ioctl(uffd_, UFFDIO_WRITEPROTECT, &wp).status();
      }
      if (!s.ok() && (s.code() == EPERM || (sync && s.code() == ENOENT))) {
        // A page of the run lost its registration (the application
        // unmapped and mapped the memory again): every range there is
        // whole this time and registered again below.
        broken.emplace_back(run.begin, run.end);
        continue;
      }
      if (!s.ok()) {
        Degrade(s.ToString());
        SayOnce();
        break;
      }
      dirty.insert(dirty.end(), found.begin(), found.end());
    }
  }
  dirty = Disjoint(std::move(dirty));  // the two scans' runs may overlap
  for (auto& [h, r] : regs_) {
    Dirty& d = out[h];
    bool in_broken = false;
    for (const auto& [b, e] : broken) in_broken = in_broken || (r.page_begin < e && b < r.page_end);
    d.whole = !tracking() || r.fresh || !r.untracked.empty() || in_broken || r.hot_left > 0;
    r.fresh = false;
    if (r.hot_left > 0 && tracking() && --r.hot_left == 0) rearm.push_back(h);
    if (d.whole || r.bytes == 0) continue;
    const uintptr_t lo = r.ptr, hi = r.ptr + r.bytes;
    auto it = std::upper_bound(dirty.begin(), dirty.end(), lo,
                               [](uintptr_t v, const PageRun& p) { return v < p.end; });
    for (; it != dirty.end() && it->begin < hi; ++it) {
      const uintptr_t b = std::max(it->begin, lo), e = std::min(it->end, hi);
      if (b >= e) continue;
      if (!d.ranges.empty() && d.ranges.back().offset + d.ranges.back().len == b - lo) {
        d.ranges.back().len += e - b;
      } else {
        d.ranges.push_back(Range{b - lo, e - b});
      }
    }
    // Hot: almost every page written again and again; stop protecting it.
    uint64_t written = 0;
    for (const Range& g : d.ranges) written += g.len;
    if (static_cast<double>(written) >= kHotFraction * static_cast<double>(r.bytes)) {
      if (++r.full_streak >= kHotStreak) {
        r.full_streak = 0;
        r.hot_left = kHotCollects;
        hot.push_back(h);
      }
    } else {
      r.full_streak = 0;
    }
  }
  if (tracking()) {
    // Newly hot ranges: their pages no tracked range shares lose the
    // protection (no faults until they are armed again).
    const std::vector<PageRun> tracked = TrackedPages(-1);
    for (int h : hot) {
      const Reg& r = regs_.at(h);
      std::vector<PageRun> free_pages;
      Subtract(r.page_begin, r.page_end, tracked, &free_pages);
      for (const PageRun& p : free_pages) {
        uffdio_writeprotect wp{};
        wp.range.start = p.begin;
        wp.range.len = p.end - p.begin;
        wp.mode = 0;  // un-protect
        (void)os_->Ioctl(uffd_, UFFDIO_WRITEPROTECT, &wp);  // failing leaves faults, not errors
      }
    }
    // Hot ranges whose time is up: protected again now, before the caller
    // copies them whole; their writes count from here.
    for (int h : rearm) {
      Reg& r = regs_.at(h);
      std::vector<PageRun> armed = TrackedPages(h);
      Arm(&r, armed);
    }
  }
  if (tracking() && !broken.empty()) {
    for (auto& [h, r] : regs_) {
      bool in_broken = false;
      for (const auto& [b, e] : broken) in_broken = in_broken || (r.page_begin < e && b < r.page_end);
      if (!in_broken) continue;
      // Everything in the run is reported whole now: arm all of it again.
      std::vector<PageRun> none;
      Arm(&r, none);
    }
  }
  return out;
}

}  // namespace dlckpt::dirty

// Dirty-page tracking of protected memory regions (issue 34, "only what
// changed"): which pages of each registered byte range were written since the
// previous Collect(), so that a checkpoint copies only those into the store.
//
// Mechanism, chosen at run time (Tracker::Create):
//  - kUffdAsync: one userfaultfd opened with UFFD_FEATURE_WP_ASYNC (and
//    WP_UNPOPULATED), every registered range's pages registered with
//    UFFDIO_REGISTER_MODE_WP and write-protected. A write clears a page's
//    protection in the kernel (no handler thread, no signal). Collect() reads
//    and re-arms in one step per range: PAGEMAP_SCAN on /proc/self/pagemap
//    with PM_SCAN_WP_MATCHING reports the written pages and write-protects
//    exactly those it reports (PM_SCAN_CHECK_WPASYNC makes a range whose
//    mapping changed under us, e.g. munmap + mmap, fail instead of being
//    skipped). A second, read-only scan adds the pages that are neither
//    present nor swapped (nor a write-protect marker): pages the application
//    discarded with MADV_DONTNEED, whose bytes changed to zeros without a
//    write. Only private anonymous memory can be registered (malloc, mmap
//    MAP_PRIVATE|MAP_ANONYMOUS, stack, .bss); any other range (a file or
//    shared mapping, .data) is copied whole at every checkpoint.
//  - kUffdSync ($DLCKPT_DIRTY_TRACKING=sync): the same registration, without
//    WP_ASYNC: a write to a protected page stops the writing thread until
//    the tracker's handler thread (started by Create, signals blocked)
//    removes the protection of a whole block around the page and
//    wakes it. Blocks start at kMinBlock bytes (aligned) and grow four
//    times, up to kMaxBlock, while faults continue where the previous block
//    ended (a sweep: the next block starts at the fault, so no page is
//    unprotected twice); a block reaching past the registered memory is
//    halved until it fits: one fault
//    per block instead of one per page, at the price of reporting whole
//    blocks (memfs copies 64 KiB blocks anyway). The handler keeps no record:
//    Collect() reads the unprotected pages (PAGE_IS_WRITTEN: no write-
//    protect bit) with a read-only PAGEMAP_SCAN and write-protects what it
//    found. A block unprotected after that scan stays unprotected and is
//    found by the next one, so no write is lost however the two interleave.
//    The handler never allocates, locks, or writes memory a registration may
//    cover (its only shared state is a mapping of its own), so a fault
//    anywhere, also in the thread calling Collect, is always resolved. A
//    range whose mapping was replaced fails the re-protection (ENOENT) and
//    is reported whole and registered again. Needs a userfaultfd that
//    handles kernel-mode faults (read(2) into a region): CAP_SYS_PTRACE or
//    vm.unprivileged_userfaultfd=1; otherwise Create falls back to
//    kUffdAsync and says why in sync_refused().
//  - kWhole: every registered range counts as wholly dirty at every Collect().
//    Taken when $DLCKPT_DIRTY_TRACKING is off/0/no/false, when userfaultfd
//    cannot be opened (seccomp; vm.unprivileged_userfaultfd=0 for a user
//    without CAP_SYS_PTRACE on a kernel older than 5.11: since 5.11 the
//    UFFD_USER_MODE_ONLY descriptor used here is allowed to any user; async
//    write protection resolves kernel-mode writes too), when the kernel
//    lacks WP_ASYNC/WP_UNPOPULATED or PAGEMAP_SCAN (before 6.7). Said once on
//    stderr. The soft-dirty bit is not used: it is a compile-time option
//    (CONFIG_MEM_SOFT_DIRTY) that the development kernel lacks, and it needs
//    the whole process's bits cleared at once (/proc/self/clear_refs).
//
// Hot ranges. A write to a protected page costs one minor fault (measured on
// the development VM: about 40-70 us, bench/README.md "Dirty pages"); a range
// that is rewritten almost whole anyway gains nothing from it. A range whose
// Collect found at least kHotFraction of its pages written kHotStreak times
// in a row is left unprotected for the next kHotCollects Collects (reported
// whole, no faults), then protected again at a Collect (it is reported whole
// there too, and its writes count from that moment).
//
// Contract of Collect(): for every registration, either `whole` or the byte
// ranges (offsets from the registered pointer, page-granular, clipped to the
// range) that hold every byte whose value may differ from its value at the
// previous Collect() (or at Register, for the first Collect after it, which is
// always `whole`). False positives are allowed, a missed byte is not. Writes
// by this process's threads, by the kernel on its behalf (read(2),
// process_vm_writev from a peer) count. Not seen: bytes changed without this
// process's page tables (DMA by a device into pinned memory, e.g. an RDMA
// receive buffer; another process writing through XPMEM or a shared mapping
// of the same pages): such regions need DLCKPT_DIRTY_TRACKING=off.
//
// Fork: a child inherits neither the registrations nor a usable descriptor;
// the tracker notices the new pid, reopens everything and reports every range
// whole once. Thread safety: none (one thread calls it; other threads may
// write the memory at any time: a page written during Collect() is reported
// now or next time). Failure: never fatal; a kernel refusal degrades one
// range or the whole tracker to `whole` (and the caller copies it whole).
#ifndef DLCKPT_COORDINATOR_DIRTY_PAGES_H_
#define DLCKPT_COORDINATOR_DIRTY_PAGES_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dlckpt/base/status.h"

namespace dlckpt::dirty {

// The kernel calls the tracker makes; Default() is the real one. Tests derive
// from it to refuse a feature (a kernel without PAGEMAP_SCAN) on this kernel.
class Os {
 public:
  virtual ~Os() = default;
  static Os* Default();  // never destroyed
  // userfaultfd(2) with O_CLOEXEC | O_NONBLOCK | `flags`: the descriptor.
  virtual Result<int> Userfaultfd(int flags);
  // open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC).
  virtual Result<int> OpenPagemap();
  // ioctl(fd, request, arg): its non-negative result or errno (EINTR retried).
  virtual Result<long> Ioctl(int fd, unsigned long request, void* arg);
  virtual void Close(int fd);
  virtual pid_t Pid();
  // The text of /proc/self/maps.
  virtual Result<std::string> SelfMaps();
};

// "" if the pages [begin, end) lie wholly in private anonymous mappings
// (heap, stack, mmap MAP_PRIVATE|MAP_ANONYMOUS) according to `maps` (the
// text of /proc/self/maps), else why not. Only there is every change a write
// through this process's page tables: shared and file mappings change
// through other mappings and write(2) too.
std::string CheckPrivateAnonymous(const std::string& maps, uintptr_t begin, uintptr_t end);

struct Range {
  uint64_t offset = 0;  // from the registered pointer
  uint64_t len = 0;
};

struct Dirty {
  bool whole = false;         // copy the whole range
  std::vector<Range> ranges;  // when !whole: sorted, disjoint, inside [0, bytes)
};

class Tracker {
 public:
  enum class Mode { kUffdAsync, kUffdSync, kWhole };

  // Chooses the mechanism. `setting`: the value of $DLCKPT_DIRTY_TRACKING
  // (nullptr: unset); "off", "0", "no", "false" force kWhole; "sync" asks for
  // kUffdSync. Never fails.
  static std::unique_ptr<Tracker> Create(const char* setting, Os* os = Os::Default());
  ~Tracker();
  Tracker(const Tracker&) = delete;
  Tracker& operator=(const Tracker&) = delete;

  Mode mode() const { return mode_; }
  // Why "sync" was asked for and kUffdSync not taken ("" otherwise).
  const std::string& sync_refused() const { return sync_refused_; }
  // Write faults the handler resolved (kUffdSync; 0 otherwise), each counted
  // before its thread is woken.
  uint64_t sync_faults() const;
  // Why the tracker is kWhole ("" when it tracks).
  const std::string& reason() const { return reason_; }
  // "dlckpt: dirty-page tracking unavailable (<reason>): regions are copied
  // whole" once per process on stderr when kWhole; nothing otherwise.
  void SayOnce() const;

  // Starts tracking [ptr, ptr + bytes) (any alignment; ranges may overlap and
  // share pages). Returns a handle > 0. The memory is the caller's; it must
  // stay mapped while registered or be re-registered after it moves (a range
  // whose mapping changed is reported whole, never missed). Never fails: a
  // range the kernel refuses is reported whole at every Collect().
  int Register(const void* ptr, size_t bytes);
  // Stops tracking `handle` (unknown handles are ignored). Pages no other
  // registration covers are unregistered from the userfaultfd.
  void Unregister(int handle);
  // What changed since the previous Collect (see the contract above), for
  // every live handle, and re-arms.
  std::map<int, Dirty> Collect();
  // Why `handle` is reported whole at every Collect ("" if it is tracked).
  std::string untracked_reason(int handle) const;

 private:
  static constexpr double kHotFraction = 0.75;
  static constexpr int kHotStreak = 2;
  static constexpr int kHotCollects = 8;

 public:
  static constexpr uintptr_t kMinBlock = 64 << 10;  // kUffdSync's blocks
  static constexpr uintptr_t kMaxBlock = 2 << 20;

 private:
  struct Sync;  // kUffdSync's handler thread and what it shares (dirty_pages.cc)

  struct Reg {
    uintptr_t ptr = 0;
    size_t bytes = 0;
    uintptr_t page_begin = 0, page_end = 0;  // the pages holding [ptr, ptr + bytes)
    bool fresh = true;  // registered since the last Collect: whole once
    int full_streak = 0;  // Collects in a row that found >= kHotFraction written
    int hot_left = 0;     // > 0: unprotected (hot), whole for that many Collects
    std::string untracked;  // non-empty: the kernel refused it (whole always)
  };
  struct PageRun {
    uintptr_t begin, end;
  };

  Tracker(Os* os, Mode mode, std::string reason, int uffd, int pagemap);
  // Registers and arms r's pages (the pages in `armed` are left as they are).
  void Arm(Reg* r, const std::vector<PageRun>& armed);
  // The union of the pages of the tracked registrations (except `skip`), merged.
  std::vector<PageRun> TrackedPages(int skip) const;
  // `runs` sorted and merged where they overlap or touch.
  static std::vector<PageRun> Disjoint(std::vector<PageRun> runs);
  // Reopens the descriptors in a forked child; false: kWhole from now on.
  bool AfterFork();
  // Appends to `out` the page runs of [begin, end) PAGEMAP_SCAN matches.
  Status Scan(uintptr_t begin, uintptr_t end, uint64_t flags, uint64_t inverted, uint64_t mask,
              uint64_t anyof, std::vector<PageRun>* out);
  void Degrade(std::string reason);
  bool tracking() const { return mode_ != Mode::kWhole; }
  // kUffdSync: starts the handler thread on uffd_; false (and why) if not.
  bool StartSync(std::string* why);
  // Stops and joins it (a forked child, which has no such thread, only
  // forgets it).
  void StopSync();
  // Unregisters every registered range from uffd_ (errors ignored: the
  // memory may be gone), which drops its write protection and wakes any
  // thread waiting in a fault there. Called while the handler still runs,
  // before the descriptor is closed: closing it is not enough when a forked
  // child holds a copy of it (the kernel keeps the registrations while any
  // copy is open), and after the handler stops no protected page may be
  // written, not even the tracker's own heap.
  void ReleaseKernel();

  Os* os_;
  Mode mode_;
  std::string reason_;
  int uffd_ = -1;
  int pagemap_ = -1;
  pid_t pid_ = 0;
  uintptr_t page_ = 4096;
  int next_handle_ = 1;
  std::map<int, Reg> regs_;
  std::vector<uint8_t> vec_;  // PAGEMAP_SCAN's output buffer
  std::string sync_refused_;
  std::unique_ptr<Sync> sync_;
};

}  // namespace dlckpt::dirty

#endif  // DLCKPT_COORDINATOR_DIRTY_PAGES_H_

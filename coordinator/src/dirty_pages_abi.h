// The kernel ABI of write tracking that Debian 12's headers (linux-libc-dev
// 6.1) lack: userfaultfd's asynchronous write protection and the PAGEMAP_SCAN
// ioctl of /proc/PID/pagemap, both merged in Linux 6.7. Values and layouts as
// the kernel's UAPI defines them (include/uapi/linux/userfaultfd.h,
// include/uapi/linux/fs.h) and documents them
// (Documentation/admin-guide/mm/userfaultfd.rst, "Write Protect Notifications"
// and UFFD_FEATURE_WP_ASYNC; Documentation/admin-guide/mm/pagemap.rst,
// "Pagemap Scan IOCTL"). Every name is guarded so that newer headers win.
// Whether the running kernel has them is checked at run time (UFFDIO_API's
// feature bits; PAGEMAP_SCAN failing with ENOTTY/EINVAL), never assumed.
#ifndef DLCKPT_COORDINATOR_DIRTY_PAGES_ABI_H_
#define DLCKPT_COORDINATOR_DIRTY_PAGES_ABI_H_

#include <linux/fs.h>
#include <linux/ioctl.h>
#include <linux/types.h>
#include <linux/userfaultfd.h>

// userfaultfd(2) flag: handle faults from user mode only; lets an
// unprivileged process open one when vm.unprivileged_userfaultfd is 0 (5.11).
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
// A VMA registered for write protection installs markers on pages never
// touched, so that their first write is tracked too (6.4).
#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1ULL << 13)
#endif
// Write-protect faults are resolved by the kernel itself (the page is marked
// written and made writable again): no handler thread (6.7).
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1ULL << 15)
#endif

#ifndef PAGEMAP_SCAN
// One reported run of pages with equal categories: [start, end) in bytes.
struct page_region {
  __u64 start;
  __u64 end;
  __u64 categories;
};

struct pm_scan_arg {
  __u64 size;       // sizeof(struct pm_scan_arg)
  __u64 flags;      // PM_SCAN_*
  __u64 start;      // page-aligned
  __u64 end;
  __u64 walk_end;   // out: where the walk stopped (== end when complete)
  __u64 vec;        // struct page_region[vec_len]
  __u64 vec_len;
  __u64 max_pages;  // 0: no limit
  __u64 category_inverted;    // categories XORed with this before matching
  __u64 category_mask;        // all of these must be set
  __u64 category_anyof_mask;  // one of these must be set (0: none asked)
  __u64 return_mask;          // categories reported in page_region
};

#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)
#endif

#ifndef PM_SCAN_WP_MATCHING
#define PM_SCAN_WP_MATCHING (1ULL << 0)    // write-protect the matched pages
#define PM_SCAN_CHECK_WPASYNC (1ULL << 1)  // EPERM on a page without async write protection
#endif

#ifndef PAGE_IS_WPALLOWED
#define PAGE_IS_WPALLOWED (1ULL << 0)
#define PAGE_IS_WRITTEN (1ULL << 1)
#define PAGE_IS_FILE (1ULL << 2)
#define PAGE_IS_PRESENT (1ULL << 3)
#define PAGE_IS_SWAPPED (1ULL << 4)
#define PAGE_IS_PFNZERO (1ULL << 5)
#define PAGE_IS_HUGE (1ULL << 6)
#endif

#endif  // DLCKPT_COORDINATOR_DIRTY_PAGES_ABI_H_

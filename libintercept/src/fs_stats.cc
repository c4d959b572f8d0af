// fs_stats.cc — statfs/statvfs (and fstatfs/fstatvfs; the *64 variants share
// these structures on x86-64) on memfs paths and descriptors: the store's
// capacity, free blocks and file table, the numbers dlckpt-fuse reports.
//
// Contract. Every path under a prefix answers, whether or not it exists yet:
// a file can be created anywhere below a prefix without creating its parents
// (a directory that only has files below it exists implicitly), so a path
// that does not exist yet -- IOR's and mdtest's test directory before their
// first file, /dlckpt/ior -- lies on the store as surely as one that does,
// and IOR, mdtest and `stat -f` must not fail there ("Backend returned error
// during statfs"). A path fails only where a real file system would fail it
// too: ENOTDIR when one of its ancestors is a regular memfs file,
// ENAMETOOLONG when it is longer than a memfs path can be (memfs::kMaxPath
// bytes, so it can never exist). An existing store is attached (and stays
// attached, as for stat); a store that does not exist yet is NOT created:
// the answer is then the geometry a store would be created with
// (DLCKPT_STORE_CAPACITY, DLCKPT_BLOCK_SIZE, DLCKPT_MAX_FILES or
// Configure()), all of it free. EBUSY when another live process owns the
// store, as for every other memfs call.
#include <sys/statfs.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "core.h"
#include "core_c.h"
#include "ops.h"

namespace dlckpt::intercept::internal {
namespace {

constexpr long kMemfsMagic = 0x646c636b;      // "dlck": f_type of memfs
constexpr unsigned kMemfsFsid = 0xd1c;        // as st_dev's major number
constexpr unsigned long kMountFlags = ST_NOSUID | ST_NODEV;
constexpr unsigned long kFlagsValid = 0x0020;  // the kernel's ST_VALID: f_flags is set

struct FsNumbers {
  uint64_t bsize = 0, blocks = 0, bfree = 0, files = 0, ffree = 0;
};

// The numbers of attached store `s`, or of the store the configuration would
// create when `s` is null. 0 or an errno value.
int Numbers(memfs::Store* s, FsNumbers* n) {
  if (s != nullptr) {
    memfs::StoreStats st = s->stats();
    auto files = s->List("");
    if (!files.ok()) return files.status().code();
    n->bsize = st.block_size;
    n->blocks = st.blocks_total;
    n->bfree = st.blocks_free;
    n->files = st.max_files;
    n->ffree = st.max_files > files->size() ? st.max_files - files->size() : 0;
    return 0;
  }
  auto cfg = ResolveConfig();
  if (!cfg.ok()) return cfg.status().code();
  const memfs::StoreOptions& o = cfg->options;
  if (o.block_size == 0) return EINVAL;
  n->bsize = o.block_size;
  n->blocks = (o.capacity + o.block_size - 1) / o.block_size;
  n->bfree = n->blocks;
  n->files = o.max_files != 0 ? o.max_files : memfs::DefaultMaxFiles(o.capacity);
  n->ffree = n->files;
  return 0;
}

void Fill(const FsNumbers& n, struct statfs* f) {
  std::memset(f, 0, sizeof *f);
  f->f_type = kMemfsMagic;
  f->f_bsize = static_cast<long>(n.bsize);
  f->f_frsize = static_cast<long>(n.bsize);
  f->f_blocks = n.blocks;
  f->f_bfree = n.bfree;
  f->f_bavail = n.bfree;
  f->f_files = n.files;
  f->f_ffree = n.ffree;
  f->f_fsid.__val[0] = static_cast<int>(kMemfsFsid);
  f->f_namelen = static_cast<long>(memfs::kMaxPath);
  f->f_flags = static_cast<long>(kMountFlags | kFlagsValid);
}

void Fill(const FsNumbers& n, struct statvfs* f) {
  std::memset(f, 0, sizeof *f);
  f->f_bsize = n.bsize;
  f->f_frsize = n.bsize;
  f->f_blocks = n.blocks;
  f->f_bfree = n.bfree;
  f->f_bavail = n.bfree;
  f->f_files = n.files;
  f->f_ffree = n.ffree;
  f->f_favail = n.ffree;
  f->f_fsid = kMemfsFsid;
  f->f_flag = kMountFlags;
  f->f_namemax = memfs::kMaxPath;
}

// statfs/statvfs of a descriptor (path null) or a path, into `out_buf`.
template <class Buf>
int FsStats(int fd, const char* path, Buf* buf, int* out) {
  if (path == nullptr) {
    return OnFd(fd, out, [&](StoreRef& ref, OpenFile&, int& err) {
      FsNumbers n;
      if ((err = Numbers(ref.store(), &n)) != 0) return -1;
      Fill(n, buf);
      return 0;
    });
  }
  return OnPath(AT_FDCWD, path, out, [&](const std::string& p, int& err) {
    StoreRef ref;
    err = ref.Acquire(true, false);
    if (err == ENOENT) err = 0;  // no store yet: the configured geometry
    if (err != 0) return -1;
    if (p.size() > memfs::kMaxPath) {
      err = ENAMETOOLONG;
      return -1;
    }
    Entry ent;
    if ((err = Lookup(ref.store(), p, &ent)) != 0) return -1;
    // A path that does not exist yet answers for the store it would be
    // created in, unless an ancestor is a file (see the contract above).
    if (ent.type == Entry::Type::kNone && (err = CheckParents(ref.store(), p)) != 0) return -1;
    FsNumbers n;
    if ((err = Numbers(ref.store(), &n)) != 0) return -1;
    Fill(n, buf);
    return 0;
  });
}

}  // namespace
}  // namespace dlckpt::intercept::internal

using namespace dlckpt::intercept::internal;  // NOLINT(google-build-using-namespace)

extern "C" {

int dlckpt_ic_statfs(int fd, const char* path, struct statfs* buf, int* out) {
  return FsStats(fd, path, buf, out);
}

int dlckpt_ic_statvfs(int fd, const char* path, struct statvfs* buf, int* out) {
  return FsStats(fd, path, buf, out);
}

}  // extern "C"

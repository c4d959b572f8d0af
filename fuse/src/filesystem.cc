// The low-level FUSE operations of dlckpt-fuse: see filesystem.h. This file
// holds construction, the operations table (one Call<> trampoline per
// operation: no exception crosses into libfuse, and one that escapes before
// the reply answers ENOMEM or EIO), the helpers the operation files share
// (the *Locked ones run under mu_, per the lock order in filesystem.h),
// MaterializeDirectories and Init. The operations themselves are in
// filesystem_entries.cc, filesystem_io.cc and filesystem_control.cc.
#include "filesystem.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <new>

#include "filesystem_internal.h"

namespace dlckpt::fusefs {
namespace {

constexpr uint32_t kMaxWrite = 1u << 20;   // bytes per WRITE request
constexpr blksize_t kIoSize = kMaxWrite;  // st_blksize: stdio buffers, cp's chunks

int64_t NowNanos() {
  timespec t = Now();
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

bool Later(const timespec& a, const timespec& b) {
  return a.tv_sec != b.tv_sec ? a.tv_sec > b.tv_sec : a.tv_nsec > b.tv_nsec;
}

Filesystem* Self(fuse_req_t req) { return static_cast<Filesystem*>(fuse_req_userdata(req)); }

// Runs one operation; no exception crosses into libfuse. Every operation
// allocates before it replies, so an exception means no reply was sent yet.
template <auto Method, class... Args>
void Call(fuse_req_t req, Args... args) noexcept {
  try {
    (Self(req)->*Method)(req, args...);
  } catch (const std::bad_alloc&) {
    fuse_reply_err(req, ENOMEM);
  } catch (...) {
    fuse_reply_err(req, EIO);
  }
}

}  // namespace

Filesystem::Filesystem(Checkpointer* checkpointer, FsConfig config)
    : checkpointer_(checkpointer),
      config_(config),
      uid_(geteuid()),
      gid_(getegid()),
      mount_time_ns_(NowNanos()) {}

void Filesystem::SetStore(memfs::Store* store) {
  store_ = store;
  block_size_ = std::max<uint64_t>(store->stats().block_size, 512);
}

const fuse_lowlevel_ops& Filesystem::Ops() {
  static const fuse_lowlevel_ops ops = [] {
    fuse_lowlevel_ops o{};
    o.init = [](void* userdata, fuse_conn_info* conn) {
      static_cast<Filesystem*>(userdata)->Init(conn);
    };
    o.lookup = &Call<&Filesystem::Lookup>;
    o.forget = [](fuse_req_t req, fuse_ino_t ino, uint64_t n) {
      try {
        Self(req)->Forget(req, ino, n);
      } catch (...) {
        fuse_reply_none(req);
      }
    };
    o.forget_multi = [](fuse_req_t req, size_t count, fuse_forget_data* forgets) {
      try {
        Self(req)->ForgetMulti(req, count, forgets);
      } catch (...) {
        fuse_reply_none(req);
      }
    };
    o.getattr = &Call<&Filesystem::Getattr>;
    o.setattr = &Call<&Filesystem::Setattr>;
    o.mknod = &Call<&Filesystem::Mknod>;
    o.mkdir = &Call<&Filesystem::Mkdir>;
    o.unlink = &Call<&Filesystem::Unlink>;
    o.rmdir = &Call<&Filesystem::Rmdir>;
    o.symlink = &Call<&Filesystem::Symlink>;
    o.rename = &Call<&Filesystem::Rename>;
    o.link = &Call<&Filesystem::Link>;
    o.open = &Call<&Filesystem::Open>;
    o.read = &Call<&Filesystem::Read>;
    o.write = &Call<&Filesystem::Write>;
    o.flush = &Call<&Filesystem::Flush>;
    o.release = &Call<&Filesystem::Release>;
    o.fsync = &Call<&Filesystem::Fsync>;
    o.opendir = &Call<&Filesystem::Opendir>;
    o.readdir = &Call<&Filesystem::Readdir>;
    o.releasedir = &Call<&Filesystem::Releasedir>;
    o.fsyncdir = &Call<&Filesystem::Fsyncdir>;
    o.statfs = &Call<&Filesystem::Statfs>;
    // No xattr operations: libfuse answers ENOSYS, after which the kernel
    // answers EOPNOTSUPP itself (it would otherwise ask us for
    // security.capability before every cached write).
    o.create = &Call<&Filesystem::Create>;
    // No fallocate: memfs has no atomic "extend to at least N", and the
    // kernel does not stop writeback around FUSE_FALLOCATE, so an emulation
    // could cut off data being written back. The kernel answers EOPNOTSUPP.
    return o;
  }();
  return ops;
}

// ---- helpers -------------------------------------------------------------------

void Filesystem::ReplyError(fuse_req_t req, const Status& status) {
  int code = status.code() > 0 ? status.code() : EIO;
  bool serious = code == EIO || code == EBADMSG || code == ESTALE || code == EBADF;
  if (config_.debug || serious) {
    fuse_log(serious ? FUSE_LOG_ERR : FUSE_LOG_DEBUG, "dlckpt-fuse: %s\n",
             status.ToString().c_str());
  }
  fuse_reply_err(req, code);
}

bool Filesystem::DirectIo(int fuse_flags) const {
  switch (config_.cache) {
    case CacheMode::kDirect: return true;
    case CacheMode::kWriteback: return false;
    case CacheMode::kAuto:
      // A write-only open that creates or truncates: a file written from start
      // to end. Appends and overwrites keep the cache, where the kernel
      // updates mtime (with the writeback cache it ignores ours).
      return (fuse_flags & O_ACCMODE) == O_WRONLY && (fuse_flags & (O_CREAT | O_TRUNC)) != 0;
  }
  return false;
}

int Filesystem::StoreFlags(int fuse_flags) const {
  int access = fuse_flags & O_ACCMODE;
  // The writeback cache reads pages through any handle of a writer.
  if (access == O_WRONLY && !DirectIo(fuse_flags)) access = O_RDWR;
  // O_APPEND is dropped: the kernel computes every write's offset.
  return access | (fuse_flags & (O_CREAT | O_EXCL | O_TRUNC));
}

Result<std::string> Filesystem::ChildPathLocked(fuse_ino_t parent, const char* name) {
  InodeTable::Inode* dir = inodes_.Find(parent);
  if (dir == nullptr || !dir->linked) {
    return Status::NotFound("store " + store_->name() + ": directory node " +
                            std::to_string(parent) + " no longer exists");
  }
  std::string path = dir->path == "/" ? "/" + std::string(name) : dir->path + "/" + name;
  if (path.size() > memfs::kMaxPath) {
    return Status::Error(ENAMETOOLONG, "store " + store_->name() + ": " + path +
                                           ": path longer than " +
                                           std::to_string(memfs::kMaxPath) + " bytes");
  }
  return path;
}

Result<memfs::FileInfo> Filesystem::InfoLocked(fuse_ino_t ino, const fuse_file_info* fi) {
  InodeTable::Inode* inode = inodes_.Find(ino);
  if (inode == nullptr) {
    return Status::Error(ESTALE, "store " + store_->name() + ": unknown node " +
                                     std::to_string(ino));
  }
  Result<memfs::FileInfo> info = Status::NotFound("store " + store_->name() + ": node " +
                                                  std::to_string(ino) + " was removed");
  if (inode->linked) {
    info = store_->Stat(inode->path);
  } else if (fi != nullptr) {
    info = store_->Fstat(static_cast<int>(fi->fh));
  } else if (!inode->fds.empty()) {
    info = store_->Fstat(inode->fds.front());
  }
  if (info.ok() && NodeIdOf(info->ino) != ino) {
    return Status::Error(ESTALE, "store " + store_->name() + ": " + info->path +
                                     " is store inode " + std::to_string(info->ino) +
                                     ", not node " + std::to_string(ino));
  }
  return info;
}

struct stat Filesystem::AttrLocked(const memfs::FileInfo& info, bool linked) {
  struct stat st {};
  st.st_ino = NodeIdOf(info.ino);
  st.st_mode = info.mode;
  st.st_nlink = linked ? 1 : 0;  // directories too: 1 means "not counted"
  st.st_uid = uid_;
  st.st_gid = gid_;
  st.st_size = static_cast<off_t>(info.size);
  st.st_blksize = kIoSize;
  st.st_blocks = static_cast<blkcnt_t>((info.size + block_size_ - 1) / block_size_ *
                                       (block_size_ / 512));
  st.st_atim = st.st_mtim = st.st_ctim = ToTimespec(info.mtime_ns);
  auto it = overlay_.find(info.ino);
  if (it != overlay_.end()) {
    const Overlay& o = it->second;
    if (o.perm) st.st_mode = (st.st_mode & S_IFMT) | *o.perm;
    if (o.uid) st.st_uid = *o.uid;
    if (o.gid) st.st_gid = *o.gid;
    if (o.atime) st.st_atim = *o.atime;
    if (o.mtime && o.mtime_base == info.mtime_ns) st.st_mtim = *o.mtime;
    if (Later(o.ctime, st.st_ctim)) st.st_ctim = o.ctime;
  }
  return st;
}

struct stat Filesystem::RootAttrLocked() {
  memfs::FileInfo root;
  root.path = "/";
  root.mode = S_IFDIR | 0755;
  root.mtime_ns = mount_time_ns_;
  root.ino = 0;  // node id 1; the overlay key of the root
  return AttrLocked(root, true);
}

fuse_entry_param Filesystem::EntryLocked(const memfs::FileInfo& info) {
  fuse_entry_param e{};
  e.ino = NodeIdOf(info.ino);
  e.attr = AttrLocked(info, true);
  e.attr_timeout = kTimeout;
  e.entry_timeout = kTimeout;
  return e;
}

void Filesystem::ReplyEntryLocked(fuse_req_t req, const memfs::FileInfo& info) {
  fuse_entry_param e = EntryLocked(info);
  inodes_.Ref(e.ino, info.path, info.mode);
  if (fuse_reply_entry(req, &e) != 0) inodes_.Forget(e.ino, 1);  // the kernel never saw it
}

void Filesystem::DropOverlayIfGoneLocked(uint64_t store_ino, bool unlinked) {
  if (!unlinked) return;  // still in the store: its overlay outlives the kernel's inode
  InodeTable::Inode* inode = inodes_.Find(NodeIdOf(store_ino));
  if (inode == nullptr || inode->fds.empty()) overlay_.erase(store_ino);
}

std::vector<std::string> Filesystem::MaterializeDirectories() {
  std::vector<std::string> warnings;
  std::lock_guard<std::mutex> lock(mu_);
  auto all = store_->List("");
  if (!all.ok()) {
    warnings.push_back(all.status().ToString());
    return warnings;
  }
  std::map<std::string, uint32_t> modes;
  for (const auto& f : *all) modes.emplace(f.path, f.mode);
  const std::string control = std::string("/") + kControlDir;
  for (const auto& f : *all) {
    const std::string& p = f.path;
    if (p.size() < 2 || p[0] != '/' || p.back() == '/' || p.find("//") != std::string::npos) {
      warnings.push_back("store path '" + p + "' is not a clean absolute path: not shown");
      continue;
    }
    if (p == control || p.compare(0, control.size() + 1, control + "/") == 0) {
      warnings.push_back(p + ": hidden by the control directory " + control);
      continue;
    }
    for (size_t pos = p.find('/', 1); pos != std::string::npos; pos = p.find('/', pos + 1)) {
      std::string dir = p.substr(0, pos);
      auto it = modes.find(dir);
      if (it == modes.end()) {
        Status s = store_->Mkdir(dir, 0755);
        if (!s.ok()) {
          warnings.push_back(p + ": not shown: " + s.ToString());
          break;
        }
        modes.emplace(dir, S_IFDIR | 0755);
      } else if (!S_ISDIR(it->second)) {
        warnings.push_back(p + ": not shown: its parent " + dir + " is a file");
        break;
      }
    }
  }
  return warnings;
}

void Filesystem::Init(fuse_conn_info* conn) {
  conn->max_write = kMaxWrite;
  if (conn->capable & FUSE_CAP_WRITEBACK_CACHE) {
    conn->want |= FUSE_CAP_WRITEBACK_CACHE;
  } else {
    fuse_log(FUSE_LOG_WARNING, "dlckpt-fuse: the kernel offers no writeback cache\n");
  }
  // Writes are copied into the store from memory: a pipe would add a copy.
  conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
  if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC) conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
  conn->time_gran = 1;
}

}  // namespace dlckpt::fusefs

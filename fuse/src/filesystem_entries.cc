// Lookup, attributes, the namespace and directory operations of a mount:
// Lookup, Forget, ForgetMulti, Getattr, Setattr, Mknod, Mkdir, Unlink, Rmdir,
// Symlink, Link, Rename, Create (a new entry, opened as in filesystem_io.cc),
// Opendir, Readdir, Releasedir, Fsyncdir and Statfs.
//
// Locking (filesystem.h): every operation that resolves a node or a path
// holds mu_ across the inode table, the attribute overlay and its store calls
// (the store's mutex nests inside); none takes checkpoint_mu_ or epoch_mu_.
// Readdir, Releasedir, Fsyncdir and Statfs take no lock here. Names under the
// control directory, and the directory itself, are answered by
// filesystem_control.cc and may not be created, removed or renamed (EPERM or
// EEXIST). Failure: every path ends in exactly one fuse_reply_* (forget:
// fuse_reply_none) with the store's errno; a reply the kernel never saw
// undoes the lookup reference or descriptor it recorded.
#include <fcntl.h>
#include <sys/statvfs.h>

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "filesystem.h"
#include "filesystem_internal.h"

namespace dlckpt::fusefs {

namespace {

// A create (Create, Mknod, Mkdir) the store refused with ENOSPC: memfs's
// message names the limit met (the file table, max_files, DLCKPT_MAX_FILES and
// --max-files; or the data area) while the application only sees the errno.
// So dlckpt-fuse says it on its stderr once per process, in the preload's words
// (libintercept's WarnCreateFailure), ahead of its own name.
void WarnCreateFailure(const Status& s) {
  static std::atomic<bool> warned{false};
  if (s.code() != ENOSPC || warned.exchange(true)) return;
  fuse_log(FUSE_LOG_ERR, "dlckpt-fuse: %s\n", s.ToString().c_str());
}

}  // namespace

// The entries of an open directory, read at Opendir (fuse_file_info::fh).
struct Filesystem::DirHandle {
  struct Entry {
    std::string name;
    fuse_ino_t ino;
    mode_t mode;
  };
  std::vector<Entry> entries;
};

bool Filesystem::RefuseReservedName(fuse_req_t req, fuse_ino_t parent, const char* name) {
  if (!IsReserved(parent, name)) return false;
  fuse_reply_err(req, IsControl(parent) ? EPERM : EEXIST);
  return true;
}

void Filesystem::Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  if (IsReserved(parent, name)) return ControlLookup(req, parent, name);
  std::lock_guard<std::mutex> lock(mu_);
  auto path = ChildPathLocked(parent, name);
  if (!path.ok()) return ReplyError(req, path.status());
  auto info = store_->Stat(*path);
  if (!info.ok()) {
    if (info.status().code() == ENOENT) {
      fuse_entry_param negative{};
      negative.entry_timeout = kTimeout;
      fuse_reply_entry(req, &negative);
      return;
    }
    return ReplyError(req, info.status());
  }
  ReplyEntryLocked(req, *info);
}

void Filesystem::Forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  if (!IsControl(ino)) {
    std::lock_guard<std::mutex> lock(mu_);
    InodeTable::Inode* inode = inodes_.Find(ino);
    bool unlinked = inode != nullptr && !inode->linked;
    if (!inodes_.Forget(ino, nlookup)) {
      fuse_log(FUSE_LOG_ERR,
               "dlckpt-fuse: store %s: kernel forgot %" PRIu64 " lookups of node %" PRIu64
               " it was not given\n",
               store_->name().c_str(), nlookup, static_cast<uint64_t>(ino));
    }
    if (ino != kRootId) DropOverlayIfGoneLocked(ino - 1, unlinked);
  }
  fuse_reply_none(req);
}

void Filesystem::ForgetMulti(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < count; ++i) {
      fuse_ino_t ino = forgets[i].ino;
      if (IsControl(ino)) continue;
      InodeTable::Inode* inode = inodes_.Find(ino);
      bool unlinked = inode != nullptr && !inode->linked;
      if (!inodes_.Forget(ino, forgets[i].nlookup)) {
        fuse_log(FUSE_LOG_ERR,
                 "dlckpt-fuse: store %s: kernel forgot %" PRIu64 " lookups of node %" PRIu64
                 " it was not given\n",
                 store_->name().c_str(), static_cast<uint64_t>(forgets[i].nlookup),
                 static_cast<uint64_t>(ino));
      }
      if (ino != kRootId) DropOverlayIfGoneLocked(ino - 1, unlinked);
    }
  }
  fuse_reply_none(req);
}

void Filesystem::Getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  if (IsControl(ino)) {
    struct stat st = ControlAttr(ino);
    fuse_reply_attr(req, &st, kTimeout);
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  struct stat st;
  if (ino == kRootId) {
    st = RootAttrLocked();
  } else {
    auto info = InfoLocked(ino, fi);
    if (!info.ok()) return ReplyError(req, info.status());
    st = AttrLocked(*info, inodes_.Find(ino)->linked);
  }
  fuse_reply_attr(req, &st, kTimeout);
}

void Filesystem::Setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int valid,
                         fuse_file_info* fi) {
  if (IsControl(ino)) {
    // `echo 1 > checkpoint` truncates first: accepted, nothing to store.
    struct stat st = ControlAttr(ino);
    fuse_reply_attr(req, &st, kTimeout);
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  memfs::FileInfo info;
  bool linked = true;
  if (ino == kRootId) {
    info.mode = S_IFDIR | 0755;
    info.mtime_ns = mount_time_ns_;
    info.ino = 0;
  } else {
    InodeTable::Inode* inode = inodes_.Find(ino);
    if (inode == nullptr) {
      return ReplyError(req, Status::Error(ESTALE, "store " + store_->name() +
                                                       ": unknown node " + std::to_string(ino)));
    }
    if (!inode->linked && inode->fds.empty() && fi == nullptr && !(valid & FUSE_SET_ATTR_SIZE)) {
      // The kernel flushes cached times of a file it has just removed: accept.
      struct stat st {};
      st.st_ino = ino;
      st.st_mode = inode->mode;
      st.st_uid = uid_;
      st.st_gid = gid_;
      fuse_reply_attr(req, &st, kTimeout);
      return;
    }
    if (valid & FUSE_SET_ATTR_SIZE) {
      uint64_t size = static_cast<uint64_t>(attr->st_size);
      Status s;
      if (fi != nullptr) {
        s = store_->Ftruncate(static_cast<int>(fi->fh), size);
      } else if (inode->linked) {
        s = store_->Truncate(inode->path, size);
      } else if (!inode->fds.empty()) {
        s = store_->Ftruncate(inode->fds.front(), size);
      } else {
        s = Status::NotFound("store " + store_->name() + ": node " + std::to_string(ino) +
                             " was removed");
      }
      if (!s.ok()) return ReplyError(req, s);
    }
    auto got = InfoLocked(ino, fi);
    if (!got.ok()) return ReplyError(req, got.status());
    info = std::move(*got);
    linked = inode->linked;
  }
  constexpr int kOverlaid = FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID |
                            FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME |
                            FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW;
  if (valid & kOverlaid) {
    Overlay& o = overlay_[info.ino];
    timespec now = Now();
    if (valid & FUSE_SET_ATTR_MODE) o.perm = attr->st_mode & 07777;
    if (valid & FUSE_SET_ATTR_UID) o.uid = attr->st_uid;
    if (valid & FUSE_SET_ATTR_GID) o.gid = attr->st_gid;
    if (valid & FUSE_SET_ATTR_ATIME_NOW) {
      o.atime = now;
    } else if (valid & FUSE_SET_ATTR_ATIME) {
      o.atime = attr->st_atim;
    }
    if (valid & (FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_MTIME)) {
      o.mtime = (valid & FUSE_SET_ATTR_MTIME_NOW) ? now : attr->st_mtim;
      o.mtime_base = info.mtime_ns;
    }
    o.ctime = now;
  }
  struct stat st = AttrLocked(info, linked);
  fuse_reply_attr(req, &st, kTimeout);
}

void Filesystem::Mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
                       dev_t rdev) {
  (void)rdev;
  if (RefuseReservedName(req, parent, name)) return;
  if (!S_ISREG(mode)) {  // FIFOs, sockets and devices cannot live in a store
    fuse_reply_err(req, EPERM);
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto path = ChildPathLocked(parent, name);
  if (!path.ok()) return ReplyError(req, path.status());
  auto fd = store_->Open(*path, O_RDWR | O_CREAT | O_EXCL, mode & 07777);
  if (!fd.ok()) {
    WarnCreateFailure(fd.status());
    return ReplyError(req, fd.status());
  }
  auto info = store_->Fstat(*fd);
  (void)store_->Close(*fd);
  if (!info.ok()) return ReplyError(req, info.status());
  ReplyEntryLocked(req, *info);
}

void Filesystem::Mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  if (RefuseReservedName(req, parent, name)) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto path = ChildPathLocked(parent, name);
  if (!path.ok()) return ReplyError(req, path.status());
  Status s = store_->Mkdir(*path, mode & 07777);
  if (!s.ok()) {
    WarnCreateFailure(s);
    return ReplyError(req, s);
  }
  auto info = store_->Stat(*path);
  if (!info.ok()) return ReplyError(req, info.status());
  ReplyEntryLocked(req, *info);
}

void Filesystem::Unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  RemoveChild(req, parent, name, /*dir=*/false);
}

void Filesystem::Rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  RemoveChild(req, parent, name, /*dir=*/true);
}

void Filesystem::RemoveChild(fuse_req_t req, fuse_ino_t parent, const char* name, bool dir) {
  if (IsReserved(parent, name)) {
    fuse_reply_err(req, EPERM);
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto path = ChildPathLocked(parent, name);
  if (!path.ok()) return ReplyError(req, path.status());
  auto info = store_->Stat(*path);
  if (!info.ok()) return ReplyError(req, info.status());
  Status s = dir ? store_->Rmdir(*path) : store_->Unlink(*path);
  if (!s.ok()) return ReplyError(req, s);
  inodes_.Unlinked(NodeIdOf(info->ino));
  DropOverlayIfGoneLocked(info->ino, true);
  fuse_reply_err(req, 0);
}

void Filesystem::Symlink(fuse_req_t req, const char* link, fuse_ino_t parent, const char* name) {
  (void)link;
  (void)parent;
  (void)name;
  fuse_reply_err(req, EPERM);  // POSIX: the file system does not support symbolic links
}

void Filesystem::Link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname) {
  (void)ino;
  (void)newparent;
  (void)newname;
  fuse_reply_err(req, EPERM);  // POSIX: the file system does not support hard links
}

void Filesystem::Rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent,
                        const char* newname, unsigned int flags) {
  if (IsReserved(parent, name) || IsReserved(newparent, newname)) {
    fuse_reply_err(req, EPERM);
    return;
  }
  if (flags & ~static_cast<unsigned int>(RENAME_NOREPLACE)) {  // RENAME_EXCHANGE, WHITEOUT
    fuse_reply_err(req, EINVAL);
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto from = ChildPathLocked(parent, name);
  if (!from.ok()) return ReplyError(req, from.status());
  auto to = ChildPathLocked(newparent, newname);
  if (!to.ok()) return ReplyError(req, to.status());
  auto src = store_->Stat(*from);
  if (!src.ok()) return ReplyError(req, src.status());
  auto dst = store_->Stat(*to);
  if (dst.ok() && (flags & RENAME_NOREPLACE)) {
    return ReplyError(req, Status::Error(EEXIST, "store " + store_->name() + ": " + *to +
                                                     ": exists (RENAME_NOREPLACE)"));
  }
  if (!dst.ok() && dst.status().code() != ENOENT) return ReplyError(req, dst.status());
  Status s = store_->Rename(*from, *to);
  if (!s.ok()) return ReplyError(req, s);
  if (dst.ok() && dst->ino != src->ino) {
    inodes_.Unlinked(NodeIdOf(dst->ino));
    DropOverlayIfGoneLocked(dst->ino, true);
  }
  inodes_.Renamed(*from, *to);
  fuse_reply_err(req, 0);
}

void Filesystem::Create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
                        fuse_file_info* fi) {
  if (RefuseReservedName(req, parent, name)) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto path = ChildPathLocked(parent, name);
  if (!path.ok()) return ReplyError(req, path.status());
  auto fd = store_->Open(*path, StoreFlags(fi->flags) | O_CREAT, mode & 07777);
  if (!fd.ok()) {
    WarnCreateFailure(fd.status());
    return ReplyError(req, fd.status());
  }
  auto info = store_->Fstat(*fd);
  if (!info.ok()) {
    (void)store_->Close(*fd);
    return ReplyError(req, info.status());
  }
  fuse_entry_param e = EntryLocked(*info);
  inodes_.Ref(e.ino, info->path, info->mode);
  inodes_.AddFd(e.ino, *fd);
  fi->fh = static_cast<uint64_t>(*fd);
  fi->direct_io = DirectIo(fi->flags);
  if (fuse_reply_create(req, &e, fi) != 0) {  // the kernel never saw it
    inodes_.Forget(e.ino, 1);
    inodes_.RemoveFd(e.ino, *fd);
    (void)store_->Close(*fd);
  }
}

void Filesystem::Opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto handle = std::make_unique<DirHandle>();
  if (ino == kControlDirId) {
    handle->entries = {{".", kControlDirId, S_IFDIR},
                       {"..", kRootId, S_IFDIR},
                       {kCheckpointFile, kCheckpointId, S_IFREG},
                       {kStatusFile, kStatusId, S_IFREG},
                       {kEpochFile, kEpochId, S_IFREG}};
  } else if (IsControl(ino)) {
    fuse_reply_err(req, ENOTDIR);
    return;
  } else {
    std::lock_guard<std::mutex> lock(mu_);
    InodeTable::Inode* inode = inodes_.Find(ino);
    if (inode == nullptr || !inode->linked) {
      return ReplyError(req, Status::NotFound("store " + store_->name() + ": directory node " +
                                              std::to_string(ino) + " no longer exists"));
    }
    std::string dir = inode->path;
    fuse_ino_t parent_id = kRootId;
    if (ino != kRootId) {
      auto info = store_->Stat(dir);
      if (!info.ok()) return ReplyError(req, info.status());
      if (!S_ISDIR(info->mode)) {
        return ReplyError(req, Status::Error(ENOTDIR, "store " + store_->name() + ": " + dir +
                                                          ": not a directory"));
      }
      std::string parent = dir.substr(0, dir.rfind('/'));
      if (!parent.empty()) {
        auto pinfo = store_->Stat(parent);
        if (pinfo.ok()) parent_id = NodeIdOf(pinfo->ino);
      }
    }
    std::string prefix = dir == "/" ? "/" : dir + "/";
    auto children = store_->List(prefix);
    if (!children.ok()) return ReplyError(req, children.status());
    handle->entries.push_back({".", ino, S_IFDIR});
    handle->entries.push_back({"..", parent_id, S_IFDIR});
    for (const auto& c : *children) {
      std::string_view rest(c.path);
      rest.remove_prefix(prefix.size());
      if (rest.empty() || rest.find('/') != std::string_view::npos) continue;  // not a child
      if (ino == kRootId && rest == kControlDir) continue;  // shadowed by the control dir
      handle->entries.push_back({std::string(rest), NodeIdOf(c.ino), c.mode});
    }
  }
  fi->fh = reinterpret_cast<uint64_t>(handle.get());
  if (fuse_reply_open(req, fi) == 0) handle.release();
}

void Filesystem::Readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                         fuse_file_info* fi) {
  (void)ino;
  const auto* handle = reinterpret_cast<const DirHandle*>(fi->fh);
  std::vector<char> buf(size);
  size_t used = 0;
  for (size_t i = static_cast<size_t>(off); i < handle->entries.size(); ++i) {
    const DirHandle::Entry& e = handle->entries[i];
    struct stat st {};
    st.st_ino = e.ino;
    st.st_mode = e.mode;
    size_t len = fuse_add_direntry(req, buf.data() + used, size - used, e.name.c_str(), &st,
                                   static_cast<off_t>(i + 1));
    if (len > size - used) break;
    used += len;
  }
  fuse_reply_buf(req, buf.data(), used);
}

void Filesystem::Releasedir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  (void)ino;
  delete reinterpret_cast<DirHandle*>(fi->fh);
  fuse_reply_err(req, 0);
}

void Filesystem::Fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi) {
  (void)ino;
  (void)datasync;
  (void)fi;
  fuse_reply_err(req, 0);
}

void Filesystem::Statfs(fuse_req_t req, fuse_ino_t ino) {
  (void)ino;
  memfs::StoreStats st = store_->stats();
  auto files = store_->List("");
  if (!files.ok()) return ReplyError(req, files.status());
  struct statvfs sv {};
  sv.f_bsize = st.block_size;
  sv.f_frsize = st.block_size;
  sv.f_blocks = st.blocks_total;
  sv.f_bfree = st.blocks_free;
  sv.f_bavail = st.blocks_free;
  sv.f_files = st.max_files;
  sv.f_ffree = st.max_files > files->size() ? st.max_files - files->size() : 0;
  sv.f_favail = sv.f_ffree;
  sv.f_namemax = memfs::kMaxPath;
  fuse_reply_statfs(req, &sv);
}

}  // namespace dlckpt::fusefs

// The file I/O operations of a mount: Open, Read, Write, Flush, Release and
// Fsync (Create, which also opens, is in filesystem_entries.cc).
//
// Locking (filesystem.h): Open and Release hold mu_ (the inode table records
// each node's open store descriptors); Read, Write and Fsync go straight to
// the store descriptor in fuse_file_info::fh and take no lock here (the
// store's own mutex orders them). Control files: Open hands over to
// ControlOpen, Write to ControlWrite; Read returns a copy of the handle's
// text and Release frees the handle. Failure: every path ends in exactly one
// fuse_reply_*, errors as the store's errno; an open the kernel never saw
// closes its descriptor again, and a failed close on release is only logged.
#include <algorithm>
#include <cinttypes>
#include <mutex>
#include <string>
#include <vector>

#include "filesystem.h"
#include "filesystem_internal.h"

namespace dlckpt::fusefs {

void Filesystem::Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  if (IsControl(ino)) return ControlOpen(req, ino, fi);
  std::lock_guard<std::mutex> lock(mu_);
  InodeTable::Inode* inode = inodes_.Find(ino);
  if (inode == nullptr) {
    return ReplyError(req, Status::Error(ESTALE, "store " + store_->name() + ": unknown node " +
                                                     std::to_string(ino)));
  }
  if (!inode->linked) {  // e.g. /proc/PID/fd/N of a removed file: memfs opens by path
    return ReplyError(req, Status::NotFound("store " + store_->name() + ": node " +
                                            std::to_string(ino) + " was removed"));
  }
  auto fd = store_->Open(inode->path, StoreFlags(fi->flags));
  if (!fd.ok()) return ReplyError(req, fd.status());
  auto info = store_->Fstat(*fd);
  if (!info.ok() || NodeIdOf(info->ino) != ino) {
    (void)store_->Close(*fd);
    return ReplyError(req, info.ok() ? Status::Error(ESTALE, "store " + store_->name() + ": " +
                                                                 inode->path + " changed identity")
                                     : info.status());
  }
  inodes_.AddFd(ino, *fd);
  fi->fh = static_cast<uint64_t>(*fd);
  fi->direct_io = DirectIo(fi->flags);
  if (fuse_reply_open(req, fi) != 0) {
    inodes_.RemoveFd(ino, *fd);
    (void)store_->Close(*fd);
  }
}

void Filesystem::Read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  if (IsControl(ino)) {
    // A copy: once the reply is written the reader may close the file and its
    // release free the handle while this thread is still in fuse_reply_buf.
    const std::string& text = reinterpret_cast<ControlHandle*>(fi->fh)->text;
    size_t start = std::min(static_cast<size_t>(off), text.size());
    std::string slice = text.substr(start, size);
    fuse_reply_buf(req, slice.data(), slice.size());
    return;
  }
  thread_local std::vector<char> buf;
  if (buf.size() < size) buf.resize(size);
  auto n = store_->Pread(static_cast<int>(fi->fh), buf.data(), size, static_cast<uint64_t>(off));
  if (!n.ok()) return ReplyError(req, n.status());
  fuse_reply_buf(req, buf.data(), *n);
}

void Filesystem::Write(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off,
                       fuse_file_info* fi) {
  if (IsControl(ino)) return ControlWrite(req, buf, size, fi);
  auto n = store_->Pwrite(static_cast<int>(fi->fh), buf, size, static_cast<uint64_t>(off));
  if (!n.ok()) return ReplyError(req, n.status());
  fuse_reply_write(req, *n);
}

void Filesystem::Flush(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  (void)ino;
  (void)fi;
  fuse_reply_err(req, 0);  // the kernel has written back; the bytes are in the store
}

void Filesystem::Release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  if (IsControl(ino)) {
    delete reinterpret_cast<ControlHandle*>(fi->fh);
    fuse_reply_err(req, 0);
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  int fd = static_cast<int>(fi->fh);
  InodeTable::Inode* inode = inodes_.Find(ino);
  bool unlinked = inode != nullptr && !inode->linked;
  if (!inodes_.RemoveFd(ino, fd)) {
    fuse_log(FUSE_LOG_ERR, "dlckpt-fuse: store %s: release of node %" PRIu64
             " with descriptor %d it was not opened with\n",
             store_->name().c_str(), static_cast<uint64_t>(ino), fd);
  }
  Status s = store_->Close(fd);
  if (!s.ok()) fuse_log(FUSE_LOG_ERR, "dlckpt-fuse: %s\n", s.ToString().c_str());
  if (ino != kRootId) DropOverlayIfGoneLocked(ino - 1, unlinked);
  fuse_reply_err(req, 0);
}

void Filesystem::Fsync(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi) {
  (void)datasync;
  if (IsControl(ino)) {
    fuse_reply_err(req, 0);
    return;
  }
  Status s = store_->Fsync(static_cast<int>(fi->fh));
  if (!s.ok()) return ReplyError(req, s);
  fuse_reply_err(req, 0);
}

}  // namespace dlckpt::fusefs

// files.cc — the file table and descriptors of a store (Store::Impl, see store_impl.h).
//
// Ownership: files_ (a FileTable, file_table.h) holds the working (owner) or
// viewed (read-only) Nodes by shared pointer; a descriptor (handles_[fd])
// shares its Node, so an unlinked file lives until its last descriptor is
// closed, when its blocks are released. Descriptors are private to one Impl; they are reused lowest-first
// and capped at max_open_.
//
// Thread safety: every public method takes mu_; the helpers expect it held.
//
// Failure: errno-valued Status naming the store and path (or fd): ENOENT,
// EEXIST, EISDIR, ENOTDIR, ENOTEMPTY, EBADF, EMFILE, ENOSPC (file table
// full), ENAMETOOLONG, EROFS (a read-only attacher asking to change files).
// A failed call changes nothing, except that Write reports a short count
// when only part of its bytes fit (see WriteAtLocked in blocks.cc).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "store_impl.h"

namespace dlckpt::memfs {

using namespace layout;  // NOLINT(google-build-using-namespace)

namespace {

bool Readable(int flags) { return (flags & O_ACCMODE) != O_WRONLY; }
bool Writable(int flags) { return (flags & O_ACCMODE) != O_RDONLY; }

}  // namespace

// ---- operations -----------------------------------------------------------------

Result<int> Store::Impl::Open(std::string_view path, int flags, mode_t mode) {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_RETURN_IF_ERROR(CheckPath(path));
  bool wants_write = Writable(flags) || (flags & (O_CREAT | O_TRUNC));
  if (!owner_ && wants_write) {
    return Status::Error(EROFS, Where(path) + ": store attached read-only");
  }
  NodePtr node;
  auto it = files_.find(path);
  if (it == files_.end()) {
    if (!(flags & O_CREAT)) return Status::NotFound(Where(path) + ": no such file");
    if (files_.size() >= geo_.max_files) {
      LoseCreateLocked(path, ENOSPC);
      return FileTableFullLocked(path);
    }
    node = files_.NewNode(path, S_IFREG | (mode & 07777), env_->WallNanos());
    ForgetLostCreateLocked(path);  // created after all
  } else {
    node = it->second;
    if ((flags & O_CREAT) && (flags & O_EXCL)) {
      return Status::Error(EEXIST, Where(path) + ": file exists");
    }
    if (S_ISDIR(node->mode)) {
      if (wants_write) return Status::Error(EISDIR, Where(path) + ": is a directory");
    } else if (flags & O_DIRECTORY) {
      return Status::Error(ENOTDIR, Where(path) + ": not a directory");
    }
  }
  int fd = FreeHandleLocked();
  if (fd < 0) {
    return Status::Error(EMFILE, Where(path) + ": too many open files (" +
                                     std::to_string(max_open_) + ")");
  }
  if (it == files_.end()) files_.Insert(node);
  if ((flags & O_TRUNC) && Writable(flags)) {
    if (node->size > 0) {
      Status cut = TruncateLocked(*node, 0);
      if (!cut.ok()) {
        MarkDamagedLocked(*node, cut, kDamageResize, 0, 0);  // bytes from 0 on should be gone
        return cut;
      }
    }
    ResizedLocked(*node);  // a file written anew: no earlier failure matters
  }
  handles_[fd] = Handle{node, flags, 0};
  node->open_count++;
  return fd;
}

Status Store::Impl::Close(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_ASSIGN_OR_RETURN(Handle * h, GetHandle(fd));
  NodePtr node = std::move(h->node);
  *h = Handle{};
  if (--node->open_count == 0 && !node->linked) ReleaseNodeLocked(*node);
  return Status::OK();
}

Result<size_t> Store::Impl::Read(int fd, void* buf, size_t len, const uint64_t* at) {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_ASSIGN_OR_RETURN(Handle * h, GetHandle(fd));
  if (!Readable(h->flags)) return Status::Error(EBADF, Where(fd) + ": not open for reading");
  if (S_ISDIR(h->node->mode)) return Status::Error(EISDIR, Where(fd) + ": is a directory");
  uint64_t off = at ? *at : h->offset;
  DLCKPT_ASSIGN_OR_RETURN(size_t n, ReadAtLocked(*h->node, static_cast<uint8_t*>(buf), len, off));
  if (!at) h->offset = off + n;
  return n;
}

Result<Extent> Store::Impl::ReadInPlace(int fd, uint64_t off, size_t len) {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_ASSIGN_OR_RETURN(Handle * h, GetHandle(fd));
  if (owner_) return Status::Error(EPERM, Where(fd) + ": in-place reads are for read-only attachers");
  if (!Readable(h->flags)) return Status::Error(EBADF, Where(fd) + ": not open for reading");
  if (S_ISDIR(h->node->mode)) return Status::Error(EISDIR, Where(fd) + ": is a directory");
  const Node& node = *h->node;
  if (off >= node.size || len == 0) return Extent{nullptr, 0};
  const uint64_t n = std::min<uint64_t>(len, node.size - off);
  if (compressed_) {
    const uint64_t ci = off / geo_.chunk_size;
    if (node.chunks[ci].compressed) {
      DLCKPT_ASSIGN_OR_RETURN(const uint8_t* raw, DecompressedLocked(node, ci));
      const uint64_t co = off - ci * geo_.chunk_size;
      return Extent{raw + co, std::min<uint64_t>(ChunkLen(node, ci) - co, n)};
    }
  }
  const uint64_t bs = geo_.block_size;
  uint64_t bi = off / bs;
  const uint8_t* p = blocks_.Ptr(node.blocks[bi]) + off % bs;
  uint64_t got = std::min<uint64_t>(bs - off % bs, n);
  // Coalesce the blocks that follow in the mapping (not across chunks of a
  // compressed store, whose next chunk may be compressed).
  while (!compressed_ && got < n && blocks_.Ptr(node.blocks[bi + 1]) == p + got) {
    ++bi;
    got += std::min<uint64_t>(bs, n - got);
  }
  return Extent{p, got};
}

Result<size_t> Store::Impl::Write(int fd, const void* buf, size_t len, const uint64_t* at) {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_ASSIGN_OR_RETURN(Handle * h, GetHandle(fd));
  if (!Writable(h->flags)) return Status::Error(EBADF, Where(fd) + ": not open for writing");
  if (len == 0) return size_t{0};  // as on Linux, even O_APPEND leaves the offset alone
  // As on Linux, O_APPEND writes at the end even through pwrite.
  uint64_t off = (h->flags & O_APPEND) ? h->node->size : (at ? *at : h->offset);
  Node& node = *h->node;
  Result<size_t> written = WriteAtLocked(node, static_cast<const uint8_t*>(buf), len, off);
  if (!written.ok()) {
    MarkDamagedLocked(node, written.status(), kDamageWrite, off, len);
    return written.status();
  }
  const size_t n = *written;
  if (n < len) {
    MarkDamagedLocked(node, Status::NoSpace("short write"), kDamageShortWrite, off + n, len - n);
  } else {
    WrittenLocked(node, off, n);
  }
  if (!at) h->offset = off + n;
  return n;
}

Result<uint64_t> Store::Impl::Seek(int fd, int64_t offset, int whence) {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_ASSIGN_OR_RETURN(Handle * h, GetHandle(fd));
  int64_t base;
  switch (whence) {
    case SEEK_SET: base = 0; break;
    case SEEK_CUR: base = static_cast<int64_t>(h->offset); break;
    case SEEK_END: base = static_cast<int64_t>(h->node->size); break;
    case SEEK_DATA:
      if (offset < 0 || static_cast<uint64_t>(offset) >= h->node->size) {
        return Status::Error(ENXIO, Where(fd) + ": SEEK_DATA past end of file");
      }
      h->offset = static_cast<uint64_t>(offset);
      return h->offset;
    case SEEK_HOLE:
      if (offset < 0 || static_cast<uint64_t>(offset) >= h->node->size) {
        return Status::Error(ENXIO, Where(fd) + ": SEEK_HOLE past end of file");
      }
      h->offset = h->node->size;
      return h->offset;
    default: return Status::InvalidArgument(Where(fd) + ": bad whence " + std::to_string(whence));
  }
  int64_t pos;
  if (__builtin_add_overflow(base, offset, &pos)) {
    return Status::Error(EOVERFLOW, Where(fd) + ": offset overflow");
  }
  if (pos < 0) return Status::InvalidArgument(Where(fd) + ": negative offset");
  h->offset = static_cast<uint64_t>(pos);
  return h->offset;
}

Status Store::Impl::Ftruncate(int fd, uint64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_ASSIGN_OR_RETURN(Handle * h, GetHandle(fd));
  if (!Writable(h->flags)) {
    return Status::InvalidArgument(Where(fd) + ": not open for writing");
  }
  if (S_ISDIR(h->node->mode)) return Status::Error(EISDIR, Where(fd) + ": is a directory");
  return ResizeLocked(*h->node, size);
}

Status Store::Impl::Truncate(std::string_view path, uint64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_ASSIGN_OR_RETURN(auto it, FileToChangeLocked(path));
  return ResizeLocked(*it->second, size);
}

// TruncateLocked, recording a failure as damage of the file: the bytes from
// the smaller of the old and new sizes on are not what was asked for.
Status Store::Impl::ResizeLocked(Node& node, uint64_t size) {
  const uint64_t old = node.size;
  Status s = TruncateLocked(node, size);
  if (s.ok()) {
    ResizedLocked(node);
  } else {
    MarkDamagedLocked(node, s, kDamageResize, std::min(old, size), size);
  }
  return s;
}

Result<FileInfo> Store::Impl::Fstat(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_ASSIGN_OR_RETURN(Handle * h, GetHandle(fd));
  return InfoLocked(*h->node);
}

Result<FileInfo> Store::Impl::Stat(std::string_view path) {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_RETURN_IF_ERROR(CheckPath(path));
  auto it = files_.find(path);
  if (it == files_.end()) return Status::NotFound(Where(path) + ": no such file");
  return InfoLocked(*it->second);
}

Result<int> Store::Impl::OpenFlags(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_ASSIGN_OR_RETURN(Handle * h, GetHandle(fd));
  return h->flags;
}

Status Store::Impl::Unlink(std::string_view path) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = FileToChangeLocked(path);
  // Removed, or given up although it never came to be (rm -f).
  if (it.ok() || it.status().code() == ENOENT) ForgetLostCreateLocked(path);
  if (!it.ok()) return it.status();
  DropLinkLocked(*it);
  return Status::OK();
}

Status Store::Impl::Rename(std::string_view from, std::string_view to) {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_RETURN_IF_ERROR(CheckPath(from));
  DLCKPT_RETURN_IF_ERROR(CheckPath(to));
  if (!owner_) return Status::Error(EROFS, Where(from) + ": store attached read-only");
  auto src = files_.find(from);
  if (src == files_.end()) return Status::NotFound(Where(from) + ": no such file");
  if (from == to) return Status::OK();
  const bool is_dir = S_ISDIR(src->second->mode);
  std::string from_dir = std::string(from) + "/";
  if (is_dir && to.substr(0, from_dir.size()) == from_dir) {
    return Status::InvalidArgument(Where(to) + ": cannot move a directory into itself");
  }
  if (is_dir) {
    for (const auto& [path, below] : files_.WithPrefix(from_dir)) {
      if (to.size() + path.size() - from.size() > kMaxPath) {
        return Status::Error(ENAMETOOLONG, Where(path) + ": path too long after rename");
      }
    }
  }
  auto dst = files_.find(to);
  if (dst != files_.end()) {
    bool dst_dir = S_ISDIR(dst->second->mode);
    if (is_dir && !dst_dir) return Status::Error(ENOTDIR, Where(to) + ": not a directory");
    if (!is_dir && dst_dir) return Status::Error(EISDIR, Where(to) + ": is a directory");
    if (dst_dir && files_.HasChildren(to)) {
      return Status::Error(ENOTEMPTY, Where(to) + ": directory not empty");
    }
    DropLinkLocked(dst);
  }
  files_.Move(from, to);
  return Status::OK();
}

Status Store::Impl::Mkdir(std::string_view path, mode_t mode) {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_RETURN_IF_ERROR(CheckPath(path));
  if (!owner_) return Status::Error(EROFS, Where(path) + ": store attached read-only");
  if (files_.contains(path)) return Status::Error(EEXIST, Where(path) + ": exists");
  if (files_.size() >= geo_.max_files) {
    return FileTableFullLocked(path);
  }
  files_.Insert(files_.NewNode(path, S_IFDIR | (mode & 07777), env_->WallNanos()));
  return Status::OK();
}

Status Store::Impl::Rmdir(std::string_view path) {
  std::lock_guard<std::mutex> lock(mu_);
  DLCKPT_RETURN_IF_ERROR(CheckPath(path));
  if (!owner_) return Status::Error(EROFS, Where(path) + ": store attached read-only");
  auto it = files_.find(path);
  if (it == files_.end()) return Status::NotFound(Where(path) + ": no such directory");
  if (!S_ISDIR(it->second->mode)) return Status::Error(ENOTDIR, Where(path) + ": not a directory");
  if (files_.HasChildren(path)) return Status::Error(ENOTEMPTY, Where(path) + ": not empty");
  DropLinkLocked(it);
  ForgetLostCreateLocked(path);
  return Status::OK();
}

Result<std::vector<FileInfo>> Store::Impl::List(std::string_view prefix) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<FileInfo> out;
  for (const auto& [path, node] : files_.WithPrefix(prefix)) out.push_back(InfoLocked(*node));
  return out;
}

// ---- helpers --------------------------------------------------------------------

std::string Store::Impl::Where(std::string_view path) const {
  return "store " + name() + ": " + std::string(path);
}

Status Store::Impl::FileTableFullLocked(std::string_view path) const {
  return Status::NoSpace(Where(path) + ": file table full: " + std::to_string(files_.size()) +
                         " files and directories (max_files " + std::to_string(geo_.max_files) +
                         "); create the store with more: DLCKPT_MAX_FILES (preload, wrappers), "
                         "dlckpt-fuse/dlckpt-store --max-files, or a larger capacity (default " +
                         "one entry per 32 KiB)");
}

std::string Store::Impl::Where(int fd) const {
  return "store " + name() + ": fd " + std::to_string(fd);
}

Status Store::Impl::CheckPath(std::string_view path) const {
  if (path.empty()) return Status::NotFound("store " + name() + ": empty path");
  if (path.size() > kMaxPath) {
    return Status::Error(ENAMETOOLONG, "store " + name() + ": path of " +
                                           std::to_string(path.size()) +
                                           " bytes exceeds " + std::to_string(kMaxPath));
  }
  if (path.find('\0') != std::string_view::npos) {
    return Status::InvalidArgument("store " + name() + ": path contains NUL");
  }
  return Status::OK();
}

Status Store::Impl::RequireOwner(const char* what) const {
  if (owner_) return Status::OK();
  return Status::Error(EROFS, "store " + name() + ": " + what + " needs the owner attachment");
}

// The regular file at `path`, for the owner to change: EROFS for a read-only
// attacher, ENOENT if there is none, EISDIR for a directory.
Result<FileTable::iterator> Store::Impl::FileToChangeLocked(std::string_view path) {
  DLCKPT_RETURN_IF_ERROR(CheckPath(path));
  if (!owner_) return Status::Error(EROFS, Where(path) + ": store attached read-only");
  auto it = files_.find(path);
  if (it == files_.end()) return Status::NotFound(Where(path) + ": no such file");
  if (S_ISDIR(it->second->mode)) return Status::Error(EISDIR, Where(path) + ": is a directory");
  return it;
}

int Store::Impl::FreeHandleLocked() {
  for (size_t i = 0; i < handles_.size(); ++i) {
    if (!handles_[i].node) return static_cast<int>(i);
  }
  if (handles_.size() >= max_open_) return -1;
  handles_.emplace_back();
  return static_cast<int>(handles_.size() - 1);
}

Result<Store::Impl::Handle*> Store::Impl::GetHandle(int fd) {
  if (fd < 0 || static_cast<size_t>(fd) >= handles_.size() || !handles_[fd].node) {
    return Status::Error(EBADF, Where(fd) + ": bad file descriptor");
  }
  return &handles_[fd];
}

FileInfo Store::Impl::InfoLocked(const Node& n) const {
  FileInfo fi;
  fi.path = n.path;
  fi.size = n.size;
  fi.mode = n.mode;
  fi.mtime_ns = n.mtime_ns;
  fi.ino = n.ino;
  fi.crc32c = n.crc_valid ? n.crc : 0;
  fi.damage = n.damage.err;
  fi.blocks = static_cast<uint64_t>(n.blocks.size()) -
              static_cast<uint64_t>(std::count(n.blocks.begin(), n.blocks.end(), kNoBlock));
  return fi;
}

void Store::Impl::DropLinkLocked(FileTable::iterator it) {
  NodePtr node = files_.Erase(it);
  node->linked = false;
  if (node->open_count == 0) ReleaseNodeLocked(*node);
}

void Store::Impl::ReleaseNodeLocked(Node& node) {
  DropShadowLocked(node);
  for (uint32_t b : node.blocks) {
    if (b != kNoBlock) blocks_.Release(b);
  }
  node.blocks.clear();
  node.chunks.clear();
  node.block_crcs.clear();
  node.size = 0;
}

}  // namespace dlckpt::memfs

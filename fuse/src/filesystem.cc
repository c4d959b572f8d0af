// The low-level FUSE operations of dlckpt-fuse: see filesystem.h.
#include "filesystem.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <ctime>
#include <map>
#include <new>

namespace dlckpt::fusefs {
namespace {

// Entry and attribute validity. Only this mount changes the store (it holds
// the owner lock), so the kernel's caches stay right for long.
constexpr double kTimeout = 60.0;
constexpr uint32_t kMaxWrite = 1u << 20;   // bytes per WRITE request
constexpr blksize_t kIoSize = kMaxWrite;  // st_blksize: stdio buffers, cp's chunks

// The control directory and its files live outside the store's node ids
// (store node ids are memfs inode numbers + 1, far below 2^63).
constexpr fuse_ino_t kControlBase = fuse_ino_t{1} << 63;
constexpr fuse_ino_t kControlDirId = kControlBase | 1;
constexpr fuse_ino_t kCheckpointId = kControlBase | 2;
constexpr fuse_ino_t kStatusId = kControlBase | 3;
constexpr fuse_ino_t kEpochId = kControlBase | 4;

timespec ToTimespec(int64_t ns) {
  timespec t{};
  t.tv_sec = static_cast<time_t>(ns / 1000000000);
  t.tv_nsec = static_cast<long>(ns % 1000000000);
  return t;
}

timespec Now() {
  timespec t{};
  clock_gettime(CLOCK_REALTIME, &t);
  return t;
}

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

struct Filesystem::DirHandle {
  struct Entry {
    std::string name;
    fuse_ino_t ino;
    mode_t mode;
  };
  std::vector<Entry> entries;
};

struct Filesystem::ControlHandle {
  fuse_ino_t ino;
  std::string text;  // what reads return: the status, or the last trigger's result
};

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

// ---- control files ----------------------------------------------------------------

bool Filesystem::IsControl(fuse_ino_t ino) const { return (ino & kControlBase) != 0; }

bool Filesystem::IsReserved(fuse_ino_t parent, const char* name) const {
  return IsControl(parent) || (parent == kRootId && std::strcmp(name, kControlDir) == 0);
}

struct stat Filesystem::ControlAttr(fuse_ino_t ino) const {
  struct stat st {};
  st.st_ino = ino;
  st.st_nlink = 1;
  st.st_uid = uid_;
  st.st_gid = gid_;
  st.st_blksize = 4096;
  st.st_atim = st.st_mtim = st.st_ctim = ToTimespec(mount_time_ns_);
  if (ino == kControlDirId) {
    st.st_mode = S_IFDIR | 0555;
  } else if (ino == kCheckpointId || ino == kEpochId) {
    st.st_mode = S_IFREG | 0600;
  } else {
    st.st_mode = S_IFREG | 0444;
  }
  return st;
}

void Filesystem::ReplyControlEntry(fuse_req_t req, fuse_ino_t ino) {
  fuse_entry_param e{};
  e.ino = ino;
  e.attr = ControlAttr(ino);
  e.attr_timeout = kTimeout;
  e.entry_timeout = kTimeout;
  fuse_reply_entry(req, &e);  // fixed nodes: lookups are not counted
}

void Filesystem::ControlOpen(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  if (ino == kControlDirId) {
    fuse_reply_err(req, EISDIR);
    return;
  }
  if (ino == kStatusId && (fi->flags & O_ACCMODE) != O_RDONLY) {
    fuse_reply_err(req, EACCES);
    return;
  }
  auto handle = std::make_unique<ControlHandle>(ControlHandle{ino, ""});
  if (ino == kStatusId) handle->text = StatusText();
  fi->fh = reinterpret_cast<uint64_t>(handle.get());
  fi->direct_io = 1;  // every read and write reaches us, bypassing the page cache
  if (fuse_reply_open(req, fi) == 0) handle.release();
}

void Filesystem::ControlWrite(fuse_req_t req, const char* buf, size_t size, fuse_file_info* fi) {
  auto* handle = reinterpret_cast<ControlHandle*>(fi->fh);
  std::string_view cmd(buf, size);
  while (!cmd.empty() && (cmd.back() == '\n' || cmd.back() == ' ' || cmd.back() == '\0')) {
    cmd.remove_suffix(1);
  }
  Result<uint64_t> epoch = Status::Error(EINVAL, "");
  if (handle->ino == kCheckpointId) {
    if (cmd == "1" || cmd == "checkpoint") {
      epoch = RunCheckpoint();
    } else {
      epoch = Status::InvalidArgument("store " + store_->name() + ": unknown command '" +
                                      std::string(cmd.substr(0, 64)) +
                                      "' (write \"1\" or \"checkpoint\" to trigger a checkpoint)");
    }
  } else if (handle->ino == kEpochId) {
    // "<verb> <epoch>". A file of its own: the kernel serialises writes to
    // one file, and a trigger of a coordinated mount waits in its write to
    // the checkpoint file until its coordinator's commands here are done.
    size_t space = cmd.find(' ');
    std::string_view verb = cmd.substr(0, space);
    uint64_t e = 0;
    bool number = false;
    if (space != std::string_view::npos) {
      std::string_view arg = cmd.substr(space + 1);
      auto [end, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), e);
      number = ec == std::errc() && end == arg.data() + arg.size() && !arg.empty() && e > 0;
    }
    if ((verb == "commit" || verb == "ack" || verb == "abort") && number) {
      epoch = EpochCommand(verb, e);
    } else {
      epoch = Status::InvalidArgument("store " + store_->name() + ": unknown epoch command '" +
                                      std::string(cmd.substr(0, 64)) +
                                      "' (want \"commit E\", \"ack E\" or \"abort E\", E > 0)");
    }
  } else {
    fuse_reply_err(req, EBADF);
    return;
  }
  if (epoch.ok()) {
    handle->text = "epoch " + std::to_string(*epoch) + "\n";
    fuse_reply_write(req, size);
  } else {
    handle->text = "error: " + epoch.status().ToString() + "\n";
    fuse_reply_err(req, epoch.status().code() > 0 ? epoch.status().code() : EIO);
  }
}

Result<uint64_t> Filesystem::RunCheckpoint() {
  std::unique_lock<std::mutex> running(checkpoint_mu_, std::try_to_lock);
  if (!running.owns_lock()) {
    return Status::Busy("store " + store_->name() + ": a checkpoint is already in progress");
  }
  Result<uint64_t> epoch = checkpointer_->Checkpoint(*store_);
  if (!epoch.ok()) {
    fuse_log(FUSE_LOG_ERR, "dlckpt-fuse: checkpoint failed: %s\n",
             epoch.status().ToString().c_str());
  }
  if (config_.checkpoint == CheckpointMode::kCoordinated) return epoch;
  std::lock_guard<std::mutex> lock(status_mu_);
  if (epoch.ok()) {
    checkpoints_++;
    last_checkpoint_ = "epoch " + std::to_string(*epoch);
  } else {
    failed_checkpoints_++;
    last_checkpoint_ = "error: " + epoch.status().ToString();
  }
  return epoch;
}

Result<uint64_t> Filesystem::EpochCommand(std::string_view verb, uint64_t epoch) {
  const std::string what = "store " + store_->name() + ": " + std::string(verb) + " " +
                           std::to_string(epoch);
  if (config_.checkpoint != CheckpointMode::kCoordinated) {
    return Status::Error(EPERM, what + ": refused: this mount checkpoints locally (start "
                                       "dlckpt-fuse with --checkpoint coordinated for job-wide "
                                       "checkpoints)");
  }
  std::lock_guard<std::mutex> serial(epoch_mu_);
  memfs::EpochState ep = store_->epochs();
  auto state = [&] {
    return " (acknowledged " + std::to_string(ep.acknowledged) + ", pending " +
           std::to_string(ep.pending) + ")";
  };
  Status s;
  if (verb == "commit") {
    auto committed = store_->Commit(epoch);
    s = committed.status();
    if (s.ok() && *committed != epoch) {
      s = Status::Error(EPROTO, what + ": the store committed epoch " + std::to_string(*committed));
    }
  } else if (verb == "ack") {
    if (ep.pending == epoch) {
      s = store_->Acknowledge(epoch);
      if (s.ok()) {
        std::lock_guard<std::mutex> lock(status_mu_);
        checkpoints_++;
        last_checkpoint_ = "epoch " + std::to_string(epoch);
      }
    } else if (ep.acknowledged != epoch) {
      s = Status::InvalidArgument(what + ": the epoch is not pending" + state());
    }
  } else {  // abort
    if (ep.pending == epoch) {
      s = store_->AbortPending();
      if (s.ok()) {
        std::lock_guard<std::mutex> lock(status_mu_);
        failed_checkpoints_++;
        last_checkpoint_ = "error: epoch " + std::to_string(epoch) + " aborted";
      }
    } else if (ep.pending != 0 || ep.acknowledged == epoch) {
      s = Status::InvalidArgument(what + ": the epoch is not pending" + state());
    }
  }
  if (!s.ok()) {
    if (s.message().find(store_->name()) == std::string::npos) s = s.Prefixed(what);
    fuse_log(FUSE_LOG_ERR, "dlckpt-fuse: %s\n", s.ToString().c_str());
    return s;
  }
  if (config_.debug) fuse_log(FUSE_LOG_DEBUG, "dlckpt-fuse: %s: done\n", what.c_str());
  return epoch;
}

std::string Filesystem::StatusText() {
  memfs::StoreStats st = store_->stats();
  memfs::EpochState ep = store_->epochs();
  auto files = store_->List("");
  std::string last;
  uint64_t ok_count, failed_count;
  {
    std::lock_guard<std::mutex> lock(status_mu_);
    last = last_checkpoint_;
    ok_count = checkpoints_;
    failed_count = failed_checkpoints_;
  }
  char buf[4096];
  std::snprintf(buf, sizeof buf,
                "store: %s\n"
                "pid: %d\n"
                "job: %s\nnode: %s\nrank: %d\n"
                "acknowledged_epoch: %" PRIu64 "\n"
                "pending_epoch: %" PRIu64 "\n"
                "next_epoch: %" PRIu64 "\n"
                "checkpoint_mode: %s\n"
                "checkpoints: %" PRIu64 "\n"
                "failed_checkpoints: %" PRIu64 "\n"
                "last_checkpoint: %s\n"
                "capacity: %" PRIu64 "\n"
                "block_size: %" PRIu64 "\n"
                "blocks_total: %" PRIu64 "\n"
                "blocks_free: %" PRIu64 "\n"
                "files: %zu\n"
                "max_files: %u\n",
                store_->name().c_str(), static_cast<int>(getpid()), st.job.c_str(), st.node.c_str(), st.rank, ep.acknowledged,
                ep.pending, ep.next,
                config_.checkpoint == CheckpointMode::kCoordinated ? "coordinated" : "local", ok_count, failed_count, last.c_str(), st.capacity, st.block_size,
                st.blocks_total, st.blocks_free, files.ok() ? files->size() : size_t{0},
                st.max_files);
  return buf;
}

// ---- operations ----------------------------------------------------------------------

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

void Filesystem::Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  if (parent == kRootId && std::strcmp(name, kControlDir) == 0) {
    ReplyControlEntry(req, kControlDirId);
    return;
  }
  if (parent == kControlDirId) {
    if (std::strcmp(name, kCheckpointFile) == 0) {
      ReplyControlEntry(req, kCheckpointId);
    } else if (std::strcmp(name, kStatusFile) == 0) {
      ReplyControlEntry(req, kStatusId);
    } else if (std::strcmp(name, kEpochFile) == 0) {
      ReplyControlEntry(req, kEpochId);
    } else {
      fuse_reply_err(req, ENOENT);
    }
    return;
  }
  if (IsControl(parent)) {
    fuse_reply_err(req, ENOTDIR);
    return;
  }
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
  if (IsReserved(parent, name)) {
    fuse_reply_err(req, IsControl(parent) ? EPERM : EEXIST);
    return;
  }
  if (!S_ISREG(mode)) {  // FIFOs, sockets and devices cannot live in a store
    fuse_reply_err(req, EPERM);
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto path = ChildPathLocked(parent, name);
  if (!path.ok()) return ReplyError(req, path.status());
  auto fd = store_->Open(*path, O_RDWR | O_CREAT | O_EXCL, mode & 07777);
  if (!fd.ok()) return ReplyError(req, fd.status());
  auto info = store_->Fstat(*fd);
  (void)store_->Close(*fd);
  if (!info.ok()) return ReplyError(req, info.status());
  ReplyEntryLocked(req, *info);
}

void Filesystem::Mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  if (IsReserved(parent, name)) {
    fuse_reply_err(req, IsControl(parent) ? EPERM : EEXIST);
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto path = ChildPathLocked(parent, name);
  if (!path.ok()) return ReplyError(req, path.status());
  Status s = store_->Mkdir(*path, mode & 07777);
  if (!s.ok()) return ReplyError(req, s);
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
  if (IsReserved(parent, name)) {
    fuse_reply_err(req, IsControl(parent) ? EPERM : EEXIST);
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto path = ChildPathLocked(parent, name);
  if (!path.ok()) return ReplyError(req, path.status());
  auto fd = store_->Open(*path, StoreFlags(fi->flags) | O_CREAT, mode & 07777);
  if (!fd.ok()) return ReplyError(req, fd.status());
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

// The control directory .dlckpt of a mount and its files (checkpoint,
// status, epoch; see dlckpt/fuse/mount.h), served beside the store's nodes.
//
// Operations: ControlLookup (lookups under the root's .dlckpt), ControlAttr
// and ReplyControlEntry (fixed nodes: lookups are not counted, forget ignores
// them), ControlOpen (a ControlHandle per open; direct I/O) and ControlWrite
// (a checkpoint trigger or an epoch command), and the checkpoint and epoch
// machinery behind them with the status text. Reads and releases of control
// files are answered in filesystem_io.cc, their directory in Opendir.
//
// Locking (filesystem.h): nothing here takes mu_. RunCheckpoint holds
// checkpoint_mu_ (try-lock: a second trigger fails with EBUSY instead of
// waiting), EpochCommand holds epoch_mu_, and status_mu_ is taken briefly and
// innermost for the counters. Failure: every path ends in exactly one
// fuse_reply_*; a failed trigger or command answers its errno and leaves
// "error: ..." as the text that reads of that handle return.
#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "filesystem.h"
#include "filesystem_internal.h"

namespace dlckpt::fusefs {

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

void Filesystem::ControlLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
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
  fuse_reply_err(req, ENOTDIR);  // any other control node is a file
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

}  // namespace dlckpt::fusefs

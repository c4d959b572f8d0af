// fault_env.cc — see dlckpt/base/fault_env.h.
#include "dlckpt/base/fault_env.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

namespace dlckpt::testing {

const char* FaultEnv::Name(Fault f) {
  switch (f) {
    case Fault::kNone: return "none";
    case Fault::kNoSpace: return "ENOSPC";
    case Fault::kShortWrite: return "short write";
    case Fault::kIO: return "EIO";
    case Fault::kSyncFails: return "failed fsync";
    case Fault::kRenameFails: return "failed rename";
    case Fault::kCrash: return "crash";
  }
  return "?";
}

void FaultEnv::Arm(Fault f, int n) {
  fault_ = f;
  target_ = n;
  applicable_ = 0;
  fired_ = crashed_ = short_pending_ = false;
  synced_.clear();
  dirty_.clear();
  fresh_.clear();
}

Status FaultEnv::Step(Kind kind, const std::string& what) {
  if (crashed_) return Status::Error(EIO, "crashed before " + what);
  if (short_pending_ && kind == Kind::kWrite) {
    short_pending_ = false;
    return Status::Error(ENOSPC, "injected ENOSPC after a short write: " + what);
  }
  bool applies = false;
  switch (fault_) {
    case Fault::kNone: break;
    case Fault::kNoSpace:
    case Fault::kShortWrite: applies = kind == Kind::kWrite; break;
    case Fault::kSyncFails: applies = kind == Kind::kSync; break;
    case Fault::kRenameFails: applies = kind == Kind::kRename; break;
    case Fault::kIO:
    case Fault::kCrash: applies = true; break;
  }
  if (!applies || fired_) return Status::OK();
  if (applicable_++ != target_) return Status::OK();
  fired_ = true;
  switch (fault_) {
    case Fault::kNoSpace: return Status::Error(ENOSPC, "injected ENOSPC: " + what);
    case Fault::kShortWrite: short_pending_ = true; return Status::OK();  // Write() halves it
    case Fault::kCrash: crashed_ = true; return Status::Error(EIO, "injected crash at " + what);
    default: return Status::Error(EIO, std::string("injected ") + Name(fault_) + ": " + what);
  }
}

void FaultEnv::Created(const File& dir, const std::string& name) { fresh_[dir.path()].insert(name); }

Result<File> FaultEnv::OpenDir(const std::string& path) {
  DLCKPT_RETURN_IF_ERROR(Step(Kind::kOther, "open directory " + path));
  return base_->OpenDir(path);
}

Result<File> FaultEnv::OpenDirAt(const File& dir, const std::string& name, bool create, mode_t mode) {
  DLCKPT_RETURN_IF_ERROR(Step(Kind::kOther, "open directory " + dir.Child(name)));
  const bool existed = base_->StatAt(dir, name).ok();
  auto r = base_->OpenDirAt(dir, name, create, mode);
  if (r.ok() && !existed) Created(dir, name);
  return r;
}

Result<File> FaultEnv::OpenAt(const File& dir, const std::string& name, int flags, mode_t mode) {
  DLCKPT_RETURN_IF_ERROR(Step(Kind::kOther, "open " + dir.Child(name)));
  const bool existed = base_->StatAt(dir, name).ok();
  auto r = base_->OpenAt(dir, name, flags, mode);
  if (r.ok() && (flags & O_ACCMODE) != O_RDONLY) {
    if (!existed) Created(dir, name);
    struct stat st;
    const bool trunc = (flags & O_TRUNC) != 0 || !existed;
    synced_[r->path()] = trunc || ::fstat(r->fd(), &st) != 0 ? 0 : st.st_size;
    if (trunc) dirty_.insert(r->path());
  }
  return r;
}

Result<size_t> FaultEnv::Write(const File& f, const void* data, size_t len) {
  DLCKPT_RETURN_IF_ERROR(Step(Kind::kWrite, "write " + f.path()));
  if (short_pending_ && len > 1) len /= 2;
  dirty_.insert(f.path());
  return base_->Write(f, data, len);
}

Result<size_t> FaultEnv::Read(const File& f, void* buf, size_t len) {
  DLCKPT_RETURN_IF_ERROR(Step(Kind::kOther, "read " + f.path()));
  return base_->Read(f, buf, len);
}

Status FaultEnv::Sync(const File& f) {
  DLCKPT_RETURN_IF_ERROR(Step(Kind::kSync, "fsync " + f.path()));
  DLCKPT_RETURN_IF_ERROR(base_->Sync(f));
  struct stat st;
  if (::fstat(f.fd(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      fresh_.erase(f.path());
    } else {
      synced_[f.path()] = st.st_size;
      dirty_.erase(f.path());
    }
  }
  return Status::OK();
}

Status FaultEnv::Close(File& f) {
  DLCKPT_RETURN_IF_ERROR(Step(Kind::kOther, "close " + f.path()));
  return base_->Close(f);
}

Status FaultEnv::RenameAt(const File& dir, const std::string& from, const std::string& to) {
  DLCKPT_RETURN_IF_ERROR(Step(Kind::kRename, "rename " + dir.Child(from)));
  DLCKPT_RETURN_IF_ERROR(base_->RenameAt(dir, from, to));
  fresh_[dir.path()].erase(from);
  Created(dir, to);
  // The renamed file's durable bytes follow it.
  auto it = synced_.find(dir.Child(from));
  if (it != synced_.end()) {
    synced_[dir.Child(to)] = it->second;
    synced_.erase(it);
  }
  if (dirty_.erase(dir.Child(from)) != 0) dirty_.insert(dir.Child(to));
  return Status::OK();
}

Status FaultEnv::UnlinkAt(const File& dir, const std::string& name, bool directory) {
  DLCKPT_RETURN_IF_ERROR(Step(Kind::kOther, "remove " + dir.Child(name)));
  DLCKPT_RETURN_IF_ERROR(base_->UnlinkAt(dir, name, directory));
  fresh_[dir.path()].erase(name);
  return Status::OK();
}

Result<struct stat> FaultEnv::Stat(const File& f) {
  DLCKPT_RETURN_IF_ERROR(Step(Kind::kOther, "stat " + f.path()));
  return base_->Stat(f);
}

Result<struct stat> FaultEnv::StatAt(const File& dir, const std::string& name) {
  DLCKPT_RETURN_IF_ERROR(Step(Kind::kOther, "stat " + dir.Child(name)));
  return base_->StatAt(dir, name);
}

Result<std::vector<std::string>> FaultEnv::ListDir(const File& dir) {
  DLCKPT_RETURN_IF_ERROR(Step(Kind::kOther, "list " + dir.path()));
  return base_->ListDir(dir);
}

void FaultEnv::DropUnsynced() {
  for (const auto& path : dirty_) {
    auto it = synced_.find(path);
    (void)::truncate(path.c_str(), it == synced_.end() ? 0 : it->second);
  }
  for (const auto& [dir, names] : fresh_) {
    for (const auto& n : names) {
      std::error_code ec;
      std::filesystem::remove_all(dir + "/" + n, ec);
    }
  }
  dirty_.clear();
  fresh_.clear();
}

}  // namespace dlckpt::testing

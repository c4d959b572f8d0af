// The low-level FUSE operations of dlckpt-fuse over one memfs store.
//
// One Filesystem serves one session. Every operation ends in exactly one
// fuse_reply_*; errors are the store's errno values. Thread safety: the
// operations run on any number of libfuse worker threads. Lock order:
// mu_ (inode table, attribute overlay, and every store call that resolves a
// path) before the store's own mutex; checkpoint_mu_ (serialises checkpoint
// triggers) and epoch_mu_ (serialises the epoch commands of a coordinated
// mount) are never held together with mu_; a trigger of a coordinated mount
// holds checkpoint_mu_ while its coordinator sends epoch commands, which take
// only epoch_mu_. Data operations (read, write, fsync) use store descriptors
// and take no lock here. A checkpoint trigger that finds one running fails
// with EBUSY instead of waiting.
//
// Attributes the store does not record (chmod, chown, atime/mtime set by
// utimens) are kept in an in-memory overlay for the life of the mount: they
// show in stat() but are not checkpoint data. A later write makes the store's
// mtime win again.
//
// The implementation is split by concern (each file states its contract):
// filesystem.cc (construction, the operations table, shared helpers),
// filesystem_entries.cc (lookup, attributes, namespace and directories),
// filesystem_io.cc (open, read, write, flush, release, fsync) and
// filesystem_control.cc (the control directory).
#ifndef DLCKPT_FUSE_FILESYSTEM_H_
#define DLCKPT_FUSE_FILESYSTEM_H_

#include <fuse_lowlevel.h>
#include <sys/stat.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "dlckpt/fuse/mount.h"
#include "dlckpt/memfs/memfs.h"
#include "inode_table.h"

namespace dlckpt::fusefs {

struct FsConfig {
  CacheMode cache = CacheMode::kAuto;
  bool debug = false;  // log every error with its message
  CheckpointMode checkpoint = CheckpointMode::kLocal;  // whether epoch commands are served
};

class Filesystem final {
 public:
  // `checkpointer` must outlive the object.
  Filesystem(Checkpointer* checkpointer, FsConfig config);
  Filesystem(const Filesystem&) = delete;
  Filesystem& operator=(const Filesystem&) = delete;

  // The operations table; userdata must be a Filesystem*.
  static const fuse_lowlevel_ops& Ops();

  // The store to serve (an owner attachment that outlives the session). Must
  // be set before the session is mounted, and only once.
  void SetStore(memfs::Store* store);

  // Adds a directory entry for every missing parent directory of a store
  // path (files written through the preload library have none), so every
  // file shows in the mount. Returns one message per path that still cannot
  // be shown (a parent that is a file, a path under the control directory).
  std::vector<std::string> MaterializeDirectories();

  // The operations (public for the trampolines in Ops()).
  void Init(fuse_conn_info* conn);
  void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name);
  void Forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
  void ForgetMulti(fuse_req_t req, size_t count, fuse_forget_data* forgets);
  void Getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void Setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int valid, fuse_file_info* fi);
  void Mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev);
  void Mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode);
  void Unlink(fuse_req_t req, fuse_ino_t parent, const char* name);
  void Rmdir(fuse_req_t req, fuse_ino_t parent, const char* name);
  void Symlink(fuse_req_t req, const char* link, fuse_ino_t parent, const char* name);
  void Rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent,
              const char* newname, unsigned int flags);
  void Link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname);
  void Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void Read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
  void Write(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off,
             fuse_file_info* fi);
  void Flush(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void Release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void Fsync(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi);
  void Opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void Readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
  void Releasedir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void Fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi);
  void Statfs(fuse_req_t req, fuse_ino_t ino);
  void Create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
              fuse_file_info* fi);

 private:
  // Attributes set through the mount that the store does not record.
  struct Overlay {
    std::optional<mode_t> perm;  // permission bits (07777)
    std::optional<uid_t> uid;
    std::optional<gid_t> gid;
    std::optional<timespec> atime;
    std::optional<timespec> mtime;
    int64_t mtime_base = 0;  // the store's mtime when mtime was set
    timespec ctime{};
  };
  struct DirHandle;
  struct ControlHandle;

  // Unlink (dir false) or Rmdir (dir true) of parent/name, answering `req`.
  void RemoveChild(fuse_req_t req, fuse_ino_t parent, const char* name, bool dir);
  // The store path of child `name` of directory node `parent`: ENOENT if the
  // node is unknown or unlinked, ENAMETOOLONG if too long.
  Result<std::string> ChildPathLocked(fuse_ino_t parent, const char* name);
  // The store entry behind node `ino` (by path, or by descriptor once
  // unlinked); ESTALE if the table disagrees with the store.
  Result<memfs::FileInfo> InfoLocked(fuse_ino_t ino, const fuse_file_info* fi);
  struct stat AttrLocked(const memfs::FileInfo& info, bool linked);
  struct stat RootAttrLocked();
  fuse_entry_param EntryLocked(const memfs::FileInfo& info);
  // Records the kernel reference of an entry reply; undone if the reply fails.
  void ReplyEntryLocked(fuse_req_t req, const memfs::FileInfo& info);
  // Forgets the overlay of a store inode that is `unlinked` once no open
  // descriptor can reach it any more.
  void DropOverlayIfGoneLocked(uint64_t store_ino, bool unlinked);
  void ReplyError(fuse_req_t req, const Status& status);
  int StoreFlags(int fuse_flags) const;
  // Whether an open with these flags bypasses the page cache.
  bool DirectIo(int fuse_flags) const;

  bool IsControl(fuse_ino_t ino) const;
  // A name that may not be created, removed or renamed (the control dir).
  bool IsReserved(fuse_ino_t parent, const char* name) const;
  // For Mknod, Mkdir and Create: if parent/name is reserved, answers `req`
  // (EPERM inside the control dir, EEXIST for the control dir itself) and
  // returns true.
  bool RefuseReservedName(fuse_req_t req, fuse_ino_t parent, const char* name);
  struct stat ControlAttr(fuse_ino_t ino) const;
  void ReplyControlEntry(fuse_req_t req, fuse_ino_t ino);
  // Lookup of a reserved name (IsReserved): the control dir and its files.
  void ControlLookup(fuse_req_t req, fuse_ino_t parent, const char* name);
  void ControlOpen(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void ControlWrite(fuse_req_t req, const char* buf, size_t size, fuse_file_info* fi);
  std::string StatusText();
  // Runs one checkpoint through the Checkpointer and records the outcome
  // (a local mount; a coordinated one records its epoch commands).
  Result<uint64_t> RunCheckpoint();
  // "commit E", "ack E", "abort E" of a coordinated mount (dlckpt/fuse/control.h).
  Result<uint64_t> EpochCommand(std::string_view verb, uint64_t epoch);

  memfs::Store* store_ = nullptr;
  uint64_t block_size_ = 4096;
  Checkpointer* const checkpointer_;
  const FsConfig config_;
  const uid_t uid_;
  const gid_t gid_;
  const int64_t mount_time_ns_;

  std::mutex mu_;  // before the store's mutex
  InodeTable inodes_;
  std::unordered_map<uint64_t, Overlay> overlay_;  // by store inode; 0 is the root

  std::mutex checkpoint_mu_;  // held while a checkpoint runs; never with mu_
  std::mutex epoch_mu_;       // held while an epoch command runs; never with mu_
  std::mutex status_mu_;      // the counters below; held briefly, innermost
  std::string last_checkpoint_ = "none";
  uint64_t checkpoints_ = 0;
  uint64_t failed_checkpoints_ = 0;
};

}  // namespace dlckpt::fusefs

#endif  // DLCKPT_FUSE_FILESYSTEM_H_

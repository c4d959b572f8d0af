// dlckpt/fuse/control.h — the control interface of a dlckpt-fuse mount, seen
// from outside the daemon: its status, its checkpoint trigger, the epoch
// commands of a job-wide checkpoint, and the coordinator socket that the
// trigger of a coordinated mount talks to. No MPI here (see fuse_job.h).
//
// Epoch commands, written to MOUNT/.dlckpt/epoch of a coordinated mount (one
// write each; reading the same open file then returns "epoch E\n" or
// "error: <message>\n"; the write fails with the errno). They have a file of
// their own because the kernel serialises writes to one file: a trigger of a
// coordinated mount waits in its write to .dlckpt/checkpoint while its
// coordinator sends these commands.
//   commit E  the working files become pending epoch E (memfs Commit(E)):
//             EBUSY while an epoch is pending, EINVAL unless E is newer than
//             every epoch the store has seen.
//   ack E     pending epoch E becomes the acknowledged one (only after the
//             codec encoded it). Repeating it once E is acknowledged is a
//             no-op; otherwise EINVAL unless E is pending.
//   abort E   drops pending epoch E (its encoding failed). A no-op when
//             nothing is pending and E is not acknowledged; EINVAL otherwise.
// The daemon executes them on its store: it stays the store's only owner.
// A pending epoch survives the coordinator: a later checkpoint-all completes
// it (see JobCheckpointer).
//
// Coordinator socket (a Unix stream socket; one request per connection):
//   trigger -> coordinator:  "checkpoint <store>\n"
//   coordinator -> trigger:  "epoch <E>\n" | "error <errno> <message>\n"
#ifndef DLCKPT_FUSE_CONTROL_H_
#define DLCKPT_FUSE_CONTROL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "dlckpt/base/status.h"

namespace dlckpt::fusefs {

// What MOUNT/.dlckpt/status says about the mount and its store.
struct MountState {
  std::string mount;
  std::string store;
  std::string job;
  std::string node;
  int rank = 0;
  int pid = 0;              // the daemon
  uint64_t acked = 0;       // acknowledged epoch, 0 = none
  uint64_t pending = 0;     // pending epoch, 0 = none
  uint64_t next = 1;        // the smallest epoch a commit may take
  bool coordinated = false;
};

// Parses the text of a status file (one "key: value" per line). EBADMSG
// naming `mount` when a required key is missing or malformed.
Result<MountState> ParseMountStatus(const std::string& mount, const std::string& text);

// A client of one mount's control files. Each call opens what it needs and
// closes it again. Errors name the mount: ENOENT/ENOTDIR "not a dlckpt-fuse
// mount", ENOTCONN "its daemon died". Not thread-safe.
class MountControl {
 public:
  explicit MountControl(std::string mount) : mount_(std::move(mount)) {}

  const std::string& mount() const { return mount_; }

  // syncfs(2) on the mount: data of files still open or mapped reaches the
  // store. An error here (a write error during writeback, e.g. ENOSPC) means
  // data written through the mount may be lost: the caller must not commit.
  Status Sync();
  Result<MountState> State();
  // The trigger: writes "checkpoint" (after Sync) and returns the epoch.
  Result<uint64_t> Trigger();
  // An epoch command ("commit", "ack" or "abort") for `epoch`; returns the
  // epoch the daemon answered.
  Result<uint64_t> Command(const std::string& verb, uint64_t epoch);

 private:
  Result<int> Open(const char* name, int flags);
  // Writes `command` to control file `file`; the daemon's answer.
  Result<uint64_t> Write(const char* file, const std::string& command);
  std::string mount_;
};

// ---- coordinator socket --------------------------------------------------------

// The trigger's side: connects to `socket_path`, asks for a checkpoint of
// `store`, and waits (without a time limit) for the answer.
Result<uint64_t> AskCoordinator(const std::string& socket_path, const std::string& store);

// The coordinator's side.
class CoordinatorSocket final {
 public:
  // Binds and listens on `path` (which must not exist); mode 0600.
  static Result<std::unique_ptr<CoordinatorSocket>> Listen(const std::string& path);
  ~CoordinatorSocket();  // closes and unlinks
  CoordinatorSocket(const CoordinatorSocket&) = delete;
  CoordinatorSocket& operator=(const CoordinatorSocket&) = delete;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

  // Accepts one connection (poll fd() first) and reads its request line,
  // waiting up to `timeout_ms`. Returns the connection's descriptor (owned
  // by the caller: pass it to Answer) and the store it names.
  Result<int> Accept(int timeout_ms, std::string* store);
  // Sends the answer and closes the connection.
  static void Answer(int conn, const Result<uint64_t>& result);

 private:
  CoordinatorSocket(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_;
  std::string path_;
};

}  // namespace dlckpt::fusefs

#endif  // DLCKPT_FUSE_CONTROL_H_

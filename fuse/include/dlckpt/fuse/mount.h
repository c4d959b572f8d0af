// dlckpt/fuse/mount.h — dlckpt-fuse: a FUSE3 mount whose files live in a
// memfs store, so unmodified programs (cp, dd, tar, fio, closed binaries)
// write checkpoints to memory. A checkpoint is triggered from outside the
// application through the mount's control files (see kControlDir).
//
// The mount serves one store. Its root is the store root "/": the file
// MOUNT/a/b is the store path "/a/b". The control directory MOUNT/.dlckpt
// exists only in the mount (never in the store, never listed by readdir):
//   .dlckpt/checkpoint  write "1" (or "checkpoint") to trigger a checkpoint
//                       through the Checkpointer; the write fails with the
//                       checkpoint's errno (e.g. EBUSY). Reading the same open
//                       file then returns "epoch N\n" or "error: <message>\n".
//   .dlckpt/epoch       the epoch commands of a job-wide checkpoint of a
//                       coordinated mount (CheckpointMode::kCoordinated):
//                       "commit E", "ack E", "abort E" (see
//                       dlckpt/fuse/control.h); a local mount refuses them.
//   .dlckpt/status      the store's identity, epochs, space and the last
//                       checkpoint, one "key: value" per line.
#ifndef DLCKPT_FUSE_MOUNT_H_
#define DLCKPT_FUSE_MOUNT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dlckpt/memfs/memfs.h"
#include "dlckpt/base/status.h"

namespace dlckpt::fusefs {

inline constexpr const char* kControlDir = ".dlckpt";
inline constexpr const char* kCheckpointFile = "checkpoint";
inline constexpr const char* kStatusFile = "status";
inline constexpr const char* kEpochFile = "epoch";

// What a checkpoint trigger (a write of "1" to .dlckpt/checkpoint) does. An
// implementation has the store's working files become a new acknowledged
// epoch (made redundant or not) and returns its number. On failure it leaves
// no pending epoch behind that it started (AbortPending) and returns an error
// naming the store and the cause.
//
// Called on a FUSE worker thread while the mount keeps serving other requests
// (unless the mount is single-threaded, -s); never concurrently with itself
// (the mount serialises triggers). It may block, e.g. while the codec encodes;
// the epoch commands of a coordinated mount are served meanwhile.
class Checkpointer {
 public:
  virtual ~Checkpointer() = default;
  virtual Result<uint64_t> Checkpoint(memfs::Store& store) = 0;
};

// Commit then Acknowledge at once: the epoch is committed locally with no
// redundancy. For a single node and for tests.
class LocalCheckpointer final : public Checkpointer {
 public:
  Result<uint64_t> Checkpoint(memfs::Store& store) override;
};

// Who decides the epochs of a mount's store.
enum class CheckpointMode {
  // The trigger commits and acknowledges at once (LocalCheckpointer); the
  // epoch commands are refused (EPERM).
  kLocal,
  // The store belongs to a job whose checkpoints are collective: a job
  // coordinator (dlckpt-ctl checkpoint-all or dlckpt-ctl run) commits,
  // acknowledges or aborts epochs with the epoch commands, after the codec
  // encoded them. The trigger never touches the store: it asks the
  // coordinator named by --coordinator (CoordinatedCheckpointer), or fails
  // with EPERM when there is none.
  kCoordinated,
};

// The trigger of a coordinated mount: sends the request to the coordinator's
// Unix socket (see fuse_control.h) and waits for its answer, which comes
// once every mount of the job asked and the job-wide checkpoint is over. It
// does not touch the store (the coordinator commits and acknowledges through
// the epoch commands). With an empty socket path every trigger fails with
// EPERM naming the tools that checkpoint such a mount. Thread-compatible
// (the mount serialises triggers).
class CoordinatedCheckpointer final : public Checkpointer {
 public:
  explicit CoordinatedCheckpointer(std::string coordinator) : coordinator_(std::move(coordinator)) {}
  Result<uint64_t> Checkpoint(memfs::Store& store) override;

 private:
  std::string coordinator_;
};

// How file data moves between the kernel and the store (-o cache=...). The
// writeback cache is negotiated in every mode; direct I/O is chosen per open.
enum class CacheMode {
  // Write-only opens that create or truncate the file (cp, dd, tar x, shell
  // >, fopen "w": a checkpoint written from start to end) bypass the page
  // cache: each write() reaches the store at once with one copy, and a full
  // store fails that write() with ENOSPC. The kernel then does not advance
  // mtime past the open (with the writeback cache it keeps its own). Other
  // opens use the page cache and the writeback cache (mmap works; a full
  // store shows as ENOSPC from fsync() and close()).
  kAuto,
  kWriteback,  // every open through the page cache and the writeback cache
  kDirect,     // every open bypasses the page cache (no shared writable mmap)
};

// The parsed command line of dlckpt-fuse.
struct MountOptions {
  std::string mountpoint;
  std::string store;  // the store's shared memory name ("/dlckpt.J.N.rR")
  bool store_named = false;  // --store given (else the name was made; it is printed)
  // Used when the store does not exist yet (capacity, block size, max files,
  // and the identity job/node/rank recorded in it).
  memfs::StoreOptions create;
  bool create_geometry_given = false;  // --capacity/--block-size/--max-files/--compress
  bool foreground = false;            // -f
  bool debug = false;                 // -d (implies -f)
  bool single_thread = false;         // -s
  CacheMode cache = CacheMode::kAuto;  // -o cache=auto|writeback|direct
  CheckpointMode checkpoint = CheckpointMode::kLocal;  // --checkpoint local|coordinated
  std::string coordinator;  // --coordinator SOCKET (implies kCoordinated)
  std::vector<std::string> fuse_options;  // other -o options, for libfuse
  bool help = false;
  bool version = false;
};

// Parses argv (argv[0] is the program name). Store selection: --store NAME or
// -o store=NAME; otherwise the name is made from --job (default $DLCKPT_JOB,
// else "local", as the preload library's), --node (default $DLCKPT_NODE, else the host name) and --rank
// (default $DLCKPT_RANK, else 0). `getenv` is injectable for tests.
// Errors (EINVAL) name the offending argument.
Result<MountOptions> ParseMountArgs(
    int argc, const char* const* argv,
    const std::function<const char*(const char*)>& getenv_fn = nullptr);

// The Checkpointer for these options: LocalCheckpointer or
// CoordinatedCheckpointer(options.coordinator).
std::unique_ptr<Checkpointer> MakeCheckpointer(const MountOptions& options);

// The usage text of dlckpt-fuse.
std::string MountUsage();
// Prints the usage text and libfuse's mount options to standard output.
void PrintMountHelp();
// "dlckpt-fuse <version> (libfuse <version>)".
std::string VersionString();

// The file system type ("fuse.dlckpt", "tmpfs"; "" if the entry has none)
// of the mount on `real_path`, an absolute path without symbolic links (as
// realpath gives it), from the first entry of /proc/self/mountinfo whose
// mount point (octal escapes such as \040 undone) is that path; nullopt when
// nothing is mounted there or mountinfo cannot be read.
std::optional<std::string> MountedType(const std::string& real_path);

// Refuses a mount point that is missing, not a directory, or already a mount
// point (an error naming the path and the reason).
Status CheckMountPoint(const std::string& path);

// Creates the store (or attaches to it as owner if it exists), mounts it on
// options.mountpoint and serves it until unmounted (fusermount3 -u, umount)
// or until SIGTERM/SIGINT/SIGHUP, then unmounts and detaches (the store keeps
// its working files for the next owner). On an error before the mount is up
// nothing stays mounted and a store created by this call is removed again.
// Without -f the caller forks a daemon that serves: the caller returns once
// the mount is up (OK) or failed (the daemon's error); the daemon never
// returns from this call (it exits), and the caller is expected to exit too
// (it does not reap the daemon).
Status RunMount(const MountOptions& options, std::unique_ptr<Checkpointer> checkpointer);

}  // namespace dlckpt::fusefs

#endif  // DLCKPT_FUSE_MOUNT_H_

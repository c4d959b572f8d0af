// dlckpt/persist/persist.h — the second level: protected epochs drained from
// memfs stores to a persistent (parallel) file system, and read back.
//
// Layout under a persistence directory DIR (dlckpt-run --persist DIR):
//
//   DIR/<job>/epoch.<E>/r<rank>/<path>   one file per checkpoint file of rank
//                                        <rank>, <path> as the application
//                                        named it in its store (without "/")
//   DIR/<job>/epoch.<E>/rank.<r>.list    rank r's part of the manifest
//   DIR/<job>/epoch.<E>/MANIFEST         the whole manifest: the epoch is
//                                        complete if and only if this parses
//
// A manifest is text: a header line, one line per file ("file RANK SIZE CRC
// MODE PATH", CRC the CRC32C of the file's bytes as memfs computed it at
// commit) and a trailer with the line count and the CRC32C of every byte
// before it, so a torn or edited manifest reads as corrupt, never as a short
// epoch. Each rank writes and fsyncs its files, then its part (temporary
// name, fsync, rename, directory fsync); whichever rank finds every part
// present publishes MANIFEST the same way (two ranks doing it at once write
// the same bytes). A crash at any point leaves no epoch that looks complete.
//
// Trust: DIR may be writable by other users (/tmp, a group scratch). DIR/<job>
// and everything below it are created 0700 (files 0600) and used only if they
// are this uid's and not writable by group or others; a symbolic link below
// DIR is never followed (every step is descriptor-relative, O_NOFOLLOW). An
// entry that fails this is refused with EPERM (a link, another type or
// owner, writable by others; ELOOP for a linked file), saying which and
// why; a refused
// epoch is listed as such, never read, restored or removed. Every file read
// is opened without blocking (a FIFO is refused, not waited on), must be a
// regular file and is read with a bound: a data file's size is checked
// against the manifest before reading, a rank's part is at most what 2^20
// files need, the MANIFEST at most what its parts hold.
//
// All file access goes through a dlckpt::Env (Env::Default() unless given),
// so tests inject ENOSPC, EIO, short writes, failed fsyncs and renames, and
// crashes between any two steps.
//
// Thread safety: the functions share no state; two drains of one epoch and
// rank must not run at once. Errors: Status naming the path and errno;
// EBADMSG for a CRC mismatch or a malformed manifest (naming the file),
// ENOENT for a missing epoch, ECANCELED for a drain cancelled by its caller,
// EPERM / ELOOP for a refused entry.
#ifndef DLCKPT_PERSIST_PERSIST_H_
#define DLCKPT_PERSIST_PERSIST_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dlckpt/base/env.h"
#include "dlckpt/base/status.h"
#include "dlckpt/memfs/memfs.h"

namespace dlckpt::persist {

struct ManifestFile {
  int rank = 0;
  std::string path;  // as in the store, starting with '/'
  uint64_t size = 0;
  uint32_t crc32c = 0;
  uint32_t mode = 0;  // permission bits and S_IFREG or S_IFDIR
};

struct Manifest {
  std::string job;
  uint64_t epoch = 0;
  int ranks = 0;
  std::vector<ManifestFile> files;  // rank order, then path order
};

// "DIR/<job>" and "DIR/<job>/epoch.<E>".
std::string JobDir(const std::string& dir, const std::string& job);
std::string EpochDir(const std::string& job_dir, uint64_t epoch);
// Where the drained copy of rank's `path` lives under an epoch directory.
std::string DataPath(const std::string& epoch_dir, int rank, const std::string& path);

std::string FormatManifest(const Manifest& m);
// EBADMSG naming `what` (a path) for anything that does not parse.
Result<Manifest> ParseManifest(const std::string& text, const std::string& what);
Result<Manifest> ReadManifest(const std::string& epoch_dir, Env* env = nullptr);

// Creates DIR/<job> (`job_dir`) 0700 (and DIR, 0700, if missing), or checks
// an existing one: EPERM if it is a link, not a directory, another uid's or
// writable by group or others; the message names it and says why. Other
// errors (DIR cannot be made) are the file system's.
Status PrepareJobDir(const std::string& job_dir, Env* env = nullptr);

struct DrainOptions {
  double bandwidth = 0;  // bytes per second for this drain; 0: unlimited
  const std::atomic<bool>* cancel = nullptr;  // set: stop soon with ECANCELED
  size_t buffer = 4u << 20;  // at most this many bytes per write (read in place from a read-only view)
  // Fault injection for tests: seconds to wait after the data is durable and
  // before rank's part is published.
  double hold_before_publish = 0;
  // Called after every buffer written: bytes done and the epoch's total for this rank.
  std::function<void(uint64_t, uint64_t)> progress;
  Env* env = nullptr;  // nullptr: Env::Default()
};

struct DrainResult {
  uint64_t files = 0, bytes = 0;
  double seconds = 0;
  bool published = false;  // this call wrote MANIFEST (every rank's part was there)
};

// Copies every file of the committed epoch a read-only `view` shows (Store::
// View(epoch) done by the caller; the epoch's blocks must stay unchanged
// meanwhile: Store::Hold) to EpochDir(job_dir, epoch), checking each file's
// bytes against its CRC32C from the commit (EBADMSG naming store, rank and
// path if they differ), fsyncs them, publishes rank's part, and publishes
// MANIFEST when all `ranks` parts are there. A drain that fails leaves no part
// for `rank`, so the epoch stays incomplete.
Result<DrainResult> DrainRank(memfs::Store& view, const std::string& job_dir, const std::string& job,
                              uint64_t epoch, int rank, int ranks, const DrainOptions& options);

// kRefused: a link, another uid's or writable by others (never used).
enum class EpochState { kComplete, kIncomplete, kCorrupt, kRefused };
const char* EpochStateName(EpochState s);

struct DrainedEpoch {
  uint64_t epoch = 0;
  EpochState state = EpochState::kIncomplete;
  std::string dir;
  int ranks = 0;       // complete: from the manifest
  uint64_t files = 0, bytes = 0;
  // Complete: when the drain published MANIFEST (its modification time,
  // seconds since 1970), the epoch's time as a listing shows it.
  int64_t time = 0;
  std::string problem;  // incomplete / corrupt: why
};

// Every epoch.<E> directory under job_dir, newest first. ENOENT if job_dir
// does not exist. Does not read file data (see VerifyEpoch).
Result<std::vector<DrainedEpoch>> ListEpochs(const std::string& job_dir, Env* env = nullptr);

// Reads every file of a complete epoch and checks its size and CRC32C;
// EBADMSG naming the first file that differs. `progress` (optional) gets
// bytes done and total.
Status VerifyEpoch(const std::string& epoch_dir,
                   const std::function<void(uint64_t, uint64_t)>& progress = nullptr, Env* env = nullptr);

// The bytes of rank's drained file `path` (as in the manifest, starting with
// '/') of a complete epoch, checked as VerifyEpoch checks them (owner, size,
// CRC32C). ENOENT if the manifest lists no such file, EFBIG if it is larger
// than `max_bytes`; EBADMSG / EPERM as VerifyEpoch.
Result<std::string> ReadDrainedFile(const std::string& epoch_dir, int rank, const std::string& path,
                                    size_t max_bytes, Env* env = nullptr);

// The job directory a --restart-from DIR names: DIR itself if it holds
// epoch.* directories, else DIR/<job> if that exists, else the only job
// directory below DIR. ENOENT / EINVAL (several jobs) with the candidates.
Result<std::string> FindJobDir(const std::string& dir, const std::string& job);

// Writes rank's files of the manifest into `owner` (a store this process
// owns, holding no epoch yet), then commits and acknowledges the manifest's
// epoch and checks every file's CRC32C against the manifest (EBADMSG naming
// the drained file). The store is left as memfs left it on failure; callers
// remove it.
Status RestoreRank(const std::string& epoch_dir, const Manifest& m, int rank, memfs::Store& owner,
                   Env* env = nullptr);

// Removes all but the newest `keep` complete epochs, and every incomplete or
// corrupt one older than the newest complete one; never a refused one, never
// through a link. Returns what it removed.
Result<std::vector<uint64_t>> Prune(const std::string& job_dir, int keep, Env* env = nullptr);

}  // namespace dlckpt::persist

#endif  // DLCKPT_PERSIST_PERSIST_H_

// dlckpt/intercept/intercept.h — libintercept: an application's ordinary file I/O under
// /dlckpt (or the colon-separated prefixes in $DLCKPT_PREFIX) goes to this
// process's memfs store; every other path goes to the OS untouched.
//
// How calls get here: statically linked wrappers (link with the CMake
// function dlckpt_intercept(target), or with the flags file
// build/lib/dlckpt-intercept.flags) or LD_PRELOAD=libdlckpt_preload.so. See
// libintercept/README.md for the list of intercepted calls and what each mode
// cannot catch.
//
// The store. One per process, attached as owner on first use: the name is
// $DLCKPT_STORE if set, else StoreName(job, node, rank) (dlckpt/base/names.h)
// with job = $DLCKPT_JOB or "local", node = ThisNode() (dlckpt/base/node.h:
// $DLCKPT_NODE or the host name, by the one rule), rank = $DLCKPT_RANK, $PMI_RANK,
// $PMIX_RANK, $SLURM_PROCID, else 0. An existing store is attached (a
// relaunched rank finds its restored checkpoint); otherwise it is created
// with $DLCKPT_STORE_CAPACITY (default 256M), $DLCKPT_BLOCK_SIZE (default
// 64K), $DLCKPT_MAX_FILES (default memfs::DefaultMaxFiles of the capacity:
// 8192 for 256M), $DLCKPT_COMPRESS (none or lz4), $DLCKPT_COMPRESS_THRESHOLD and
// $DLCKPT_COMPRESS_CHUNK (see memfs.h) and the identity job/node/rank.
// Operations that only read (stat, statfs, open without O_CREAT, opendir)
// never create a store. Once attached, the store stays attached until exit,
// exec or DetachStore(), except that a process that has not opened a memfs
// file (nor called ProcessStore()) lets it go before fork, vfork,
// posix_spawn, system and popen, so that the commands a shell runs can own
// it. Configure() overrides the environment before first use.
// At exit the store is detached cleanly after every stdio stream (and, in
// both modes, libgfortran's units) has been flushed, so its working files
// remain for the next owner.
//
// Descriptors. A memfs file's descriptor is a reserved real descriptor (an
// O_PATH placeholder), so numbers never collide with the OS's and an I/O call
// that escapes interception fails with EBADF instead of touching a disk file.
// dup/dup2/dup3/fcntl(F_DUPFD*) share one memfs open file (one offset);
// close-on-exec is honoured; after exec the descriptor is a dead
// placeholder. In a child made by fork() (without exec) memfs is cut off: the
// inherited memfs descriptors fail with EBADF and new prefix paths with
// EBUSY while the parent owns the store, so the child can never corrupt it.
//
// Thread safety: every function here and every intercepted call is
// thread-safe. Functions returning Status never throw.
#ifndef DLCKPT_INTERCEPT_INTERCEPT_H_
#define DLCKPT_INTERCEPT_INTERCEPT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dlckpt/memfs/memfs.h"
#include "dlckpt/base/status.h"

// Exported from libdlckpt_preload.so (the library is built with hidden
// visibility otherwise).
#define DLCKPT_INTERCEPT_API __attribute__((visibility("default")))

// The original design's switch (thesis §4.5.2): while non-zero, every
// path-based call (open, fopen, stat, unlink, mkdir, ...) goes to memfs
// whatever the path (relative paths are made absolute against the working
// directory; /proc, /sys and /dev excepted). Descriptors keep the storage
// they were opened on. Default 0.
extern "C" DLCKPT_INTERCEPT_API int dlckpt_enabled;

namespace dlckpt::intercept {

// Explicit settings; empty / zero / negative fields fall back to the
// environment as described above.
struct StoreConfig {
  std::string store_name;  // a full name ("/dlckpt.job.node.r0"): overrides job/node/rank
  std::string job;
  std::string node;
  int rank = -1;
  uint64_t capacity = 0;    // bytes; used only when the store is created
  uint32_t block_size = 0;  // bytes; used only when the store is created
  // Files and directories the store's table holds (used only when the store
  // is created): 0 = $DLCKPT_MAX_FILES, else memfs::DefaultMaxFiles(capacity).
  uint32_t max_files = 0;
  // Compression of a store this process creates: "" = $DLCKPT_COMPRESS, else
  // "none" or "lz4"; threshold < 0 and chunk_size 0 = their environment
  // variables (memfs.h, "Compression"). Ignored for an existing store.
  std::string compress;
  double compress_threshold = -1;
  uint32_t compress_chunk_size = 0;
};

// Sets the configuration for the store this process attaches next. If a store
// is already attached under a different name: EBUSY (DetachStore first). The
// same name as the attached store: OK, nothing changes.
DLCKPT_INTERCEPT_API Status Configure(const StoreConfig& config);

// The name the process store has (or will have) under the current settings.
DLCKPT_INTERCEPT_API Result<std::string> ProcessStoreName();

// The process store, attached or created on first call. The pointer stays
// valid until DetachStore() or process exit. Use it for Commit, Acknowledge,
// GetImage, ...: it is the same Store object the intercepted calls use.
DLCKPT_INTERCEPT_API Result<memfs::Store*> ProcessStore();

// Store::Rollback / Store::Restore(epoch) on the process store, atomically
// with invalidating every memfs descriptor and stream opened before (their
// handles were closed by memfs): afterwards they fail with EBADF and close()
// on them succeeds. Prefer these to calling Rollback/Restore directly.
DLCKPT_INTERCEPT_API Status RollbackStore();
DLCKPT_INTERCEPT_API Status RestoreStore(uint64_t epoch);

// For a Rollback/Restore done directly on ProcessStore(): marks every memfs
// descriptor opened before as stale (EBADF). Racy against other threads doing
// I/O at the same moment; RollbackStore/RestoreStore are not.
DLCKPT_INTERCEPT_API void InvalidateDescriptors();

// Flushes every stdio stream (fflush(NULL)), so buffered checkpoint data
// written with fprintf/fwrite reaches memfs. Call before Commit. (C++
// ofstream and Fortran units buffer on their own: flush or close them.)
DLCKPT_INTERCEPT_API Status FlushStreams();

// Flushes streams, invalidates every memfs descriptor and destroys the Store
// object (an owner keeps its working files). The next memfs access attaches
// again, with the configuration at that time, and the process is no longer
// pinned to the store (see "The store" above) until it opens a file again.
DLCKPT_INTERCEPT_API Status DetachStore();

// Calls `hook` once, on the first write to a memfs file after this call (the
// application started writing its next checkpoint; dlckpt-run's phase:write
// failure injection uses it). A later call replaces a hook not yet run. The
// hook runs on the writing thread before the write, outside every lock, and
// must not do file I/O under the prefix. nullptr disarms.
DLCKPT_INTERCEPT_API void ArmWriteHook(void (*hook)());

// True if `path` (absolute, or relative to the working directory) is served by
// memfs under the current prefixes and dlckpt_enabled.
DLCKPT_INTERCEPT_API bool RoutesToMemfs(std::string_view path);

// The prefixes in force ($DLCKPT_PREFIX, default "/dlckpt"), normalised.
DLCKPT_INTERCEPT_API std::vector<std::string> Prefixes();

}  // namespace dlckpt::intercept

#endif  // DLCKPT_INTERCEPT_INTERCEPT_H_

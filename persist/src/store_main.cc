// dlckpt-store: look into (and, for tests and scripts, fill) memfs stores,
// and the epochs drained from them to a persistence directory. The tool is
// built here, where both levels are visible: memfs's first-level commands
// and command line (dlckpt/memfs/store_tool.h), persist's second-level
// commands (store_commands.h), and the usage text of the whole tool.
#include <string_view>

#include "dlckpt/base/version.h"
#include "dlckpt/memfs/store_tool.h"
#include "store_commands.h"

namespace {

constexpr std::string_view kUsage = R"(usage: dlckpt-store COMMAND [OPTIONS] [ARGS]

Inspect memfs stores (POSIX shared memory objects /dev/shm/dlckpt.*).
STORE is a store name such as /dlckpt.JOB.NODE.rRANK (the leading '/' may be
omitted).

commands:
  list [PREFIX]           stores on this node (name, job, node, rank, epochs)
  ls STORE [PREFIX]       files of the newest committed epoch (or --epoch E)
  cat STORE PATH          write a file's bytes to standard output; committed
                          bytes are checked against their CRC first (exit 1,
                          nothing printed, on a mismatch)
  stat STORE [PATH]       the store's geometry and epochs, or one file's metadata
  verify STORE            recompute the CRC32C of every file of every committed
                          epoch; exit 1 on a mismatch
  rm STORE [PATH]         remove the whole store, or one file of its working set
  rm --job JOB [--node N] remove every store and parity object of job JOB (on
                          node N) from this node, printing each name

  drained DIR             epochs drained to a persistence directory (dlckpt-run
                          --persist DIR: DIR, DIR/<job> or DIR/<job>/epoch.E),
                          newest first, with their state: complete,
                          incomplete (a drain that did not finish), corrupt,
                          or refused (a link, another user's, or writable by
                          others: never used); for a complete one its time
                          (when drained) and the application's checkpoint
                          name where the SCR layer gave one (as scr_index
                          --list shows)
  verify-drained DIR      read every file of the epoch a restart would use
                          (the newest complete one that verifies; or --epoch
                          E) and check its size and CRC32C against the
                          manifest; says which newer epochs it skipped and
                          why, and exits 1 if one is corrupt or refused, or
                          naming the first bad file
  drain DIR --job J --ranks N
                          copy every store of job J on this node (--node N,
                          default $DLCKPT_NODE or the host name) at the epoch
                          they hold acknowledged (or --epoch E) to
                          DIR/J/epoch.E, as dlckpt-run --persist does; the
                          call that completes the N ranks' parts publishes the
                          MANIFEST (dlckpt-run runs it on every node when it
                          halts a job; --bandwidth R caps it per node)

ls, cat and stat also check the metadata of every version the store holds;
a damaged one is reported on standard error and the exit status is 1.
  create STORE            create an empty store (--capacity, --block-size,
                          --max-files, --job, --node, --rank, --compress,
                          --threshold, --chunk-size)
  put STORE PATH [FILE]   write FILE (default: standard input) as PATH
  commit STORE            commit the working files as a new epoch and
                          acknowledge it (--no-ack leaves it pending)

options:
  --epoch E       the committed epoch to look at (ls, cat, stat), or the
                  drained one (drained, verify-drained)
  --capacity N    data capacity for create (default 256M; K/M/G suffixes)
  --block-size N  block size for create (default 64K)
  --max-files N   file table size for create (default: one per 32 KiB of
                  capacity, at least 1024: 8192 for 256M)
  --compress C    none (default) or lz4: compress file data chunk by chunk
  --threshold T   lz4: keep a chunk compressed only if it fills at most T of
                  its raw blocks (default 0.875)
  --chunk-size N  lz4: bytes per chunk (default 16 blocks)
  --job J --node N --rank R   identity recorded by create
  --ranks N       drain: the job's number of ranks
  --bandwidth R   drain: bytes per second (K/M/G suffixes; default unlimited)
  --no-ack        commit without acknowledging
  -h, --help      this help
)";

constexpr dlckpt::memfs::tool::Command kSecondLevel[] = {
    {"drained", dlckpt::persist::tool::CmdDrained},
    {"verify-drained", dlckpt::persist::tool::CmdVerifyDrained},
    {"drain", dlckpt::persist::tool::CmdDrain},
};

}  // namespace

int main(int argc, char** argv) {
  if (dlckpt_version_requested(argc, argv)) return 0;
  return dlckpt::memfs::tool::Main(argc, argv, kUsage, kSecondLevel);
}

#!/usr/bin/env bash
# io_test.sh BIN_DIR PYTHON: Python's and numpy's file I/O under
# /dlckpt/pyio goes into the store with libdlckpt_preload.so (io_test.py,
# twice: write, then check from a second process), nothing reaches the disk,
# and the store holds the bytes (dlckpt-store). No MPI: the store is named
# from DLCKPT_JOB.
set -uo pipefail
bin=$1 py=$2
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
job=pyio$$
jobs=("$job")
trap cleanup_jobs EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -e /dlckpt ] && fail "/dlckpt exists on disk: the test could not tell interception from the OS"
for phase in write check; do
  LD_PRELOAD="$libdir/libdlckpt_preload.so" DLCKPT_JOB=$job DLCKPT_STORE_CAPACITY=64M \
    "$py" "$here/io_test.py" $phase /dlckpt/pyio || fail "io_test.py $phase"
done
[ -e /dlckpt ] && fail "something reached the disk under /dlckpt"
store=$(cd /dev/shm && ls -d dlckpt."$job".* 2>/dev/null | head -1)
[ -n "$store" ] || fail "no store /dev/shm/dlckpt.$job.*"
got=$("$bin/dlckpt-store" cat "/$store" /dlckpt/pyio/sub/raw) || fail "dlckpt-store cat /$store"
[ "$got" = 01ab456789 ] || fail "the store holds '$got' for /dlckpt/pyio/sub/raw"
echo "io_test: ok"

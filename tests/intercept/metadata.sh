#!/bin/bash
# metadata.sh [BIN_DIR BENCH] — metadata under LD_PRELOAD=$DLCKPT_PRELOAD (issue 21, items 2-4):
# statfs/statvfs on /dlckpt answer from the store (or, before one exists, from
# the configuration, creating nothing); the file table is sized from the
# capacity and by DLCKPT_MAX_FILES, and a full one says so on stderr; thousands
# of creates in one shell; a process that only looked at /dlckpt does not keep
# the store from the children it starts (fork, vfork, posix_spawn, system).
# Also a smoke run of bench/metadata_bench.sh (its METRIC line, no timing).
set -euo pipefail
lib=${DLCKPT_PRELOAD:?}
bin_dir=${1:-}      # with BENCH: where dlckpt-bench-metadata is
bench=${2:-}        # bench/metadata_bench.sh
job="icmd$$x$RANDOM"
export DLCKPT_JOB=$job
unset DLCKPT_STORE DLCKPT_PREFIX DLCKPT_MAX_FILES DLCKPT_STORE_CAPACITY DLCKPT_BLOCK_SIZE
tmp=$(mktemp -d /tmp/dlckpt-md.XXXXXX)
cleanup() { rm -f /dev/shm/dlckpt."$job".* /dev/shm/dlckpt."$job"?*.*; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
p() { LD_PRELOAD="$lib" "$@"; }
stores() { ls /dev/shm | grep -c "^dlckpt\.$job\." || true; }
[ ! -e /dlckpt ] || fail "/dlckpt exists on disk before the test; remove it"

# statfs before any store: the configured geometry, and no store is made.
export DLCKPT_STORE_CAPACITY=32M DLCKPT_BLOCK_SIZE=64K
[ "$(p stat -f -c '%S %b %f %c %d' /dlckpt)" = "65536 512 512 1024 1024" ] ||
  fail "stat -f before a store: $(p stat -f -c '%S %b %f %c %d' /dlckpt 2>&1)"
[ "$(stores)" = 0 ] || fail "stat -f created a store"
# A directory that does not exist yet (IOR's /dlckpt/ior before its first
# file; issue 36) lies on the store too: statfs answers, and creates nothing.
[ "$(p stat -f -c '%S %b' /dlckpt/ior)" = "65536 512" ] ||
  fail "stat -f of a directory before its first file: $(p stat -f -c '%S %b' /dlckpt/ior 2>&1)"
p python3 -c 'import os; os.statvfs("/dlckpt/ior/sub")' || fail "statvfs of /dlckpt/ior/sub before it exists"
[ "$(stores)" = 0 ] || fail "stat -f of a missing path created a store"
# statvfs (what IOR calls) and fstatvfs of a memfs descriptor, from the store.
p python3 - <<'EOF' || fail "statvfs/fstatvfs"
import os
os.makedirs("/dlckpt/v")
with open("/dlckpt/v/data", "wb") as f:
    f.write(b"x" * (3 * 65536))
    f.flush()
    a = os.statvfs("/dlckpt/v")
    b = os.fstatvfs(f.fileno())
assert a.f_bsize == 65536 and a.f_blocks == 512, a
assert a.f_bfree == 512 - 3, a              # three blocks written
assert a.f_files == 1024 and a.f_ffree == 1024 - 2, a  # /dlckpt/v and its file
assert (b.f_bfree, b.f_ffree) == (a.f_bfree, a.f_ffree), (a, b)
EOF
[ "$(p stat -f -c '%f %d' /dlckpt)" = "509 1022" ] || fail "stat -f after writes: $(p stat -f -c '%f %d' /dlckpt)"
# With the store: a missing directory answers from it; below a file is ENOTDIR.
[ "$(p stat -f -c '%f %d' /dlckpt/ior)" = "509 1022" ] || fail "stat -f /dlckpt/ior with a store: $(p stat -f /dlckpt/ior 2>&1)"
p stat -f /dlckpt/v/data/x > "$tmp/out" 2>&1 && fail "stat -f below a regular file succeeded"
grep -q "Not a directory" "$tmp/out" || fail "stat -f below a file: $(cat "$tmp/out")"
rm -f /dev/shm/dlckpt."$job".*

# The file table: 2048 entries by default for 64M (more than the old 1024).
export DLCKPT_STORE_CAPACITY=64M
p bash -c 'mkdir -p /dlckpt/md && for i in $(seq 1500); do : > /dlckpt/md/f$i || exit 1; done' ||
  fail "1500 creates in one shell with a 64M store"
[ "$(p stat -f -c '%c %d' /dlckpt)" = "2048 547" ] || fail "file table after 1500 creates: $(p stat -f -c '%c %d' /dlckpt)"
[ "$(p ls /dlckpt/md | wc -l)" = 1500 ] || fail "ls after 1500 creates"
rm -f /dev/shm/dlckpt."$job".*
# DLCKPT_MAX_FILES sets it; a full table names the limit on stderr.
export DLCKPT_STORE_CAPACITY=32M DLCKPT_MAX_FILES=4
if p bash -c 'for i in 1 2 3 4 5; do : > /dlckpt/f$i || exit 1; done' 2> "$tmp/err"; then
  fail "a fifth file fit a table of 4"
fi
grep -q "file table full: 4 files and directories (max_files 4).*DLCKPT_MAX_FILES" "$tmp/err" ||
  fail "no hint on a full file table: $(cat "$tmp/err")"
grep -q "No space left on device" "$tmp/err" || fail "not ENOSPC: $(cat "$tmp/err")"
[ "$(p stat -f -c '%c %d' /dlckpt)" = "4 0" ] || fail "DLCKPT_MAX_FILES=4: $(p stat -f -c '%c %d' /dlckpt)"
rm -f /dev/shm/dlckpt."$job".*
unset DLCKPT_MAX_FILES

# A process that only looked at /dlckpt lets its children have the store.
p mkdir -p /dlckpt/t
p bash -c '[ -d /dlckpt/t ] && ls -d /dlckpt/t > /dev/null && x=$(ls -d /dlckpt/t) && [ "$x" = /dlckpt/t ]' ||
  fail "bash: stat then children"
p python3 - <<'EOF' || fail "python: stat then subprocess (vfork), posix_spawn, system"
import os, subprocess
os.stat("/dlckpt/t")
assert subprocess.run(["ls", "-d", "/dlckpt/t"], stdout=subprocess.DEVNULL).returncode == 0, "subprocess"
os.stat("/dlckpt/t")
pid = os.posix_spawnp("ls", ["ls", "-d", "/dlckpt/t"], os.environ)
assert os.waitpid(pid, 0)[1] == 0, "posix_spawn"
os.stat("/dlckpt/t")
assert os.system("ls -d /dlckpt/t > /dev/null") == 0, "system"
os.stat("/dlckpt/t")
EOF
[ ! -e /dlckpt ] || fail "/dlckpt appeared on disk"

# dlckpt-store rm --job removes every store of the job, and only those.
if [ -n "${DLCKPT_STORE_TOOL:-}" ]; then
  DLCKPT_RANK=1 p mkdir -p /dlckpt/r1
  [ "$(stores)" = 2 ] || fail "expected stores r0 and r1: $(ls /dev/shm | grep "$job" || true)"
  : > /dev/shm/dlckpt."$job"x.other  # another job's object: kept
  "$DLCKPT_STORE_TOOL" rm --job "$job" > "$tmp/rm" || fail "dlckpt-store rm --job: $(cat "$tmp/rm")"
  [ "$(stores)" = 0 ] || fail "stores left after rm --job: $(ls /dev/shm | grep "$job")"
  grep -q "^removed /dlckpt.$job\..*\.r1$" "$tmp/rm" || fail "rm --job output: $(cat "$tmp/rm")"
  [ -e /dev/shm/dlckpt."$job"x.other ] || fail "rm --job removed another job's object"
fi

# The benchmark runs and prints its METRIC line (figures not checked).
if [ -n "$bench" ] && [ -x "$bin_dir/dlckpt-bench-metadata" ]; then
  out=$("$bench" --runs 1 --items 200 --bin "$bin_dir" --lib "$lib" --no-fuse) ||
    fail "metadata_bench.sh: $out"
  grep -q "^METRIC preload_metadata_vs_tmpfs [0-9.]* x target >= 0.5$" <<< "$out" ||
    fail "metadata_bench.sh METRIC line: $out"
fi
echo "PASS: metadata under the preload library"

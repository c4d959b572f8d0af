#!/bin/bash
# run.sh KIND MODE PROGRAM — one libintercept system test.
#   KIND     io (PROGRAM BASE writes a tree; compared with the same program's
#            tree on disk), fork, errors, enabled
#   MODE     static (PROGRAM carries the wrappers), preload (run under
#            LD_PRELOAD=$DLCKPT_PRELOAD), or both (a static PROGRAM under the
#            preload library, which must then stay out of the way)
# Environment: DLCKPT_STORE_TOOL (build/bin/dlckpt-store), DLCKPT_PRELOAD.
# Every run uses its own job id, a prefix that is a real, empty directory (so
# a call that escaped interception would leave a file there: the test checks
# it stays empty), and removes its store and scratch directory at the end.
set -euo pipefail
kind=$1 mode=$2 prog=$3
tool=${DLCKPT_STORE_TOOL:?}
job="it$$x${RANDOM}"
tmp=$(mktemp -d /tmp/dlckpt-intercept.XXXXXX)
store="/dlckpt.${job}.testnode.r0"
cleanup() {
  "$tool" rm "$store" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

prefix="$tmp/dlckpt"
mkdir -p "$prefix" "$tmp/ref" "$tmp/disk"
export DLCKPT_PREFIX="$prefix" DLCKPT_JOB="$job" DLCKPT_NODE=testnode DLCKPT_RANK=0
export DLCKPT_STORE_CAPACITY=${CAPACITY:-64M}
unset DLCKPT_STORE
run() {
  if [ "$mode" = static ]; then "$@"; else LD_PRELOAD="${DLCKPT_PRELOAD:?}" "$@"; fi
}

case "$kind" in
  io)
    run "$prog" "$prefix/app" || fail "$prog in memfs"
    run "$prog" "$tmp/ref/app" || fail "$prog on disk"
    ;;
  fork) run "$prog" "$prefix" || fail "$prog" ;;
  errors) CAPACITY=1M; export DLCKPT_STORE_CAPACITY=1M
    run "$prog" "$prefix" "$tmp/disk" || fail "$prog" ;;
  enabled)
    run "$prog" "$tmp/disk" || fail "$prog"
    [ -e "$tmp/disk/file2" ] || fail "file2 not on disk"
    [ ! -e "$tmp/disk/file1" ] || fail "file1 reached the disk"
    "$tool" commit "$store" >/dev/null
    [ "$("$tool" cat "$store" "$tmp/disk/file1")" = "Hello World" ] || fail "file1 not in memfs"
    ;;
  *) fail "unknown kind $kind" ;;
esac

# Nothing may have reached the disk under the prefix.
if [ -n "$(ls -A "$prefix")" ]; then
  ls -laR "$prefix" >&2
  fail "files were created on disk under the prefix $prefix"
fi

if [ "$kind" = io ]; then
  "$tool" commit "$store" >/dev/null || fail "commit $store"
  # Regular files in the store (ls prints: mode size crc path).
  "$tool" ls "$store" "$prefix/" | awk '$1 ~ /^-/ {print $4}' | sed "s|^$prefix/||" | sort > "$tmp/in_store"
  (cd "$tmp/ref" && find app -type f | sort) > "$tmp/on_disk"
  if ! diff -u "$tmp/on_disk" "$tmp/in_store" >&2; then fail "file sets differ (disk vs store)"; fi
  [ -s "$tmp/on_disk" ] || fail "no files written"
  while read -r rel; do
    "$tool" cat "$store" "$prefix/$rel" > "$tmp/got" || fail "cat $rel"
    cmp "$tmp/got" "$tmp/ref/$rel" || fail "bytes of $rel differ between memfs and disk"
  done < "$tmp/on_disk"
  echo "PASS: $(wc -l < "$tmp/on_disk") files identical in memfs and on disk ($mode, $(basename "$prog"))"
else
  echo "PASS: $kind ($mode, $(basename "$prog"))"
fi

#!/usr/bin/env bash
# dlckpt-fuse --max-files N: a new store's file table holds N files and
# directories (statfs's f_files); the next create (a file, mknod or mkdir) gets
# ENOSPC, and dlckpt-fuse says once on its stderr what the preload says: the
# table is full, its size, and DLCKPT_MAX_FILES / --max-files to make it larger
# (mdtest -n 10000 with the default 8,192 entries met only ENOSPC).
#
# usage: fuse_max_files_test.sh BIN_DIR
set -euo pipefail
BIN_DIR="$1"
source "$(dirname "$0")/lib.sh"

new_store store
new_mountpoint mnt
mount_fs "$mnt" "$store" --capacity 32M --max-files 4
[ "$(stat -f -c %c "$mnt")" = 4 ] || fail "statfs: $(stat -f -c %c "$mnt") files, not the 4 of --max-files 4"
mkdir "$mnt/d"
for i in 1 2 3; do : >"$mnt/d/f$i"; done
if err=$( { : >"$mnt/d/f4"; } 2>&1 ); then fail "a fifth entry fit a file table of 4"; fi
grep -q "No space left on device" <<<"$err" || fail "a full table is not ENOSPC: $err"
if mkdir "$mnt/e" 2>/dev/null; then fail "a directory fit a full file table"; fi
log=${DAEMON_LOG[$mnt]}
line="file table full: 4 files and directories (max_files 4); create the store with more: DLCKPT_MAX_FILES"
grep -q "^dlckpt-fuse: store $store: .*d/f4: $line" "$log" || fail "no message naming the full table: $(cat "$log")"
grep -q "dlckpt-fuse/dlckpt-store --max-files" "$log" || fail "the message does not name --max-files: $(cat "$log")"
[ "$(grep -c "file table full" "$log")" = 1 ] || fail "not said once: $(cat "$log")"
# Removing one makes room again.
rm "$mnt/d/f3"
: >"$mnt/d/f4" || fail "no room after a remove"
unmount_fs "$mnt"
echo "fuse_max_files_test: ok: $(grep -m1 "file table full" "$log")"

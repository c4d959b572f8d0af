#!/usr/bin/env bash
# Real tools against a dlckpt-fuse mount: cp + cmp of a large random file,
# dd, a tar round trip, fio verify jobs, concurrent writers, then a
# checkpoint that dlckpt-store sees, and a remount that shows the same files.
# Usage: fuse_tools_test.sh BIN_DIR
set -euo pipefail
BIN_DIR="$1"
source "$(dirname "$0")/lib.sh"

new_store store
new_mountpoint mnt
mount_fs "$mnt" "$store" --capacity 1G --job "$TEST_JOB" --node n0 --rank 0

# cp + cmp of a large random file (write-only open: direct I/O path).
head -c 200M /dev/urandom > "$TMP/big"
cp "$TMP/big" "$mnt/big"
cmp "$TMP/big" "$mnt/big" || fail "cp of a 200 MB file differs"
[ "$(stat -c %s "$mnt/big")" = $((200 << 20)) ] || fail "size of the copy"

# dd with 1 MiB records, then a partial overwrite in place (conv=notrunc).
dd if="$TMP/big" of="$mnt/dd.out" bs=1M count=64 status=none
cmp <(head -c 64M "$TMP/big") "$mnt/dd.out" || fail "dd copy differs"
cp "$mnt/dd.out" "$TMP/dd.ref"
dd if=/dev/urandom of="$TMP/patch" bs=1k count=300 status=none
dd if="$TMP/patch" of="$mnt/dd.out" bs=4k seek=1000 conv=notrunc status=none
dd if="$TMP/patch" of="$TMP/dd.ref" bs=4k seek=1000 conv=notrunc status=none
cmp "$TMP/dd.ref" "$mnt/dd.out" || fail "dd conv=notrunc overwrite differs"

# Cached (read-write) writers: a file rewritten through an O_RDWR descriptor.
python3 - "$mnt/rw.bin" "$TMP/rw.ref" <<'EOF'
import os, sys
data = os.urandom(3 << 20)
for path in sys.argv[1:]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.pwrite(fd, data, 0)
    os.pwrite(fd, b"x" * 5000, 12345)           # overwrite inside
    os.pwrite(fd, b"tail", len(data) + 100)     # a hole, then data past the end
    os.fsync(fd)
    os.close(fd)
EOF
cmp "$TMP/rw.ref" "$mnt/rw.bin" || fail "read-write rewrite differs"

# tar round trip of a small tree with directories, empty and odd-sized files.
src="$TMP/tree"
mkdir -p "$src/a/b/c" "$src/empty_dir" "$src/x"
echo hello > "$src/a/hello.txt"
head -c 123457 /dev/urandom > "$src/a/b/odd.bin"
: > "$src/a/b/c/empty"
head -c 70000 /dev/urandom > "$src/x/data"
chmod 600 "$src/x/data"
mkdir "$mnt/tree"
tar -C "$src" -cf - . | tar -C "$mnt/tree" -xf - || fail "tar extract into the mount"
diff -r "$src" "$mnt/tree" || fail "extracted tree differs"
[ "$(stat -c %a "$mnt/tree/x/data")" = 600 ] || fail "tar did not keep mode 600"
mkdir "$TMP/back"
tar -C "$mnt/tree" -cf - . | tar -C "$TMP/back" -xf - || fail "tar from the mount"
diff -r "$src" "$TMP/back" || fail "tree archived from the mount differs"

# fio verify jobs: sequential 1 MiB and random 4 KiB writes, 2 jobs each.
for job in "--rw=write --bs=1M" "--rw=randwrite --bs=4k"; do
  # shellcheck disable=SC2086
  fio --name=verify --directory="$mnt" $job --size=24M --numjobs=2 --ioengine=psync \
      --verify=crc32c --do_verify=1 --verify_state_save=0 --fallocate=none --unlink=1 --output="$TMP/fio.log" ||
    { cat "$TMP/fio.log"; fail "fio $job verify"; }
  grep -q "err= 0" "$TMP/fio.log" || { cat "$TMP/fio.log"; fail "fio $job reported errors"; }
done

# Concurrent writers: dd and cp in the background, into separate files.
pids=()
for i in 1 2 3 4; do
  dd if="$TMP/big" of="$mnt/conc.$i" bs=256k skip=$((i * 40)) count=80 status=none & pids+=($!)
done
for i in 1 2; do cp "$TMP/big" "$mnt/conc.cp$i" & pids+=($!); done
for p in "${pids[@]}"; do wait "$p" || fail "a concurrent writer failed"; done
for i in 1 2 3 4; do
  cmp <(dd if="$TMP/big" bs=256k skip=$((i * 40)) count=80 status=none) "$mnt/conc.$i" ||
    fail "concurrent dd $i differs"
done
for i in 1 2; do cmp "$TMP/big" "$mnt/conc.cp$i" || fail "concurrent cp $i differs"; done
rm "$mnt"/conc.*

# Namespace races: renames of a directory tree while files below it are
# created, read, written and unlinked. Individual commands may fail (ENOENT
# while a path is renamed away); the daemon must survive and the mount must
# end up agreeing with the store (checked after the checkpoint below).
mkdir -p "$mnt/race/a/b"
(for i in $(seq 150); do mv "$mnt/race/a" "$mnt/race/c"; mv "$mnt/race/c" "$mnt/race/a"; done) 2>/dev/null &
r1=$!
(for i in $(seq 150); do echo "$i" > "$mnt/race/a/b/f$((i % 7))"; cat "$mnt/race/a/b/f$(((i + 3) % 7))";
   rm -f "$mnt/race/a/b/f$(((i + 5) % 7))"; ls -R "$mnt/race"; done) >/dev/null 2>&1 &
r2=$!
(for i in $(seq 150); do mkdir -p "$mnt/race/a/d$((i % 3))/e"; rmdir "$mnt/race/a/d$(((i + 1) % 3))/e";
   rmdir "$mnt/race/a/d$(((i + 1) % 3))"; done) 2>/dev/null &
r3=$!
wait $r1 $r2 $r3 || true
grep -q "^pid: " "$mnt/.dlckpt/status" || fail "daemon gone after namespace races"
[ -d "$mnt/race/a" ] || [ -d "$mnt/race/c" ] || fail "race directory lost"

# A checkpoint: the committed epoch holds exactly what the mount shows.
epoch=$("$CTL_BIN" checkpoint "$mnt") || fail "dlckpt-ctl checkpoint"
[ "$epoch" = 1 ] || fail "first checkpoint is epoch $epoch"
grep -q "acknowledged_epoch: 1" <<< "$("$STORE_BIN" stat "$store")" || fail "store does not show epoch 1"
"$STORE_BIN" cat "$store" /big | cmp - "$TMP/big" || fail "dlckpt-store cat /big differs"
"$STORE_BIN" cat "$store" /tree/a/b/odd.bin | cmp - "$src/a/b/odd.bin" || fail "store cat odd.bin"
grep -q " /tree/a/b/c/empty$" <<< "$("$STORE_BIN" ls "$store")" || fail "store ls lacks the empty file"
(cd "$mnt" && find . -mindepth 1 -printf '%y %p\n' | sed 's|^\(.\) \.|\1 |' | sort) > "$TMP/mount.list"
"$STORE_BIN" ls "$store" | awk '{ print ($1 ~ /^d/ ? "d" : "f"), $4 }' | sort > "$TMP/store.list"
diff "$TMP/mount.list" "$TMP/store.list" || fail "store and mount list different entries"

# Remount: the same files, byte for byte.
(cd "$mnt" && find . -printf '%y %s %p\n' | sort) > "$TMP/before"
unmount_fs "$mnt"
mount_fs "$mnt" "$store"
(cd "$mnt" && find . -printf '%y %s %p\n' | sort) > "$TMP/after"
diff "$TMP/before" "$TMP/after" || fail "remount shows different files"
cmp "$TMP/big" "$mnt/big" || fail "big differs after remount"
diff -r "$src" "$mnt/tree" || fail "tree differs after remount"
unmount_fs "$mnt"
echo "fuse_tools_test: ok"

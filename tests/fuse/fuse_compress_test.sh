#!/usr/bin/env bash
# dlckpt-fuse -o compress=lz4: a new store compresses its checkpoint data (zeros
# take a fraction of their size in blocks, random data stays raw), what the mount
# and dlckpt-store read back is byte for byte what was written, every CRC
# verifies, and a remount without the option keeps serving the store as it is.
#
# usage: fuse_compress_test.sh BIN_DIR
set -euo pipefail
BIN_DIR="$1"
source "$(dirname "$0")/lib.sh"

new_store store
new_mountpoint mnt
mount_fs "$mnt" "$store" --capacity 64M -o compress=lz4
dd if=/dev/zero of="$mnt/zeros" bs=1M count=8 status=none
head -c $((3 << 20)) /dev/urandom >"$TMP/random"
cp "$TMP/random" "$mnt/random"
epoch=$("$CTL_BIN" checkpoint "$mnt") || fail "dlckpt-ctl checkpoint"
st=$("$STORE_BIN" stat "$store")
grep -q "^compression: lz4" <<<"$st" || fail "the store does not compress: $st"
bs=$(sed -n 's/^block_size: //p' <<<"$st")
fb=$(sed -n 's/^epoch_file_bytes: //p' <<<"$st")
eb=$(sed -n 's/^epoch_blocks: //p' <<<"$st")
[ "$fb" = $((11 << 20)) ] || fail "epoch $epoch holds $fb bytes of files, not 11 MiB"
# 8 MiB of zeros in a few blocks, 3 MiB of random data raw: well under 4 MiB.
[ $((eb * bs)) -lt $((4 << 20)) ] || fail "epoch $epoch takes $((eb * bs)) bytes of blocks for $fb bytes"
echo "epoch $epoch: $fb bytes of files in $((eb * bs)) bytes of blocks"
"$STORE_BIN" verify "$store" >/dev/null || fail "dlckpt-store verify"
cmp "$TMP/random" "$mnt/random" || fail "random data read through the mount differs"
cmp <(head -c $((8 << 20)) /dev/zero) "$mnt/zeros" || fail "zeros read through the mount differ"
"$STORE_BIN" cat "$store" /random | cmp - "$TMP/random" || fail "dlckpt-store cat differs"
unmount_fs "$mnt"

# Remounted without the option (and with another $DLCKPT_COMPRESS): the same store.
DLCKPT_COMPRESS=none mount_fs "$mnt" "$store"
cmp "$TMP/random" "$mnt/random" || fail "random data differs after the remount"
grep -q "^compression: lz4" <<< "$("$STORE_BIN" stat "$store")" || fail "the remount changed the store"
unmount_fs "$mnt"

# A bad value is refused before anything is mounted.
new_mountpoint bad
if "$FUSE_BIN" "$bad" --store "$store" -o compress=zip 2>"$TMP/bad.log"; then fail "compress=zip accepted"; fi
grep -q "bad compression 'zip'" "$TMP/bad.log" || fail "no clear message: $(cat "$TMP/bad.log")"
echo "fuse_compress_test: ok"

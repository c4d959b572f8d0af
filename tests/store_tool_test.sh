#!/usr/bin/env bash
# dlckpt-store from the shell: create, put, commit, ls, cat, stat, verify, rm,
# and clear errors for bad input. Usage: store_tool_test.sh BIN_DIR
set -euo pipefail
bin="$1/dlckpt-store"
store="/dlckpt.tooltest$$.n0.r0"
cstore="/dlckpt.tooltest$$.n0.r1"
tmp=$(mktemp -d)
dstore="/dlckpt.tooltest$$.n0.r2"
cleanup() {
  "$bin" rm "$store" >/dev/null 2>&1 || true
  "$bin" rm "$cstore" >/dev/null 2>&1 || true
  rm -f "/dev/shm$dstore"
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Whole output first: grep -q may end before the tool has written all of it
# (SIGPIPE, which pipefail would report).
"$bin" --help >"$tmp/help" && grep -q "usage: dlckpt-store" "$tmp/help" || fail "--help"
"$bin" create "$store" --capacity 8M --block-size 4K --job tooltest$$ --node n0 --rank 0
head -c 300000 /dev/urandom > "$tmp/data"
"$bin" put "$store" /dlckpt/app/ckpt.0 "$tmp/data"
echo hello | "$bin" put "$store" /dlckpt/app/meta
[ "$("$bin" commit "$store")" = 1 ] || fail "first commit is not epoch 1"
grep -q " 300000 .* /dlckpt/app/ckpt.0$" <<< "$("$bin" ls "$store")" || fail "ls"
"$bin" cat "$store" /dlckpt/app/ckpt.0 | cmp - "$tmp/data" || fail "cat differs"
[ "$("$bin" cat "$store" /dlckpt/app/meta)" = hello ] || fail "cat meta"
grep -q "acknowledged_epoch: 1" <<< "$("$bin" stat "$store")" || fail "stat"
grep -q "size: 6" <<< "$("$bin" stat "$store" /dlckpt/app/meta)" || fail "stat file"
grep -q "epoch 1: ok" <<< "$("$bin" verify "$store")" || fail "verify"
grep -q "$store" <<< "$("$bin" list)" || fail "list"
[ "$(stat -c %a /dev/shm${store})" = 600 ] || fail "mode is not 0600"

# A compressed store (64 KiB chunks of 16 blocks): 2 MiB of zeros fill 32 blocks, one per
# chunk; 300000 random bytes stay raw in 74 blocks.
"$bin" create "$cstore" --capacity 8M --block-size 4K --compress lz4 --threshold 0.75 --chunk-size 64K
head -c 2097152 /dev/zero > "$tmp/zeros"
"$bin" put "$cstore" /dlckpt/z "$tmp/zeros"
"$bin" put "$cstore" /dlckpt/r "$tmp/data"
[ "$("$bin" commit "$cstore")" = 1 ] || fail "compressed store: first commit is not epoch 1"
st=$("$bin" stat "$cstore")
grep -q "^compression: lz4$" <<<"$st" || fail "stat: $st"
grep -q "^chunk_size: 65536$" <<<"$st" || fail "stat chunk size: $st"
grep -q "^compress_threshold: 0.750$" <<<"$st" || fail "stat threshold: $st"
grep -q "^epoch_file_bytes: 2397152$" <<<"$st" || fail "stat epoch bytes: $st"
grep -q "^epoch_blocks: $(( 32 + 74 ))$" <<<"$st" || fail "zeros compressed, random raw: $st"
"$bin" cat "$cstore" /dlckpt/z | cmp - "$tmp/zeros" || fail "compressed cat differs"
grep -q "epoch 1: ok" <<< "$("$bin" verify "$cstore")" || fail "compressed verify"
if "$bin" create /dlckpt.x$$.n.r1 --compress zstd 2>/dev/null; then fail "unknown compression accepted"; fi
if "$bin" create /dlckpt.x$$.n.r1 --compress lz4 --threshold 2 2>/dev/null; then fail "bad threshold accepted"; fi

# Errors: non-zero exit and a message naming what failed.
if out=$("$bin" cat "$store" /dlckpt/nope 2>&1); then fail "cat of a missing file succeeded"; fi
grep -q "/dlckpt/nope" <<< "$out" || fail "error does not name the path: $out"
if out=$("$bin" ls /dlckpt.nosuchstore.n.r0 2>&1); then fail "ls of a missing store succeeded"; fi
grep -q "ENOENT" <<< "$out" || fail "missing store error: $out"
if "$bin" frobnicate 2>/dev/null; then fail "unknown command accepted"; fi
if "$bin" create "$store" 2>/dev/null; then fail "create over an existing store"; fi
if "$bin" create /dlckpt.x$$.n.r0 --capacity 12Q 2>/dev/null; then fail "bad size accepted"; fi

# Corrupted committed bytes: cat prints nothing and fails naming the store, epoch and file;
# ls, cat and stat report a damaged version slot and exit 1.
"$bin" create "$dstore" --capacity 1M --block-size 4K
head -c 10000 /dev/urandom > "$tmp/d"
"$bin" put "$dstore" /dlckpt/d "$tmp/d"
echo small | "$bin" put "$dstore" /dlckpt/s
[ "$("$bin" commit "$dstore")" = 1 ] || fail "damage store: first commit is not epoch 1"
st=$("$bin" stat "$dstore")
data_offset=$(( $(sed -n 's/^shm_bytes: //p' <<<"$st") - $(sed -n 's/^capacity: \([0-9]*\).*/\1/p' <<<"$st") ))
# The first file written fills the first blocks; flip one of its bytes.
byte=$(od -An -tu1 -j $((data_offset + 100)) -N1 "/dev/shm$dstore")
printf "\\$(printf %03o $(( (byte + 1) % 256 )))" |
  dd of="/dev/shm$dstore" bs=1 seek=$((data_offset + 100)) conv=notrunc status=none
if "$bin" cat "$dstore" /dlckpt/d > "$tmp/out" 2> "$tmp/err"; then fail "cat of corrupted bytes exited 0"; fi
[ ! -s "$tmp/out" ] || fail "cat printed corrupted bytes"
grep -q "store $dstore epoch 1: /dlckpt/d: checksum mismatch" "$tmp/err" || fail "cat message: $(cat "$tmp/err")"
if "$bin" cat --epoch 1 "$dstore" /dlckpt/d > /dev/null 2>&1; then fail "cat --epoch 1 of corrupted bytes exited 0"; fi
[ "$("$bin" cat "$dstore" /dlckpt/s)" = small ] || fail "an intact file of the damaged store"
# Damage epoch 1's version slot (slot 0's file table): the view (the saved working files) is
# whole, but the store is not.
byte=$(od -An -tu1 -j $((4096 + 216 + 3)) -N1 "/dev/shm$dstore")
printf "\\$(printf %03o $(( byte ^ 64 )))" | dd of="/dev/shm$dstore" bs=1 seek=$((4096 + 216 + 3)) conv=notrunc status=none
for cmd in ls stat; do
  if out=$("$bin" $cmd "$dstore" 2>&1); then fail "$cmd of a store with a damaged slot exited 0"; fi
  grep -q "warning: store $dstore: version slot 0 (epoch 1) is damaged" <<<"$out" || fail "$cmd message: $out"
done
if out=$("$bin" cat "$dstore" /dlckpt/s 2>&1); then fail "cat of a store with a damaged slot exited 0"; fi
grep -q "version slot 0 (epoch 1) is damaged" <<<"$out" || fail "cat damaged slot message: $out"
rm -f "/dev/shm$dstore"

# A store another user planted (or that others can read) is never attached.
"$bin" create "$dstore" --capacity 1M --block-size 4K
chmod 0666 "/dev/shm$dstore"
if out=$("$bin" ls "$dstore" 2>&1); then fail "ls attached a store with mode 0666"; fi
grep -q "store /dev/shm$dstore has mode 0666, expected 0600; refusing to attach" <<<"$out" || fail "mode message: $out"
if [ "$(id -u)" = 0 ]; then
  chmod 0600 "/dev/shm$dstore"
  chown 65534 "/dev/shm$dstore"
  if out=$("$bin" ls "$dstore" 2>&1); then fail "ls attached a store of uid 65534"; fi
  grep -q "store /dev/shm$dstore is owned by uid 65534, not by uid 0 (this process); refusing to attach" <<<"$out" ||
    fail "owner message: $out"
  if "$bin" create "$dstore" 2>/dev/null; then fail "create over a planted store"; fi
  [ "$(stat -c %u "/dev/shm$dstore")" = 65534 ] || fail "create changed the planted store"
fi
rm -f "/dev/shm$dstore"

# A damaged store is refused, not read.
printf '\x00\x00\x00\x00' | dd of=/dev/shm${store} bs=1 seek=16 conv=notrunc status=none
if out=$("$bin" ls "$store" 2>&1); then fail "damaged store was read"; fi
grep -q "not a valid dlckpt store" <<< "$out" || fail "damage message: $out"
"$bin" rm "$store"
[ ! -e /dev/shm${store} ] || fail "rm left the store"
echo "store_tool_test: ok"

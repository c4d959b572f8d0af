#!/usr/bin/env bash
# dlckpt-store from the shell: create, put, commit, ls, cat, stat, verify, rm,
# and clear errors for bad input. Usage: store_tool_test.sh BIN_DIR
set -euo pipefail
bin="$1/dlckpt-store"
store="/dlckpt.tooltest$$.n0.r0"
cstore="/dlckpt.tooltest$$.n0.r1"
tmp=$(mktemp -d)
cleanup() { "$bin" rm "$store" >/dev/null 2>&1 || true; "$bin" rm "$cstore" >/dev/null 2>&1 || true; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bin" --help | grep -q "usage: dlckpt-store" || fail "--help"
"$bin" create "$store" --capacity 8M --block-size 4K --job tooltest$$ --node n0 --rank 0
head -c 300000 /dev/urandom > "$tmp/data"
"$bin" put "$store" /dlckpt/app/ckpt.0 "$tmp/data"
echo hello | "$bin" put "$store" /dlckpt/app/meta
[ "$("$bin" commit "$store")" = 1 ] || fail "first commit is not epoch 1"
"$bin" ls "$store" | grep -q " 300000 .* /dlckpt/app/ckpt.0$" || fail "ls"
"$bin" cat "$store" /dlckpt/app/ckpt.0 | cmp - "$tmp/data" || fail "cat differs"
[ "$("$bin" cat "$store" /dlckpt/app/meta)" = hello ] || fail "cat meta"
"$bin" stat "$store" | grep -q "acknowledged_epoch: 1" || fail "stat"
"$bin" stat "$store" /dlckpt/app/meta | grep -q "size: 6" || fail "stat file"
"$bin" verify "$store" | grep -q "epoch 1: ok" || fail "verify"
"$bin" list | grep -q "$store" || fail "list"
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
"$bin" verify "$cstore" | grep -q "epoch 1: ok" || fail "compressed verify"
if "$bin" create /dlckpt.x$$.n.r1 --compress zstd 2>/dev/null; then fail "unknown compression accepted"; fi
if "$bin" create /dlckpt.x$$.n.r1 --compress lz4 --threshold 2 2>/dev/null; then fail "bad threshold accepted"; fi

# Errors: non-zero exit and a message naming what failed.
if out=$("$bin" cat "$store" /dlckpt/nope 2>&1); then fail "cat of a missing file succeeded"; fi
echo "$out" | grep -q "/dlckpt/nope" || fail "error does not name the path: $out"
if out=$("$bin" ls /dlckpt.nosuchstore.n.r0 2>&1); then fail "ls of a missing store succeeded"; fi
echo "$out" | grep -q "ENOENT" || fail "missing store error: $out"
if "$bin" frobnicate 2>/dev/null; then fail "unknown command accepted"; fi
if "$bin" create "$store" 2>/dev/null; then fail "create over an existing store"; fi
if "$bin" create /dlckpt.x$$.n.r0 --capacity 12Q 2>/dev/null; then fail "bad size accepted"; fi

# A damaged store is refused, not read.
printf '\x00\x00\x00\x00' | dd of=/dev/shm${store} bs=1 seek=16 conv=notrunc status=none
if out=$("$bin" ls "$store" 2>&1); then fail "damaged store was read"; fi
echo "$out" | grep -q "not a valid dlckpt store" || fail "damage message: $out"
"$bin" rm "$store"
[ ! -e /dev/shm${store} ] || fail "rm left the store"
echo "store_tool_test: ok"

#!/bin/bash
# tools.sh — unmodified binaries (coreutils, bash) under
# LD_PRELOAD=$DLCKPT_PRELOAD with the default prefix /dlckpt and a store named
# from the environment (DLCKPT_STORE): successive processes see the same
# files; nothing appears on disk under /dlckpt.
set -euo pipefail
tool=${DLCKPT_STORE_TOOL:?}
lib=${DLCKPT_PRELOAD:?}
tmp=$(mktemp -d /tmp/dlckpt-tools.XXXXXX)
export DLCKPT_STORE="/dlckpt.tools$$x${RANDOM}.testnode.r0" DLCKPT_STORE_CAPACITY=32M
unset DLCKPT_PREFIX
cleanup() {
  "$tool" rm "$DLCKPT_STORE" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
[ ! -e /dlckpt ] || fail "/dlckpt exists on disk before the test; remove it"
p() { LD_PRELOAD="$lib" "$@"; }

head -c 3000000 /dev/urandom > "$tmp/src"
p mkdir -p /dlckpt/t/sub || fail "mkdir -p"
p cp "$tmp/src" /dlckpt/t/a || fail "cp into memfs"
p cat /dlckpt/t/a > "$tmp/a" || fail "cat"
cmp "$tmp/src" "$tmp/a" || fail "cp then cat: bytes differ"
p dd if="$tmp/src" of=/dlckpt/t/b bs=4k status=none || fail "dd into memfs"
p dd if=/dlckpt/t/b of="$tmp/b" bs=64k status=none || fail "dd out of memfs"
cmp "$tmp/src" "$tmp/b" || fail "dd round trip differs"
[ "$(p stat -c %s /dlckpt/t/a)" = 3000000 ] || fail "stat size"
[ "$(p ls /dlckpt/t | tr '\n' ' ')" = "a b sub " ] || fail "ls: $(p ls /dlckpt/t)"
p ls -la /dlckpt/t > /dev/null || fail "ls -la exit status"
p mv /dlckpt/t/b /dlckpt/t/sub/c || fail "mv"
p cp -r /dlckpt/t/sub /dlckpt/t/sub2 || fail "cp -r"
p cmp /dlckpt/t/sub2/c "$tmp/src" || fail "cp -r content"
[ "$(p find /dlckpt/t -type f | sort | tr '\n' ' ')" = "/dlckpt/t/a /dlckpt/t/sub/c /dlckpt/t/sub2/c " ] || fail "find"
p touch /dlckpt/t/empty || fail "touch"
p rm /dlckpt/t/empty || fail "rm"
p rm -r /dlckpt/t/sub2 || fail "rm -r"
p bash -c 'test -d /dlckpt/t && cd /dlckpt/t/sub && [ "$(pwd)" = /dlckpt/t/sub ] && [ -f c ] && echo /dlckpt/t/*' \
  > "$tmp/glob" || fail "bash: test, cd, glob"
[ "$(cat "$tmp/glob")" = "/dlckpt/t/a /dlckpt/t/sub" ] || fail "bash glob: $(cat "$tmp/glob")"
# A shell that only looked at /dlckpt does not keep the store from its children.
p bash -c '[ -e /dlckpt/t/a ] && cat /dlckpt/t/a | cmp - '"$tmp/src" || fail "bash then child"
echo "written through tee" > "$tmp/builtin"
p bash -c 'echo "written through tee" | tee /dlckpt/t/builtin > /dev/null' || fail "bash | tee"
p cmp /dlckpt/t/builtin "$tmp/builtin" || fail "tee content"
# A redirection makes a memfs file the shell's standard output, which the C
# library writes with internal calls no interposer sees: it must fail loudly.
if p bash -c 'echo lost > /dlckpt/t/redirected' 2> "$tmp/err"; then fail "redirection succeeded silently"; fi
grep -q "Bad file descriptor" "$tmp/err" || fail "redirection error: $(cat "$tmp/err")"
p rm /dlckpt/t/redirected
[ ! -e /dlckpt ] || fail "/dlckpt appeared on disk"

# The store holds exactly these files.
"$tool" commit "$DLCKPT_STORE" > /dev/null
"$tool" cat "$DLCKPT_STORE" /dlckpt/t/sub/c | cmp - "$tmp/src" || fail "store bytes"
[ "$("$tool" ls "$DLCKPT_STORE" | awk '$1 ~ /^-/ {print $4}' | tr '\n' ' ')" = \
  "/dlckpt/t/a /dlckpt/t/builtin /dlckpt/t/sub/c " ] || fail "store listing: $("$tool" ls "$DLCKPT_STORE")"
# Paths outside the prefix are untouched, even through the same processes.
p cp "$tmp/src" "$tmp/copy" && cmp "$tmp/src" "$tmp/copy" || fail "cp outside the prefix"
echo "PASS: coreutils and bash under the preload library"

#!/usr/bin/env bash
# dlckpt-codec's one-shot modes on real stores: encode epoch 1 of three nodes'
# stores onto a spare (XOR), lose a node, rebuild its store on the spare,
# compare every file byte for byte; lose two nodes: a clean error naming the
# group, nothing half-built left behind. A parity object planted by another
# user (root only) is refused naming it, and left in place.
# usage: codec_oneshot_test.sh BIN_DIR
set -uo pipefail
bin=$1
job="one$$"
tmp=$(mktemp -d)
cleanup() { rm -f /dev/shm/dlckpt."$job".*; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
store() { echo "/dlckpt.$job.$1.r$2"; }
codec() {  # codec NODE... -- ARGS
  local nodes=() args=()
  while [ "$1" != -- ]; do nodes+=("$1"); shift; done; shift
  local cmd=() first=1
  for n in "${nodes[@]}"; do
    [ $first = 1 ] || cmd+=(:); first=0
    cmd+=(-n 1 -env DLCKPT_NODE "$n" "$bin/dlckpt-codec" --job "$job" "$@")
  done
  timeout -k 5 120 mpiexec -launcher fork "${cmd[@]}"
}

# Every object of the job gone, then stores n0..n2 holding /dlckpt/app/a, committed.
fresh_stores() {
  rm -f /dev/shm/dlckpt."$job".*
  for r in 0 1 2; do
    "$bin/dlckpt-store" create "$(store n$r $r)" --capacity 16M --job "$job" --node "n$r" --rank "$r" || fail create
    "$bin/dlckpt-store" put "$(store n$r $r)" /dlckpt/app/a "$tmp/a$r" || fail put
    "$bin/dlckpt-store" commit "$(store n$r $r)" > /dev/null || fail commit
  done
}

for r in 0 1 2; do
  "$bin/dlckpt-store" create "$(store n$r $r)" --capacity 16M --job "$job" --node "n$r" --rank "$r" || fail create
  head -c $((100000 + r * 33333)) /dev/urandom > "$tmp/a$r"
  head -c $((7 + r)) /dev/urandom > "$tmp/b$r"
  "$bin/dlckpt-store" put "$(store n$r $r)" /dlckpt/app/a "$tmp/a$r" || fail put
  "$bin/dlckpt-store" put "$(store n$r $r)" /dlckpt/app/b "$tmp/b$r" || fail put
  [ "$("$bin/dlckpt-store" commit "$(store n$r $r)")" = 1 ] || fail commit
done
codec n0 n1 n2 n3 -- --mode encode --epoch 1 || fail "encode"
ls /dev/shm | grep -q "dlckpt.$job.n3.parity" || fail "no parity on the spare n3"

rm -f /dev/shm/dlckpt."$job".n1.*           # node n1 is gone
codec n0 n2 n3 -- --mode recover --lost n1 > "$tmp/out" 2>&1 || { cat "$tmp/out"; fail "recover"; }
cat "$tmp/out"
grep -q "rank 1 -> n3" "$tmp/out" || fail "rank 1 was not placed on n3"
for f in a b; do
  "$bin/dlckpt-store" cat "$(store n3 1)" /dlckpt/app/$f | cmp - "$tmp/${f}1" || fail "rebuilt /dlckpt/app/$f differs"
done
grep -q "epoch 1: ok" <<< "$("$bin/dlckpt-store" verify "$(store n3 1)")" || fail "verify"

rm -f /dev/shm/dlckpt."$job".n0.* /dev/shm/dlckpt."$job".n2.*   # two more: beyond XOR
if codec n3 -- --mode recover --lost n0,n2 > "$tmp/out2" 2>&1; then fail "two losses in an XOR group were accepted"; fi
cat "$tmp/out2"
grep -q "unrecoverable" "$tmp/out2" || fail "no unrecoverable message"
[ -z "$(ls /dev/shm | grep "dlckpt.$job.n3.r0\|dlckpt.$job.n3.r2")" ] || fail "half-built stores left behind"
# A surviving store whose committed bytes were damaged is refused, not used.
fresh_stores
codec n0 n1 n2 n3 -- --mode encode --epoch 1 > /dev/null || fail "encode"
python3 - "/dev/shm/dlckpt.$job.n0.r0" "$tmp/a0" <<'PY'
import sys
data = open(sys.argv[2], 'rb').read(64)
with open(sys.argv[1], 'r+b') as f:
    blob = f.read()
    at = blob.find(data)
    assert at > 0, "file data not found in the store"
    f.seek(at + 10)
    f.write(bytes([blob[at + 10] ^ 0x55]))
PY
rm -f /dev/shm/dlckpt."$job".n1.*
if codec n0 n2 n3 -- --mode recover --lost n1 > "$tmp/out3" 2>&1; then fail "a damaged surviving store was used"; fi
grep -q "checksum mismatch" "$tmp/out3" || { cat "$tmp/out3"; fail "no checksum message"; }
grep -q "/dlckpt/app/a" "$tmp/out3" || fail "the damaged file is not named"
# A parity object another user planted under the spare's slot names is
# refused as a planted store is (EPERM naming /dev/shm/NAME), never removed.
if [ "$(id -u)" = 0 ] && command -v setpriv > /dev/null; then
  fresh_stores
  for s in 0 1; do
    setpriv --reuid=65534 --regid=65534 --clear-groups \
      sh -c "umask 077; head -c 8192 /dev/zero > /dev/shm/dlckpt.$job.n3.parity$s" || fail "plant parity$s"
  done
  if codec n0 n1 n2 n3 -- --mode encode --epoch 1 > "$tmp/out4" 2>&1; then fail "encoded into a planted parity object"; fi
  grep -q "parity object /dev/shm/dlckpt.$job.n3.parity0 is owned by uid 65534, not by uid 0 (this process); refusing" \
    "$tmp/out4" || { cat "$tmp/out4"; fail "no refusal naming the planted parity object"; }
  for s in 0 1; do
    [ "$(stat -c '%u %s' "/dev/shm/dlckpt.$job.n3.parity$s" 2>/dev/null)" = "65534 8192" ] ||
      fail "the planted parity$s was removed or changed"
  done
fi
echo "codec_oneshot_test: ok"

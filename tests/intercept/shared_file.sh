#!/bin/bash
# shared_file.sh BIN_DIR PROG — issue 36: under `dlckpt-run --preload`, a file
# shared by several ranks (IOR without -F) is refused at close on every rank
# but 0, with one line naming the rank, the path, ENOTSUP and the way out, and
# nothing is lost; a private file of one name on every rank and a header
# written last are not refused. 3 ranks on 3 virtual nodes.
set -uo pipefail
bin=$1 prog=$2
job="sf$$x$RANDOM"
tmp=$(mktemp -d /tmp/dlckpt-sf.XXXXXX)
cleanup() { rm -rf /dev/shm/dlckpt."$job".* /dev/shm/dlckpt-*."$job"* "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
[ ! -e /dlckpt ] || fail "/dlckpt exists on disk; remove it"
# The tests' path to the library; to dlckpt-run, DLCKPT_PRELOAD is --preload's flag.
unset DLCKPT_PRELOAD

# run MODE: the program under dlckpt-run; sets rc, output in $tmp/MODE.out.
run() {
  local mode=$1
  timeout -k 5 120 "$bin/dlckpt-run" --job "$job" --nodes 3 --spares 1 --preload --capacity 16M -- \
    "$prog" "$mode" >"$tmp/$mode.out" 2>&1
  rc=$?
}

run shared
[ "$rc" = 3 ] || fail "shared: exit $rc, expected the program's 3: $(cat "$tmp/shared.out")"
for r in 1 2; do
  grep -q "^rank $r close ENOTSUP$" "$tmp/shared.out" || fail "shared: rank $r's close did not fail ENOTSUP"
  grep -q "dlckpt: rank $r: /dlckpt/sf/shared: close fails with ENOTSUP: .*N-to-1.*(IOR: -F)" "$tmp/shared.out" ||
    fail "shared: no line for rank $r naming the path, ENOTSUP, N-to-1 and -F: $(cat "$tmp/shared.out")"
done
grep -q "^rank 0 close OK$" "$tmp/shared.out" || fail "shared: rank 0 (it writes the start) was refused"
[ "$(grep -c "^rank [012] kept OK$" "$tmp/shared.out")" = 3 ] || fail "shared: a rank lost bytes: $(cat "$tmp/shared.out")"
echo "shared: exit $rc; $(grep -m1 "dlckpt: rank 1:" "$tmp/shared.out" | cut -c1-120)..."

for mode in private headerlast; do
  run "$mode"
  [ "$rc" = 0 ] || fail "$mode: exit $rc: $(cat "$tmp/$mode.out")"
  [ "$(grep -c "^rank [012] close OK$" "$tmp/$mode.out")" = 3 ] || fail "$mode: $(cat "$tmp/$mode.out")"
  ! grep -q "N-to-1" "$tmp/$mode.out" || fail "$mode: refused: $(cat "$tmp/$mode.out")"
  echo "$mode: exit 0, not refused"
done
echo "shared_file: ok"

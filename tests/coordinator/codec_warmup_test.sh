#!/usr/bin/env bash
# The codec's warm-up after a HELLO (issue 21, item 5): data nodes attach
# their stores and spares reserve the first parity slot before the first
# checkpoint and the second once encode 1 is done, so that the encodes of
# epochs 1 and 2 write into slots that exist already. Asserted from the
# codec's trace, not from timings:
#   first     every codec process reports its warm-up, the spare the second
#             slot's after encode 1; the spare's encodes of epochs 1 and 2
#             create no parity slot. With
#             DLCKPT_CODEC_WARMUP=0 they do (the check can fail).
#   recovery  a node killed after checkpoint 2: the relaunched codec warms up
#             again, its first encode creates no slot, and the application
#             reads back the checkpoint it restarted from, word by word.
#
# usage: codec_warmup_test.sh BIN_DIR SCENARIO
set -uo pipefail
bin=$1 scenario=$2
job="wu${scenario//[^a-z0-9]/}$$"
out=$(mktemp)
cleanup() {
  rm -f /dev/shm/dlckpt."$job".* 2>/dev/null
  rm -rf "/tmp/dlckpt-run.$job" "$out"
}
trap cleanup EXIT
fail() {
  echo "FAIL ($scenario): $*" >&2
  echo "---- output:" >&2; cat "$out" >&2
  echo "---- codec log:" >&2; cat "/tmp/dlckpt-run.$job/codec.log" >&2 2>/dev/null
  exit 1
}
run() {
  cleanup
  DLCKPT_CODEC_TRACE=1 timeout -k 5 150 "$bin/dlckpt-run" --keep --job "$job" "$@" >"$out" 2>&1
}
log() { cat "/tmp/dlckpt-run.$job/codec.log"; }
# The spare's trace line for the encode of epoch $1 (of the last codec generation).
spare_line() { log | grep -E "dlckpt-codec\[[0-9]+ $2\]: group 0 encode of epoch $1 \(parity\):" | tail -1; }
app=("$bin/dlckpt-bench-ckpt" --mib 8 --warmup 0)

case "$scenario" in
first)
  run --nodes 3 --spares 1 -- "${app[@]}" --iters 4 || fail "exit $?"
  for n in vn0 vn1 vn2; do
    grep -qE "dlckpt-codec\[[0-9]+ $n\]: warm-up: stores [0-9.]+ s" <<< "$(log)" || fail "$n did not attach its stores"
  done
  log | grep -qE "dlckpt-codec\[[0-9]+ vn3\]: warm-up: parity slots \(the first\) [0-9.]+ s" ||
    fail "the spare did not reserve the first slot"
  # The second slot: once encode 1 is done, not before (encode 1 waits for one slot only).
  log | awk '/vn3\]: group 0 encode of epoch 1 \(parity\)/ { e = 1 }
             /vn3\]: warm-up: parity slots \(the second\)/ && !seen { seen = 1; ok = e }
             END { exit !ok }' ||
    fail "the spare did not reserve the second slot after encode 1"
  [ "$(grep -c ' codec warmup vn' "/tmp/dlckpt-run.$job/events")" = 5 ] ||
    fail "not one warmup event per data node and two for the spare"
  for e in 1 2 3; do
    l=$(spare_line $e vn3)
    [ -n "$l" ] || fail "no trace of encode $e on the spare"
    case "$l" in *"new parity slot"*) fail "encode $e created a parity slot: $l" ;; esac
  done
  DLCKPT_CODEC_WARMUP=0 run --nodes 3 --spares 1 -- "${app[@]}" --iters 3 || fail "without warm-up: exit $?"
  grep -q "new parity slot" <<< "$(spare_line 1 vn3)" || fail "without warm-up, encode 1 did not create a slot"
  grep -q "new parity slot" <<< "$(spare_line 2 vn3)" || fail "without warm-up, encode 2 did not create a slot"
  grep -q "warm-up:" <<< "$(log)" && fail "DLCKPT_CODEC_WARMUP=0 still warmed up"
  ;;
recovery)
  run --nodes 3 --spares 2 --kill-node vn1 --at checkpoint:2 -- "${app[@]}" --iters 4 --after-restart 2 ||
    fail "exit $?"
  grep -q "recovery 1" "$out" || fail "no recovery"
  grep -qE "^RELOAD .*verified" "$out" || fail "the relaunched ranks did not read their checkpoint back"
  [ "$(log | grep -c 'warm-up: parity slots (the first)')" -ge 2 ] || fail "the relaunched codec's spare did not warm up"
  # The spare's first encode after the relaunched codec's warm-up.
  l=$(log | awk '/warm-up: parity slots \(the first\)/ { n++ } n >= 2 && /encode of epoch [0-9]+ \(parity\):/ { print; exit }')
  [ -n "$l" ] || fail "no spare's trace of the encode after the relaunch"
  case "$l" in *"new parity slot"*) fail "the first encode after the relaunch created a slot: $l" ;; esac
  ;;
*) echo "unknown scenario $scenario" >&2; exit 2 ;;
esac
grep -E "^dlckpt-run:" "$out" | tail -3
echo "codec_warmup_test $scenario: ok"

#!/usr/bin/env bash
# The codec service rings its doorbells (codec/src/doorbell.h) for every
# command. With DLCKPT_CODEC_IDLE_SLEEP_MS=3600000 an idle codec process with
# a doorbell sleeps an hour between tests for rank 0's next command, so a
# command that is not rung is not seen for an hour: the run below (checkpoints,
# a node kill, the recovery's relaunch of the codec, the shutdown) finishes
# only if every command wakes the processes through their doorbells. Without
# a doorbell a process falls back to 2 ms tests, which would hide a missing
# ring, so the test also requires every launch's doorbells to have connected.
#
# usage: doorbell_run_test.sh BIN_DIR TEST_BIN_DIR
set -uo pipefail
bin=$1 tbin=$2
job="rtbell$$"
out=$(mktemp)
rundir="/tmp/dlckpt-run.$job"
cleanup() {
  for p in $(grep -ls "DLCKPT_JOB=$job" /proc/[0-9]*/environ 2>/dev/null | grep -v "/proc/$$/"); do
    p=${p#/proc/}; kill -9 "${p%%/*}" 2>/dev/null
  done
  rm -f /dev/shm/dlckpt."$job".* 2>/dev/null
  rm -rf "$rundir" "$out"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; echo "---- output:" >&2; cat "$out" >&2; [ -f "$rundir/codec.log" ] && cat "$rundir/codec.log" >&2; exit 1; }

DLCKPT_CODEC_IDLE_SLEEP_MS=3600000 timeout -k 5 120 "$bin/dlckpt-run" --job "$job" --keep --nodes 3 --spares 1 \
  --kill-node vn1 --at checkpoint:2 -- "$tbin/ckpt_app" --iters 6 --kib 64 --sleep-ms 40 >"$out" 2>&1
rc=$?
[ "$rc" = 0 ] || fail "dlckpt-run exited $rc (124: a command that no doorbell rang waited for an hour)"
grep -q "recovery 1: restore epoch 2" "$out" || fail "no recovery from epoch 2"
grep -q "^checksum: " "$out" || fail "the application printed no checksum"
# Two launches of the codec job: 4 processes, then 3 after vn1's loss.
grep -q "doorbells: 3 of 3 processes connected" "$rundir/codec.log" || fail "the first launch's doorbells did not all connect"
grep -q "doorbells: 2 of 2 processes connected" "$rundir/codec.log" || fail "the relaunch's doorbells did not all connect"
echo "doorbell_run_test: ok ($(grep -c 'processes connected' "$rundir/codec.log") launch(es), every command rung)"

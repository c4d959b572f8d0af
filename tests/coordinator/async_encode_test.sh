#!/usr/bin/env bash
# Asynchronous encode under dlckpt-run, without failures:
#   backpressure  a tiny compute phase: every checkpoint waits for the previous
#                 encode (at most one in flight), every epoch ends protected,
#                 the answer is the failure-free one, the summary counts
#                 committed and protected epochs and the wait;
#   enospc        a store sized for two versions of the checkpoint: in sync
#                 mode the run passes; in async mode, where a store holds the
#                 protected epoch, the one being encoded and the one being
#                 written, the third version fails with ENOSPC, cleanly: the
#                 relaunch restores a committed epoch that reads back whole,
#                 and the answer is the sync run's.
#
# usage: async_encode_test.sh BIN_DIR TEST_BIN_DIR SCENARIO
set -uo pipefail
bin=$1 tbin=$2 scenario=$3
job="ae${scenario//[^a-z0-9]/}$$"
out=$(mktemp)

leftovers() { grep -ls "DLCKPT_JOB=$1" /proc/[0-9]*/environ 2>/dev/null | grep -v "/proc/$$/" || true; }
cleanup() {
  for j in "$job" "${job}ref" "${job}s"; do
    for p in $(leftovers "$j"); do p=${p#/proc/}; kill -9 "${p%%/*}" 2>/dev/null; done
    rm -f /dev/shm/dlckpt."$j".* 2>/dev/null
    rm -rf "/tmp/dlckpt-run.$j"
  done
  rm -f "$out"
}
trap cleanup EXIT
fail() { echo "FAIL ($scenario): $*" >&2; echo "---- output:" >&2; cat "$out" >&2; exit 1; }

case "$scenario" in
backpressure)
  iters=8
  app=("$tbin/ckpt_app" --iters $iters --kib 2048 --sleep-ms 0 --write-pieces 4)
  ref=$(DLCKPT_JOB="${job}ref" timeout -k 5 120 mpiexec -launcher fork -n 3 "${app[@]}" 2>/dev/null |
        sed -n 's/^checksum: //p')
  rm -f /dev/shm/dlckpt."${job}ref".*
  [ -n "$ref" ] || fail "the failure-free run printed no checksum"
  timeout -k 5 200 "$bin/dlckpt-run" -v --job "$job" --nodes 3 --spares 1 --encode async -- "${app[@]}" \
    >"$out" 2>&1 || fail "dlckpt-run exited $?"
  got=$(sed -n 's/^checksum: //p' "$out")
  [ "$got" = "$ref" ] || fail "checksum '$got' differs from the failure-free run's '$ref'"
  # The codec ran at the async default nice value.
  grep -q -- "--nice 10" "$out" || fail "the codec was not launched with --nice 10"
  # At most one encode in flight: epoch E begins after E-1 ended, protected.
  ev=$(grep -oE "event: app ckpt-(begin|commit|end) [0-9]+( -?[0-9]+)?" "$out" | sed 's/^event: app //')
  for ((e = 1; e <= iters; e++)); do
    c=$(echo "$ev" | grep -n "^ckpt-commit $e 0$" | cut -d: -f1)
    d=$(echo "$ev" | grep -n "^ckpt-end $e 0$" | cut -d: -f1)
    [ -n "$c" ] && [ -n "$d" ] && [ "$c" -lt "$d" ] || fail "epoch $e was not committed, then protected"
    if [ $e -gt 1 ]; then
      b=$(echo "$ev" | grep -n "^ckpt-begin $e$" | cut -d: -f1)
      p=$(echo "$ev" | grep -n "^ckpt-end $((e - 1)) 0$" | cut -d: -f1)
      [ "$p" -lt "$b" ] || fail "checkpoint $e began before epoch $((e - 1))'s encode ended"
    fi
  done
  grep -Eq "summary of job $job: exit 0; $iters checkpoint\(s\) \(last epoch $iters\); async encode: $iters committed, $iters protected \(newest protected epoch $iters\), waited [0-9.]+ s" \
    "$out" || fail "the summary does not count $iters committed and $iters protected epochs and the wait"
  ;;
enospc)
  # 1.5 MiB per rank (25 blocks of 64 KiB); 4 MiB of data blocks hold two
  # versions, not three.
  app=("$tbin/ckpt_app" --iters 4 --kib 1536 --sleep-ms 0 --write-pieces 4)
  sync=$(timeout -k 5 120 "$bin/dlckpt-run" --job "${job}s" --nodes 2 --spares 1 --capacity 4M --encode sync \
    -- "${app[@]}" 2>&1) || { echo "$sync" >"$out"; fail "sync run with a 4M store exited $?"; }
  ref=$(echo "$sync" | sed -n 's/^checksum: //p')
  [ -n "$ref" ] || fail "the sync run printed no checksum"
  # Async: writing epoch 3 while 2 is pending and 1 protected needs a third
  # version: fwrite fails with ENOSPC; the application stops, and dlckpt-run
  # relaunches it from the protected epoch, which is whole.
  timeout -k 5 120 "$bin/dlckpt-run" --job "$job" --nodes 2 --spares 1 --capacity 4M --encode async \
    -- "${app[@]}" >"$out" 2>&1 || fail "async run exited $?"
  grep -q "fwrite checkpoint: No space left on device" "$out" || fail "no ENOSPC from fwrite"
  grep -q "recovery 1: restore epoch [12]$\|recovery 1: restore epoch [12];" "$out" ||
    fail "recovery 1 did not restore a committed epoch"
  grep -q "checkpoint verified" "$out" || fail "the relaunched application did not verify its checkpoint"
  got=$(sed -n 's/^checksum: //p' "$out")
  [ "$got" = "$ref" ] || fail "checksum '$got' differs from the sync run's '$ref'"
  ;;
*) echo "unknown scenario $scenario" >&2; exit 2 ;;
esac
sleep 0.2
[ -z "$(leftovers "$job")" ] || fail "processes of the job are still running"
grep -E "^dlckpt-run:|^METRIC" "$out" | grep -v "event:"
echo "async_encode_test $scenario: ok"

#!/usr/bin/env bash
# Incremental encode end to end: partial_ckpt_app rewrites 10% of its
# checkpoint each iteration, so the codec updates the parity from deltas
# (DLCKPT_DELTA=on forces it for every encode whose kept parity allows it).
# A node is killed in the middle of the series (during a delta encode, or
# between checkpoints); the run must finish with the checksum of a
# failure-free run, the restored checkpoint must match what was written byte
# for byte (the app verifies it), a delta-encode kill must restore the
# previous protected epoch, and nothing may be left running or in /dev/shm.
#
# usage: incremental_kill_test.sh BIN_DIR TEST_BIN_DIR SCENARIO
set -uo pipefail
bin=$1 tbin=$2 scenario=$3
job="inc${scenario//[^a-z0-9]/}$$"
out=$(mktemp)
kib=1024
extra=()
restored=""
case "$scenario" in
  # Killed while encoding epoch 5 (a delta encode): epoch 4 is restored.
  xor-encode) layout=(--nodes 3 --spares 2 --spares-per-group 1 --scheme xor); inject=(--kill-node vn1 --at phase:encode:5); restored=4 ;;
  rs-encode)  layout=(--nodes 4 --spares 4 --spares-per-group 2 --scheme rs); inject=(--kill-node vn0,vn2 --at phase:encode:5)
              restored=4 ;;
  lz4-encode) layout=(--nodes 3 --spares 2 --spares-per-group 1 --scheme xor --compress lz4); inject=(--kill-node vn2 --at phase:encode:5)
              restored=4; kib=4096 ;;
  # Asynchronous encode: the application writes the next checkpoint while
  # the codec encodes the delta of the last one.
  async-encode) layout=(--nodes 3 --spares 2 --spares-per-group 1 --scheme xor --encode async)
              inject=(--kill-node vn1 --at phase:encode:5); restored=4 ;;
  # Parity spread over the members, no spare (issue 32): the delta updates
  # every member's parity object; the lost ranks are relaunched on a
  # survivor, and the encodes after the recovery are deltas again.
  spread-xor) layout=(--nodes 4 --spares 0 --parity spread --scheme xor); inject=(--kill-node vn1 --at phase:encode:5)
              restored=4 ;;
  spread-rs)  layout=(--nodes 5 --spares 0 --spares-per-group 2 --parity spread --scheme rs)
              inject=(--kill-node vn0,vn2 --at phase:encode:5); restored=4 ;;
  spread-async) layout=(--nodes 4 --spares 0 --parity spread --scheme xor --encode async)
              inject=(--kill-node vn2 --at phase:encode:5); restored=4 ;;
  # Killed between checkpoints 3 and 4; the encodes after the recovery are
  # full first (new placement), then deltas again.
  between)    layout=(--nodes 3 --spares 2 --spares-per-group 1 --scheme xor); inject=(--kill-node vn1 --at checkpoint:3+0.02) ;;
  *) echo "unknown scenario $scenario" >&2; exit 2 ;;
esac
app=("$tbin/partial_ckpt_app" --iters 9 --kib "$kib" --rewrite-fraction 0.1 --sleep-ms 30)
nodes=${layout[1]}

leftovers() {
  grep -ls "DLCKPT_JOB=$1" /proc/[0-9]*/environ 2>/dev/null | grep -v "/proc/$$/" || true
}
cleanup() {
  for j in "$job" "${job}ref"; do
    for p in $(leftovers "$j"); do p=${p#/proc/}; kill -9 "${p%%/*}" 2>/dev/null; done
    rm -f /dev/shm/dlckpt."$j".* 2>/dev/null
    rm -rf "/tmp/dlckpt-run.$j"
  done
  rm -f "$out"
}
trap cleanup EXIT
fail() { echo "FAIL ($scenario): $*" >&2; echo "---- output:" >&2; cat "$out" >&2; exit 1; }

# The failure-free answer, without dlckpt-run (local commits only).
ref=$(DLCKPT_JOB="${job}ref" timeout -k 5 120 mpiexec -launcher fork -n "$nodes" "${app[@]}" 2>/dev/null \
      | sed -n 's/^checksum: //p')
rm -f /dev/shm/dlckpt."${job}ref".*
[ -n "$ref" ] || fail "the failure-free run printed no checksum"

# --keep: the run directory's event log says which encodes were deltas; the
# job's objects are removed by this script afterwards.
DLCKPT_DELTA=on DLCKPT_CODEC_TRACE=1 timeout -k 5 240 "$bin/dlckpt-run" --job "$job" --keep "${layout[@]}" \
  "${inject[@]}" -- "${app[@]}" >"$out" 2>&1
rc=$?
[ "$rc" = 0 ] || fail "dlckpt-run exited $rc"
got=$(sed -n 's/^checksum: //p' "$out")
[ "$got" = "$ref" ] || fail "checksum '$got' differs from the failure-free run's '$ref'"
grep -q "checkpoint verified" "$out" || fail "the application did not restart from a verified checkpoint"
if [ -n "$restored" ]; then
  grep -Eq "recovery 1: restore epoch ($restored);" "$out" || fail "recovery 1 did not restore epoch $restored"
fi
# Delta encodes happened, before the kill and after the recovery: the
# codec's "encode-delta E groups-by-delta/groups packed/length" events.
events="/tmp/dlckpt-run.$job/events"
[ -r "$events" ] || fail "no event log in the run directory"
deltas=$(grep "encode-delta" "$events" | grep -v " 0/[0-9]* " | sed -n 's/.*encode-delta \([0-9]*\) .*/\1/p' | tr '\n' ' ')
before=0 after=0
for e in $deltas; do if [ "$e" -lt 5 ]; then before=$((before + 1)); else after=$((after + 1)); fi; done
[ "$before" -ge 2 ] || fail "only $before delta encodes before the kill (epochs: $deltas)"
[ "$after" -ge 2 ] || fail "only $after delta encodes after the recovery (epochs: $deltas)"
sleep 0.2
[ -z "$(leftovers "$job")" ] || fail "processes of the job are still running"
grep -h "encode-delta" "$events" | head -20
grep -E "^dlckpt-run:.*recovery" "$out" | head -5
ndelta=$((before + after))
echo "incremental_kill_test $scenario: ok (checksum $ref, $ndelta delta encodes)"

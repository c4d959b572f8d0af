#!/usr/bin/env bash
# A checkpoint too large for its store is refused, never committed as
# protected (issue 30, item 3). trunc_app checks fclose but not fwrite; under
# `dlckpt-run --capacity 1M` its second checkpoint (1.6 MB per rank) does not
# fit. Expected: dlckpt_checkpoint() refuses it with a message naming the
# file, the store, its capacity and --capacity; the summary counts it as
# refused, not protected, and names the newest protected epoch; a node killed
# right after the refusal is rebuilt from the epoch before, which the
# relaunched application reads back whole (never a short file).
#
# usage: truncated_ckpt_test.sh BIN_DIR TEST_BIN_DIR
set -uo pipefail
bin=$1 tbin=$2
job="trunc$$"
out=$(mktemp)

leftovers() { grep -ls "DLCKPT_JOB=$1" /proc/[0-9]*/environ 2>/dev/null | grep -v "/proc/$$/" || true; }
cleanup() {
  for p in $(leftovers "$job"); do p=${p#/proc/}; kill -9 "${p%%/*}" 2>/dev/null; done
  rm -f /dev/shm/dlckpt."$job".* 2>/dev/null
  rm -rf "/tmp/dlckpt-run.$job"
  rm -f "$out"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; echo "---- output:" >&2; cat "$out" >&2; exit 1; }

# Iteration 0 (256 KiB) is epoch 1; iteration 1 (1600 KiB) cannot fit a 1 MiB
# store that keeps epoch 1; iteration 2 (256 KiB) fits again. vn1 is killed
# when the round of epoch 2 ends (refused), before iteration 2 is written.
timeout -k 5 180 "$bin/dlckpt-run" --job "$job" --nodes 2 --spares 1 --capacity 1M \
  --kill-node vn1 --at checkpoint:2 -- \
  "$tbin/trunc_app" --iters 3 --small-kib 256 --big-kib 1600 --big-at 1 --sleep-ms 1500 >"$out" 2>&1
rc=$?
[ "$rc" = 0 ] || fail "dlckpt-run exited $rc"

# The refusal names the file, the store, its capacity and the option.
line=$(grep -m1 "checkpoint of iteration 1 refused" "$out") || fail "the oversized checkpoint was not refused"
for want in "refusing to commit epoch" "/dlckpt/trunc_app/rank" "is incomplete" "/dlckpt.$job.vn" \
            "1.0 MiB of file data" "dlckpt-run --capacity" "DLCKPT_MAX_FILES"; do
  [[ "$line" == *"$want"* ]] || fail "the refusal does not say '$want': $line"
done
grep -q "short checkpoint\|differs from what was written\|bad checkpoint header" "$out" &&
  fail "the relaunched application read a damaged checkpoint"
grep -q "fclose checkpoint" "$out" && fail "fclose failed: the scenario needs an application that goes on"

# The kill came after the refusal: epoch 1 was restored and read back whole.
grep -q "recovery 1: restore epoch 1\b" "$out" || fail "recovery 1 did not restore epoch 1"
grep -q "trunc_app: restarted from epoch 1 (iteration 0, 262144 bytes), checkpoint verified" "$out" ||
  fail "the relaunched application did not verify the checkpoint of iteration 0"

# The summary: only the checkpoints that fit are protected; the refused ones
# are named, with the newest protected epoch.
summary=$(grep "^dlckpt-run: summary of job $job" "$out") || fail "no summary"
[[ "$summary" == *"; 2 checkpoint(s) (last epoch "* ]] || fail "the summary does not count 2 protected checkpoints: $summary"
[[ "$summary" =~ checkpoint\(s\)\ refused\ at\ commit\ \(epoch\(s\)\ 2(,\ [0-9]+)?\),\ epoch\ [0-9]+\ is\ the\ newest\ protected ]] ||
  fail "the summary does not name the refused checkpoints: $summary"
grep -q "^dlckpt-run:   checkpoint refused: rank [01]: .*/dlckpt/trunc_app/rank[01].ckpt is incomplete" "$out" ||
  fail "the summary does not say which file made the checkpoint fail"
grep -q "trunc_app: done, 1 checkpoint(s) refused" "$out" || fail "the application did not finish"

ls /dev/shm | grep -q "^dlckpt\.$job\." && fail "shared memory left behind"
echo "truncated_ckpt_test: ok"

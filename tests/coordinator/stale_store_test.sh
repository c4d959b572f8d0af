#!/usr/bin/env bash
# Stores left by an earlier run are never resumed by accident (issue 21, item 1):
#   mpiexec    plain mpiexec, no dlckpt-run: a run that ends well removes its
#              stores (DLCKPT_KEEP=1 keeps them); a second run of the same job
#              says it does not resume the kept stores and starts from empty
#              ones, with the failure-free answer; DLCKPT_RESUME=1 restarts
#              from them;
#   dlckptrun  dlckpt-run --keep, then the same --job again: from empty stores
#              unless --resume.
#
# usage: stale_store_test.sh BIN_DIR TEST_BIN_DIR SCENARIO
set -uo pipefail
bin=$1 tbin=$2 scenario=$3
job="st${scenario//[^a-z0-9]/}$$"
out=$(mktemp)
cleanup() {
  rm -f /dev/shm/dlckpt."$job".* 2>/dev/null
  rm -rf "/tmp/dlckpt-run.$job" "$out"
}
trap cleanup EXIT
fail() { echo "FAIL ($scenario): $*" >&2; echo "---- output:" >&2; cat "$out" >&2; exit 1; }
app=("$tbin/ckpt_app" --iters 4 --kib 64 --sleep-ms 0)
stores() { ls /dev/shm | grep -c "^dlckpt\.$job\." ; }
checksum() { sed -n 's/^checksum: //p' "$out"; }

case "$scenario" in
mpiexec)
  run() { env DLCKPT_JOB="$job" "$@" timeout -k 5 60 mpiexec -launcher fork -n 2 "${app[@]}" >"$out" 2>&1; }
  run || fail "first run exited $?"
  ref=$(checksum)
  [ -n "$ref" ] || fail "no checksum"
  [ "$(stores)" = 0 ] || fail "a run that ended well left its stores (DLCKPT_KEEP unset)"
  run DLCKPT_KEEP=1 || fail "run with DLCKPT_KEEP=1 exited $?"
  [ "$(stores)" = 2 ] || fail "DLCKPT_KEEP=1 did not keep both stores"
  # The kept stores hold epoch 4: a plain second run starts from empty stores.
  run DLCKPT_KEEP=1 || fail "second run exited $?"
  grep -q "hold epoch 4 of an earlier run; not resuming it" "$out" || fail "no message about the earlier run's stores"
  grep -q "restarted from" "$out" && fail "the second run resumed the earlier run's stores"
  [ "$(checksum)" = "$ref" ] || fail "second run: checksum $(checksum), expected $ref"
  # Deliberately: DLCKPT_RESUME=1.
  run DLCKPT_RESUME=1 || fail "run with DLCKPT_RESUME=1 exited $?"
  grep -q "restarted from epoch 4" "$out" || fail "DLCKPT_RESUME=1 did not restart from epoch 4"
  [ "$(checksum)" = "$ref" ] || fail "resumed run: checksum $(checksum), expected $ref"
  [ "$(stores)" = 0 ] || fail "the resumed run did not remove its stores at the end"
  ;;
dlckptrun)
  r() { timeout -k 5 120 "$bin/dlckpt-run" --job "$job" --nodes 2 --spares 1 "$@" -- "${app[@]}" >"$out" 2>&1; }
  r --keep || fail "first run exited $?"
  ref=$(checksum)
  [ "$(stores)" -ge 2 ] || fail "--keep did not keep the stores"
  r --keep || fail "second run exited $?"
  grep -q "not resuming it" "$out" || fail "the second dlckpt-run resumed the kept stores without --resume"
  [ "$(checksum)" = "$ref" ] || fail "second run: checksum $(checksum), expected $ref"
  r --resume || fail "run with --resume exited $?"
  grep -q "restarted from epoch 4" "$out" || fail "--resume did not restart from the kept epoch 4"
  [ "$(checksum)" = "$ref" ] || fail "resumed run: checksum $(checksum), expected $ref"
  ;;
*) echo "unknown scenario $scenario" >&2; exit 2 ;;
esac
echo "stale_store_test $scenario: ok"

#!/usr/bin/env bash
# dlckpt-run end to end: the test program checkpoints every iteration through
# stdio into memfs; a node (or a process) is killed at a chosen point; the run
# must finish with the checksum of a failure-free run, the restored checkpoint
# must match what was written byte for byte (ckpt_app verifies it), and
# nothing may be left running or in /dev/shm.
#
# usage: dlckpt_run_test.sh BIN_DIR TEST_BIN_DIR SCENARIO
set -uo pipefail
bin=$1 tbin=$2 scenario=$3
job="rt${scenario//[^a-z0-9]/}$$"
out=$(mktemp)
app=("$tbin/ckpt_app" --iters 6 --kib 512 --sleep-ms 40 --write-pieces 8)

leftovers() {
  local procs
  procs=$(grep -ls "DLCKPT_JOB=$1" /proc/[0-9]*/environ 2>/dev/null | grep -v "/proc/$$/" || true)
  echo "$procs"
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

# layout and injection per scenario
expect_rc=0
restored=""  # the epoch (regex) the first recovery must restore, when known
case "$scenario" in
  between)  layout=(--nodes 3 --spares 1);  inject=(--kill-node vn1 --at checkpoint:2+0.02) ;;
  # The ranks hold their first write of checkpoint 3 (DLCKPT_WRITE_HOLD), so
  # the kill lands before it is committed: the recovery restores epoch 2.
  write)    layout=(--nodes 3 --spares 1);  inject=(--kill-node vn1 --at phase:write:3+0.05); restored=2 ;;
  encode)   layout=(--nodes 3 --spares 1);  inject=(--kill-node vn2 --at phase:encode:3) ;;
  recover)  layout=(--nodes 4 --spares 2 --group-size 2)
            inject=(--kill-node vn1 --at checkpoint:2 --kill-node vn3 --at phase:recover) ;;
  rs)       layout=(--nodes 4 --spares 2 --scheme rs); inject=(--kill-node vn1,vn3 --at checkpoint:2) ;;
  rs-encode) layout=(--nodes 4 --spares 2 --scheme rs); inject=(--kill-node vn0,vn2 --at phase:encode:4) ;;
  crash)    layout=(--nodes 3 --spares 1);  inject=(--crash-rank 1 --at checkpoint:2+0.02) ;;
  spare)    layout=(--nodes 3 --spares 1);  inject=(--kill-node vn3 --at checkpoint:2) ;;
  # The node dies at the last checkpoint, while the application ends: the
  # relaunch restores epoch 6 (iteration 5) on every rank and only finishes.
  last)     layout=(--nodes 3 --spares 1);  inject=(--kill-node vn1 --at checkpoint:6); restored=6 ;;
  toomany)  layout=(--nodes 3 --spares 1);  inject=(--kill-node vn1,vn2 --at checkpoint:2); expect_rc=3 ;;
  mtbf)     layout=(--nodes 3 --spares 3);  inject=(--mtbf 1.5 --max-failures 2 --seed 11); expect_rc=any ;;
  # Asynchronous encode: the application computes while the codec encodes.
  async-encode) layout=(--nodes 3 --spares 1 --encode async); inject=(--kill-node vn2 --at phase:encode:3)
            restored=2 ;;
  async-commit) layout=(--nodes 3 --spares 1 --encode async); inject=(--kill-node vn1 --at commit:3)
            restored="2|3" ;;
  async-rs) layout=(--nodes 4 --spares 2 --scheme rs --encode async); inject=(--kill-node vn0,vn2 --at phase:encode:4)
            restored=3 ;;
  *) echo "unknown scenario $scenario" >&2; exit 2 ;;
esac
nodes=${layout[1]}

# The failure-free answer, without dlckpt-run (local commits only).
ref=$(DLCKPT_JOB="${job}ref" timeout -k 5 120 mpiexec -launcher fork -n "$nodes" "${app[@]}" 2>/dev/null \
      | sed -n 's/^checksum: //p')
rm -f /dev/shm/dlckpt."${job}ref".*
[ -n "$ref" ] || fail "the failure-free run printed no checksum"

timeout -k 5 240 "$bin/dlckpt-run" --job "$job" "${layout[@]}" "${inject[@]}" -- "${app[@]}" >"$out" 2>&1
rc=$?
if [ "$expect_rc" = any ]; then
  # Random kills: either the run survives or it stops with a clear message.
  grep -q "killing node" "$out" || fail "no node was killed"
  case "$rc" in
    0) expect_rc=0 ;;
    3) grep -q "unrecoverable:" "$out" || fail "exit 3 without an unrecoverable message"; expect_rc=3 ;;
    *) fail "dlckpt-run exited $rc" ;;
  esac
fi
[ "$rc" = "$expect_rc" ] || fail "dlckpt-run exited $rc, expected $expect_rc"
summary_rc=$(sed -n 's/^dlckpt-run: summary of job [^:]*: exit \([0-9]*\).*/\1/p' "$out")
[ "$summary_rc" = "$rc" ] || fail "the summary says exit '$summary_rc' but dlckpt-run exited $rc"
if [ "$expect_rc" = 0 ] && [ "$scenario" = mtbf ]; then
  got=$(sed -n 's/^checksum: //p' "$out")
  [ "$got" = "$ref" ] || fail "checksum '$got' differs from the failure-free run's '$ref'"
elif [ "$expect_rc" = 0 ]; then
  # Every checksum printed (a run that ended before its node was lost prints one before the relaunch too).
  got=$(sed -n 's/^checksum: //p' "$out" | sort -u)
  [ "$got" = "$ref" ] || fail "checksum '$got' differs from the failure-free run's '$ref'"
  grep -q "checkpoint verified" "$out" || fail "the application did not restart from a verified checkpoint"
  grep -q "^METRIC recovery_seconds" "$out" || fail "no recovery METRIC line"
  if [ -n "$restored" ]; then
    # Never an epoch whose encode did not complete: the previous protected one.
    grep -Eq "recovery 1: restore epoch ($restored);" "$out" || fail "recovery 1 did not restore epoch $restored"
  fi
elif [ "$scenario" = toomany ]; then
  grep -q "unrecoverable: group 0" "$out" || fail "no clear unrecoverable message naming the group"
  grep -q "newest checkpoint that still exists is epoch 2" "$out" || fail "the message does not name the newest checkpoint"
fi
sleep 0.2
[ -z "$(leftovers "$job")" ] || fail "processes of the job are still running"
if ls /dev/shm | grep -q "^dlckpt\.$job\."; then fail "shared memory objects left: $(ls /dev/shm | grep "dlckpt.$job.")"; fi
[ ! -e "/tmp/dlckpt-run.$job" ] || fail "run directory left behind"
grep -E "^dlckpt-run:|^METRIC" "$out"
echo "dlckpt_run_test $scenario: ok (checksum $ref)"

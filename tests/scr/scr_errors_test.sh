#!/usr/bin/env bash
# scr_errors_test.sh SCR_APP — the SCR API's error paths (scr_app --mode
# errors) on 4 ranks without dlckpt-run (checkpoints committed locally):
# Complete_output without Start_output, Start_restart with no checkpoint,
# valid = 0 on one rank, a routed file never written, nested Start_output.
set -uo pipefail
app=$1
job="screrr$$x${RANDOM}"
out=$(mktemp)
cleanup() { rm -f /dev/shm/dlckpt."$job".*; rm -rf /dev/shm/dlckpt-scr."$job".*; rm -f "$out"; }
trap cleanup EXIT
DLCKPT_JOB=$job DLCKPT_STORE_CAPACITY=16M timeout -k 5 50 mpiexec -launcher fork -n 4 "$app" --mode errors \
  >"$out" 2>&1 || { cat "$out"; echo "FAIL: scr_app --mode errors exited $?"; exit 1; }
grep -q "^errors: ok" "$out" || { cat "$out"; echo "FAIL: error paths"; exit 1; }
ls /dev/shm | grep "^dlckpt-scr\.$job\." >/dev/null && { echo "FAIL: staging directories left behind"; exit 1; }
echo "scr_errors_test: ok"

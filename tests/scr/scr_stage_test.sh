#!/usr/bin/env bash
# scr_stage_test.sh APP — no staging directory (/dev/shm/dlckpt-scr.<job>.r<rank>)
# outlives a failed SCR restart. APP is scr_byname --fail-restart HOW: after a
# checkpoint, SCR_Route_file of a file the checkpoint does not hold must fail,
# then every rank ends without SCR_Finalize:
#   exit  exit(3) (what a Fortran runtime error or a C program giving up does)
#   kill  SIGKILL (nothing of the rank runs any more)
# 2 ranks under plain mpiexec (checkpoints committed locally).
set -uo pipefail
app=$1
base="sst$$x${RANDOM}"
out=$(mktemp)
cleanup() {
  for how in exit kill; do
    rm -f /dev/shm/dlckpt."$base$how".*; rm -rf /dev/shm/dlckpt-scr."$base$how".*
  done
  rm -f "$out"
}
trap cleanup EXIT
for how in exit kill; do
  job=$base$how
  DLCKPT_JOB=$job timeout -k 5 60 mpiexec -launcher fork -n 2 "$app" --iters 3 --fail-restart "$how" >"$out" 2>&1
  rc=$?
  case $rc in 124|137) cat "$out"; echo "FAIL ($how): mpiexec hung"; exit 1 ;; esac
  [ $rc != 0 ] || { cat "$out"; echo "FAIL ($how): the run did not fail"; exit 1; }
  grep -q "route of a missing file failed" "$out" || { cat "$out"; echo "FAIL ($how): the route was not refused"; exit 1; }
  left=$(ls -d /dev/shm/dlckpt-scr."$job".* 2>/dev/null)
  [ -z "$left" ] || { cat "$out"; echo "FAIL ($how): staging directories left behind: $left"; exit 1; }
  echo "$how: no staging directory left"
done
echo "scr_stage_test: ok"

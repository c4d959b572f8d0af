#!/usr/bin/env bash
# run_test.sh BIN_DIR PYTHON roundtrip SCRIPT
#   SCRIPT (roundtrip.py) under dlckpt-run --preload on 2 virtual nodes and
#   a spare: every rank must print "roundtrip ok".
# run_test.sh BIN_DIR PYTHON abort SCRIPT
#   SCRIPT (abort.py: rank 1 raises) on 2 nodes must end the run, not hang.
# run_test.sh BIN_DIR PYTHON nodekill SCRIPT ARGS...
#   SCRIPT (heat.py) failure-free under dlckpt-run --preload on 4 nodes and a
#   spare, then with vn1 killed right after checkpoint 3: the recovered run
#   must restart from a checkpoint and print the same checksum.
# Ranks start as "$PYTHON SCRIPT", or "$PYTHON with_mpi4py.py SCRIPT" (common.sh).
# Processes, stores and run directories of the jobs are removed at the end.
set -uo pipefail
bin=$1 py=$2 what=$3 script=$4
shift 4
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
job=py${what}$$
jobs=("$job" "${job}ref")
out=$(mktemp)
trap 'cleanup_jobs; rm -f "$out"' EXIT
fail() { echo "FAIL ($what): $*" >&2; cat "$out" >&2; exit 1; }
left() { ls /dev/shm | grep -q "^dlckpt\.$1\." && fail "shared memory objects of $1 left behind"; }
case $what in
roundtrip)
  timeout -k 5 120 "$bin/dlckpt-run" --job "$job" --nodes 2 --spares 1 --preload -- \
    "${pyrun[@]}" "$script" "$@" >"$out" 2>&1 || fail "dlckpt-run exited $?"
  # (Ranks' lines may reach mpiexec's output merged: "rank 0: ...okrank 1: ...".)
  [ "$(grep -o "rank [01]: roundtrip ok" "$out" | sort -u | wc -l)" = 2 ] || fail "not every rank ended ok"
  left "$job"
  echo "roundtrip ($flavor, ${pyrun[*]}): ok" ;;
abort)
  start=$(date +%s)
  timeout -k 5 60 "$bin/dlckpt-run" --job "$job" --nodes 2 --spares 1 --preload -- \
    "${pyrun[@]}" "$script" "$@" >"$out" 2>&1 && fail "dlckpt-run exited 0"
  rc=$?
  [ "$rc" = 124 ] || [ "$rc" = 137 ] && fail "the run hung (timeout)"
  grep -q "ValueError: rank 1 gives up" "$out" || fail "no traceback"
  grep -q "not reached" "$out" && fail "a rank went past the checkpoint"
  left "$job"
  echo "abort ($flavor, ${pyrun[*]}): ok (dlckpt-run exited $rc after $(( $(date +%s) - start )) s)" ;;
nodekill)
  timeout -k 5 120 "$bin/dlckpt-run" --job "${job}ref" --nodes 4 --spares 1 --preload -- \
    "${pyrun[@]}" "$script" "$@" >"$out" 2>&1 || fail "the failure-free run: dlckpt-run exited $?"
  ref=$(sed -n 's/^checksum: //p' "$out")
  [ -n "$ref" ] || fail "the failure-free run printed no checksum"
  left "${job}ref"
  timeout -k 5 180 "$bin/dlckpt-run" --job "$job" --nodes 4 --spares 1 --preload \
    --kill-node vn1 --at checkpoint:3 -- "${pyrun[@]}" "$script" "$@" >"$out" 2>&1 \
    || fail "dlckpt-run exited $?"
  got=$(sed -n 's/^checksum: //p' "$out")
  [ "$got" = "$ref" ] || fail "checksum '$got' differs from the failure-free run's '$ref'"
  grep -q "killing node" "$out" || fail "no node was killed (the run ended before checkpoint 3?)"
  grep -q "restarted from step [1-9]" "$out" || fail "the application did not restart from a checkpoint"
  left "$job"
  grep -E "^dlckpt-run: +(recovery|node killed)" "$out"
  echo "nodekill ($flavor, ${pyrun[*]}): ok (checksum $ref)" ;;
*) fail "unknown test $what" ;;
esac

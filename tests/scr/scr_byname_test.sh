#!/usr/bin/env bash
# scr_byname_test.sh RUN_DIR APP — SCR's restart by checkpoint name: APP
# (scr_byname or scr_byname_f) checkpoints into ckpt.<iteration>/rank_N.ckpt
# and restarts from "<checkpoint name>/rank_N.ckpt". Runs APP once
# failure-free (plain mpiexec, 4 ranks), then under RUN_DIR/dlckpt-run on 4
# virtual nodes (XOR, 1 spare) with node vn2 killed right after checkpoint 1:
# the relaunched job must restart by name from a checkpoint and print the
# failure-free checksum. Cleans up its processes, stores
# (/dev/shm/dlckpt.<job>.*), staging directories and run directory.
set -uo pipefail
run_dir=$1 app=$2
job="sbn$(basename "$app" | tr -cd 'a-z0-9')x$$"
out=$(mktemp)
cleanup() {
  for j in "$job" "${job}ref"; do
    for p in $(grep -ls "DLCKPT_JOB=$j" /proc/[0-9]*/environ 2>/dev/null); do
      p=${p#/proc/}; [ "${p%%/*}" = $$ ] || kill -9 "${p%%/*}" 2>/dev/null
    done
    rm -f /dev/shm/dlckpt."$j".*; rm -rf /dev/shm/dlckpt-scr."$j".* "/tmp/dlckpt-run.$j"
  done
  rm -f "$out"
}
trap cleanup EXIT
fail() { echo "FAIL ($(basename "$app")): $*" >&2; cat "$out" >&2; exit 1; }
args=(--iters 10 --sleep-ms 50)

ref=$(DLCKPT_JOB="${job}ref" timeout -k 5 60 mpiexec -launcher fork -n 4 "$app" "${args[@]}" 2>"$out" \
      | sed -n 's/^checksum: *//p')
[ -n "$ref" ] || fail "the failure-free run printed no checksum"
rm -f /dev/shm/dlckpt."${job}ref".*
timeout -k 5 90 "$run_dir/dlckpt-run" --job "$job" --nodes 4 --spares 1 --scheme xor --kill-node vn2 \
  --at checkpoint:1 -- "$app" "${args[@]}" >"$out" 2>&1
rc=$?
[ "$rc" = 0 ] || fail "dlckpt-run exited $rc"
grep -q "killing node" "$out" || fail "no node was killed"
grep -Eq "^restarted from iteration [1-9][0-9]* \(checkpoint scr\.dataset\.[1-9][0-9]*\)" "$out" ||
  fail "the application did not restart by checkpoint name"
grep -q "SCR_Route_file" "$out" && fail "SCR_Route_file reported an error"
got=$(sed -n 's/^checksum: *//p' "$out")
[ "$got" = "$ref" ] || fail "checksum '$got' differs from the failure-free run's '$ref'"
ls /dev/shm | grep "^dlckpt\.$job\." >/dev/null && fail "shared memory objects left behind"
ls /dev/shm | grep "^dlckpt-scr\.$job\." >/dev/null && fail "staging directories left behind"
grep -E "^restarted from" "$out"
echo "scr_byname_test $(basename "$app"): ok (checksum $ref)"

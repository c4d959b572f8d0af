#!/usr/bin/env bash
# An app under dlckpt-run loses node(s) at a seeded random time (XOR: one data
# node; RS with 2 parities: two data nodes at once) and must finish with the
# checksum of a failure-free run of the same binary.
#
# usage: app_node_kill_test.sh BIN_DIR APP xor|rs SEED
set -uo pipefail
bin=$1 app=$2 scheme=$3 seed=$4
job="ak${app//[^a-z0-9]/}${scheme}${seed}x$$"
out=$(mktemp)
cleanup() {
  for j in "$job" "${job}ref"; do
    for p in $(grep -ls "DLCKPT_JOB=$j" /proc/[0-9]*/environ 2>/dev/null); do
      p=${p#/proc/}; [ "${p%%/*}" = $$ ] || kill -9 "${p%%/*}" 2>/dev/null
    done
    rm -f /dev/shm/dlckpt."$j".*; rm -rf "/tmp/dlckpt-run.$j"
  done
  rm -f "$out"
}
trap cleanup EXIT
fail() { echo "FAIL ($app $scheme seed $seed): $*" >&2; cat "$out" >&2; exit 1; }

args=(--iters 16 --sleep-ms 80 --ckpt-every 1)
RANDOM=$seed
epoch=$(( 2 + RANDOM % 10 ))      # after this checkpoint ...
delay=$(( RANDOM % 150 ))          # ... plus this many ms, somewhere in the next iteration
n1=$(( RANDOM % 4 )); n2=$(( (n1 + 1 + RANDOM % 3) % 4 ))
if [ "$scheme" = xor ]; then
  layout=(--nodes 4 --spares 1 --scheme xor); victims="vn$n1"
else
  layout=(--nodes 4 --spares 2 --scheme rs); victims="vn$n1,vn$n2"
fi
at="checkpoint:$epoch+0.$(printf %03d $delay)"

ref=$(DLCKPT_JOB="${job}ref" timeout -k 5 120 mpiexec -launcher fork -n 4 "$bin/$app-dlckpt" "${args[@]}" 2>/dev/null \
      | sed -n 's/^checksum: //p')
rm -f /dev/shm/dlckpt."${job}ref".*
[ -n "$ref" ] || fail "the failure-free run printed no checksum"
echo "killing $victims at $at"
timeout -k 5 240 "$bin/dlckpt-run" --job "$job" "${layout[@]}" --kill-node "$victims" --at "$at" \
  -- "$bin/$app-dlckpt" "${args[@]}" >"$out" 2>&1
rc=$?
[ "$rc" = 0 ] || fail "dlckpt-run exited $rc"
got=$(sed -n 's/^checksum: //p' "$out")
[ "$got" = "$ref" ] || fail "checksum '$got' differs from the failure-free run's '$ref'"
grep -q "killing node" "$out" || fail "no node was killed (the run ended before $at)"
grep -q "restarted from iteration" "$out" || fail "the application did not restart from a checkpoint"
if ls /dev/shm | grep -q "^dlckpt\.$job\."; then fail "shared memory objects left behind"; fi
grep -E "^dlckpt-run: +(recovery|node killed)|^METRIC" "$out"
echo "app_node_kill_test $app $scheme seed $seed: ok (checksum $ref)"

#!/usr/bin/env bash
# Reed-Solomon with k = 2 (4 data nodes vn0..vn3, parity on vn4 and vn5) must
# survive a second lost node that comes before the next encode: FIRST dies
# right after checkpoint 3, is recovered (a lost data node is rebuilt on a
# spare that may also hold a parity of the group), and SECOND dies while the
# relaunched application writes checkpoint 4, so the second recovery again
# restores epoch 3, from what the first one left. Every run must finish with
# the checksum of a failure-free run and leave nothing in /dev/shm.
#
# usage: second_loss_test.sh BIN_DIR FIRST:SECOND...   (e.g. vn2:vn0 vn4:vn5)
set -uo pipefail
bin=$1; shift
job="sl$$"
out=$(mktemp)
cleanup() {
  for p in $(grep -ls "DLCKPT_JOB=$job" /proc/[0-9]*/environ 2>/dev/null); do
    p=${p#/proc/}; [ "${p%%/*}" = $$ ] || kill -9 "${p%%/*}" 2>/dev/null
  done
  rm -f /dev/shm/dlckpt."$job"*; rm -rf /tmp/dlckpt-run."$job"*
  rm -f "$out"
}
trap cleanup EXIT
fail() { echo "FAIL ($pair): $*" >&2; cat "$out" >&2; exit 1; }

app=("$bin/heat2d-dlckpt" --nx 128 --ny 128 --iters 100 --ckpt-every 10 --sleep-ms 30)
pair=reference
ref=$(DLCKPT_JOB="${job}ref" timeout -k 5 120 mpiexec -launcher fork -n 4 "${app[@]}" 2>/dev/null |
      sed -n 's/^checksum: //p')
rm -f /dev/shm/dlckpt."${job}ref".*
[ -n "$ref" ] || fail "the failure-free run printed no checksum"

for pair in "$@"; do
  first=${pair%%:*} second=${pair##*:}
  j="$job${first}${second}"
  timeout -k 5 180 "$bin/dlckpt-run" --job "$j" --nodes 4 --spares 2 --scheme rs \
    --kill-node "$first" --at checkpoint:3 --kill-node "$second" --at phase:write:4 -- "${app[@]}" >"$out" 2>&1
  rc=$?
  [ "$rc" = 0 ] || fail "dlckpt-run exited $rc"
  got=$(sed -n 's/^checksum: //p' "$out")
  [ "$got" = "$ref" ] || fail "checksum '$got' differs from the failure-free run's '$ref'"
  grep -q "node killed: $first (--at checkpoint:3)" "$out" || fail "$first was not killed"
  grep -q "node killed: $second (--at phase:write:4)" "$out" || fail "$second was not killed"
  grep -q "recovery 2: restore epoch 3" "$out" || fail "the second recovery did not restore epoch 3"
  if ls /dev/shm | grep -q "^dlckpt\.$j\."; then fail "shared memory objects left behind"; fi
  echo "$pair: $(grep -E -m1 '^dlckpt-run: recovery 2:' "$out" | sed 's/^dlckpt-run: *//')"
done
echo "second_loss_test: $# pair(s) recovered with the failure-free checksum $ref"

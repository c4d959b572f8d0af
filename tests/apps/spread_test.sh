#!/usr/bin/env bash
# Parity spread over a group's members (dlckpt-run --parity spread|auto): a run
# with no spare node, or one whose spares a recovery used up, survives node
# losses and finishes with the checksum of a failure-free run.
#   xor-nospare  8 data nodes in 2 groups of 4, no spare, XOR spread: vn1
#                dies at checkpoint 3 and vn6 at checkpoint 7; each lost rank is
#                rebuilt from its group's stripes (parity on the members) and
#                runs on a survivor (oversubscribed), first one outside its group
#   rs-nospare   4 data nodes x 2 ranks, no spare, RS k = 2 spread: vn1 and vn2
#                die at once at checkpoint 3 (two members of every stripe)
#   auto         4 data nodes, 1 spare, --parity auto: vn1 dies at checkpoint
#                3 (rebuilt on the spare), vn2 at checkpoint 7 and vn3 at
#                checkpoint 10, when the group has spread its parity (no spare
#                left)
#   encode       4 data nodes, no spare, XOR spread: vn2 dies inside the encode
#                of epoch 4, so epoch 3 is restored from spread parity
#   switch-encode
#                4 data nodes, 1 spare, --parity auto: vn1 dies at checkpoint 3
#                (rebuilt on the spare vn4, which holds p0: d1,p0@vn4), then vn2
#                inside the encode of epoch 4, the first after the switch to
#                spread parity; epoch 3 is restored from its spares-layout
#                parity: d2 = d0 ^ d1 ^ d3 ^ p0, vn4 giving d1 ^ p0 as one
#                source (issue 32, test 4)
#   halt         as xor-nospare on 4 nodes with --on-spares-exhausted halt
#                --persist DIR: vn1's rank is rebuilt on a survivor, that epoch
#                drained, exit 7; then --restart-from DIR on 4 fresh nodes
# Each run must name the layout in its summary and leave nothing in /dev/shm.
#
# usage: spread_test.sh BIN_DIR SCENARIO...
set -uo pipefail
bin=$1; shift
job="sp$$"
out=$(mktemp)
cleanup() {
  for p in $(grep -ls "DLCKPT_JOB=$job" /proc/[0-9]*/environ 2>/dev/null); do
    p=${p#/proc/}; [ "${p%%/*}" = $$ ] || kill -9 "${p%%/*}" 2>/dev/null
  done
  rm -f /dev/shm/dlckpt."$job"*; rm -rf /tmp/dlckpt-run."$job"*
  rm -f "$out"
}
trap cleanup EXIT
fail() { echo "FAIL ($scenario): $*" >&2; cat "$out" >&2; exit 1; }

app=("$bin/heat2d-dlckpt" --nx 384 --ny 384 --iters 60 --ckpt-every 5 --sleep-ms 20)
declare -A ref
reference() {  # NP
  local np=$1
  if [ -z "${ref[$np]:-}" ]; then
    ref[$np]=$(DLCKPT_JOB="${job}ref" timeout -k 5 120 mpiexec -launcher fork -n "$np" "${app[@]}" 2>/dev/null |
               sed -n 's/^checksum: //p')
    rm -f /dev/shm/dlckpt."${job}ref".*
    [ -n "${ref[$np]}" ] || fail "the failure-free run on $np ranks printed no checksum"
  fi
  echo "${ref[$np]}"
}

for scenario in "$@"; do
  j="$job${scenario//-/}"
  case $scenario in
    xor-nospare) np=8; args=(--nodes 8 --group-size 4 --spares 0 --parity spread --kill-node vn1 --at checkpoint:3
                             --kill-node vn6 --at checkpoint:7) ;;
    rs-nospare)  np=8; args=(--nodes 4 --ranks-per-node 2 --spares 0 --parity spread --scheme rs
                             --kill-node vn1,vn2 --at checkpoint:3) ;;
    auto)        np=4; args=(--nodes 4 --spares 1 --kill-node vn1 --at checkpoint:3
                             --kill-node vn2 --at checkpoint:7 --kill-node vn3 --at checkpoint:10) ;;
    encode)      np=4; args=(--nodes 4 --spares 0 --parity spread --kill-node vn2 --at phase:encode:4) ;;
    switch-encode) np=4; args=(--nodes 4 --spares 1 --kill-node vn1 --at checkpoint:3
                               --kill-node vn2 --at phase:encode:4) ;;
    halt)        np=4; persist=$(mktemp -d /tmp/dlckpt-spread-persist.XXXXXX)
                 args=(--nodes 4 --spares 0 --parity spread --on-spares-exhausted halt --persist "$persist"
                       --kill-node vn1 --at checkpoint:4) ;;
    *) echo "unknown scenario $scenario" >&2; exit 2 ;;
  esac
  want=$(reference "$np")
  timeout -k 5 240 "$bin/dlckpt-run" --job "$j" "${args[@]}" -- "${app[@]}" >"$out" 2>&1
  rc=$?
  if [ "$scenario" = halt ]; then
    [ "$rc" = 7 ] || fail "--on-spares-exhausted halt: exit $rc, expected 7"
    grep -q "no spare node left to host the lost ranks, and --on-spares-exhausted halt" "$out" ||
      fail "the halt does not say why"
    grep -q "halted by --on-spares-exhausted halt; epoch 4 drained to" "$out" || fail "epoch 4 was not drained"
    timeout -k 5 240 "$bin/dlckpt-run" --job "$j" --nodes 4 --spares 0 --parity spread --restart-from "$persist" \
      -- "${app[@]}" >"$out" 2>&1
    rc=$?
    rm -rf "$persist"
  fi
  [ "$rc" = 0 ] || fail "dlckpt-run exited $rc"
  got=$(sed -n 's/^checksum: //p' "$out")
  [ "$got" = "$want" ] || fail "checksum '$got' differs from the failure-free run's '$want'"
  case $scenario in
    xor-nospare)
      grep -q "recovery 1: restore epoch 3; lost node(s) vn1; rebuild group 0 member vn1 on vn4; no spare node left: vn4 now runs ranks 1,4 (oversubscribed)" "$out" ||
        fail "the first recovery did not rebuild vn1 on a survivor outside its group and say so"
      grep -q "recovery 2: restore epoch 7; lost node(s) vn6; rebuild group 1 member vn6 on .*(oversubscribed)" "$out" ||
        fail "the second recovery did not rebuild vn6 on a survivor"
      grep -q "chunks spread: " "$out" || fail "the recovery line does not name the spread layout" ;;
    rs-nospare)
      grep -q "recovery 1: restore epoch 3; lost node(s) vn1 vn2" "$out" || fail "no recovery of vn1 and vn2"
      [ "$(grep -c 'rebuild group 0 member' "$out")" -ge 1 ] || fail "no rebuild" ;;
    auto)
      grep -q "recovery 1: .*rebuild group 0 member vn1 on vn4; .*(chunks d0@vn0" "$out" ||
        fail "the first loss was not rebuilt on the spare"
      grep -q "warning: codec protection spread: group(s) 0 keep their parity on their own data nodes" "$out" ||
        fail "the switch to spread parity was not reported"
      grep -q "recovery 2: restore epoch 7; lost node(s) vn2; rebuild group 0 member vn2 on .*(chunks spread: " "$out" ||
        fail "the second loss was not rebuilt from spread parity"
      grep -q "recovery 3: restore epoch 10; lost node(s) vn3; rebuild group 0 member vn3 on .*(chunks spread: " "$out" ||
        fail "the third loss was not rebuilt from spread parity" ;;
    halt)
      grep -q "^dlckpt-run: restarting from .*epoch" "$out" || fail "no restart from the drained epoch" ;;
    encode)
      grep -q "recovery 1: restore epoch 3; lost node(s) vn2; rebuild group 0 member vn2 on .*(chunks spread: " "$out" ||
        fail "a loss inside the encode of epoch 4 did not restore epoch 3 from spread parity" ;;
    switch-encode)
      grep -q "recovery 1: restore epoch 3; lost node(s) vn1; rebuild group 0 member vn1 on vn4; .*(chunks d0@vn0 d2@vn2 d3@vn3 d1,p0@vn4" "$out" ||
        fail "the first loss was not rebuilt on the spare holding p0"
      grep -q "recovery 2: restore epoch 3; lost node(s) vn2; rebuild group 0 member vn2 on " "$out" ||
        fail "a loss inside the first spread encode did not restore epoch 3 (d1 and p0 both on vn4)" ;;
  esac
  if ls /dev/shm | grep -q "^dlckpt\.$j\."; then fail "shared memory objects left behind"; fi
  echo "$scenario: $(grep -E -m1 '^dlckpt-run: (recovery 1|restarting from)' "$out" | sed 's/^dlckpt-run: *//')"
done
echo "spread_test: $# scenario(s) finished with the failure-free checksum"

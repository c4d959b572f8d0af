#!/usr/bin/env bash
# The choice between delta and full encode, through the environment that
# dlckpt-run passes to the codec: DLCKPT_DELTA unset (auto) encodes a 10 %
# and a 50 % rewrite as deltas and a 90 % rewrite in full (above the
# measured threshold of the spares layout, 0.7 for XOR); DLCKPT_DELTA=off
# never encodes a delta; DLCKPT_DELTA=on does even at 90 %. Every run must give the failure-free checksum. The codec's
# "encode-delta E <groups by delta>/<groups> ..." events tell what it chose.
#
# usage: incremental_modes_test.sh BIN_DIR TEST_BIN_DIR
set -uo pipefail
bin=$1 tbin=$2
base="incmodes$$"
out=$(mktemp)
cleanup() {
  for j in "$base"a "$base"b "$base"c "$base"d "$base"e "${base}ref"; do
    rm -f /dev/shm/dlckpt."$j".* 2>/dev/null
    rm -rf "/tmp/dlckpt-run.$j"
  done
  rm -f "$out"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; echo "---- output:" >&2; cat "$out" >&2; exit 1; }

# run JOB MODE FRACTION: prints "<delta encodes> <full encodes after the first>"
run() {
  local job=$1 mode=$2 fraction=$3
  local app=("$tbin/partial_ckpt_app" --iters 5 --kib 1024 --rewrite-fraction "$fraction" --sleep-ms 10)
  local ref
  ref=$(DLCKPT_JOB="${base}ref" timeout -k 5 60 mpiexec -launcher fork -n 3 "${app[@]}" 2>/dev/null |
        sed -n 's/^checksum: //p')
  rm -f /dev/shm/dlckpt."${base}ref".*
  if [ "$mode" = auto ]; then
    env -u DLCKPT_DELTA timeout -k 5 120 "$bin/dlckpt-run" --job "$job" --keep --nodes 3 --spares 1 -- "${app[@]}" \
      >"$out" 2>&1 || fail "dlckpt-run ($mode, $fraction) failed"
  else
    DLCKPT_DELTA=$mode timeout -k 5 120 "$bin/dlckpt-run" --job "$job" --keep --nodes 3 --spares 1 -- "${app[@]}" \
      >"$out" 2>&1 || fail "dlckpt-run ($mode, $fraction) failed"
  fi
  local got
  got=$(sed -n 's/^checksum: //p' "$out")
  [ -n "$ref" ] && [ "$got" = "$ref" ] || fail "$mode $fraction: checksum '$got', failure-free '$ref'"
  local ev="/tmp/dlckpt-run.$job/events"
  local delta full
  delta=$(grep -c "encode-delta [0-9]* 1/1 " "$ev")
  full=$(grep "encode-delta [0-9]* 0/1 " "$ev" | grep -vc "encode-delta 1 ")
  rm -f /dev/shm/dlckpt."$job".*
  rm -rf "/tmp/dlckpt-run.$job"
  echo "$delta $full"
}

read -r d f < <(run "$base"a auto 0.1) || exit 1
[ "$d" -ge 3 ] && [ "$f" = 0 ] || fail "auto at 10 %: $d delta and $f full encodes after the first"
read -r d f < <(run "$base"e auto 0.5) || exit 1
[ "$d" -ge 3 ] && [ "$f" = 0 ] || fail "auto at 50 %: $d delta and $f full encodes after the first"
read -r d f < <(run "$base"b auto 0.9) || exit 1
[ "$d" = 0 ] && [ "$f" -ge 3 ] || fail "auto at 90 %: $d delta and $f full encodes after the first"
read -r d f < <(run "$base"c off 0.1) || exit 1
[ "$d" = 0 ] || fail "DLCKPT_DELTA=off: $d delta encodes"
read -r d f < <(run "$base"d on 0.9) || exit 1
[ "$d" -ge 3 ] || fail "DLCKPT_DELTA=on at 90 %: only $d delta encodes"
echo "incremental_modes_test: ok"

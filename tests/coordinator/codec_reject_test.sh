#!/usr/bin/env bash
# A codec service under attack: wrong token, no HELLO, malformed and oversized
# frames, another job, forbidden commands. Each is rejected with a logged
# reason and the service keeps running; then it shuts down cleanly.
# usage: codec_reject_test.sh BIN_DIR TEST_BIN_DIR
set -uo pipefail
bin=$1 tbin=$2
job="rej$$"
dir=$(mktemp -d)
cleanup() {
  [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null
  for p in $(grep -ls "DLCKPT_JOB=$job" /proc/[0-9]*/environ 2>/dev/null); do
    p=${p#/proc/}; [ "${p%%/*}" = $$ ] || kill -9 "${p%%/*}" 2>/dev/null
  done
  rm -f /dev/shm/dlckpt."$job".*; rm -rf "$dir"
}
trap cleanup EXIT
DLCKPT_JOB=$job mpiexec -launcher fork -n 1 -env DLCKPT_NODE n0 "$bin/dlckpt-codec" --rendezvous "$dir/rdv" : \
  -n 1 -env DLCKPT_NODE n1 "$bin/dlckpt-codec" --rendezvous "$dir/rdv" >"$dir/log" 2>&1 &
pid=$!
"$tbin/codec_client" "$dir/rdv"; rc=$?
[ "$rc" = 0 ] || kill "$pid" 2>/dev/null
wait "$pid"; codec_rc=$?
echo "---- codec log:"; cat "$dir/log"
[ "$rc" = 0 ] || { echo "FAIL: client checks failed"; exit 1; }
[ "$codec_rc" = 0 ] || { echo "FAIL: the codec exited $codec_rc"; exit 1; }
grep -q "rejected .*wrong token" "$dir/log" || { echo "FAIL: no logged reason for the wrong token"; exit 1; }
grep -q "rejected .*malformed" "$dir/log" || { echo "FAIL: no logged reason for the malformed frame"; exit 1; }
echo "codec_reject_test: ok"

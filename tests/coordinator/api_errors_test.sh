#!/usr/bin/env bash
# The application API's bad inputs: a rendezvous file that never appears, one
# readable by others, and a codec that is gone. Each ends the job with a
# message naming the cause; nothing is left behind.
# usage: api_errors_test.sh TEST_BIN_DIR
set -uo pipefail
tbin=$1
job="apierr$$"
dir=$(mktemp -d)
cleanup() { rm -f /dev/shm/dlckpt."$job".*; rm -rf "$dir"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; cat "$dir/out" >&2; exit 1; }
run() { DLCKPT_JOB=$job timeout -k 5 60 mpiexec -launcher fork -n 2 "$@" "$tbin/ckpt_app" --iters 2 --kib 16 --sleep-ms 1 >"$dir/out" 2>&1; }

run -genv DLCKPT_RENDEZVOUS "$dir/missing" -genv DLCKPT_RENDEZVOUS_TIMEOUT 1
[ $? != 0 ] || fail "a missing rendezvous file was accepted"
grep -q "rendezvous file $dir/missing does not exist" "$dir/out" || fail "no message naming the missing rendezvous file"

printf 'dlckpt-rendezvous 1\nhost 127.0.0.1\nport 1\ntoken %064d\njob x\n' 0 > "$dir/open"
chmod 644 "$dir/open"
run -genv DLCKPT_RENDEZVOUS "$dir/open"
[ $? != 0 ] || fail "a world-readable rendezvous file was accepted"
grep -q "readable by others" "$dir/out" || fail "no message about the rendezvous file's mode"

chmod 600 "$dir/open"
run -genv DLCKPT_RENDEZVOUS "$dir/open"
[ $? != 0 ] || fail "a dead codec address was accepted"
grep -q "connect 127.0.0.1:1" "$dir/out" || fail "no message naming the unreachable service"
if ls /dev/shm | grep -q "^dlckpt\.$job\."; then rm -f /dev/shm/dlckpt."$job".*; fi
echo "api_errors_test: ok"

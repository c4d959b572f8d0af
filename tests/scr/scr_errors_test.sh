#!/usr/bin/env bash
# scr_errors_test.sh SCR_APP — the SCR API's error paths (scr_app --mode
# errors) on 4 ranks without dlckpt-run (checkpoints committed locally):
# Complete_output without Start_output, Start_restart with no checkpoint,
# valid = 0 on one rank, a routed file never written, nested Start_output,
# a checkpoint too large for a 16 MiB store (invalid everywhere), and an
# SCR_CONF_FILE that is a FIFO (refused at once: SCR_Init must not hang).
set -uo pipefail
app=$1
job="screrr$$x${RANDOM}"
out=$(mktemp)
fifo=$(mktemp -u /tmp/scr_errors_fifo.XXXXXX)
cleanup() {
  rm -f /dev/shm/dlckpt."$job".* /dev/shm/dlckpt."${job}f".*; rm -rf /dev/shm/dlckpt-scr."$job".* /dev/shm/dlckpt-scr."${job}f".*
  rm -f "$out" "$fifo"
}
trap cleanup EXIT
DLCKPT_JOB=$job DLCKPT_STORE_CAPACITY=16M timeout -k 5 50 mpiexec -launcher fork -n 4 "$app" --mode errors \
  >"$out" 2>&1 || { cat "$out"; echo "FAIL: scr_app --mode errors exited $?"; exit 1; }
grep -q "^errors: ok" "$out" || { cat "$out"; echo "FAIL: error paths"; exit 1; }
ls /dev/shm | grep "^dlckpt-scr\.$job\." >/dev/null && { echo "FAIL: staging directories left behind"; exit 1; }
# SCR_CONF_FILE is a FIFO no one writes: SCR_Init fails at once, naming it.
mkfifo "$fifo" || { echo "FAIL: mkfifo"; exit 1; }
DLCKPT_JOB="${job}f" SCR_CONF_FILE=$fifo timeout -k 5 30 mpiexec -launcher fork -n 1 "$app" --mode errors >"$out" 2>&1
rc=$?
case $rc in 124|137) cat "$out"; echo "FAIL: SCR_Init hung on a FIFO as SCR_CONF_FILE"; exit 1 ;; esac
[ $rc != 0 ] || { cat "$out"; echo "FAIL: a FIFO as SCR_CONF_FILE was accepted"; exit 1; }
grep -q "SCR_CONF_FILE: $fifo is .*not a regular file" "$out" || { cat "$out"; echo "FAIL: no message naming the FIFO"; exit 1; }
echo "scr_errors_test: ok"

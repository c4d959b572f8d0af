#!/usr/bin/env bash
# scr_halt_test.sh RUN_DIR APP — SCR_Should_exit follows dlckpt-run's halt,
# and dlckpt-store drained lists the halted job's checkpoint by its SCR name.
# APP is scr_byname (SCR_Should_exit after every checkpoint).
#   direct   without dlckpt-run: SCR_Should_exit says 0 (the run goes to its
#            end) unless $DLCKPT_HALT_FILE exists (then 1 at the first check)
#   seconds  dlckpt-run --halt-seconds 3 --persist DIR: the application stops
#            at its next checkpoint on its own ("should_exit"), dlckpt-run
#            drains it and exits 7; dlckpt-store drained DIR shows that epoch
#            complete, with a time and the checkpoint name scr.dataset.<N>
#   usr1     the same halt asked by SIGUSR1 to dlckpt-run
set -uo pipefail
run_dir=$1 app=$2
base="shx$$x${RANDOM}"
out=$(mktemp)
dir=$(mktemp -d)
cleanup() {
  for j in "${base}d" "${base}h" "${base}s" "${base}u"; do
    for p in $(grep -ls "DLCKPT_JOB=$j" /proc/[0-9]*/environ 2>/dev/null); do
      p=${p#/proc/}; [ "${p%%/*}" = $$ ] || kill -9 "${p%%/*}" 2>/dev/null
    done
    rm -f /dev/shm/dlckpt."$j".*; rm -rf /dev/shm/dlckpt-scr."$j".* "/tmp/dlckpt-run.$j"
  done
  rm -rf "$out" "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; cat "$out" >&2; exit 1; }

# direct: no halt file, then an existing one.
DLCKPT_JOB="${base}d" DLCKPT_HALT_FILE="$dir/none" timeout -k 5 60 mpiexec -launcher fork -n 2 "$app" --iters 4 \
  >"$out" 2>&1 || fail "direct run: exit $?"
grep -q "^should_exit" "$out" && fail "SCR_Should_exit said 1 with no halt file"
grep -q "^checkpoint: iteration 4" "$out" || fail "the direct run did not reach its end"
touch "$dir/halt"
DLCKPT_JOB="${base}h" DLCKPT_HALT_FILE="$dir/halt" timeout -k 5 60 mpiexec -launcher fork -n 2 "$app" --iters 4 \
  >"$out" 2>&1 || fail "direct run with a halt file: exit $?"
grep -q "^should_exit: iteration 1$" "$out" || fail "SCR_Should_exit did not say 1 with \$DLCKPT_HALT_FILE present"
rm -f "$dir/halt"; rm -f /dev/shm/dlckpt."${base}d".* /dev/shm/dlckpt."${base}h".*
echo "direct: ok"

# check_halt JOB HOW: the halted run's output and the drained listing.
check_halt() {
  local job=$1 how=$2 rc=$3
  [ "$rc" = 7 ] || fail "$how: dlckpt-run exited $rc, expected 7 (halted, drained)"
  local n
  n=$(sed -n 's/^should_exit: iteration \([0-9]*\)$/\1/p' "$out")
  [ -n "$n" ] || fail "$how: the application was not told to exit (SCR_Should_exit)"
  grep -q "the application ended on its own" "$out" || fail "$how: dlckpt-run did not let the application end"
  timeout -k 2 20 "$run_dir/dlckpt-store" drained "$dir/p$how" >"$out" 2>&1 || fail "$how: dlckpt-store drained: exit $?"
  cat "$out"
  # epoch state time ranks files bytes checkpoint
  grep -Eq "^[0-9]+ +complete +20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2} +4 +[0-9]+ +[0-9]+ +scr\.dataset\.$n( |$)" \
    "$out" || fail "$how: no complete epoch listed with its time and the name scr.dataset.$n"
  ls /dev/shm | grep -E "^dlckpt(-scr)?\.$job\." >/dev/null && fail "$how: shared memory or staging left behind"
  echo "$how: ok (halted at checkpoint scr.dataset.$n)"
}

timeout -k 5 90 "$run_dir/dlckpt-run" --job "${base}s" --nodes 4 --spares 1 --persist "$dir/pseconds" \
  --halt-seconds 3 --term-grace 20 -- "$app" --iters 100000 --sleep-ms 50 >"$out" 2>&1
check_halt "${base}s" seconds $?

# dlckpt-run itself in the background (a timeout(1) in between would not pass
# SIGUSR1 on), stopped with SIGKILL if it outlives 90 s.
"$run_dir/dlckpt-run" --job "${base}u" --nodes 4 --spares 1 --persist "$dir/pusr1" \
  --term-grace 20 -- "$app" --iters 100000 --sleep-ms 50 >"$out" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  grep -q "^checkpoint: iteration 3$" "$out" && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
grep -q "^checkpoint: iteration 3$" "$out" || { kill -9 $pid 2>/dev/null; fail "usr1: the application did not reach checkpoint 3"; }
kill -USR1 $pid
for _ in $(seq 1 900); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
kill -0 $pid 2>/dev/null && { kill -9 $pid; fail "usr1: dlckpt-run still runs 90 s after SIGUSR1"; }
wait $pid
check_halt "${base}u" usr1 $?
echo "scr_halt_test: ok"

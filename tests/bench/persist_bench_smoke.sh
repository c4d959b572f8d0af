#!/usr/bin/env bash
# Smoke run of bench/persist_bench.sh (the second level's cost, issue 20) at a
# tiny size: both METRIC lines appear, the drained epoch verifies, and nothing
# is left behind (no store, process, run directory, drained file or dd file),
# also when the bench is stopped by SIGTERM in the middle of a run. The
# figures mean nothing and are not checked.
#
# usage: persist_bench_smoke.sh SOURCE_DIR BIN_DIR
set -uo pipefail
src=$1 bin=$2
tag=pbsmoke$$
dir=$(mktemp -d -p /var/tmp dlckpt-persist-bench-smoke.XXXXXX)
log=$(mktemp)
trap 'rm -rf "$dir" "$log"' EXIT
fail() { echo "FAIL: $*" >&2; echo "---- output:" >&2; cat "$log" >&2; exit 1; }
tmp_before=$(ls -d /tmp/dlckpt-persist-bench.* 2>/dev/null)
nothing_left() {  # what
  sleep 0.2
  [ -z "$(ls -A "$dir")" ] || fail "$1: files left in the drain directory: $(ls -A "$dir")"
  if ls /dev/shm | grep -q "^dlckpt\.$tag"; then fail "$1: shared memory left: $(ls /dev/shm | grep "^dlckpt\.$tag")"; fi
  [ -z "$(grep -lsa "DLCKPT_JOB=$tag" /proc/[0-9]*/environ 2>/dev/null | grep -v "^/proc/$$/")" ] ||
    fail "$1: processes of the bench still running"
  ls -d /tmp/dlckpt-run."$tag"* >/dev/null 2>&1 && fail "$1: run directories left: $(ls -d /tmp/dlckpt-run."$tag"*)"
  [ "$(ls -d /tmp/dlckpt-persist-bench.* 2>/dev/null)" = "$tmp_before" ] || fail "$1: the bench's /tmp directory is left"
  echo "ok: $1: nothing left (${SECONDS} s)"
}
args=(--bin "$bin" --dir "$dir" --nx 256 --iters 30 --ckpt-every 5 --reps 1 --every 2)

"$src/bench/persist_bench.sh" "${args[@]}" --tag "$tag" >"$log" 2>&1 || fail "persist_bench.sh exited $?"
grep -qE '^METRIC persist_ckpt_time_ratio [0-9.]+ x target <= 1\.1$' "$log" || fail "no METRIC persist_ckpt_time_ratio line"
grep -qE '^METRIC persist_drain_bw_vs_dd [0-9.]+ x target >= 0\.8$' "$log" || fail "no METRIC persist_drain_bw_vs_dd line"
grep -q "verify-drained .*: ok" "$log" || fail "the drained epoch was not verified"
grep -q "^== every2: .*--persist $dir/dlckpt-persist-bench\.[A-Za-z0-9]* --persist-every 2 " "$log" ||
  fail "the command line with --persist is not printed"
grep -E "^METRIC|^persist_" "$log"
nothing_left "a whole run"

# SIGTERM once the first dlckpt-run's first checkpoint is done (a longer run,
# so that it lands inside it).
"$src/bench/persist_bench.sh" "${args[@]}" --iters 400 --tag "${tag}t" >"$log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  grep -qs " app ckpt-end 1" "/tmp/dlckpt-run.${tag}tx0/events" && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.05
done
grep -qs " app ckpt-end 1" "/tmp/dlckpt-run.${tag}tx0/events" || fail "the first run did not checkpoint"
kill -TERM "$pid"
wait "$pid"
rc=$?
[ "$rc" = 143 ] || fail "persist_bench.sh exited $rc after SIGTERM, expected 143"
nothing_left "SIGTERM"
echo "persist_bench_smoke: ok"

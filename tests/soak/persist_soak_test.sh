#!/usr/bin/env bash
# Persist-mode soak: protected runs with --persist under dlckpt-run, seeded
# random node kills within parity and beyond it, and halts continued with
# --restart-from, each compared with the failure-free checksum.
#
# Layout: 4 data nodes in 2 XOR groups of 2, one spare each, so two nodes of
# one group lost at once is more than parity rebuilds: the run restarts from
# the newest drained epoch (or, before any checkpoint, from scratch). A run's
# pattern, drawn from its seed: --persist-every 1-3; one kill within parity,
# or two nodes of one group at once (beyond parity), or a kill within parity
# then a later one beyond it; one run in six is halted (--halt-seconds) and
# continued with --restart-from in a new job.
# Every run is checked for: the checksum, exit 0 (a halt: 7, then 0); no
# hang; no shared-memory object or process of the job left; every drained
# epoch private (0700/0600). An exit 3 counts as explained only when the run
# says no drained epoch could be used.
#
# usage: persist_soak_test.sh BIN_DIR [RUNS] [FIRST_SEED]
# Ends with the totals (runs, checkpoints, kills, restores from drained
# epochs, wrong checksums, hangs, leftovers) and "N passed, N failed".
set -uo pipefail
bin=$1 runs=${2:-16} seed0=${3:-1}
tag="psk$$"
out=$(mktemp)
root=$(mktemp -d -p /var/tmp dlckpt-persist-soak.XXXXXX)
cleanup_job() {
  local j=$1
  for p in $(grep -ls "DLCKPT_JOB=$j" /proc/[0-9]*/environ 2>/dev/null); do
    p=${p#/proc/}; [ "${p%%/*}" = $$ ] || kill -9 "${p%%/*}" 2>/dev/null
  done
  rm -f /dev/shm/dlckpt."$j".* /dev/shm/*."$j".* 2>/dev/null; rm -rf "/tmp/dlckpt-run.$j"
}
trap 'for j in $(ls /dev/shm | sed -n "s/^dlckpt\.\($tag[a-z0-9]*\)\..*/\1/p" | sort -u); do cleanup_job "$j"; done; rm -rf "$out" "$root"' EXIT

H=("$bin/heat2d-dlckpt" --nx 96 --ny 96 --iters 100 --ckpt-every 5 --sleep-ms 40)
layout=(--nodes 4 --spares 2 --group-size 2)
j="${tag}ref"
ref=$(DLCKPT_JOB="$j" timeout -k 5 120 mpiexec -launcher fork -n 4 "${H[@]}" 2>/dev/null | sed -n 's/^checksum: //p')
cleanup_job "$j"
[ -n "$ref" ] || { echo "persist soak: the failure-free run printed no checksum"; exit 1; }
echo "persist soak: reference checksum $ref"

passed=0 failed=0 ckpts=0 kills=0 restores=0 halts=0 wrong=0 hangs=0 leftovers=0 explained=0
# run_one JOB ARGS...: dlckpt-run; sets rc, got, and adds to the totals.
run_one() {
  local j=$1; shift
  timeout -k 5 300 "$bin/dlckpt-run" --job "$j" "${layout[@]}" "$@" -- "${H[@]}" >>"$out" 2>&1
  rc=$?
  got=$(sed -n 's/^checksum: //p' "$out" | tail -1)
  local n k
  n=$(sed -n 's/.*summary of job '"$j"':.*; \([0-9]*\) checkpoint(s).*/\1/p' "$out" | tail -1)
  ckpts=$(( ckpts + ${n:-0} ))
  k=$(grep -c "node killed:" "$out"); kills=$(( kills + k - counted_kills )); counted_kills=$k
  [ "$rc" = 124 ] || [ "$rc" = 137 ] && { why="${why:+$why; }hang (timeout) of job $j"; hangs=$(( hangs + 1 )); }
  sleep 0.5
  local left procs
  left=$(ls /dev/shm | grep -c "\.$j\.")
  procs=$(grep -ls "DLCKPT_JOB=$j" /proc/[0-9]*/environ 2>/dev/null | wc -l)
  if [ "$left" != 0 ] || [ "$procs" != 0 ]; then
    why="${why:+$why; }job $j left $left shm object(s) and $procs process(es)"; leftovers=$(( leftovers + 1 ))
  fi
  cleanup_job "$j"
}

for (( i = 0; i < runs; i++ )); do
  seed=$(( seed0 + i ))
  RANDOM=$seed
  dir="$root/run$i"
  every=$(( 1 + RANDOM % 3 ))
  e1=$(( 2 + RANDOM % 8 ))
  g=$(( RANDOM % 2 )); a=$(( 2 * g )); b=$(( 2 * g + 1 ))
  case $(( RANDOM % 6 )) in
    0|1) pattern="within parity"; kill_args=(--kill-node "vn$(( RANDOM % 4 ))" --at "checkpoint:$e1") ;;
    2|3) pattern="beyond parity"; kill_args=(--kill-node "vn$a,vn$b" --at "checkpoint:$e1") ;;
    4) pattern="within, then beyond"
       e2=$(( e1 + 2 + RANDOM % 4 ))
       kill_args=(--kill-node "vn$(( RANDOM % 4 ))" --at "checkpoint:$e1" --kill-node "vn$a,vn$b" --at "checkpoint:$e2") ;;
    5) pattern="halt, restart-from"; kill_args=(--halt-seconds $(( 3 + RANDOM % 3 ))) ;;
  esac
  j="$tag$i"
  : >"$out"
  why="" counted_kills=0
  start=$(date +%s)
  run_one "$j" --persist "$dir" --persist-every "$every" "${kill_args[@]}"
  if [ "$pattern" = "halt, restart-from" ]; then
    if [ "$rc" = 7 ]; then
      halts=$(( halts + 1 ))
      run_one "${j}b" --restart-from "$dir" --persist "$dir"
    elif [ "$rc" != 0 ]; then
      why="${why:+$why; }halt: exit $rc, expected 7 (or 0 if the run ended first)"
    fi
  fi
  # The supervisor's own line, once per restore (the summary repeats it after "recovery N: ").
  r=$(grep -c "^dlckpt-run: restart from the persistent copy\|^dlckpt-run: restarting from" "$out"); restores=$(( restores + r ))
  if [ "$rc" = 3 ] && grep -q "no complete drained epoch" "$out" && [ "$pattern" != "within parity" ]; then
    explained=$(( explained + 1 ))
  elif [ "$rc" != 0 ]; then
    why="${why:+$why; }exit $rc: $(grep -E 'recovery failed|unrecoverable|refus|error' "$out" | head -1)"
  elif [ "$got" != "$ref" ]; then
    why="${why:+$why; }wrong checksum '$got' (expected '$ref')"; wrong=$(( wrong + 1 ))
  fi
  if [ -d "$dir" ]; then
    loose=$(find "$dir" -mindepth 1 \( -type d ! -perm 0700 \) -o \( -type f ! -perm 0600 \) | head -3)
    [ -z "$loose" ] || why="${why:+$why; }drained entries others can read: $loose"
  fi
  secs=$(( $(date +%s) - start ))
  line="run $i (seed $seed) every $every, $pattern: ${kill_args[*]}: exit $rc, $r restore(s), $secs s"
  if [ -z "$why" ]; then
    passed=$(( passed + 1 )); echo "$line: ok"
  else
    failed=$(( failed + 1 )); echo "$line: FAILED: $why"
    sed 's/^/    /' "$out" | grep -E "dlckpt-run|checksum" | tail -25
  fi
  rm -rf "$dir"
done
echo "persist soak: $runs runs, $ckpts checkpoints, $kills kills, $restores restores from drained epochs, $halts halts continued with --restart-from, $wrong wrong checksum(s), $hangs hang(s), $leftovers run(s) with leftovers, $explained explained exit 3"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]

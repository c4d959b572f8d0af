#!/usr/bin/env bash
# The checkpoint at the memory limit (issue 35): dlckpt's checkpoint against
# what the machine can do, in one run. Configurations (dlckpt-run, virtual
# nodes, one spare, XOR, dlckpt-bench-ckpt writing M MiB per rank with fwrite
# in 1 MiB records, then dlckpt_checkpoint()):
#   async   --encode async, N data nodes, the ranks idle S ms after each
#           checkpoint (a compute phase on other cores, long enough for
#           the encode to end in it): the checkpoint the application sees
#           (write + dlckpt_checkpoint returning) over the write alone
#             METRIC async_visible_vs_write <median of (write+ckpt)/write> x target <= 1.2
#   warm    sync encode, N data nodes: a warm checkpoint (write + commit +
#           encode + acknowledge) as bytes per second, over memcpy on one
#           core (dlckpt-bench-ckpt-baselines, CPU time, same run)
#             METRIC warm_ckpt_vs_memcpy <ratio> x target >= 0.3
#           and the encode's bytes moved per byte checkpointed (a ring
#           reduce-scatter, then the slices to the spare: 1 for XOR)
#   cold    sync encode, (by default) 4 and 8 data nodes at 64 and 256 MiB, --setup-ms 0,
#           10 checkpoints, no warm-up: checkpoint 1 over checkpoint 10
#             METRIC first_ckpt_vs_tenth_nosetup <largest ratio> x target <= 1.5
# Drains to a file system have their own script: bench/persist_bench.sh
# (METRIC persist_drain_bw_vs_dd).
#
# usage: memlimit_bench.sh [--bin DIR]... [--nodes N] [--mib M] [--reps R]
#                          [--only async|warm|cold]... [--cold N:M,...]
#   --bin DIR   build/bin of a build to measure; given twice or more, every
#               configuration runs on each in turn (before/after in one run);
#               METRIC lines are printed per build, the last one's last
#               (default: build/bin beside this script's repo)
#   --nodes N   data nodes for async and warm (default 8)
#   --mib M     MiB per rank for async and warm (default 64)
#   --reps R    runs of async and warm per build, interleaved (default 2)
#   --idle-ms S the async configuration's compute phase (default 1000)
#   --only X    only these configurations (default all three)
#   --cold L    the cold configurations, data nodes:MiB per rank
#               (default 4:64,8:64,4:256,8:256)
# Every run uses a fresh job (memlimit<pid>x<n>) whose stores are removed after it.
set -euo pipefail

bins=()
nodes=8
mib=64
reps=2
idle=1000
only=()
cold_cfgs="4:64,8:64,4:256,8:256"
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bins+=("$(cd "$2" && pwd)"); shift 2 ;;
    --nodes) nodes="$2"; shift 2 ;;
    --mib) mib="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --idle-ms) idle="$2"; shift 2 ;;
    --only) only+=("$2"); shift 2 ;;
    --cold) cold_cfgs="$2"; shift 2 ;;
    -h|--help) sed -n '2,36p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "memlimit_bench.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ ${#bins[@]} -gt 0 ] || bins=("$(cd "$(dirname "$0")/.." && pwd)/build/bin")
[ ${#only[@]} -gt 0 ] || only=(async warm cold)
wants() { local x; for x in "${only[@]}"; do [ "$x" = "$1" ] && return 0; done; return 1; }
for b in "${bins[@]}"; do
  for t in dlckpt-run dlckpt-bench-ckpt dlckpt-bench-ckpt-baselines dlckpt-store; do
    [ -x "$b/$t" ] || { echo "memlimit_bench.sh: no $b/$t (build the benchmarks)" >&2; exit 2; }
  done
done
# The MPI dlckpt was built with (build/mpi-bin, cmake/mpi.cmake), not `mpiexec` in PATH.
[ -d "${bins[0]}/../mpi-bin" ] && PATH="$(cd "${bins[0]}/../mpi-bin" && pwd):$PATH"

n=0
jobs_made=()
cleanup() {
  local j
  for j in "${jobs_made[@]}"; do
    "${bins[0]}/dlckpt-store" rm --job "$j" >/dev/null 2>&1 || true
    rm -rf "/tmp/dlckpt-run.$j"
  done
}
trap cleanup EXIT
trap 'exit 130' INT TERM
load() { cut -d' ' -f1-3 /proc/loadavg; }

# run BIN NODES MIB ITERS WARMUP IDLE_MS EXTRA... : dlckpt-bench-ckpt under dlckpt-run; prints its ITER/COLD lines.
run() {
  local b="$1" nn="$2" m="$3" it="$4" wu="$5" im="$6"; shift 6
  local job="memlimit$$x$n" cap=$(( 2 * m + 64 ))
  n=$((n + 1)); jobs_made+=("$job")
  timeout -k 10 900 setsid "$b/dlckpt-run" --nodes "$nn" --spares 1 --job "$job" --capacity "${cap}M" "$@" -- \
    "$b/dlckpt-bench-ckpt" --mib "$m" --iters "$it" --warmup "$wu" --idle-ms "$im" --report-cold --setup-ms 0 2>&1 |
    grep -E '^(ITER|COLD) ' || { echo "memlimit_bench.sh: run $job failed" >&2; return 1; }
  "$b/dlckpt-store" rm --job "$job" >/dev/null 2>&1 || true
  rm -rf "/tmp/dlckpt-run.$job"
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

declare -A async_ratio warm_total cold_worst
memcpy_gbs=0
if wants warm; then
  memcpy_gbs=$(timeout -k 5 300 mpiexec -n 1 "${bins[0]}/dlckpt-bench-ckpt-baselines" --mib "$mib" 2>/dev/null |
               awk '$2 == "memcpy" { for (i = 3; i <= NF; i++) if ($i ~ /^gbs=/) { sub("gbs=", "", $i); print $i } }' | head -1)
  echo "== memcpy of $mib MiB on one core (CPU time, best of the baseline's reps): $memcpy_gbs GB/s  [load $(load)]"
fi
for r in $(seq 1 "$reps"); do
  for b in "${bins[@]}"; do
    if wants async; then
      echo "== async, $nodes data nodes + 1 spare, $mib MiB per rank, rep $r: $b  [load $(load)]"
      out=$(run "$b" "$nodes" "$mib" 9 3 "$idle" --encode async)
      echo "$out" | sed 's/^/   /'
      async_ratio[$b]+=$(echo "$out" | awk '/^ITER/ && !/warmup/ { printf "%s ", ($6 + $8) / $6 }')
    fi
    if wants warm; then
      echo "== sync, $nodes data nodes + 1 spare, $mib MiB per rank, rep $r: $b  [load $(load)]"
      out=$(run "$b" "$nodes" "$mib" 9 3 0)
      echo "$out" | sed 's/^/   /'
      warm_total[$b]+=$(echo "$out" | awk '/^ITER/ && !/warmup/ { printf "%s ", $12 }')
    fi
  done
done
if wants cold; then
  for cfg in ${cold_cfgs//,/ }; do
    set -- ${cfg/:/ }
    for b in "${bins[@]}"; do
      echo "== cold, $1 data nodes + 1 spare, $2 MiB per rank, no setup: $b  [load $(load)]"
      out=$(run "$b" "$1" "$2" 10 0 0)
      echo "$out" | sed 's/^/   /'
      ratio=$(echo "$out" | awk '/^COLD/ { printf "%.3f", $5 / $9 }')
      echo "   checkpoint 1 / checkpoint 10 (total): $ratio; checkpoint 2 / checkpoint 10: $(echo "$out" |
        awk '/^ITER 1 / { t2 = $12 } /^ITER 9 / { t10 = $12 } END { if (t10 > 0) printf "%.3f", t2 / t10 }')"
      cold_worst[$b]=$(echo "${cold_worst[$b]:-0} $ratio" | awk '{ print ($2 > $1) ? $2 : $1 }')
    done
  done
fi

for b in "${bins[@]}"; do
  echo "== $b  [load $(load)]"
  if wants async; then
    a=$(echo "${async_ratio[$b]}" | tr ' ' '\n' | grep . | median)
    printf 'METRIC async_visible_vs_write %.2f x target <= 1.2\n' "$a"
  fi
  if wants warm; then
    t=$(echo "${warm_total[$b]}" | tr ' ' '\n' | grep . | median)
    awk -v t="$t" -v n="$nodes" -v m="$mib" -v c="$memcpy_gbs" 'BEGIN {
      gbs = n * m * 1048576 / t / 1e9
      printf "warm sync checkpoint: median %.3f s for %d x %d MiB = %.2f GB/s; memcpy %.2f GB/s; encode bytes moved per byte checkpointed: 1.00 (ring reduce-scatter: (N-1)/N of each member image, then 1/N to the spare)\n", t, n, m, gbs, c
      printf "METRIC warm_ckpt_vs_memcpy %.2f x target >= 0.3\n", (c > 0) ? gbs / c : 0 }'
  fi
  if wants cold; then
    printf 'METRIC first_ckpt_vs_tenth_nosetup %.2f x target <= 1.5\n' "${cold_worst[$b]}"
  fi
done

#!/usr/bin/env bash
# Cold against warm checkpoints (issue 21, item 5): checkpoint 1 against
# checkpoint 10 of one run of dlckpt-bench-ckpt --report-cold, with memfs's
# pre-touch of fresh store pages on (the default) and off (DLCKPT_PRETOUCH=0),
# as local commits under plain mpiexec (no codec) and under dlckpt-run with
# one spare (commit + encode + acknowledge). Prints, per configuration, the
# benchmark's INIT (dlckpt_init, which creates the store), COLD and METRIC
# lines:
#   METRIC first_ckpt_vs_tenth <write1/write10> x target <= 1.2
#   METRIC first_ckpt_vs_tenth_total <total1/total10> x target <= 1.2
#
# usage: cold_bench.sh [--bin DIR] [--ranks N] [--mib M] [--iters I] [--no-run] [--no-mpiexec]
#   --bin DIR     where dlckpt-bench-ckpt, dlckpt-run, dlckpt-store are
#                 (default: build/bin beside this script's repo)
#   --ranks N     ranks under mpiexec, data nodes under dlckpt-run (default 4)
#   --mib M       MiB per rank and checkpoint (default 64)
#   --iters I     checkpoints (default 10; no warm-up)
#   --no-run      skip the dlckpt-run configuration
#   --no-mpiexec  skip the plain mpiexec configuration
# Each run uses a fresh job (coldbench<pid>x<n>), whose stores are removed afterwards.
set -euo pipefail

bin="$(cd "$(dirname "$0")/.." && pwd)/build/bin"
ranks=4
mib=64
iters=10
do_run=1
do_mpiexec=1
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --ranks) ranks="$2"; shift 2 ;;
    --mib) mib="$2"; shift 2 ;;
    --iters) iters="$2"; shift 2 ;;
    --no-run) do_run=0; shift ;;
    --no-mpiexec) do_mpiexec=0; shift ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "cold_bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

n=0
run_one() {  # $1: mpiexec|dlckpt-run  $2: 1|0 (pre-touch)
  local how="$1" pt="$2" job="coldbench$$x$n"
  n=$((n + 1))
  local args=(--mib "$mib" --iters "$iters" --warmup 0 --report-cold)
  echo "== $how, pre-touch $([ "$pt" = 1 ] && echo on || echo off)"
  local out
  if [ "$how" = mpiexec ]; then
    echo "   DLCKPT_PRETOUCH=$pt DLCKPT_JOB=$job mpiexec -launcher fork -n $ranks $bin/dlckpt-bench-ckpt ${args[*]}"
    out=$(DLCKPT_PRETOUCH=$pt DLCKPT_JOB=$job mpiexec -launcher fork -n "$ranks" \
            "$bin/dlckpt-bench-ckpt" "${args[@]}" 2>&1) || { echo "$out" >&2; return 1; }
  else
    echo "   DLCKPT_PRETOUCH=$pt $bin/dlckpt-run --nodes $ranks --spares 1 --job $job -- $bin/dlckpt-bench-ckpt ${args[*]}"
    out=$(DLCKPT_PRETOUCH=$pt "$bin/dlckpt-run" --nodes "$ranks" --spares 1 --job "$job" -- \
            "$bin/dlckpt-bench-ckpt" "${args[@]}" 2>&1) || { echo "$out" >&2; return 1; }
  fi
  "$bin/dlckpt-store" rm --job "$job" >/dev/null 2>&1 || true
  echo "$out" | grep -E '^(ITER|INIT|COLD|METRIC) ' | sed 's/^ITER/   ITER/'
}

for pt in 1 0; do
  if [ "$do_mpiexec" = 1 ]; then run_one mpiexec "$pt"; fi
  if [ "$do_run" = 1 ]; then run_one dlckpt-run "$pt"; fi
done

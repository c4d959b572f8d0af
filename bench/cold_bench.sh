#!/usr/bin/env bash
# Cold against warm checkpoints (issue 21, item 5): checkpoint 1 against
# checkpoint 10 of one run of dlckpt-bench-ckpt --report-cold.
#   mpiexec     local commits, no codec: memfs's pre-touch of fresh store
#               pages on (the default) and off (DLCKPT_PRETOUCH=0);
#   dlckpt-run  one spare (commit + encode + acknowledge): the codec's
#               warm-up after HELLO (stores attached, parity slots reserved)
#               on and off (DLCKPT_CODEC_WARMUP=0), with S ms of application
#               setup between dlckpt_init and checkpoint 1 (--setup-ms), and
#               with warm-up on and no setup at all.
# Prints, per configuration, the benchmark's ITER, INIT (dlckpt_init, which
# creates the store), COLD and METRIC lines, the codec's warm-up times, then
# the headline figures of dlckpt-run with warm-up and setup:
#   METRIC first_ckpt_vs_tenth <write1/write10> x target <= 1.2
#   METRIC first_ckpt_vs_tenth_total <total1/total10> x target <= 1.2
#
# usage: cold_bench.sh [--bin DIR] [--ranks N] [--mib M] [--iters I] [--setup-ms S]
#                      [--no-run] [--no-mpiexec]
#   --bin DIR     where dlckpt-bench-ckpt, dlckpt-run, dlckpt-store are
#                 (default: build/bin beside this script's repo)
#   --ranks N     ranks under mpiexec, data nodes under dlckpt-run (default 4)
#   --mib M       MiB per rank and checkpoint (default 64)
#   --iters I     checkpoints (default 10; no warm-up)
#   --setup-ms S  the application's setup before checkpoint 1 (default 2000)
#   --no-run      skip the dlckpt-run configurations
#   --no-mpiexec  skip the plain mpiexec configurations
# Each run uses a fresh job (coldbench<pid>x<n>), whose stores are removed afterwards.
set -euo pipefail

bin="$(cd "$(dirname "$0")/.." && pwd)/build/bin"
ranks=4
mib=64
iters=10
setup=2000
do_run=1
do_mpiexec=1
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --ranks) ranks="$2"; shift 2 ;;
    --mib) mib="$2"; shift 2 ;;
    --iters) iters="$2"; shift 2 ;;
    --setup-ms) setup="$2"; shift 2 ;;
    --no-run) do_run=0; shift ;;
    --no-mpiexec) do_mpiexec=0; shift ;;
    -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "cold_bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
# The MPI dlckpt was built with (build/mpi-bin, cmake/mpi.cmake), not `mpiexec` in PATH.
[ -d "$bin/../mpi-bin" ] && PATH="$(cd "$bin/../mpi-bin" && pwd):$PATH"

n=0
headline=""
# $1: mpiexec|dlckpt-run  $2: DLCKPT_PRETOUCH  $3: DLCKPT_CODEC_WARMUP  $4: setup ms
run_one() {
  local how="$1" pt="$2" wu="$3" su="$4" job="coldbench$$x$n"
  n=$((n + 1))
  local args=(--mib "$mib" --iters "$iters" --warmup 0 --report-cold --setup-ms "$su")
  local out
  if [ "$how" = mpiexec ]; then
    echo "== mpiexec, pre-touch $([ "$pt" = 1 ] && echo on || echo off), setup $su ms"
    echo "   DLCKPT_PRETOUCH=$pt DLCKPT_JOB=$job mpiexec -launcher fork -n $ranks $bin/dlckpt-bench-ckpt ${args[*]}"
    out=$(DLCKPT_PRETOUCH=$pt DLCKPT_JOB=$job mpiexec -launcher fork -n "$ranks" \
            "$bin/dlckpt-bench-ckpt" "${args[@]}" 2>&1) || { echo "$out" >&2; return 1; }
    "$bin/dlckpt-store" rm --job "$job" >/dev/null 2>&1 || true
  else
    echo "== dlckpt-run, codec warm-up $([ "$wu" = 1 ] && echo on || echo off), setup $su ms"
    echo "   DLCKPT_CODEC_WARMUP=$wu $bin/dlckpt-run --nodes $ranks --spares 1 --job $job --keep -- $bin/dlckpt-bench-ckpt ${args[*]}"
    out=$(DLCKPT_PRETOUCH=$pt DLCKPT_CODEC_WARMUP=$wu "$bin/dlckpt-run" --nodes "$ranks" --spares 1 --job "$job" \
            --keep -- "$bin/dlckpt-bench-ckpt" "${args[@]}" 2>&1) || { echo "$out" >&2; return 1; }
    # "warmup NODE SECONDS WAITED": the warm-up's own time, and how long the first encode waited for it.
    grep " codec warmup " "/tmp/dlckpt-run.$job/events" 2>/dev/null |
      awk '{ printf "   WARMUP %s %s s (encode 1 waited %s s)\n", $4, $5, $6 }' || true
    "$bin/dlckpt-store" rm --job "$job" >/dev/null 2>&1 || true
    rm -rf "/tmp/dlckpt-run.$job"
  fi
  echo "$out" | grep -E '^(ITER|INIT|COLD|METRIC) ' | sed 's/^/   /'
  if [ "$how" = dlckpt-run ] && [ "$wu" = 1 ] && [ "$su" = "$setup" ]; then
    headline=$(echo "$out" | grep -E '^METRIC ')
  fi
}

if [ "$do_mpiexec" = 1 ]; then
  run_one mpiexec 1 1 0
  run_one mpiexec 0 1 0
fi
if [ "$do_run" = 1 ]; then
  run_one dlckpt-run 1 0 "$setup"
  run_one dlckpt-run 1 1 0
  run_one dlckpt-run 1 1 "$setup"
  echo "== headline: dlckpt-run $ranks+1, codec warm-up on, setup $setup ms"
  echo "$headline"
fi

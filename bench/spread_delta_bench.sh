#!/bin/bash
# spread_delta_bench.sh — the incremental (delta) encode in the spread layout
# against a full spread encode, in one run: NODES data nodes, no spare
# (--parity spread), one rank per node, partial_ckpt_app with MIB MiB of
# state per rank rewriting a stretch of F of it in place each iteration
# (memfs's copy-on-write tells which blocks changed). For each code (XOR,
# RS k = 2) and fraction, one run with DLCKPT_DELTA=off and one with the
# default (auto: delta up to the measured threshold). The encode time of an
# epoch is encode-begin to encode-end in the run's event log; median over
# the epochs from 3 on, then median over REPS repetitions (off and auto
# alternate, so both see the same machine). Prints one line per run, then
#   METRIC spread_delta_<code>_<p>pct <auto/off> x
#
# usage: bench/spread_delta_bench.sh [BIN [TEST_BIN]]   (default build/bin build/tests)
# environment: NODES (default 8), MIB (default 64), ITERS (default 8), REPS (default 3),
#              FRACTIONS (default "0.01 0.1 0.5")
set -u
if [[ ${1:-} == -h || ${1:-} == --help ]]; then sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
[[ ${1:-} == -* ]] && { echo "spread_delta_bench.sh: unknown option $1 (see --help)" >&2; exit 2; }
bin=${1:-build/bin} tbin=${2:-build/tests} nodes=${NODES:-8} mib=${MIB:-64} iters=${ITERS:-8} reps=${REPS:-3}
fractions=${FRACTIONS:-0.01 0.1 0.5}
[ -x "$tbin/partial_ckpt_app" ] || { echo "spread_delta_bench.sh: no $tbin/partial_ckpt_app (build the tests)" >&2; exit 2; }
job=sdb$$ out=$(mktemp -d /tmp/dlckpt-spread-delta.XXXXXX)
. "$(dirname "$0")/bench_lib.sh"
bench_cleanup_on_exit "$job" "$out"
echo "# $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $nodes nodes x $mib MiB, spread parity, $iters iterations, $reps rep(s)"
printf "%-4s %6s %-5s %3s %9s %10s %s\n" code change delta rep encode_s packed rc
for rep in $(seq 1 "$reps"); do
for f in $fractions; do
  for code in xor rs; do
    k=1; [ $code = rs ] && k=2
    for mode in off auto; do
      j=$job$code$mode${f/./}r$rep
      if [ $mode = auto ]; then unset DLCKPT_DELTA; else export DLCKPT_DELTA=off; fi
      setsid timeout -k 5 900 "$bin/dlckpt-run" --job "$j" --keep --nodes "$nodes" --spares 0 --parity spread \
        --scheme $code --spares-per-group $k --capacity "$((3 * mib))M" -- \
        "$tbin/partial_ckpt_app" --iters "$iters" --kib "$((mib * 1024))" --rewrite-fraction "$f" --sleep-ms 300 \
        >"$out/run.log" 2>&1
      rc=$?
      ev=/tmp/dlckpt-run.$j/events
      enc=$(awk '$3 == "encode-begin" {b[$4] = $1} $3 == "encode-end" && $4 >= 3 && ($4 in b) {printf "%.3f\n", ($1 - b[$4]) / 1e9}' "$ev" | median)
      # The packed share of the epochs' encodes ("encode-delta E used/groups packed/whole").
      packed=$(awk '$3 == "encode-delta" && $4 >= 3 {split($6, a, "/"); p += a[1]; w += a[2]} END {if (w) printf "%.3f", p / w}' "$ev")
      rm -f /dev/shm/dlckpt."$j".* 2>/dev/null; rm -rf /tmp/dlckpt-run."$j"
      printf "%-4s %6s %-5s %3s %9s %10s %s\n" $code "$f" $mode "$rep" "${enc:--}" "${packed:--}" "$rc"
      echo "$code $f $mode ${enc:-}" >>"$out/all"
    done
  done
done
done
unset DLCKPT_DELTA
for f in $fractions; do
  for code in xor rs; do
    name=$code; [ $code = rs ] && name=rs2
    a=$(awk -v c=$code -v f="$f" '$1 == c && $2 == f && $3 == "auto" {print $4}' "$out/all" | median)
    o=$(awk -v c=$code -v f="$f" '$1 == c && $2 == f && $3 == "off" {print $4}' "$out/all" | median)
    pct=$(awk -v f="$f" 'BEGIN {printf "%g", f * 100}')
    [ -n "$a" ] && [ -n "$o" ] &&
      echo "METRIC spread_delta_${name}_${pct}pct $(awk -v a="$a" -v o="$o" 'BEGIN {printf "%.2f", a / o}') x (auto $a s, full $o s)"
  done
done

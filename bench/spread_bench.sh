#!/bin/bash
# spread_bench.sh — parity on spares against parity spread over the members, in
# one run: the warm encode (median of dlckpt-bench-ckpt's encode time), the
# parity each node holds (from /dev/shm at the end of the run), and the rebuild
# phase of one recovery (vn1 killed at checkpoint 3), for XOR and RS k = 2.
#
# Layouts: spares = NODES data nodes + K spare nodes (--parity spares);
# spread = NODES data nodes, no spare (--parity spread). One rank per node,
# MIB MiB per rank. Prints one line per run, then METRIC lines:
#   spread_xor_encode_vs_spares  (target <= 1.5), spread_rs2_encode_vs_spares,
#   and the parity MiB per node of each layout.
#
# usage: bench/spread_bench.sh [BIN]      (default build/bin)
# environment: NODES (default 8), MIB (default 64), ITERS (default 5), REPS (default 1)
set -u
if [[ ${1:-} == -h || ${1:-} == --help ]]; then sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
[[ ${1:-} == -* ]] && { echo "spread_bench.sh: unknown option $1 (see --help)" >&2; exit 2; }
bin=${1:-build/bin} nodes=${NODES:-8} mib=${MIB:-64} iters=${ITERS:-5} reps=${REPS:-1}
job=spb$$ out=$(mktemp -d /tmp/dlckpt-spread.XXXXXX)
. "$(dirname "$0")/bench_lib.sh"
bench_cleanup_on_exit "$job" "$out"
echo "# $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $nodes data nodes x $mib MiB, $iters iterations, $reps rep(s)"
printf "%-7s %-4s %3s %9s %12s %9s %s\n" layout code rep encode_s parity_MiB/node rebuild_s status  # per node holding parity
for rep in $(seq 1 "$reps"); do
  for code in xor rs; do
    k=1; [ $code = rs ] && k=2
    for layout in spares spread; do
      spares=$k; [ $layout = spread ] && spares=0
      j=$job$layout$code$rep
      common=(--nodes "$nodes" --spares "$spares" --parity "$layout" --scheme "$code" --spares-per-group "$k"
              --capacity "$((2 * mib + 64))M" --timeout 900)
      # The warm encode, and the parity left on each node (--keep).
      setsid timeout -k 5 900 "$bin/dlckpt-run" --job "$j" --keep "${common[@]}" -- \
        "$bin/dlckpt-bench-ckpt" --mib "$mib" --iters "$iters" --warmup 2 >"$out/enc.log" 2>&1
      rc=$?
      enc=$(sed -n 's/^RESULT .* encode=\([0-9.]*\).*/\1/p' "$out/enc.log" | head -1)
      # Parity memory per node holding any: both slots (double-buffered), as
      # sized at the end (spare slots are reserved ahead for the stores'
      # expected size; spread slots are sized to the parity).
      par=$(for f in /dev/shm/dlckpt."$j".*.parity[01]; do [ -e "$f" ] && echo "$(basename "$f") $(stat -c %s "$f")"; done |
            awk '{split($1, a, "."); m[a[3]] += $2} END {s = 0; c = 0; for (n in m) {s += m[n]; c++}; if (c) printf "%.1f", s / c / 1048576; else print "-"}')
      "$bin/dlckpt-store" rm --job "$j" >/dev/null 2>&1; rm -rf /tmp/dlckpt-run."$j"
      # One recovery.
      setsid timeout -k 5 900 "$bin/dlckpt-run" --job "$j"r "${common[@]}" --kill-node vn1 --at checkpoint:3 -- \
        "$bin/dlckpt-bench-ckpt" --mib "$mib" --iters 3 --warmup 1 >"$out/rec.log" 2>&1
      rc2=$?
      reb=$(grep -m1 -oE "rebuild [0-9.]+ s, relaunch" "$out/rec.log" | awk '{print $2}')
      rm -f /dev/shm/dlckpt."$j"* 2>/dev/null
      printf "%-7s %-4s %3s %9s %12s %9s rc=%s,%s\n" "$layout" "$code" "$rep" "${enc:--}" "${par:--}" "${reb:--}" "$rc" "$rc2"
      echo "$layout $code ${enc:-} ${par:-} ${reb:-}" >>"$out/all"
    done
  done
done
get() {  # LAYOUT CODE FIELD(3 encode, 4 parity, 5 rebuild)
  awk -v l="$1" -v c="$2" -v f="$3" '$1 == l && $2 == c && $f != "" && $f != "-" {print $f}' "$out/all" | median
}
for code in xor rs; do
  name=$code; [ $code = rs ] && name=rs2
  se=$(get spares $code 3) pe=$(get spread $code 3)
  if [ -n "$se" ] && [ -n "$pe" ]; then
    ratio=$(awk -v a="$pe" -v b="$se" 'BEGIN {printf "%.2f", a / b}')
    target=""; [ $code = xor ] && target=" target <= 1.5"
    echo "METRIC spread_${name}_encode_vs_spares $ratio x$target (spread $pe s, spares $se s)"
  fi
  echo "METRIC spares_${name}_parity_per_parity_node $(get spares $code 4) MiB ($mib MiB per data node)"
  echo "METRIC spread_${name}_parity_per_node $(get spread $code 4) MiB ($mib MiB per data node)"
  echo "METRIC spares_${name}_rebuild $(get spares $code 5) s"
  echo "METRIC spread_${name}_rebuild $(get spread $code 5) s"
done

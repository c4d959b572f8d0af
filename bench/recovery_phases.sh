#!/bin/bash
# recovery_phases.sh — the phases of one recovery (survey, rebuild) under
# dlckpt-run, for one or two builds in the same run, alternating.
#
# 4 data nodes + 1 spare (XOR), one rank per node, each rank checkpoints
# MIB MiB (dlckpt-bench-ckpt); vn1 is killed at checkpoint 2 and rebuilt on
# the spare. dlckpt-run's summary gives the phases; this prints one line per
# run and the medians per build and size.
#
# usage: bench/recovery_phases.sh [BIN [BASE_BIN]]
#   BIN       the build's bin directory (default build/bin), named "new"
#   BASE_BIN  another bin directory (e.g. a copy of the previous build), run
#             alternately with BIN and named "base"
# environment: SIZES (MiB per rank, default "64 256"), REPS (default 3).
set -u
case "${1:-}" in
  -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  -*) echo "recovery_phases.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
esac
bin=${1:-build/bin}
compare=${2:-}
sizes=${SIZES:-64 256}
reps=${REPS:-3}
out=$(mktemp -d /tmp/dlckpt-recphase.XXXXXX)
job=rph$$
cleanup() {
  pkill -KILL -f "dlckpt-run --job $job" 2>/dev/null
  rm -rf "$out" /tmp/dlckpt-run."$job"*
  rm -f /dev/shm/dlckpt-"$job"* /dev/shm/dlckpt.*"$job"* 2>/dev/null
}
trap cleanup EXIT INT TERM
builds="new=$bin"
[ -n "$compare" ] && builds="base=$compare $builds"
echo "# $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); sizes $sizes MiB per rank; $reps reps"
printf "%-5s %5s %3s %8s %8s %8s\n" build MiB rep survey rebuild status
for mib in $sizes; do
  for rep in $(seq 1 "$reps"); do
    for b in $builds; do
      name=${b%%=*}; dir=${b#*=}
      log=$out/$name.$mib.$rep.log
      setsid timeout -k 5 600 "$dir/dlckpt-run" --job "$job" --nodes 4 --spares 1 --timeout 500 \
        --capacity "$((2 * mib + 64))M" --kill-node vn1 --at checkpoint:2 -- \
        "$dir/dlckpt-bench-ckpt" --mib "$mib" --iters 2 >"$log" 2>&1
      rc=$?
      line=$(grep -m1 -oE "survey [0-9.]+ s, rebuild [0-9.]+ s" "$log")
      s=$(echo "$line" | awk '{print $2}'); r=$(echo "$line" | awk '{print $5}')
      printf "%-5s %5s %3s %8s %8s %8s\n" "$name" "$mib" "$rep" "${s:--}" "${r:--}" "rc=$rc"
      echo "$name $mib $s $r" >>"$out/all"
      rm -f /dev/shm/dlckpt-"$job"* 2>/dev/null
    done
  done
done
echo "# medians"
median() { sort -n | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]}'; }
for mib in $sizes; do
  for b in $builds; do
    name=${b%%=*}
    k=$(awk -v n="$name" -v m="$mib" '$1==n && $2==m && $3!=""' "$out/all" | wc -l)
    [ "$k" -gt 0 ] || continue
    s=$(awk -v n="$name" -v m="$mib" '$1==n && $2==m && $3!="" {print $3}' "$out/all" | median)
    r=$(awk -v n="$name" -v m="$mib" '$1==n && $2==m && $3!="" {print $4}' "$out/all" | median)
    printf "%-5s %5s MiB: survey %s s, rebuild %s s (median of %d)\n" "$name" "$mib" "$s" "$r" "$k"
  done
done

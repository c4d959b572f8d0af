#!/usr/bin/env bash
# The second level's cost (issue 20): dlckpt-run --persist DIR --persist-every N
# drains every Nth protected epoch of every rank's store to DIR in a background
# thread of the rank. One run of this script measures, in interleaved
# repetitions on the same machine state:
#
#  (a) the checkpoint time the application sees (heat2d-dlckpt's "checkpoint:
#      iteration N complete (slot 0, X s)": write + dlckpt_checkpoint with sync
#      encode) without --persist, with --persist-every 2 and --persist-every 1;
#      the mean over the checkpoints after the warm-up ones, as a ratio:
#        METRIC persist_ckpt_time_ratio <every2/none> x target <= 1.1
#  (b) the drain's bandwidth, per drained epoch: the bytes of every rank
#      (drain-end events) over the epoch's wall span (first drain-begin to last
#      drain-end, the events' monotonic stamps), against dd writing the same
#      bytes to the same DIR with conv=fsync (bs=4M), medians:
#        METRIC persist_drain_bw_vs_dd <drain/dd> x target >= 0.8
#      Also printed, not in the METRIC: dd as N streams at once (one file per
#      rank, as the drain writes), and dd while heat2d computes without
#      --persist (the CPU contention a drain meets), as diagnosis. The
#      removal of epochs beyond --persist-keep follows drain-end (prune
#      events) and is reported apart, beside the time of dd's own `rm`.
#
# usage: persist_bench.sh [options]
#   --bin DIR         dlckpt-run, dlckpt-store, heat2d-dlckpt (default: build/bin
#                     beside this script's repo)
#   --dir DIR         the persistent file system to drain to (default /var/tmp);
#                     the bench works in a fresh subdirectory it removes
#   --nodes N         data nodes (virtual, one rank each; default 4), 1 spare
#   --nx N            heat2d points per rank along x and y (default 2048: a
#                     checkpoint of nx*nx*8 bytes = 32 MiB per rank)
#   --iters I         iterations per run (default 130)
#   --ckpt-every C    iterations between checkpoints (default 10)
#   --warmup W        first checkpoints of a run left out of the means (default 2:
#                     the first checkpoints of a run are the coldest)
#   --every "LIST"    --persist-every values to measure (default "2 1"; 2 is the
#                     one of the METRIC line)
#   --reps R          repetitions of every configuration, interleaved (default 2)
#   --tag TAG         job ids TAGx0, TAGx1, ... (default plb<pid>)
#   --timeout S       limit per dlckpt-run (default 300)
# Prints every command line, the raw per-checkpoint and per-drain figures and the
# METRIC lines; leaves no store, process, run directory or file behind. Speed
# is reported, never asserted: a missed target is printed as missed.
set -uo pipefail

bin="$(cd "$(dirname "$0")/.." && pwd)/build/bin"
pdir_parent=/var/tmp
nodes=4 nx=2048 iters=130 every_ckpt=10 warmup=2 everies="2 1" reps=2 tag="plb$$" tmo=300
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --dir) pdir_parent=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --nx) nx=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --ckpt-every) every_ckpt=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --every) everies=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    --timeout) tmo=$2; shift 2 ;;
    -h|--help) sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "persist_bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
case "$tag" in ''|*[!A-Za-z0-9_-]*) echo "persist_bench.sh: --tag must be of [A-Za-z0-9_-]" >&2; exit 2 ;; esac
for b in dlckpt-run dlckpt-store heat2d-dlckpt; do
  [ -x "$bin/$b" ] || { echo "persist_bench.sh: no $bin/$b" >&2; exit 2; }
done
[ -d "$pdir_parent" ] || { echo "persist_bench.sh: --dir $pdir_parent is not a directory" >&2; exit 2; }

work=$(mktemp -d -p "$pdir_parent" dlckpt-persist-bench.XXXXXX) || exit 1
tmp=$(mktemp -d /tmp/dlckpt-persist-bench.XXXXXX) || { rmdir "$work"; exit 1; }
jobs_started=()
cur_pid=""

# Everything of one job: its processes (by DLCKPT_JOB in their environment),
# its stores and parity (dlckpt-run --keep leaves them for the events), its
# run directory and its drained epochs.
clean_job() {
  local j=$1 p
  for p in $(grep -lsaz "^DLCKPT_JOB=$j$" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); do
    [ "$p" = $$ ] || kill -9 "$p" 2>/dev/null
  done
  "$bin/dlckpt-store" rm --job "$j" >/dev/null 2>&1
  rm -f /dev/shm/dlckpt."$j".* 2>/dev/null
  rm -rf "/tmp/dlckpt-run.$j" "${work:?}/$j"
}
cleanup() {
  local j i
  if [ -n "$cur_pid" ]; then
    # dlckpt-run stops its jobs on SIGTERM (--term-grace 1 s); give it 10 s.
    kill -TERM -- -"$cur_pid" 2>/dev/null
    for i in $(seq 1 100); do kill -0 "$cur_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- -"$cur_pid" 2>/dev/null
  fi
  for j in "${jobs_started[@]}"; do clean_job "$j"; done
  rm -rf "$work" "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# Median and mean of the numbers on stdin (one per line): "MEDIAN MEAN N".
stats() {
  sort -g | awk '{ v[NR] = $1; s += $1 }
    END { if (NR == 0) { print "nan nan 0"; exit }
          m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
          printf "%.6g %.6g %d\n", m, s / NR, NR }'
}

bytes_per_rank=$(( nx * nx * 8 ))
echo "persist_bench: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "persist_bench: DIR $work on $(findmnt -rn -o FSTYPE,SOURCE -T "$work" | head -1)"
echo "persist_bench: $nodes ranks x $(awk -v b="$bytes_per_rank" 'BEGIN { printf "%g", b / 1048576 }') MiB (heat2d ${nx}x${nx} per rank)," \
  "$iters iterations, a checkpoint every $every_ckpt, first $warmup checkpoints left out," \
  "--persist-every: $everies; $reps repetition(s)"

n=0
# One dlckpt-run; $1: 0 (no --persist) or N (--persist-every N). Appends the
# checkpoint times to $tmp/ckpt.<cfg>, the drains to $tmp/drain.<cfg>.
run_one() {
  local e=$1 cfg job=${tag}x$n out ev rc t0 t1
  n=$((n + 1))
  cfg=$([ "$e" = 0 ] && echo none || echo "every$e")
  jobs_started+=("$job")
  out=$tmp/$job.out
  local cmd=("$bin/dlckpt-run" --job "$job" --nodes "$nodes" --spares 1 --encode sync --keep)
  [ "$e" = 0 ] || cmd+=(--persist "$work" --persist-every "$e")
  cmd+=(-- "$bin/heat2d-dlckpt" --nx "$nx" --ny "$nx" --iters "$iters" --ckpt-every "$every_ckpt")
  echo "== $cfg: ${cmd[*]}"
  t0=$(date +%s.%N)
  setsid timeout -k 5 "$tmo" "${cmd[@]}" >"$out" 2>&1 &
  cur_pid=$!
  wait "$cur_pid"; rc=$?
  cur_pid=""
  t1=$(date +%s.%N)
  if [ "$rc" != 0 ]; then
    echo "   dlckpt-run exited $rc; its output:"; sed 's/^/   | /' "$out"
    clean_job "$job"
    return 1
  fi
  grep -E '^dlckpt-run: summary' "$out" | sed 's/^/   /'
  # Checkpoint k (epoch k) at iteration k * C; rank 0's time.
  awk -v c="$every_ckpt" -v w="$warmup" '
    /^checkpoint: iteration [0-9]+ complete/ { it = $3
      v = $0; sub(/^.*, /, "", v); sub(/ s\)$/, "", v); k = it / c
      if (k > w) printf "%s ", v }' "$out" >"$tmp/row"
  echo "   checkpoint seconds, epochs $((warmup + 1))..: $(cat "$tmp/row")"
  tr ' ' '\n' <"$tmp/row" | grep . >>"$tmp/ckpt.$cfg"
  echo "   $(grep '^compute:' "$out"), dlckpt-run wall $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s"
  ev=/tmp/dlckpt-run.$job/events
  if [ "$e" != 0 ]; then
    # Per epoch: ranks, bytes, wall span of the drain, slowest rank's own time, codes.
    awk '$2 == "app" && $3 == "drain-begin" { e = $4; if (!(e in b) || $1 < b[e]) b[e] = $1 }
         $2 == "app" && $3 == "drain-end" { e = $4; if (!(e in f) || $1 > f[e]) f[e] = $1
           r[e]++; by[e] += $8; if ($9 > mx[e]) mx[e] = $9; if ($7 != 0) bad[e]++ }
         $2 == "app" && $3 == "drain-skip" { sk[$4]++ }
         $2 == "app" && $3 == "prune" { pr[$4] = $8 }
         END { for (e in f) printf "%d %d %d %.6f %.6f %d %.6f\n", e, r[e], by[e], (f[e] - b[e]) / 1e9, mx[e], bad[e] + 0, pr[e] + 0
               for (e in sk) printf "skip %d %d\n", e, sk[e] }' "$ev" | sort -n >"$tmp/drains"
    local skipped
    skipped=$(grep -c '^skip' "$tmp/drains")
    grep -v '^skip' "$tmp/drains" | while read -r ep nr by span mx bad pr; do
      awk -v ep="$ep" -v nr="$nr" -v by="$by" -v sp="$span" -v mx="$mx" -v bad="$bad" -v pr="$pr" 'BEGIN {
        printf "   drain of epoch %d: %d ranks, %d bytes, span %.3f s (slowest rank %.3f s), %.1f MiB/s%s%s\n",
          ep, nr, by, sp, mx, by / sp / 1048576, bad ? ", FAILED on " bad " rank(s)" : "",
          (pr > 0 ? sprintf("; then older epochs removed in %.3f s", pr) : "") }'
      [ "$bad" = 0 ] && [ "$nr" = "$nodes" ] && echo "$by $span" >>"$tmp/drain.$cfg"
      [ "$pr" = 0.000000 ] || echo "$pr" >>"$tmp/prune.all"
    done
    [ "$skipped" = 0 ] || echo "   drains skipped (the previous one still ran): epochs $(grep '^skip' "$tmp/drains" | cut -d' ' -f2 | tr '\n' ' ')"
    if [ ! -f "$tmp/verified" ]; then
      if "$bin/dlckpt-store" verify-drained "$work/$job" >"$tmp/verify" 2>&1; then
        echo "   dlckpt-store verify-drained $work/$job: ok ($(tail -1 "$tmp/verify"))"
      else
        echo "   dlckpt-store verify-drained $work/$job: FAILED:"; sed 's/^/   | /' "$tmp/verify"
      fi
      touch "$tmp/verified"
    fi
  fi
  clean_job "$job"
}

# dd of the bytes of one drained epoch (all ranks) to DIR, with fsync before
# dd ends; the wall time around dd (its start included). $1: 1 stream, or N
# parallel streams of 1/N each (the drain writes one file per rank at once).
dd_total=$(( (nodes * bytes_per_rank + (4 << 20) - 1) / (4 << 20) ))   # 4 MiB blocks
dd_one() {
  local par=$1 sfx=${2:-} i t0 t1 cnt=$(( (dd_total + $1 - 1) / $1 )) pids=()
  [ "$dd_shown" = 1 ] || [ "$par" != 1 ] ||
    echo "== dd: dd if=/dev/zero of=$work/dd.0 bs=4M count=$cnt conv=fsync"
  [ "$dd_shown" = 1 ] || [ "$par" = 1 ] ||
    echo "== dd x$par: $par x (dd if=/dev/zero of=$work/dd.<i> bs=4M count=$cnt conv=fsync) at once"
  t0=$(date +%s.%N)
  for i in $(seq 0 $((par - 1))); do
    timeout -k 5 120 dd if=/dev/zero of="$work/dd.$i" bs=4M count="$cnt" conv=fsync status=none &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || echo "   dd exited non-zero"; done
  t1=$(date +%s.%N)
  rm -f "$work"/dd.*
  local t2
  t2=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" -v c="$t2" -v by=$((par * cnt * 4194304)) -v par="$par" -v w="${sfx:+ while heat2d computes}" 'BEGIN {
    printf "   dd x%d%s: %d bytes in %.3f s, %.1f MiB/s (then rm %.3f s)\n", par, w, by, b - a, by / (b - a) / 1048576, c - b }'
  echo "$((par * cnt * 4194304)) $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }')" >>"$tmp/dd$sfx.$par"
}

# dd while heat2d computes without --persist (same CPU contention as a drain):
# from the second checkpoint on, dd x1 and dd xN alternately, 2 times each.
dd_busy() {
  local job=${tag}x$n i
  n=$((n + 1))
  jobs_started+=("$job")
  local cmd=("$bin/dlckpt-run" --job "$job" --nodes "$nodes" --spares 1 --encode sync
             -- "$bin/heat2d-dlckpt" --nx "$nx" --ny "$nx" --iters "$iters" --ckpt-every "$every_ckpt")
  echo "== dd while the application computes: ${cmd[*]}"
  setsid timeout -k 5 "$tmo" "${cmd[@]}" >"$tmp/$job.out" 2>&1 &
  cur_pid=$!
  for i in $(seq 1 $((tmo * 10))); do
    grep -q "^checkpoint: iteration $((2 * every_ckpt)) complete" "$tmp/$job.out" && break
    kill -0 "$cur_pid" 2>/dev/null || break
    sleep 0.1
  done
  for i in 1 2; do dd_one 1 .busy; dd_one "$nodes" .busy; done
  kill -0 "$cur_pid" 2>/dev/null || echo "   (the run ended before the last dd)"
  wait "$cur_pid"
  cur_pid=""
  clean_job "$job"
}

dd_shown=0
dd_one 1; dd_one "$nodes"; dd_shown=1
for rep in $(seq 1 "$reps"); do
  echo "-- repetition $rep"
  run_one 0 || exit 1
  for e in $everies; do run_one "$e" || exit 1; done
  dd_one 1; dd_one "$nodes"
done
echo "-- dd under the application's CPU load"
dd_busy

echo "-- summary"
read -r none_med none_mean none_n < <(stats <"$tmp/ckpt.none")
echo "checkpoint seconds, no --persist: mean $none_mean, median $none_med ($none_n checkpoints)"
ratio=nan
for e in $everies; do
  read -r med mean cnt < <(stats <"$tmp/ckpt.every$e")
  r=$(awk -v a="$mean" -v b="$none_mean" 'BEGIN { printf "%.2f", a / b }')
  rm_=$(awk -v a="$med" -v b="$none_med" 'BEGIN { printf "%.2f", a / b }')
  echo "checkpoint seconds, --persist-every $e: mean $mean, median $med ($cnt checkpoints): ratio to none: mean ${r}x, median ${rm_}x"
  [ "$e" = 2 ] && ratio=$r
done
bw_of() {  # file of "bytes seconds" lines: per-line MiB/s
  awk '{ printf "%.3f\n", $1 / $2 / 1048576 }' "$1" | stats
}
read -r dd_med dd_mean dd_n < <(bw_of "$tmp/dd.1")
read -r ddp_med ddp_mean ddp_n < <(bw_of "$tmp/dd.$nodes")
echo "dd (1 stream, conv=fsync), MiB/s: median $dd_med, mean $dd_mean ($dd_n runs)"
echo "dd ($nodes streams at once, conv=fsync), MiB/s: median $ddp_med, mean $ddp_mean ($ddp_n runs)"
read -r ddb_med ddb_mean ddb_n < <(bw_of "$tmp/dd.busy.1")
read -r ddbp_med ddbp_mean ddbp_n < <(bw_of "$tmp/dd.busy.$nodes")
echo "dd while heat2d computes (1 stream / $nodes streams), MiB/s: median $ddb_med / $ddbp_med ($ddb_n / $ddbp_n runs)"
cat "$tmp"/drain.every* >"$tmp/drain.all" 2>/dev/null
read -r dr_med dr_mean dr_n < <(bw_of "$tmp/drain.all")
echo "drain ($nodes ranks, every complete drained epoch of every run), MiB/s: median $dr_med, mean $dr_mean ($dr_n drains)"
if [ -s "$tmp/prune.all" ]; then
  read -r pr_med pr_mean pr_n < <(stats <"$tmp/prune.all")
  echo "removal of older epochs after a drain (--persist-keep), seconds: median $pr_med, mean $pr_mean ($pr_n)"
fi
bw=$(awk -v a="$dr_med" -v b="$dd_med" 'BEGIN { printf "%.2f", a / b }')
echo "drain / dd x$nodes (medians): $(awk -v a="$dr_med" -v b="$ddp_med" 'BEGIN { printf "%.2f", a / b }') x;" \
  "drain / dd while heat2d computes: $(awk -v a="$dr_med" -v b="$ddb_med" 'BEGIN { printf "%.2f", a / b }') x (1 stream)," \
  "$(awk -v a="$dr_med" -v b="$ddbp_med" 'BEGIN { printf "%.2f", a / b }') x ($nodes streams)"
echo "METRIC persist_ckpt_time_ratio $ratio x target <= 1.1"
echo "METRIC persist_drain_bw_vs_dd $bw x target >= 0.8"
awk -v r="$ratio" 'BEGIN { exit !(r <= 1.1) }' && echo "persist_ckpt_time_ratio: target met" ||
  echo "persist_ckpt_time_ratio: target MISSED ($ratio x > 1.1)"
awk -v r="$bw" 'BEGIN { exit !(r >= 0.8) }' && echo "persist_drain_bw_vs_dd: target met" ||
  echo "persist_drain_bw_vs_dd: target MISSED ($bw x < 0.8)"

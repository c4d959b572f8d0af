#!/usr/bin/env bash
# gluster_bench.sh — dlckpt against GlusterFS, a real distributed file system,
# on this machine: the same ranks, sizes and run for every target.
#
#  (a) IOR rows: an IOR-compatible benchmark (file per process, fsync) writes
#      into GlusterFS, /dev/shm, local disk, a dlckpt-fuse mount and, if the
#      benchmark can run under dlckpt-run, /dlckpt.
#  (b) Checkpoint study: an app (default sppm-mini) checkpoints each iteration
#      to the same targets (plain build, --ckpt-dir, fsync'ed) and into /dlckpt
#      under dlckpt-run (the -dlckpt build: write + encode onto a spare).
#  (c) Recovery: one rank's node is killed after checkpoint K. GlusterFS: the
#      job ends, the same command is rerun and reads its checkpoint back.
#      dlckpt: dlckpt-run detects, surveys, rebuilds on a spare, relaunches.
#      Time from the kill to the app's "restarted from iteration" line.
#
# The volume comes from gluster_volume.sh (up before, down after, also when
# this script fails or is killed). Results: CSV, PNG plot (python3-matplotlib)
# and a log in --out (default bench/results/), METRIC lines at the end.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=$repo/build/bin
out=$repo/bench/results
ranks=4 mib=64 reps=3 iters=4 rec_iters=5 rec_at=2 sleep_ms=0
app=sppm-mini app_args="" ior="" ior_dlckpt="" short=0 cold=0 parts="ior,ckpt,recovery" plot=1
tag=${DLCKPT_GBENCH_TAG:-gb$$}   # names this run's jobs, stores and processes
argv=("$@")

usage() {
  cat <<EOF
usage: $(basename "$0") [options]

  --ranks N          MPI ranks = data nodes (default 4)
  --mib M            checkpoint / IOR file size per rank in MiB (default 64)
  --reps R           IOR repetitions, best taken (default 3)
  --iters C          checkpoints per app run in the study (default 4)
  --app NAME         sppm-mini (default) or heat2d; sized to --mib per rank
  --app-args "ARGS"  size arguments instead of the computed ones
  --ior "CMD"        IOR-compatible command; {ranks} is replaced by --ranks.
                     Default: "mpiexec -n {ranks} BIN/dlckpt-ior" when built,
                     else "$here/fio_ior.sh --np {ranks}" (fio stand-in)
  --ior-dlckpt "CMD" the same under dlckpt-run for the /dlckpt row, e.g.
                     "BIN/dlckpt-run --nodes {ranks} --spares 1 -- BIN/dlckpt-ior";
                     without it the row is left out
  --parts LIST       any of ior,ckpt,recovery (default all)
  --bin DIR          build/bin (default $bin)
  --out DIR          results directory (default $out)
  --short            CI version: 2 ranks, 4 MiB, 1 repetition, 2 checkpoints
  --cold             drop the page cache before the GlusterFS rerun reads its
                     checkpoint (the whole machine's: sync; drop_caches)
  --no-plot          no PNG
  -h, --help         this text

Needs root (glusterd, mounts), glusterfs-server + glusterfs-client, mpich, fio,
python3 (+ python3-matplotlib for the plot) and a build (cmake --build build).
Volume options (bricks, paths): see gluster_volume.sh --help.
EOF
}

while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) ranks=$2; shift 2 ;;
    --mib) mib=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --app) app=$2; shift 2 ;;
    --app-args) app_args=$2; shift 2 ;;
    --ior) ior=$2; shift 2 ;;
    --ior-dlckpt) ior_dlckpt=$2; shift 2 ;;
    --parts) parts=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --short) short=1; ranks=2 mib=4 reps=1 iters=2 rec_iters=3 rec_at=1; shift ;;
    --no-plot) plot=0; shift ;;
    --cold) cold=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gluster_bench: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

# Outside the volume: bring it up around this script (gluster_volume.sh tears
# it down however this ends, and its watchdog if this is killed).
if [ -z "${GLUSTER_MNT:-}" ]; then
  exec "$here/gluster_volume.sh" -q run -- "$here/$(basename "$0")" "${argv[@]}"
fi

for f in "$bin/$app" "$bin/$app-dlckpt" "$bin/dlckpt-run"; do
  [ -x "$f" ] || { echo "gluster_bench: $f not found: build first (cmake --build build)" >&2; exit 2; }
done
# The MPI dlckpt was built with (build/mpi-bin, cmake/mpi.cmake), not `mpiexec` in PATH.
[ -d "$bin/../mpi-bin" ] && PATH="$(cd "$bin/../mpi-bin" && pwd):$PATH"
command -v mpiexec >/dev/null || { echo "gluster_bench: mpiexec not found" >&2; exit 2; }
if [ -z "$ior" ]; then
  if [ -x "$bin/dlckpt-ior" ]; then
    ior="mpiexec -launcher fork -n {ranks} $bin/dlckpt-ior"
    # /dlckpt: the same writes under dlckpt-run, each write phase ending with
    # dlckpt_checkpoint() (commit + encode onto the spare) inside the timing.
    [ -n "$ior_dlckpt" ] || ior_dlckpt="$bin/dlckpt-run --job ${tag}i --nodes {ranks} --spares 1 \
--capacity $(( 2 * mib + 64 ))M -- $bin/dlckpt-ior --dlckpt.checkpoint"
  else
    ior="$here/fio_ior.sh --np {ranks}"
  fi
fi
ior=${ior//\{ranks\}/$ranks}
ior_dlckpt=${ior_dlckpt//\{ranks\}/$ranks}
has_part() { case ",$parts," in *",$1,"*) return 0 ;; esac; return 1; }

# Sizes: the app's state per rank as close to --mib MiB as its grid allows.
if [ -z "$app_args" ]; then
  case "$app" in
    sppm-mini) app_args="--n $(awk -v m="$mib" 'BEGIN { printf "%d", (m * 1048576 / 40) ^ (1 / 3) + 0.5 }')" ;;
    heat2d) n=$(awk -v m="$mib" 'BEGIN { printf "%d", sqrt(m * 1048576 / 8) + 0.5 }'); app_args="--nx $n --ny $n" ;;
    *) echo "gluster_bench: give --app-args for $app" >&2; exit 2 ;;
  esac
fi
export UCX_TLS=${UCX_TLS:-self,sm}   # one host: no network transports (see tests/apps)
export GBENCH_TAG=$tag               # marks every process this script starts

mkdir -p "$out" || exit 2
work=$(mktemp -d /var/tmp/gluster-bench.XXXXXX)   # local disk (the root file system)
shm=$(mktemp -d /dev/shm/gluster-bench.XXXXXX)
fmnt=$(mktemp -d /tmp/gluster-bench-fuse.XXXXXX)
fstore="/dlckpt.$tag.n0.r0"
csv=$out/glusterfs.csv
logf=$out/glusterfs.log
jobs_made=()

# Processes of ours (environment GBENCH_TAG) other than this shell.
tagged_pids() {
  grep -lsaz "^GBENCH_TAG=$tag$" /proc/[0-9]*/environ 2>/dev/null | while read -r p; do
    p=${p#/proc/}; p=${p%%/*}
    [ "$p" != $$ ] && [ "$p" != "$BASHPID" ] && echo "$p"
  done
}
fuse_mounted() { findmnt -rn --mountpoint "$fmnt" >/dev/null 2>&1; }   # also a dead mount
cleanup() {
  local p j
  # The FUSE mount first: its daemon is one of the tagged processes.
  if fuse_mounted; then fusermount3 -u "$fmnt" 2>/dev/null || sleep 1; fi
  p=$(tagged_pids)
  [ -n "$p" ] && kill -KILL $p 2>/dev/null
  if fuse_mounted; then fusermount3 -u "$fmnt" 2>/dev/null || umount -l "$fmnt"; fi
  "$bin/dlckpt-store" rm "$fstore" >/dev/null 2>&1
  for j in "${jobs_made[@]}"; do rm -f /dev/shm/dlckpt."$j".*; rm -rf "/tmp/dlckpt-run.$j"; done
  rm -rf "$work" "$shm" "$GLUSTER_MNT/gbench"
  rmdir "$fmnt" 2>/dev/null
  return 0
}
trap 'cleanup' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say() { echo "$*" | tee -a "$logf"; }
row() {  # section target metric value unit
  echo "$1,$2,$3,$4,$5" >>"$csv"
}
# Runs a command in the background (so that a signal reaches this script's
# trap at once) with its output in $work/out; status of the command.
run_bg() { "$@" >"$work/out" 2>&1 & wait $!; }
# The same, each output line time-stamped live into FILE (pipefail: the
# command's status).
run_stamped() { local f=$1; shift; ( "$@" 2>&1 | stamp >"$f" ) & wait $!; }
# Prefix every line with the wall clock (seconds, microseconds).
stamp() { while IFS= read -r l; do printf '%s %s\n' "$EPOCHREALTIME" "$l"; done; }
now() { echo "$EPOCHREALTIME"; }
fsub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a - b }'; }
fdiv() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "nan" }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.4f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

: >"$logf"
echo "section,target,metric,value,unit" >"$csv"
say "gluster_bench: $(date -u +%FT%TZ), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
say "gluster_bench: $ranks ranks x $mib MiB, IOR: $ior"
"$here/gluster_volume.sh" info >>"$logf" 2>&1

mkdir -p "$GLUSTER_MNT/gbench" || exit 1
declare -A target_dir=([glusterfs]="$GLUSTER_MNT/gbench" [devshm]="$shm" [disk]="$work")
targets=(glusterfs devshm disk)
fuse_capacity=$(( 2 * ranks * mib + 2 * ranks * mib / 8 + 64 ))   # two checkpoint slots per rank
if [ -x "$bin/dlckpt-fuse" ] && [ -c /dev/fuse ] &&
   "$bin/dlckpt-fuse" "$fmnt" --store "$fstore" --capacity "${fuse_capacity}M" >>"$logf" 2>&1; then
  target_dir[fuse]=$fmnt; targets+=(fuse)
else
  say "gluster_bench: no dlckpt-fuse mount (not built or no /dev/fuse); the FUSE row is left out"
fi

# ---------------------------------------------------------------- (a) IOR
declare -A ior_write
if has_part ior; then
  say ""
  row load ior loadavg1 "$(cut -d' ' -f1 /proc/loadavg)" ""
  say "== (a) IOR: $ranks ranks x $mib MiB, file per process, 1 MiB transfers, fsync (-e), best of $reps"
  ior_args=(-a POSIX -b "${mib}m" -t 1m -s 1 -F -w -e -C -i "$reps")
  for t in "${targets[@]}" dlckpt; do
    if [ "$t" = dlckpt ]; then
      [ -n "$ior_dlckpt" ] || { say "  /dlckpt: left out (no dlckpt-ior; or give --ior-dlckpt)"; continue; }
      jobs_made+=("${tag}i")
      cmd="$ior_dlckpt ${ior_args[*]/-e/} -o /dlckpt/ior.dat"
    else
      mkdir -p "${target_dir[$t]}/ior"
      cmd="$ior ${ior_args[*]} -o ${target_dir[$t]}/ior/ior.dat"
    fi
    run_bg setsid timeout -k 5 600 $cmd
    rc=$? res=$(cat "$work/out")
    echo "$res" >>"$logf"
    w=$(echo "$res" | sed -n 's/^Max Write: *\([0-9.]*\) MiB\/sec.*/\1/p' | tail -1)
    if [ "$rc" != 0 ] || [ -z "$w" ]; then
      say "  $t: IOR failed (exit $rc); output in $logf"; echo "$res" | tail -5 >&2; exit 1
    fi
    ior_write[$t]=$w
    row ior "$t" write_bw "$w" MiB/s
    say "$(printf '  %-10s write %10.1f MiB/s' "$t" "$w")$([ "$t" = glusterfs ] && echo "   (by hand with the real IOR, 4 x 64 MiB: about 560 MiB/s)")"
    rm -rf "${target_dir[$t]:-/nonexistent}/ior"
  done
fi

# ---------------------------------------------------------------- (b) checkpoints
# Median checkpoint time (s) of a run's "checkpoint: iteration N complete (..., T s)" lines.
ckpt_times() { sed -n 's/.*checkpoint: iteration [0-9]* complete (.*, \([0-9.]*\) s)$/\1/p'; }
declare -A ckpt_med
if has_part ckpt; then
  bytes=""
  say ""
  row load ckpt loadavg1 "$(cut -d' ' -f1 /proc/loadavg)" ""
  say "== (b) checkpoint study: $app $app_args, $ranks ranks, $iters checkpoints per run (median)"
  for t in "${targets[@]}" dlckpt; do
    if [ "$t" = dlckpt ]; then
      job=${tag}c; jobs_made+=("$job")
      run_bg setsid timeout -k 5 900 "$bin/dlckpt-run" --job "$job" --nodes "$ranks" --spares 1 \
              --capacity "$(( 3 * mib + 64 ))M" -- "$bin/$app-dlckpt" $app_args --iters "$iters" \
              --ckpt-every 1
    else
      d=${target_dir[$t]}/ckpt; rm -rf "$d"
      run_bg setsid timeout -k 5 900 mpiexec -launcher fork -n "$ranks" "$bin/$app" $app_args \
              --iters "$iters" --ckpt-every 1 --ckpt-dir "$d"
    fi
    rc=$? res=$(cat "$work/out")
    echo "$res" >>"$logf"
    if [ "$rc" != 0 ]; then say "  $t: $app failed (exit $rc); output in $logf"; echo "$res" | tail -5 >&2; exit 1; fi
    [ -n "$bytes" ] || bytes=$(echo "$res" | sed -n 's/^checkpoint bytes per rank: //p' | head -1)
    m=$(echo "$res" | ckpt_times | median)
    ckpt_med[$t]=$m
    row ckpt "$t" ckpt_seconds "$m" s
    say "$(printf '  %-10s checkpoint %8.4f s  (%s)' "$t" "$m" "$(echo "$res" | ckpt_times | tr '\n' ' ')")"
    [ "$t" != dlckpt ] && rm -rf "${target_dir[$t]}/ckpt"
  done
  row ckpt all bytes_per_rank "$bytes" B
  say "  ($bytes bytes per rank; dlckpt: write into memfs + encode onto 1 spare; others: write + fsync)"
fi

# ---------------------------------------------------------------- (c) recovery
# Waits until FILE has a line matching RE (or the timeout); prints its time stamp.
wait_line() {  # file re timeout_s
  local end=$(( SECONDS + $3 )) l
  while [ $SECONDS -lt $end ]; do
    l=$(grep -m1 -E "$2" "$1" 2>/dev/null) && { echo "${l%% *}"; return 0; }
    sleep 0.05
  done
  return 1
}
if has_part recovery; then
  say ""
  row load recovery loadavg1 "$(cut -d' ' -f1 /proc/loadavg)" ""
  say "== (c) recovery: $app $app_args, $ranks ranks, node of rank 1 killed after checkpoint $rec_at"

  # GlusterFS: run, kill rank 1's process after checkpoint rec_at, rerun.
  # Rank 1 is found while the run is live (it exists from MPI start to the
  # end), and killed once checkpoint rec_at is complete. The iterations after
  # it last at least 1 s each, so the kill lands inside the run; should the
  # run still end first (a very slow machine), the injection is repeated with
  # twice the pause, at most 3 times: the measurement needs a kill mid-run.
  d=$GLUSTER_MNT/gbench/rec
  l1=$work/rec-g1.log l2=$work/rec-g2.log
  rec_sleep=$(( sleep_ms > 1000 ? sleep_ms : 1000 ))
  app_exe=$(readlink -f "$bin/$app")
  killed=0
  for attempt in 1 2 3; do
    rm -rf "$d"
    rargs=($app_args --iters "$rec_iters" --ckpt-every 1 --sleep-ms "$rec_sleep")
    (setsid timeout -k 5 900 mpiexec -launcher fork -n "$ranks" "$bin/$app" "${rargs[@]}" \
       --ckpt-dir "$d" 2>&1 | stamp >"$l1") &
    first=$!   # its end is awaited below (after the kill)
    victim=""
    while [ -z "$victim" ] && kill -0 "$first" 2>/dev/null; do
      victim=$(for p in $(tagged_pids); do
                 [ "$(readlink "/proc/$p/exe" 2>/dev/null)" = "$app_exe" ] &&
                   tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "PMI_RANK=1" && echo "$p"
               done | head -1)
      [ -n "$victim" ] || sleep 0.02
    done
    if [ -z "$victim" ]; then
      wait "$first"; say "  glusterfs: the run ended before its rank 1 was seen"; cat "$l1" >&2; exit 1
    fi
    if ! wait_line "$l1" "checkpoint: iteration $rec_at complete" 600 >/dev/null; then
      say "  glusterfs: checkpoint $rec_at never completed"; cat "$l1" >&2; exit 1
    fi
    t_kill=$(now)
    kill -KILL "$victim" 2>/dev/null
    wait "$first"
    # A run that printed its checksum finished: the kill came too late.
    if ! grep -q "^[0-9.]* checksum:" "$l1"; then killed=1; break; fi
    say "  glusterfs: the run ended before rank 1 could be killed (attempt $attempt, $rec_sleep ms per iteration)"
    rec_sleep=$(( rec_sleep * 2 ))
  done
  [ "$killed" = 1 ] || { say "  glusterfs: rank 1 could not be killed mid-run"; exit 1; }
  t_exit=$(now)
  if [ "$cold" = 1 ]; then sync; echo 3 >/proc/sys/vm/drop_caches; fi
  t_launch=$(now)
  run_stamped "$l2" setsid timeout -k 5 900 mpiexec -launcher fork -n "$ranks" "$bin/$app" \
    "${rargs[@]}" --ckpt-dir "$d"
  rc=$?
  t_res=$(grep -m1 "restarted from iteration" "$l2" | cut -d' ' -f1)
  cat "$l1" "$l2" >>"$logf"
  [ "$rc" = 0 ] && [ -n "$t_res" ] || { say "  glusterfs: the rerun did not restart (exit $rc)"; tail -5 "$l2" >&2; exit 1; }
  g_detect=$(fsub "$t_exit" "$t_kill")
  g_restart=$(fsub "$t_res" "$t_launch")
  g_total=$(awk -v a="$g_detect" -v b="$g_restart" 'BEGIN { printf "%.3f", a + b }')
  row recovery glusterfs detection "$g_detect" s
  row recovery glusterfs relaunch_read "$g_restart" s
  row recovery glusterfs total "$g_total" s
  say "  glusterfs: $g_total s from the kill to 'restarted from iteration' (job end $g_detect s, rerun + MPI start + reading the checkpoint $g_restart s)"

  # dlckpt: dlckpt-run kills the node itself and recovers.
  job=${tag}r; jobs_made+=("$job")
  l3=$work/rec-d.log
  run_stamped "$l3" setsid timeout -k 5 900 "$bin/dlckpt-run" --job "$job" --nodes "$ranks" \
    --spares 1 --capacity "$(( 3 * mib + 64 ))M" --kill-node vn1 --at "checkpoint:$rec_at" \
    -- "$bin/$app-dlckpt" "${rargs[@]}"
  rc=$?
  cat "$l3" >>"$logf"
  t_kill=$(grep -m1 "killing node" "$l3" | cut -d' ' -f1)
  t_res=$(grep -m1 "restarted from iteration" "$l3" | cut -d' ' -f1)
  [ "$rc" = 0 ] && [ -n "$t_kill" ] && [ -n "$t_res" ] ||
    { say "  dlckpt: the run did not recover (exit $rc)"; tail -8 "$l3" >&2; exit 1; }
  d_total=$(fsub "$t_res" "$t_kill")
  # dlckpt-run's summary: "detection X s, [teardown X s, ]survey X s, rebuild X s, relaunch X s".
  summary=$(grep "dlckpt-run: .*detection [0-9.]* s, " "$l3" | tail -1)
  phase() { echo "$summary" | grep -o "$1 [0-9.]* s" | awk '{ print $2 }'; }
  p_det=$(phase detection) p_tea=$(phase teardown) p_sur=$(phase survey) p_reb=$(phase rebuild) p_rel=$(phase relaunch)
  p_tea=${p_tea:-0}
  p_rest=$(awk -v t="$d_total" -v a="$p_det" -v e="$p_tea" -v b="$p_sur" -v c="$p_reb" -v d="$p_rel" \
             'BEGIN { printf "%.3f", t - a - e - b - c - d }')
  for k in detection:$p_det teardown:$p_tea survey:$p_sur rebuild:$p_reb relaunch:$p_rel app_read:$p_rest \
           total:$d_total; do
    row recovery dlckpt "${k%%:*}" "${k#*:}" s
  done
  say "  dlckpt:    $d_total s from the kill to 'restarted from iteration' (detection $p_det, teardown $p_tea, survey $p_sur, rebuild $p_reb, relaunch $p_rel, app start + read $p_rest s)"
fi

# ---------------------------------------------------------------- figures
say ""
say "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores, shared)"
row load end loadavg1 "$(cut -d' ' -f1 /proc/loadavg)" ""
if [ "$plot" = 1 ]; then
  py=python3; [ -x /usr/bin/python3 ] && py=/usr/bin/python3   # Debian's, with python3-matplotlib
  if "$py" -c 'import matplotlib' 2>/dev/null; then
    "$py" "$here/plot_gluster.py" "$csv" "$out/glusterfs.png" \
      "$ranks ranks x $mib MiB, $(date -u +%F), load $(cut -d' ' -f1 /proc/loadavg) on $(nproc) cores" &&
      say "plot: $out/glusterfs.png"
  else
    say "plot: skipped (apt-get install python3-matplotlib)"
  fi
fi
say "csv: $csv"
if [ -n "${ior_write[glusterfs]:-}" ] && [ -n "${ior_write[dlckpt]:-}" ]; then
  say "METRIC ior_write_speedup_vs_glusterfs $(fdiv "${ior_write[dlckpt]}" "${ior_write[glusterfs]}") x target >= 10"
fi
if [ -n "${g_total:-}" ]; then
  say "METRIC recovery_time_vs_glusterfs_restart $(fdiv "$d_total" "$g_total") x target <= 2"
fi
if [ -n "${ckpt_med[glusterfs]:-}" ] && [ -n "${ckpt_med[dlckpt]:-}" ]; then
  say "METRIC ckpt_speedup_vs_glusterfs $(fdiv "${ckpt_med[glusterfs]}" "${ckpt_med[dlckpt]}") x target >= 10"
fi
exit 0

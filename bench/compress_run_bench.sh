#!/usr/bin/env bash
# An app's checkpoints across a run (sppm-mini by default), with and without
# LZ4 compression of the memfs stores: memory per checkpoint byte (the blocks each committed epoch
# fills, read from the stores with dlckpt-store stat while the run goes on),
# the encode time of every epoch (codec events) and the checkpoint time the
# application sees (write + commit + encode + acknowledge, its "checkpoint:
# ... complete (..., X s)" lines). Both runs: dlckpt-run, 4 virtual data nodes
# of 1 rank, 1 spare (XOR), 64 KiB blocks, 1 MiB chunks, threshold 0.875.
#
# usage: compress_run_bench.sh [--bin DIR] [--app sppm-mini|sweep3d-mini|heat2d]
#          [--app-args "ARGS"] [--iters N] [--sleep-ms MS]
# --app-args: the app's size options (default sppm-mini "--n 40", sweep3d-mini
# "--nx 16 --ny 16 --nz 64", heat2d "--nx 362 --ny 362"); every app checkpoints
# every iteration (heat2d every 10 Jacobi iterations; --iters counts checkpoints).
# Ends with METRIC lines (targets justified in bench/README.md).
set -uo pipefail
bin=build/bin app=sppm-mini app_args= iters=24 sleep=500
while [ $# -gt 0 ]; do
  case $1 in
    --bin) bin=$2; shift 2 ;;
    --app) app=$2; shift 2 ;;
    --app-args) app_args=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --sleep-ms) sleep=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "compress_run_bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
case $app in
  sppm-mini) : "${app_args:=--n 40}"; every=1 ;;
  sweep3d-mini) : "${app_args:=--nx 16 --ny 16 --nz 64}"; every=1 ;;
  heat2d) : "${app_args:=--nx 362 --ny 362}"; every=10 ;;
  *) echo "compress_run_bench.sh: unknown app $app" >&2; exit 2 ;;
esac
for t in dlckpt-run dlckpt-codec dlckpt-store "$app-dlckpt"; do
  [ -x "$bin/$t" ] || { echo "compress_run_bench.sh: $bin/$t missing (build it)" >&2; exit 2; }
done
tmp=$(mktemp -d)
jobs_started=()
poller=
cleanup() {
  [ -n "$poller" ] && kill "$poller" 2>/dev/null
  for j in "${jobs_started[@]}"; do
    rm -f /dev/shm/dlckpt."$j".*; rm -rf "/tmp/dlckpt-run.$j"
  done
  rm -rf "$tmp"
}
trap cleanup EXIT

# poll JOB OUT: every 0.2 s, one line per store: rank epoch file_bytes blocks block_size image_bytes
poll() {
  local job=$1 out=$2
  while :; do
    for s in /dev/shm/dlckpt."$job".*.r*; do
      [ -e "$s" ] || continue
      "$bin/dlckpt-store" stat "/${s#/dev/shm/}" 2>/dev/null | awk -v store="$s" '
        /^rank:/ {r=$2} /^block_size:/ {bs=$2} /^epoch:/ {e=$2} /^epoch_file_bytes:/ {fb=$2}
        /^epoch_blocks:/ {b=$2} /^epoch_image_bytes:/ {ib=$2}
        END {if (e != "") print r, e, fb, b, bs, ib}'
    done >>"$out"
    sleep 0.2
  done
}

# run MODE: one run; leaves $tmp/MODE.{log,poll,events}
run() {
  local mode=$1 job="cbench${1}$$"
  jobs_started+=("$job")
  poll "$job" "$tmp/$mode.poll" &
  poller=$!
  # shellcheck disable=SC2086
  timeout -k 5 900 "$bin/dlckpt-run" --job "$job" --nodes 4 --spares 1 --scheme xor --keep \
    --compress "$mode" -- "$bin/$app-dlckpt" $app_args --iters $(( iters * every )) \
    --ckpt-every "$every" --sleep-ms "$(( sleep / every ))" >"$tmp/$mode.log" 2>&1
  local rc=$?
  kill "$poller" 2>/dev/null; wait "$poller" 2>/dev/null; poller=
  cp "/tmp/dlckpt-run.$job/events" "$tmp/$mode.events" 2>/dev/null
  if [ $rc != 0 ]; then
    echo "compress_run_bench.sh: the $mode run failed ($rc):" >&2; tail -20 "$tmp/$mode.log" >&2; exit 1
  fi
  rm -f /dev/shm/dlckpt."$job".*; rm -rf "/tmp/dlckpt-run.$job"
}

echo "$app $app_args, $iters checkpoints, 4 ranks"
run none
run lz4

# Per epoch: memory per checkpoint byte (all ranks), encode seconds, checkpoint seconds.
summary() {
  local mode=$1
  awk -v mode="$mode" '
    FILENAME ~ /poll$/ { key = $2 SUBSEP $1; if (!(key in seen)) { seen[key] = 1; fb[$2] += $3; mem[$2] += $4 * $5; img[$2] += $6; nr[$2]++ } next }
    FILENAME ~ /events$/ { if ($3 == "encode-begin") b[$4] = $1; if ($3 == "encode-end") enc[$4] = ($1 - b[$4]) / 1e9; next }
    /^checkpoint: iteration [0-9]+ complete/ { ck[++nck] = $(NF - 1); next }
    END {
      for (e = 1; e <= nck; e++) {
        r = (e in fb && fb[e] > 0) ? mem[e] / fb[e] : -1
        printf "%s epoch %2d  memory/byte %s  image/byte %s  encode %.3f s  checkpoint %.3f s\n", mode, e,
          (r < 0 ? "  n/a" : sprintf("%.3f", r)), (r < 0 ? "  n/a" : sprintf("%.3f", img[e] / fb[e])), enc[e], ck[e]
      }
    }' "$tmp/$mode.poll" "$tmp/$mode.events" "$tmp/$mode.log"
}
summary none | tee "$tmp/none.sum"
summary lz4 | tee "$tmp/lz4.sum"
awk '
  FILENAME ~ /none.sum$/ { if ($5 != "n/a") { nm += $5; nn++ } ne += $9; nc += $12; next }
  { if ($5 != "n/a") { lm += $5; ln++; if (first == "") first = $5; last = $5; if ($5 > lmax) lmax = $5 } le += $9; lc += $12 }
  END {
    printf "memory per checkpoint byte, mean over epochs: none %.3f, lz4 %.3f (first %s, last %s, max %.3f)\n", nm / nn, lm / ln, first, last, lmax
    printf "encode seconds, sum: none %.3f, lz4 %.3f; checkpoint seconds, sum: none %.3f, lz4 %.3f\n", ne, le, nc, lc
    printf "METRIC lz4_%s_memory_ratio %.3f x target <= 1.0\n", app, (lm / ln) / (nm / nn)
    printf "METRIC lz4_%s_checkpoint_time_ratio %.3f x target <= 1.1\n", app, lc / nc
  }' app="${app//-mini/}" "$tmp/none.sum" "$tmp/lz4.sum"

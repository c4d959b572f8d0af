#!/usr/bin/env bash
# mdtest-like metadata rates (creates, stats, removes of directories and empty
# files, one process; dlckpt-bench-metadata) under LD_PRELOAD=libdlckpt_preload.so
# into /dlckpt, against the same on tmpfs (/dev/shm) in the same run, and on a
# dlckpt-fuse mount when /dev/fuse is usable. Runs alternate preload and
# tmpfs; prints each run, the medians and one METRIC line: the median over
# runs of preload ops/s / tmpfs ops/s.
#
# usage: metadata_bench.sh [--runs N] [--items N] [--bin DIR] [--lib FILE] [--no-fuse]
#   --runs N    pairs of runs (default 5)
#   --items N   directories and files per run (default 1000, as mdtest -n 1000)
#   --bin DIR   where dlckpt-bench-metadata, dlckpt-fuse, dlckpt-store are
#               (default: build/bin beside this script's repo)
#   --lib FILE  the preload library (default: DIR/../lib/libdlckpt_preload.so)
#   --no-fuse   skip the dlckpt-fuse figure
# Each run uses a fresh store (job mdbench<pid>x<run>), removed afterwards.
set -euo pipefail

runs=5
items=1000
bin="$(cd "$(dirname "$0")/.." && pwd)/build/bin"
lib=""
fuse=1
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --items) items="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --lib) lib="$2"; shift 2 ;;
    --no-fuse) fuse=0; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "metadata_bench: unknown argument $1" >&2; exit 2 ;;
  esac
done
bin=$(cd "$bin" && pwd)
[ -n "$lib" ] || lib="$bin/../lib/libdlckpt_preload.so"
lib=$(readlink -f "$lib")
md="$bin/dlckpt-bench-metadata"
[ -x "$md" ] || { echo "metadata_bench: $md not found" >&2; exit 2; }
[ -f "$lib" ] || { echo "metadata_bench: $lib not found" >&2; exit 2; }

job="mdbench$$"
shm=$(mktemp -d /dev/shm/dlckpt-bench-md.XXXXXX)
mnt=""
cleanup() {
  set +e
  if [ -n "$mnt" ]; then
    if mountpoint -q "$mnt"; then fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt"; fi
    rmdir "$mnt" 2>/dev/null
  fi
  rm -rf "$shm"
  rm -f /dev/shm/dlckpt."$job"*.* 2>/dev/null
}
trap cleanup EXIT

# A store large enough for the file table (items + the directory) and no more.
export DLCKPT_STORE_CAPACITY=64M DLCKPT_MAX_FILES=$((items + 64))
unset DLCKPT_STORE DLCKPT_PREFIX

rate() { "$@" | awk '$1 == "RESULT" && $2 == "total_ops_per_s" { print $3 }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

pre_all="" tmp_all="" ratio_all=""
for ((i = 1; i <= runs; i++)); do
  p=$(DLCKPT_JOB="${job}x$i" LD_PRELOAD="$lib" rate "$md" /dlckpt/md --items "$items")
  rm -f /dev/shm/dlckpt."${job}x$i".*
  t=$(rate "$md" "$shm/md" --items "$items")
  rm -rf "${shm:?}/md"
  [ -n "$p" ] && [ -n "$t" ] || { echo "metadata_bench: a run failed" >&2; exit 1; }
  r=$(awk -v p="$p" -v t="$t" 'BEGIN { printf "%.3f", p / t }')
  printf 'run %d: preload %8s ops/s  tmpfs %8s ops/s  ratio %s\n' "$i" "$p" "$t" "$r"
  pre_all+="$p " tmp_all+="$t " ratio_all+="$r "
done

fuse_rate="-"
if [ "$fuse" = 1 ] && [ -x "$bin/dlckpt-fuse" ] && [ -r /dev/fuse ] && [ -w /dev/fuse ]; then
  mnt=$(mktemp -d /tmp/dlckpt-bench-md-mnt.XXXXXX)
  if "$bin/dlckpt-fuse" "$mnt" --store "/dlckpt.${job}f.n0.r0" --capacity 64M \
       --max-files $((items + 64)) >/dev/null 2>&1; then
    fuse_rate=$(rate "$md" "$mnt/md" --items "$items" || echo "-")
  fi
fi

m() { echo "$1" | tr ' ' '\n' | grep . | median; }
echo "medians over $runs runs of $items directories and $items files (6 x $items operations):"
echo "  preload $(m "$pre_all") ops/s, tmpfs $(m "$tmp_all") ops/s, dlckpt-fuse $fuse_rate ops/s"
echo "METRIC preload_metadata_vs_tmpfs $(m "$ratio_all") x target >= 0.5"

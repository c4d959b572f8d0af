#!/usr/bin/env bash
# Sequential 1 MiB writes into a dlckpt-fuse mount against the same into
# /dev/shm (tmpfs), with dd and with fio; prints per-run figures, medians and
# one METRIC line (dd: the median over runs of mount MB/s / tmpfs MB/s, each
# run measured back to back).
#
# usage: fuse_write_bench.sh [--runs N] [--size MiB] [--bin DIR] [-- DLCKPT-FUSE OPTIONS...]
#   --runs N     pairs of runs per tool (default 5)
#   --size MiB   bytes per run (default 1024)
#   --bin DIR    where dlckpt-fuse is (default: build/bin beside this script's repo)
# Options after -- go to dlckpt-fuse (e.g. -o direct_io, -o max_threads=2).
# Needs root or FUSE access, dd and fio. Each run writes a fresh file
# (dd: O_TRUNC; fio: unlinked after each run) and ends with fsync, so the
# bytes are in the store (or tmpfs) when the time stops.
set -euo pipefail

runs=5
size=1024
bin="$(cd "$(dirname "$0")/.." && pwd)/build/bin"
fuse_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --size) size="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --) shift; fuse_args=("$@"); break ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "fuse_write_bench: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -e /dev/fuse ] || { echo "fuse_write_bench: /dev/fuse is absent" >&2; exit 2; }
command -v fio >/dev/null || { echo "fuse_write_bench: fio not found" >&2; exit 2; }

store="/dlckpt.bench$$.n0.r0"
mnt=$(mktemp -d /tmp/dlckpt-bench-mnt.XXXXXX)
shm=$(mktemp -d /dev/shm/dlckpt-bench-tmpfs.XXXXXX)
cleanup() {
  if mountpoint -q "$mnt"; then fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt"; fi
  "$bin/dlckpt-store" rm "$store" >/dev/null 2>&1 || true
  rm -rf "$shm"
  rmdir "$mnt" 2>/dev/null || true
}
trap cleanup EXIT

# Room for the file, its page-cache-free rewrite and fio's file.
"$bin/dlckpt-fuse" "$mnt" --store "$store" --capacity "$((2 * size + 64))M" \
  "${fuse_args[@]}"

# MB/s (10^6 bytes per second) of one dd run.
dd_rate() {
  local out
  out=$(LC_ALL=C dd if=/dev/zero of="$1/dd.out" bs=1M count="$size" conv=fsync 2>&1 | tail -1)
  awk -v line="$out" 'BEGIN { n = split(line, w, " "); for (i = 1; i <= n; i++) if (w[i] == "copied,") { printf "%.0f\n", w[1] / w[i + 1] / 1e6; exit } }'
}

fio_rate() {
  fio --name=seqwrite --directory="$1" --rw=write --bs=1M --size="${size}M" --ioengine=psync \
      --end_fsync=1 --fallocate=none --unlink=1 --output-format=json 2>/dev/null |
    jq '.jobs[0].write.bw_bytes / 1e6 | floor'
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

declare -A rates
for tool in dd fio; do
  for ((i = 1; i <= runs; i++)); do
    f=$(${tool}_rate "$mnt")
    t=$(${tool}_rate "$shm")
    rm -f "$mnt/dd.out" "$shm/dd.out"
    r=$(awk -v f="$f" -v t="$t" 'BEGIN { printf "%.3f", f / t }')
    printf '%-4s run %d: mount %6s MB/s  tmpfs %6s MB/s  ratio %s\n' "$tool" "$i" "$f" "$t" "$r"
    rates[$tool,fuse]+="$f "
    rates[$tool,tmpfs]+="$t "
    rates[$tool,ratio]+="$r "
  done
done

echo "medians over $runs runs of ${size} MiB, 1 MiB records (dlckpt-fuse ${fuse_args[*]:-default options}):"
for tool in dd fio; do
  f=$(echo "${rates[$tool,fuse]}" | tr ' ' '\n' | grep . | median)
  t=$(echo "${rates[$tool,tmpfs]}" | tr ' ' '\n' | grep . | median)
  r=$(echo "${rates[$tool,ratio]}" | tr ' ' '\n' | grep . | median)
  printf '  %-4s mount %s MB/s, tmpfs %s MB/s, ratio %s\n' "$tool" "$f" "$t" "$r"
  [ "$tool" = dd ] && dd_ratio=$r
done
echo "METRIC fuse_write_vs_tmpfs $dd_ratio x target >= 0.5"

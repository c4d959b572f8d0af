#!/usr/bin/env bash
# fio_ior.sh — a stand-in for IOR's POSIX file-per-process runs, made of fio,
# for benchmarks to use until dlckpt-ior is built. It takes IOR's command line
# (the subset below) and prints IOR's summary lines, so a script can switch
# between this and dlckpt-ior (or the real IOR) by changing one command.
#
#   fio_ior.sh --np N -a POSIX -b 64m -t 1m [-s 1] -F [-w] [-r] [-e] [-C] [-i 3] -o FILE [-k]
#
# --np N      processes (IOR's MPI ranks): fio jobs, one file each, FILE.0000000 ...
# -b, -t, -s  block size per segment, transfer size, segments (file = b x s)
# -w, -r      write, then read back (both if neither is given, as IOR)
# -e          fsync each file before it is closed (fio --fsync_on_close)
# -C          accepted; the page cache is dropped for the files before reading
#             (fio --invalidate) instead of shifting ranks, which one process
#             group on one machine cannot do
# -i N        repetitions; Max/Min/Mean over them, as IOR
# -k          keep the files (default: removed after each repetition)
#
# Bandwidth of a repetition = bytes of all processes / the slowest process's
# time from its first write to its close (incl. fsync with -e), fio's
# group-reporting figure. Output: `Max Write: X MiB/sec (Y MB/sec)`, `Max Read:`,
# and IOR's summary table rows for write/read.
set -euo pipefail

np=1 api=POSIX block=1m xfer=1m segs=1 fpp=0 do_w=0 do_r=0 fsync=0 iters=1 out="" keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --np) np=$2; shift 2 ;;
    -a) api=$2; shift 2 ;;
    -b) block=$2; shift 2 ;;
    -t) xfer=$2; shift 2 ;;
    -s) segs=$2; shift 2 ;;
    -F) fpp=1; shift ;;
    -w) do_w=1; shift ;;
    -r) do_r=1; shift ;;
    -e) fsync=1; shift ;;
    -C) shift ;;
    -i) iters=$2; shift 2 ;;
    -o) out=$2; shift 2 ;;
    -k) keep=1; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "fio_ior: unsupported option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ "$api" = POSIX ] || { echo "fio_ior: only -a POSIX is supported" >&2; exit 2; }
[ "$fpp" = 1 ] || { echo "fio_ior: only file per process (-F) is supported" >&2; exit 2; }
[ -n "$out" ] || { echo "fio_ior: -o FILE is required" >&2; exit 2; }
command -v fio >/dev/null || { echo "fio_ior: fio not found (apt-get install fio)" >&2; exit 2; }
if [ "$do_w" = 0 ] && [ "$do_r" = 0 ]; then do_w=1 do_r=1; fi

# Bytes of an IOR size (k, m, g: powers of 1024).
bytes() {
  local v=${1,,}
  case "$v" in
    *k) echo $(( ${v%k} * 1024 )) ;; *m) echo $(( ${v%m} * 1048576 )) ;;
    *g) echo $(( ${v%g} * 1073741824 )) ;; *) echo "$v" ;;
  esac
}
bs=$(bytes "$xfer")
size=$(( $(bytes "$block") * segs ))
dir=$(dirname "$out") base=$(basename "$out")
[ -d "$dir" ] || { echo "fio_ior: directory $dir does not exist" >&2; exit 2; }

# One fio run over np jobs; prints the aggregate bandwidth in bytes/s.
run() {  # rw
  local rw=$1 extra=()
  [ "$rw" = write ] && [ "$fsync" = 1 ] && extra+=(--fsync_on_close=1)
  fio --name=ior --rw="$rw" --bs="$bs" --size="$size" --numjobs="$np" --ioengine=psync \
      --directory="$dir" --filename_format="$base.\$jobnum" --fallocate=none --invalidate=1 \
      --create_on_open=1 --group_reporting --output-format=json "${extra[@]}" |
    python3 -c 'import json, sys
j = json.load(sys.stdin)["jobs"][0]["'"$rw"'"]
print(j["io_bytes"] / (j["runtime"] / 1000.0) if j["runtime"] else 0)'
}

echo "fio_ior: IOR stand-in over $(fio --version): $np processes, file per process, $size bytes each, transfer $bs, fsync $fsync, $iters repetition(s)"
echo "Results:"
echo
printf '%-9s %-10s %-10s\n' access "bw(MiB/s)" iter
declare -a wr=() rd=()
for ((i = 0; i < iters; i++)); do
  if [ "$do_w" = 1 ]; then
    b=$(run write); wr+=("$b")
    printf '%-9s %-10.2f %-10d\n' write "$(awk -v b="$b" 'BEGIN { print b / 1048576 }')" "$i"
  fi
  if [ "$do_r" = 1 ]; then
    b=$(run read); rd+=("$b")
    printf '%-9s %-10.2f %-10d\n' read "$(awk -v b="$b" 'BEGIN { print b / 1048576 }')" "$i"
  fi
  if [ "$keep" = 0 ]; then
    for ((j = 0; j < np; j++)); do rm -f "$out.$j"; done
  fi
done
echo
summary() {  # name values...
  local name=$1; shift
  [ $# -gt 0 ] || return 0
  printf '%s\n' "$@" | awk -v n="$name" '
    { v = $1 / 1048576; s += v; if (NR == 1 || v > mx) mx = v; if (NR == 1 || v < mn) mn = v }
    END { printf "Max %s: %.2f MiB/sec (%.2f MB/sec)\n", n, mx, mx * 1.048576
          printf "Summary %s: max %.2f min %.2f mean %.2f MiB/sec over %d\n", n, mx, mn, s / NR, NR }'
}
summary Write "${wr[@]}"
summary Read "${rd[@]}"

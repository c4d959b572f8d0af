#!/bin/bash
# symbols.sh LIST ARCHIVE PRELOAD — both link modes define exactly the
# functions of symbols.list: __wrap_X in the static archive, X exported by the
# preload library (plus dlckpt_enabled, (P)MPI_Init and (P)MPI_Init_thread,
# which make the store when MPI starts — Open MPI's Fortran MPI_INIT calls the
# PMPI_ name — and the C++ API; nothing else).
set -euo pipefail
list=$1 archive=$2 preload=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
grep -E '^[A-Za-z_]' "$list" | sort > "$tmp/want"
nm --defined-only "$archive" 2>/dev/null | awk '$2 == "T" && $3 ~ /^__wrap_/ {sub(/^__wrap_/, "", $3); print $3}' | sort -u > "$tmp/wrapped"
nm -D --defined-only "$preload" | awk '$2 ~ /^[TW]$/ && $3 !~ /^_Z/ && $3 !~ /^P?MPI_Init(_thread)?$/ {print $3}' | sort -u > "$tmp/exported"
nm -D --defined-only "$preload" > "$tmp/all"
for s in MPI_Init MPI_Init_thread PMPI_Init PMPI_Init_thread; do
  grep -q " T $s\$" "$tmp/all" || { echo "FAIL: the preload library does not export $s" >&2; exit 1; }
done
status=0
diff -u "$tmp/want" "$tmp/wrapped" || { echo "FAIL: static archive differs from symbols.list" >&2; status=1; }
diff -u "$tmp/want" "$tmp/exported" || { echo "FAIL: preload exports differ from symbols.list" >&2; status=1; }
others=$(nm -D --defined-only -C "$preload" | awk '$2 !~ /^[TW]$/ || $3 ~ /::/' | grep -v 'dlckpt_enabled' | grep -v 'dlckpt::intercept::' || true)
[ -z "$others" ] || { echo "FAIL: unexpected exports: $others" >&2; status=1; }
[ $status = 0 ] && echo "PASS: $(wc -l < "$tmp/want") functions in both modes"
exit $status

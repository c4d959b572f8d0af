#!/bin/bash
# mpi.sh FLAGS_FILE — MPI jobs in both link modes: a C and a Fortran MPI
# program built with the non-CMake static recipe (`mpicc/mpif90 ...
# @FLAGS_FILE`), and the C program built plainly and run under
# LD_PRELOAD=$DLCKPT_PRELOAD; each runs with 2 ranks under mpiexec. Checks
# that every rank wrote into its own store (named from PMI_RANK) and nothing
# reached the disk.
set -euo pipefail
flags=$1
tool=${DLCKPT_STORE_TOOL:?}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d /tmp/dlckpt-mpi.XXXXXX)
job="mpi$$x${RANDOM}"
cleanup() {
  for r in 0 1; do "$tool" rm "/dlckpt.$job.testnode.r$r" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

mpicc -O2 -o "$tmp/mpi_c" "$here/mpi_ckpt.c" @"$flags" || fail "mpicc with $flags"
mpif90 -O2 -o "$tmp/mpi_f" "$here/mpi_ckpt.f90" @"$flags" || fail "mpif90 with $flags"
mpicc -O2 -o "$tmp/mpi_plain" "$here/mpi_ckpt.c" || fail "mpicc"
nm "$tmp/mpi_c" > "$tmp/nm_c"
nm "$tmp/mpi_f" > "$tmp/nm_f"
grep -q ' __wrap_fopen$' "$tmp/nm_c" || fail "mpi_c carries no wrappers"
grep -q ' __wrap_open$' "$tmp/nm_f" || fail "mpi_f carries no wrappers"

prefix="$tmp/dlckpt"
mkdir -p "$prefix"
export DLCKPT_PREFIX="$prefix" DLCKPT_JOB="$job" DLCKPT_NODE=testnode DLCKPT_STORE_CAPACITY=16M
unset DLCKPT_RANK DLCKPT_STORE
for prog in mpi_c mpi_f; do
  setsid timeout -k 5 60 mpiexec -n 2 "$tmp/$prog" "$prefix" < /dev/null || fail "mpiexec $prog"
done
mkdir -p "$prefix.preload"
DLCKPT_PREFIX="$prefix.preload" LD_PRELOAD="${DLCKPT_PRELOAD:?}" \
  setsid timeout -k 5 60 mpiexec -n 2 "$tmp/mpi_plain" "$prefix.preload" < /dev/null || fail "mpiexec under the preload"
[ -z "$(ls -A "$prefix.preload")" ] || fail "files reached the disk under $prefix.preload"
[ -z "$(ls -A "$prefix")" ] || fail "files reached the disk under $prefix"
for r in 0 1; do
  store="/dlckpt.$job.testnode.r$r"
  "$tool" commit "$store" > /dev/null || fail "no store for rank $r"
  for i in $(seq 0 999); do echo "rank $r value $((i * r))"; done > "$tmp/want_c"
  for i in $(seq 1 500); do echo "rank $r value $((i * r))"; done > "$tmp/want_f"
  "$tool" cat "$store" "$prefix/rank$r.ckpt" | cmp - "$tmp/want_c" || fail "rank $r C checkpoint"
  "$tool" cat "$store" "$prefix/frank$r.ckpt" | cmp - "$tmp/want_f" || fail "rank $r Fortran checkpoint"
  "$tool" cat "$store" "$prefix.preload/rank$r.ckpt" | cmp - "$tmp/want_c" || fail "rank $r preload checkpoint"
done
echo "PASS: mpicc/mpif90 @flags and LD_PRELOAD, 2 ranks, one store per rank"

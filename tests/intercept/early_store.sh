#!/bin/bash
# early_store.sh C_PROG F_PROG — issue 36: under LD_PRELOAD=$DLCKPT_PRELOAD an
# unmodified MPI program (it never calls dlckpt_init, as IOR) has its store
# made when MPI_Init / MPI_Init_thread returns, before its first open; with
# DLCKPT_STORE_EARLY=0 it is made by the first open, as before. 2 ranks each,
# C (MPI_Init and MPI_Init_thread) and Fortran (MPI_INIT).
set -euo pipefail
cprog=$1 fprog=$2
lib=${DLCKPT_PRELOAD:?}
job="early$$x$RANDOM"
tmp=$(mktemp -d /tmp/dlckpt-early.XXXXXX)
cleanup() { rm -f /dev/shm/dlckpt."$job".*; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export DLCKPT_JOB=$job DLCKPT_NODE=earlynode DLCKPT_STORE_CAPACITY=64M
unset DLCKPT_RANK DLCKPT_STORE DLCKPT_PREFIX DLCKPT_STORE_EARLY
[ ! -e /dlckpt ] || fail "/dlckpt exists on disk; remove it"

# run NAME WANT ARGS...: 2 ranks under the preload; every rank must report
# store_before_open WANT.
run() {
  local name=$1 want=$2
  shift 2
  rm -f /dev/shm/dlckpt."$job".*
  setsid timeout -k 5 60 mpiexec -genv LD_PRELOAD "$lib" -n 2 "$@" < /dev/null > "$tmp/$name.out" 2> "$tmp/$name.err" ||
    fail "$name: mpiexec exited $?: $(cat "$tmp/$name.err")"
  cat "$tmp/$name.out"
  [ "$(grep -c "store_before_open $want" "$tmp/$name.out")" = 2 ] ||
    fail "$name: expected store_before_open $want on both ranks: $(cat "$tmp/$name.out" "$tmp/$name.err")"
  for r in 0 1; do
    [ -e /dev/shm/dlckpt."$job".earlynode.r$r ] || fail "$name: no store for rank $r"
  done
  ! grep -q "memfs store unavailable" "$tmp/$name.err" || fail "$name: $(cat "$tmp/$name.err")"
}
run c_init 1 "$cprog" plain 4
run c_init_thread 1 "$cprog" thread 4
run fortran 1 "$fprog"
# The old behaviour, to show the check can fail: the first open makes the store.
DLCKPT_STORE_EARLY=0 run c_late 0 "$cprog" plain 4
# The store made early holds what the program wrote (it was the one the
# rank attached, not a second one).
DLCKPT_STORE="/dlckpt.$job.earlynode.r1" LD_PRELOAD="$lib" ls /dlckpt/early > "$tmp/ls" 2>&1 ||
  fail "listing rank 1's store: $(cat "$tmp/ls")"
grep -qx "f.1" "$tmp/ls" || fail "rank 1's store lacks its file: $(cat "$tmp/ls")"
echo "early_store: ok"

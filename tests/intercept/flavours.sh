#!/bin/bash
# flavours.sh LFS_C FORTIFY_C — the build flavours really call the
# entry points they are meant to exercise (so the io tests cover them).
set -euo pipefail
need() {  # need BINARY SYMBOL...
  local bin=$1; shift
  local syms
  syms=$(nm -u "$bin")
  for s in "$@"; do
    grep -q " $s@" <<< "$syms" || { echo "FAIL: $(basename "$bin") does not call $s" >&2; exit 1; }
  done
}
need "$1" open64 fopen64 lseek64 fstat64 pread64 ftruncate64 stat64 openat64
need "$2" __open_2 __read_chk __pread_chk __fprintf_chk
echo "PASS: the LFS and fortified builds call the 64-bit and checking entry points"

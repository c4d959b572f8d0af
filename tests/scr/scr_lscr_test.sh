#!/usr/bin/env bash
# scr_lscr_test.sh BUILD_DIR WORK_DIR — an SCR makefile links unchanged:
# `cmake --install BUILD_DIR` into WORK_DIR/prefix, then tests/scr/Makefile.scr
# (mpicc / mpif90 with -lscr -lscrf) builds the C and Fortran programs
# against it; each must record libdlckpt_scr and run (2 ranks, plain
# mpiexec). pkg-config's scr.pc gives the same link. The build tree has the
# SCR names too (build/lib/libscr.so, libscrf.so).
set -uo pipefail
build=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
job="slscr$$x${RANDOM}"
fail() { echo "FAIL: $*" >&2; [ -f "$work/log" ] && tail -30 "$work/log" >&2; exit 1; }
rm -rf "$work"; mkdir -p "$work"
trap 'rm -rf "$work"; rm -f /dev/shm/dlckpt."$job".*; rm -rf /dev/shm/dlckpt-scr."$job".*' EXIT
for n in libscr.so libscrf.so; do
  [ -e "$build/lib/$n" ] || fail "$build/lib/$n: no such library in the build tree"
done
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/log" 2>&1 || fail "cmake --install"
libdir=$(cd "$prefix" && dirname "$(ls -d lib*/pkgconfig lib/*/pkgconfig 2>/dev/null | head -1)")
[ -n "$libdir" ] || fail "no pkgconfig directory under $prefix"
for n in libscr.so libscrf.so; do
  [ -L "$prefix/$libdir/$n" ] && [ -e "$prefix/$libdir/$n" ] || fail "$prefix/$libdir/$n is not a link to an installed library"
done
[ -f "$prefix/$libdir/pkgconfig/scr.pc" ] || fail "scr.pc is not installed"
targets=scr_byname
command -v mpif90 >/dev/null && targets="$targets scr_byname_f"
make -C "$work" -f "$here/Makefile.scr" SCR_PKG="$prefix" SCR_LIBDIR="$prefix/$libdir" SRC="$here" $targets >>"$work/log" 2>&1 ||
  fail "make with -lscr -lscrf"
# pkg-config scr: the same library.
PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig" mpicc -O2 -o "$work/scr_byname_pc" "$here/scr_byname.c" \
  $(PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig" pkg-config --cflags --libs scr) >>"$work/log" 2>&1 ||
  fail "mpicc with pkg-config scr"
for app in $targets scr_byname_pc; do
  readelf -d "$work/$app" | grep 'NEEDED.*libdlckpt_scr\.so' >/dev/null || fail "$app does not record libdlckpt_scr"
  DLCKPT_JOB=$job timeout -k 5 60 mpiexec -launcher fork -n 2 "$work/$app" --iters 2 >"$work/out" 2>&1 ||
    { cat "$work/out" >&2; fail "$app: exit $?"; }
  grep -q "^checksum: " "$work/out" || { cat "$work/out" >&2; fail "$app printed no checksum"; }
  rm -f /dev/shm/dlckpt."$job".*
  echo "$app: linked with the SCR names, ran"
done
echo "scr_lscr_test: ok"

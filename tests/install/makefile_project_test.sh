#!/usr/bin/env bash
# makefile_project_test.sh PREFIX WORK_DIR [static|dynamic]
# static (default): builds tests/install/Makefile.example with make + mpicc
# against PREFIX (pkg-config, dlckpt-cc, the flags file; the SCR app with
# dlckpt-scr.pc, the VeloC app with dlckpt-veloc.pc), then runs the pkg-config builds under PREFIX/bin/dlckpt-run
# with a node kill: each must end with the failure-free checksum.
# dynamic: the -ldlckpt_api -ldlckpt_preload build, run with --preload.
set -uo pipefail
prefix=$1 work=$2 recipe=${3:-static}
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*" >&2; [ -f "$work/log" ] && tail -30 "$work/log" >&2; exit 1; }
rm -rf "$work"; mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
libdir=$(cd "$prefix" && dirname "$(ls -d lib*/pkgconfig lib/*/pkgconfig 2>/dev/null | head -1)")
if [ "$recipe" = dynamic ]; then targets=ckpt_app_dyn; else targets=all; fi
make -C "$work" -f "$here/Makefile.example" PREFIX="$prefix" SRC="$here" LIBDIR="$prefix/$libdir" \
  PKG="PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig pkg-config" $targets >"$work/log" 2>&1 || fail "make"
if [ "$recipe" = dynamic ]; then
  readelf -d "$work/ckpt_app_dyn" | grep 'NEEDED.*libdlckpt_preload' >/dev/null || fail "no libdlckpt_preload"
  DLCKPT_RUN_EXTRA=--preload "$here/run_app.sh" "$prefix/bin" "$work/ckpt_app_dyn" xor -- --iters 10 --sleep-ms 50 || exit 1
else
  for app in ckpt_app_pc ckpt_app_cc ckpt_app_flags; do
    nm "$work/$app" | grep ' __wrap_fopen$' >/dev/null || fail "$app carries no static wrappers"
  done
  readelf -d "$work/scr_app_pc" | grep 'NEEDED.*libdlckpt_scr' >/dev/null || fail "scr_app_pc does not link libdlckpt_scr"
  "$here/run_app.sh" "$prefix/bin" "$work/ckpt_app_pc" xor -- --iters 10 --sleep-ms 50 || exit 1
  "$here/run_app.sh" "$prefix/bin" "$work/scr_app_pc" xor -- --iters 10 --sleep-ms 50 || exit 1
  readelf -d "$work/veloc_app_pc" | grep 'NEEDED.*libdlckpt_veloc' >/dev/null || fail "veloc_app_pc does not link libdlckpt_veloc"
  "$here/run_app.sh" "$prefix/bin" "$work/veloc_app_pc" xor -- "$here/../veloc/veloc.cfg" --iters 10 --sleep-ms 50 || exit 1
fi
echo "makefile_project_test ($recipe): ok"

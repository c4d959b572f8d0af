#!/usr/bin/env bash
# relocate_test.sh PREFIX WORK VERSION — issue 36: an installed dlckpt that is
# moved keeps building applications. PREFIX (the install.prefix fixture) is
# copied to WORK/a, which is then moved to WORK/b (so WORK/a is gone, as the
# old prefix of a moved installation is). From WORK/b: dlckpt-cc --version
# prints dlckpt's version, then the compiler's; dlckpt-cc --flags names WORK/b
# only and notes that share/dlckpt/dlckpt.flags names the old prefix; an MPI
# application builds (and links the wrappers) with WORK/b/bin/dlckpt-cc, with
# mpicc $(dlckpt-cc --flags), and with dlckpt-f90; the .pc files follow too.
set -euo pipefail
prefix=$1 work=$2 version=$3
src=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
cp -a "$prefix" "$work/a"
mv "$work/a" "$work/b"
old="$work/a" new="$work/b"
cd "$work"

# --version: dlckpt's line first, then the compiler's (gcc's for mpicc).
for w in dlckpt-cc dlckpt-cxx dlckpt-f90; do
  "$new/bin/$w" --version > "$w.version" 2>&1 || fail "$w --version exited $?: $(cat "$w.version")"
  # (files, not pipes into grep -q: pipefail would see the writer's SIGPIPE)
  sed -n 1p "$w.version" > "$w.first"
  sed -n '2,$p' "$w.version" > "$w.rest"
  grep -qF "$w $version" "$w.first" || fail "$w --version first line: $(cat "$w.first")"
  case $w in dlckpt-cc) c=mpicc ;; dlckpt-cxx) c=mpicxx ;; *) c=mpif90 ;; esac
  "$c" --version > "$w.compiler" 2>&1
  [ -s "$w.rest" ] && cmp -s "$w.rest" "$w.compiler" ||
    fail "$w --version: after dlckpt's line, not $c's version: $(cat "$w.version")"
  "$new/bin/$w" --help > "$w.help" || fail "$w --help exited $?"
  grep -q -- "--flags" "$w.help" || fail "$w --help does not document --flags"
done
grep -qF "$new" dlckpt-cc.version || fail "dlckpt-cc --version does not name its prefix $new"

# --flags: the recipe for where the prefix is now, and a note on the stale file.
"$new/bin/dlckpt-cc" --flags > flags.out 2> flags.err || fail "dlckpt-cc --flags exited $?"
grep -qF -- "-I$new/include" flags.out || fail "--flags lacks -I$new/include: $(cat flags.out)"
grep -qF -- "--whole-archive $new/" flags.out || fail "--flags does not link $new's archives: $(cat flags.out)"
! grep -qF -e "$old" -e "$prefix/" flags.out || fail "--flags names the old prefix: $(cat flags.out)"
grep -qF "dlckpt.flags names another prefix" flags.err || fail "no note on the stale dlckpt.flags: $(cat flags.err)"
grep -qF "$prefix/" "$new/share/dlckpt/dlckpt.flags" || fail "the installed dlckpt.flags should still name $prefix"
# The fixture's own prefix has a current dlckpt.flags: no note there.
"$prefix/bin/dlckpt-cc" --flags > /dev/null 2> here.err
[ ! -s here.err ] || fail "dlckpt-cc --flags in the installed prefix printed: $(cat here.err)"
# Regenerated, the flags file serves the moved prefix.
"$new/bin/dlckpt-cc" --flags > "$new/share/dlckpt/dlckpt.flags" 2>/dev/null
"$new/bin/dlckpt-cc" --flags 2> regen.err > /dev/null
[ ! -s regen.err ] || fail "a note after regenerating dlckpt.flags: $(cat regen.err)"

# Build an application every way from the moved prefix, then hide the
# original prefix's archives from the linker by checking the link map.
"$new/bin/dlckpt-cc" -O2 -c -o ckpt_app.o "$src/ckpt_app.c" || fail "dlckpt-cc -c"
"$new/bin/dlckpt-cc" -O2 -o app_cc ckpt_app.o -Wl,-Map,app_cc.map || fail "dlckpt-cc link"
# shellcheck disable=SC2046
mpicc -O2 -o app_flags "$src/ckpt_app.c" $("$new/bin/dlckpt-cc" --flags) || fail "mpicc \$(dlckpt-cc --flags)"
mpicc -O2 -o app_file "$src/ckpt_app.c" @"$new/share/dlckpt/dlckpt.flags" || fail "mpicc @regenerated dlckpt.flags"
printf 'program p\n  use mpi\n  integer :: ierr\n  call MPI_Init(ierr)\n  call MPI_Finalize(ierr)\nend program p\n' > p.f90
for app in app_cc app_flags app_file app_f; do
  [ "$app" != app_f ] || "$new/bin/dlckpt-f90" -O2 -o app_f p.f90 || fail "dlckpt-f90"
  nm "$app" > "$app.nm"
  grep -q ' __wrap_open$' "$app.nm" || fail "$app carries no static wrappers"
  [ "$app" = app_f ] || grep -q ' dlckpt_init$' "$app.nm" || fail "$app lacks the API"
done
grep -qF "$new/lib" app_cc.map || fail "dlckpt-cc did not link $new's archives"
! grep -qF "$prefix/lib" app_cc.map || fail "dlckpt-cc linked the original prefix's archives"
# pkg-config finds the moved prefix from the .pc file's own directory.
libdir=$(cd "$new" && dirname "$(ls lib*/pkgconfig/dlckpt.pc lib/*/pkgconfig/dlckpt.pc 2>/dev/null | head -1)")
PKG_CONFIG_PATH="$new/$libdir" pkg-config --cflags dlckpt > pc.out || fail "pkg-config after the move"
inc=$(sed 's/^-I//; s/ .*//' pc.out)
[ "$(readlink -f "$inc")" = "$(readlink -f "$new/include")" ] || fail "pkg-config after the move: $(cat pc.out)"
echo "relocate_test: ok ($new)"

#!/usr/bin/env bash
# install_test.sh BUILD_DIR SOURCE_DIR PREFIX
# `cmake --install BUILD_DIR --prefix PREFIX` (a fresh PREFIX) and the layout
# it must give: tools with an install RPATH, the exported CMake package, the
# pkg-config files, the headers, the compiler wrappers and the flags file —
# none of them naming the build or source tree.
set -euo pipefail
build=$1 src=$2 prefix=$3
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null || fail "cmake --install"
cd "$prefix"
libdir=$(dirname "$(ls lib*/cmake/dlckpt/dlckptConfig.cmake lib/*/cmake/dlckpt/dlckptConfig.cmake 2>/dev/null | head -1)")
libdir=${libdir%/cmake/dlckpt}
[ -n "$libdir" ] || fail "no dlckptConfig.cmake"
for f in bin/dlckpt-run bin/dlckpt-codec bin/dlckpt-store bin/dlckpt-plan bin/dlckpt-cc bin/dlckpt-f90 \
         bin/dlckpt-cxx bin/dlckpt-ior \
         bin/sppm-mini-dlckpt share/dlckpt/demo.sh share/dlckpt/dlckpt.flags \
         "$libdir"/cmake/dlckpt/dlckptConfigVersion.cmake "$libdir"/cmake/dlckpt/dlckptTargets.cmake \
         "$libdir"/pkgconfig/dlckpt.pc "$libdir"/pkgconfig/dlckpt-scr.pc "$libdir"/pkgconfig/dlckpt-veloc.pc \
         "$libdir"/libdlckpt_api.a "$libdir"/libdlckpt_intercept.a "$libdir"/libdlckpt_api.so \
         "$libdir"/libdlckpt_preload.so "$libdir"/libdlckpt_scr.so \
         include/dlckpt/dlckpt.h include/dlckpt/base/version.h include/dlckpt/intercept/intercept.h \
         include/scr.h include/scrf.h; do
  [ -e "$f" ] || fail "$f is not installed"
done
# No build- or source-tree path in anything a user's build reads.
for f in share/dlckpt/dlckpt.flags "$libdir"/pkgconfig/*.pc "$libdir"/cmake/dlckpt/*.cmake bin/dlckpt-cc; do
  # (PREFIX itself may lie in the build tree: its own mentions do not count.)
  if sed "s|$prefix||g" "$f" | grep -e "$build" -e "$src" >/dev/null; then
    fail "$f names the build or source tree"
  fi
done
grep -q -- "--whole-archive $prefix/$libdir/libdlckpt_intercept.a" share/dlckpt/dlckpt.flags \
  || fail "dlckpt.flags does not name this prefix"
# Installed tools find their libraries through the install RPATH.
readelf -d bin/dlckpt-run | grep 'R.*PATH.*\$ORIGIN/\.\./'"$libdir" >/dev/null || fail "dlckpt-run has no install RPATH"
bin/dlckpt-run --version | grep "dlckpt-run" >/dev/null || fail "the installed dlckpt-run does not run"
# dlckpt-ior (issue 36): installed, and it runs from the prefix.
bin/dlckpt-ior --version | grep "^dlckpt-ior " >/dev/null || fail "the installed dlckpt-ior does not run"
# The shared API exports its whole C API; the SCR library only SCR's names.
for s in dlckpt_init dlckpt_checkpoint dlckpt_restarted_epoch dlckpt_finalize dlckpt_last_error \
         dlckpt_set_encode_mode dlckpt_checkpoint_wait dlckpt_protected_epoch; do
  nm -D --defined-only "$libdir"/libdlckpt_api.so | grep " $s$" >/dev/null || fail "libdlckpt_api.so does not export $s"
done
bad=$(nm -D --defined-only "$libdir"/libdlckpt_scr.so | awk '{print $3}' | grep -v -E '^(SCR_|scr_.*_$)' || true)
[ -z "$bad" ] || fail "libdlckpt_scr.so exports more than SCR's names: $bad"
# pkg-config and the version file.
PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig" pkg-config --exists 'dlckpt >= 0.1' dlckpt-scr dlckpt-veloc \
  || fail "pkg-config does not find dlckpt"
# The Fortran module of the API, and the man pages (rendered by help2man when
# the build found it).
[ -f include/dlckpt.mod ] || fail "the Fortran module dlckpt.mod is not installed"
if command -v help2man >/dev/null; then
  for t in dlckpt-run dlckpt-store dlckpt-plan dlckpt-fuse dlckpt-ctl dlckpt-codec dlckpt-ior \
           dlckpt-cc dlckpt-cxx dlckpt-f90; do
    grep -q '^\.TH "\?'"$(echo $t | tr a-z A-Z)" share/man/man1/$t.1 2>/dev/null || fail "no man page for $t"
  done
  grep -q 'encode.* sync|async' share/man/man1/dlckpt-run.1 || fail "dlckpt-run.1 lacks the options"
  # The wrappers' pages document their own options, and no compiler's copyright.
  for t in dlckpt-cc dlckpt-cxx dlckpt-f90; do
    grep -q -- '--flags' share/man/man1/$t.1 || fail "$t.1 lacks --flags"
    ! grep -qi 'Free Software Foundation' share/man/man1/$t.1 || fail "$t.1 carries the compiler's copyright"
  done
  grep -q -- 'transfer' share/man/man1/dlckpt-ior.1 || fail "dlckpt-ior.1 lacks the options"
fi
# The Python package (lib/python3/dist-packages) imports from the prefix and
# loads the prefix's library, whatever the build tree.
pydir=lib/python3/dist-packages
for f in $pydir/dlckpt/__init__.py $pydir/dlckpt/_build.py share/dlckpt/python/heat.py; do
  [ -f "$f" ] || fail "$f is not installed"
done
if grep -e "$build" -e "$src" $pydir/dlckpt/_build.py >/dev/null; then fail "_build.py names the build or source tree"; fi
lib=$(cd / && PYTHONPATH="$prefix/$pydir" python3 -c 'import dlckpt; print(dlckpt.library_path())') ||
  fail "PYTHONPATH=$prefix/$pydir python3 -c 'import dlckpt'"
[ "$lib" = "$prefix/$libdir/libdlckpt_api.so" ] || fail "the installed package loads $lib"
echo "install_test: ok ($prefix, libdir $libdir)"

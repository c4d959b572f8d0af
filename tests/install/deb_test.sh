#!/usr/bin/env bash
# deb_test.sh BUILD_DIR WORK — the .deb (cpack -G DEB, the same install rules
# as `cmake --install`) carries what issue 36 added: dlckpt-ior, the compiler
# wrappers and their man pages, dlckpt-ior's man page; and its dlckpt.flags
# names /usr; the Python package is where Debian's python3 looks for
# /usr. Packages into WORK (removed at the end).
set -euo pipefail
build=$1 work=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
(cd "$build" && cpack -G DEB -B "$work" > "$work/cpack.log" 2>&1) || fail "cpack: $(tail -5 "$work/cpack.log")"
deb=$(ls "$work"/dlckpt*_*.deb)
# Named after the MPI it was built with, and depending on that MPI.
mpi=$(sed -n 's/^#define DLCKPT_MPI_FLAVOR "\(.*\)"/\1/p' "$build"/base/include/dlckpt/base/version.h)
case "$mpi" in
  mpich) want_name=dlckpt want_dep=libmpich12 ;;
  openmpi) want_name=dlckpt-openmpi want_dep=libopenmpi3 ;;
  *) fail "no DLCKPT_MPI_FLAVOR in $build/base/include/dlckpt/base/version.h" ;;
esac
[ "$(dpkg-deb -f "$deb" Package)" = "$want_name" ] || fail "$deb: package $(dpkg-deb -f "$deb" Package), want $want_name ($mpi)"
grep -q "$want_dep" <<< "$(dpkg-deb -f "$deb" Depends)" || fail "$deb does not depend on $want_dep: $(dpkg-deb -f "$deb" Depends)"
dpkg-deb -c "$deb" > "$work/list"
for f in usr/bin/dlckpt-ior usr/bin/dlckpt-cc usr/bin/dlckpt-cxx usr/bin/dlckpt-f90 usr/share/dlckpt/dlckpt.flags; do
  grep -q " \./$f\$" "$work/list" || fail "$f is not in $deb"
done
if command -v help2man > /dev/null; then
  for t in dlckpt-ior dlckpt-cc dlckpt-cxx dlckpt-f90; do
    grep -q " \./usr/share/man/man1/$t\.1" "$work/list" || fail "the man page of $t is not in $deb"
  done
fi
dpkg-deb -x "$deb" "$work/root"
grep -qF -- "--whole-archive /usr/lib" "$work/root/usr/share/dlckpt/dlckpt.flags" ||
  fail "the package's dlckpt.flags does not name /usr: $(cat "$work/root/usr/share/dlckpt/dlckpt.flags")"
# The Python package, where Debian's python3 finds it for /usr, naming the
# package's own library directory (relative: it follows the extracted tree).
for f in usr/lib/python3/dist-packages/dlckpt/__init__.py usr/lib/python3/dist-packages/dlckpt/_build.py \
         usr/share/dlckpt/python/heat.py; do
  grep -q " \./$f\$" "$work/list" || fail "$f is not in $deb"
done
if [ -x /usr/bin/python3 ]; then
  /usr/bin/python3 -c 'import sys; sys.exit("/usr/lib/python3/dist-packages" not in sys.path)' ||
    fail "/usr/bin/python3 does not read /usr/lib/python3/dist-packages"
fi
lib=$(PYTHONPATH="$work/root/usr/lib/python3/dist-packages" python3 -c 'import dlckpt; print(dlckpt.library_path())') ||
  fail "import dlckpt from the package's tree"
[ -f "$lib" ] && [ "${lib#"$work/root/usr/lib"}" != "$lib" ] || fail "the package's dlckpt loads $lib, not its own"
echo "deb_test: ok ($(basename "$deb"))"

#!/usr/bin/env bash
# package_test.sh BIN_DIR PYTHON: the dlckpt Python package without dlckpt-run.
#  1. it imports without loading anything, and names its build's MPI and library;
#  2. init() without the preload refuses, naming dlckpt-run --preload;
#  3. init() with mpi4py on another MPI than dlckpt's raises a RuntimeError
#     naming both MPIs and -DDLCKPT_MPI=openmpi (Debian's mpi4py is Open MPI;
#     skipped when mpi4py is missing or uses dlckpt's MPI), and so does
#     init() with both MPI libraries mapped (mpi4py imported under the preload);
#  4. the C library itself: dlckpt_init_f in a process that also loaded the
#     other MPI's library fails with ENOTSUP and a message naming both
#     libraries, before any MPI call (whatever MPI the build uses);
#  5. the preload's MPI_Init_thread refuses the same (mpi4py's import under
#     the preload of an MPICH build), before either MPI starts.
set -uo pipefail
bin=$1 py=$2
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
fail() { echo "FAIL: $*" >&2; exit 1; }
names=(MPICH "Open MPI"); [ "$flavor" = openmpi ] && names=("Open MPI" MPICH)
mine=${names[0]} other=${names[1]}

# 1.
out=$("$py" -c 'import dlckpt, sys, os
print(dlckpt.__version__, dlckpt.MPI_FLAVOR, dlckpt.library_path())
assert dlckpt._s.lib is None, "import loaded the library"
assert os.path.exists(dlckpt.library_path()), dlckpt.library_path()' 2>&1) || fail "import dlckpt: $out"
echo "import: $out"
[ "$(DLCKPT_LIBRARY=/x/libdlckpt_api.so "$py" -c 'import dlckpt; print(dlckpt.library_path())')" = /x/libdlckpt_api.so ] \
  || fail "DLCKPT_LIBRARY does not override the library"

# 2.
out=$("$py" -c 'import dlckpt; dlckpt.init()' 2>&1) && fail "init() without the preload succeeded"
grep -q "RuntimeError: dlckpt: Python's file I/O is not intercepted.*dlckpt-run --preload" <<<"$out" \
  || fail "init() without the preload: $out"
echo "without the preload: ${out##*RuntimeError: }"

# 3.
if "$py" -c 'import mpi4py' 2>/dev/null; then
  theirs=$("$py" -c 'import mpi4py; mpi4py.rc.initialize = False
from mpi4py import MPI; print(MPI.Get_library_version())' 2>/dev/null | tr -d '\0' | head -1)
  if ! grep -q "${mine%% *}" <<<"$theirs"; then
    out=$("$py" -c 'import mpi4py; mpi4py.rc.initialize = False
from mpi4py import MPI
import dlckpt
dlckpt.init(MPI.COMM_WORLD)' 2>&1) && fail "init() with mpi4py on $other succeeded"
    grep -q "RuntimeError: dlckpt: mpi4py uses $other (.*) but dlckpt is built with $mine. .*-DDLCKPT_MPI=openmpi" \
      <<<"$out" || fail "mismatched mpi4py: $out"
    echo "mismatched mpi4py: ${out##*RuntimeError: }"
    # Under the preload (which brings dlckpt's MPI), importing mpi4py maps the other one too.
    out=$(LD_PRELOAD="$libdir/libdlckpt_preload.so:$libdir/libdlckpt_api.so" DLCKPT_JOB=pypkg$$ "$py" -c '
import mpi4py; mpi4py.rc.initialize = False
from mpi4py import MPI
import dlckpt
dlckpt.init()' 2>&1) && fail "init() with two MPIs mapped succeeded"
    grep -q "RuntimeError: dlckpt: two MPI libraries in this process: .*libmpich.so.* (MPICH) and .*libmpi.so.40.* (Open MPI); dlckpt is built with $mine. .*-DDLCKPT_MPI=openmpi" \
      <<<"$out" || fail "two MPIs mapped: $out"
    echo "two MPIs mapped: ${out##*RuntimeError: }"
  else
    echo "mpi4py uses $mine, dlckpt's MPI: no mismatch to test"
  fi
else
  echo "no mpi4py: mismatch not tested"
fi

# 4.
if [ "$flavor" = openmpi ]; then other_lib=libmpich.so.12; else other_lib=libmpi.so.40; fi
out=$(LD_PRELOAD="$libdir/libdlckpt_preload.so:$libdir/libdlckpt_api.so" DLCKPT_JOB=pypkg$$ "$py" -c '
import ctypes, os, sys
ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
api = ctypes.CDLL(None, use_errno=True)
api.dlckpt_last_error.restype = ctypes.c_char_p
rc = api.dlckpt_init_f(0)
print("rc", rc, "errno", os.strerror(ctypes.get_errno()))
print(api.dlckpt_last_error().decode())' "$other_lib" 2>&1)
rm -f /dev/shm/dlckpt.pypkg$$.*
grep -q "^rc -1 errno Operation not supported" <<<"$out" || fail "dlckpt_init_f with two MPIs: $out"
grep -q "^dlckpt_init: two MPI libraries in one process: MPICH (.*libmpich.so.12.*) and Open MPI (.*libmpi.so.40.*); dlckpt is built with $mine.*-DDLCKPT_MPI=openmpi" \
  <<<"$out" || fail "dlckpt_init_f's message: $out"
echo "C: ${out#*$'\n'}"

# 5. The preload's MPI_Init_thread: mpi4py importing (and initialising) the
#    other MPI under the preload fails with the message, not inside that MPI.
if "$py" -c 'import mpi4py' 2>/dev/null && [ "$flavor" = mpich ]; then
  out=$(LD_PRELOAD="$libdir/libdlckpt_preload.so:$libdir/libdlckpt_api.so" DLCKPT_JOB=pypkg$$ \
        "$py" -c 'from mpi4py import MPI' 2>&1) && fail "importing mpi4py (Open MPI) under the MPICH preload succeeded"
  rm -f /dev/shm/dlckpt.pypkg$$.*
  grep -q "^dlckpt: libdlckpt_preload.so: MPI_Init_thread: two MPI libraries in one process: MPICH (.*) and Open MPI (.*); dlckpt is built with MPICH.*-DDLCKPT_MPI=openmpi" \
    <<<"$out" || fail "mpi4py under the preload: $out"
  echo "mpi4py under the preload: $(head -1 <<<"$out")"
fi
echo "package_test: ok ($flavor)"

# common.sh: sourced by the tests/python scripts after setting
#   bin   the build's bin/ (dlckpt-run, dlckpt-store) and
#   py    a python3 with numpy,
# with PYTHONPATH naming the build tree's package. Sets:
#   flavor     the MPI dlckpt is built with (mpich | openmpi)
#   libdir     the directory of libdlckpt_api.so and libdlckpt_preload.so
#   pyrun      how a rank starts Python: "$py", or "$py with_mpi4py.py"
#              (the script then finds mpi4py.MPI imported and dlckpt.init
#              takes its COMM_WORLD) when DLCKPT_TEST_MPI4PY=1 or the build
#              is Open MPI's (Debian's python3-mpi4py is built against Open
#              MPI; with an MPICH build this mode must fail, saying so)
#   jobs       job names for cleanup; `cleanup_jobs` kills their processes
#              and removes their stores and run directories.
flavor=$("$py" -c 'import dlckpt; print(dlckpt.MPI_FLAVOR)') || { echo "FAIL: import dlckpt" >&2; exit 1; }
libdir=$("$py" -c 'import dlckpt, os; print(os.path.dirname(dlckpt.library_path()))')
pyrun=("$py")
if [ "${DLCKPT_TEST_MPI4PY:-0}" = 1 ] || [ "$flavor" = openmpi ]; then
  pyrun=("$py" "$(dirname "${BASH_SOURCE[0]}")/with_mpi4py.py")
fi
jobs=()
cleanup_jobs() {
  local j p
  for j in "${jobs[@]}"; do
    for p in $(grep -ls "DLCKPT_JOB=$j" /proc/[0-9]*/environ 2>/dev/null); do
      p=${p#/proc/}; [ "${p%%/*}" = $$ ] || kill -9 "${p%%/*}" 2>/dev/null
    done
    rm -f /dev/shm/dlckpt."$j".*; rm -rf "/tmp/dlckpt-run.$j"
  done
}

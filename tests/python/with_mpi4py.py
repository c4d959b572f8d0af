"""with_mpi4py.py SCRIPT ARGS...: runs SCRIPT as __main__ with mpi4py.MPI
imported (and MPI initialised by mpi4py) first, so that dlckpt.init() takes
mpi4py's COMM_WORLD. (`python3 -m mpi4py` does not import mpi4py.MPI.) An
uncaught exception aborts the job, as under `python3 -m mpi4py`."""
import runpy
import sys
import traceback

from mpi4py import MPI

sys.argv = sys.argv[1:]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit:
    raise
except BaseException:
    traceback.print_exc()
    sys.stderr.flush()
    MPI.COMM_WORLD.Abort(1)

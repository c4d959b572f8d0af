"""abort.py: rank 1 raises after init() while the others wait in a
checkpoint; the package's exit handler aborts the job (MPI_Abort), so the run
ends with the traceback instead of hanging."""
import sys

import dlckpt

mpi = sys.modules.get("mpi4py.MPI")
dlckpt.init(mpi.COMM_WORLD if mpi else None)
if dlckpt.rank() == 1:
    raise ValueError("rank 1 gives up")
dlckpt.checkpoint()
print("rank %d: not reached" % dlckpt.rank(), flush=True)

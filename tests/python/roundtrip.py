"""roundtrip.py: the dlckpt package under dlckpt-run --preload (any number
of ranks). Arrays saved with save/save_arrays are read back after each of
two checkpoints, epochs and the reduction are checked, bad names and missing
files raise. Uses mpi4py's COMM_WORLD when mpi4py.MPI is already imported
(tests/python/with_mpi4py.py), else the package's own MPI init.
Prints "rank R: roundtrip ok" per rank."""
import sys

import numpy as np

import dlckpt

mpi = sys.modules.get("mpi4py.MPI")
dlckpt.init(mpi.COMM_WORLD if mpi else None)
r, n = dlckpt.rank(), dlckpt.size()


def check(what, cond):
    # An uncaught exception (not SystemExit) aborts the whole job: no rank waits.
    if not cond:
        raise AssertionError("rank %d: FAIL: %s" % (r, what))


check("restarted_epoch of a fresh run", dlckpt.restarted_epoch() == 0)
check("protected_epoch before a checkpoint", dlckpt.protected_epoch() == 0)
a = np.arange(100000, dtype=np.int32) * (r + 1)
b = np.random.default_rng(r).standard_normal((300, 40))
check("save's path", dlckpt.save("a", a) == "/dlckpt/python/a.r%d.npy" % r)
dlckpt.save_arrays("ab", a=a, b=b, step=np.int64(5))
dlckpt.checkpoint()
check("protected_epoch after checkpoint 1", dlckpt.protected_epoch() == 1)
check("load a", np.array_equal(dlckpt.load("a"), a))
got = dlckpt.load_arrays("ab")
check("load_arrays", set(got) == {"a", "b", "step"} and np.array_equal(got["a"], a)
      and np.array_equal(got["b"], b) and int(got["step"]) == 5)
dlckpt.save("a", b)  # replaced: another shape and type
dlckpt.checkpoint()
check("protected_epoch after checkpoint 2", dlckpt.protected_epoch() == 2)
check("load the replaced a", np.array_equal(dlckpt.load("a"), b))
check("allreduce_sum", dlckpt.allreduce_sum(r + 1) == n * (n + 1) / 2)
try:
    dlckpt.load("missing")
    check("load of a missing name raises", False)
except FileNotFoundError:
    pass
for bad in ("../x", "a/b", "", ".hidden"):
    try:
        dlckpt.save(bad, a)
        check("save(%r) raises" % bad, False)
    except ValueError:
        pass
print("rank %d: roundtrip ok" % r, flush=True)
dlckpt.finalize()

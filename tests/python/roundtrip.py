"""roundtrip.py: the dlckpt package under dlckpt-run --preload (any number
of ranks). Arrays saved with save/save_arrays are read back after each of
two checkpoints, epochs and the reduction are checked, bad names and missing
files raise; numpy arrays and a bytearray protected as memory regions come
back through recover(), and misuse raises. Uses mpi4py's COMM_WORLD when mpi4py.MPI is already imported
(tests/python/with_mpi4py.py), else the package's own MPI init.
Prints "rank R: roundtrip ok" per rank."""
import errno
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
# Protected memory: regions stored by checkpoint(), copied back in place.
u = np.arange(5000, dtype=np.float64) * (r + 1)
raw = bytearray(b"rank %d region" % r)
dlckpt.protect(0, u)
dlckpt.protect(1, raw)
dlckpt.checkpoint()
check("region_size", dlckpt.region_size(0) == u.nbytes and dlckpt.region_size(1) == len(raw)
      and dlckpt.region_size(7) is None)
u[:] = -1
raw[0:4] = b"XXXX"
dlckpt.recover()
check("recover", np.array_equal(u, np.arange(5000, dtype=np.float64) * (r + 1)) and raw.startswith(b"rank "))
u[:] = 0
dlckpt.recover_region(0)
check("recover_region", u[1] == r + 1)
try:
    raw.append(1)
    check("a protected bytearray cannot be resized", False)
except BufferError:
    pass
for bad_id, bad_buf in ((0, np.arange(10)[::2]), (0, b"read-only"), (-1, u), (0, 3.5)):
    try:
        dlckpt.protect(bad_id, bad_buf)
        check("protect(%r, %r) raises" % (bad_id, type(bad_buf).__name__), False)
    except ValueError:
        pass
dlckpt.unprotect(1)
raw.append(1)  # released
try:
    dlckpt.unprotect(1)
    check("unprotect of an unprotected region raises", False)
except dlckpt.DlckptError as e:
    check("unprotect twice: ENOENT", e.errno == errno.ENOENT)
# Another size than the checkpoint's: recover refuses and writes nothing.
small = np.zeros(10)
dlckpt.protect(0, small)
try:
    dlckpt.recover()
    check("recover of a region of another size raises", False)
except dlckpt.DlckptError as e:
    check("recover of another size: EINVAL, nothing written", e.errno == errno.EINVAL and not small.any())
dlckpt.checkpoint()
check("the next checkpoint holds the regions as protected now",
      dlckpt.region_size(0) == small.nbytes and dlckpt.region_size(1) is None)
print("rank %d: roundtrip ok" % r, flush=True)
dlckpt.finalize()

"""dlckpt: diskless checkpoints for MPI programs in Python.

A binding of dlckpt's C API (dlckpt/dlckpt.h) over ctypes, plus numpy helpers
that keep arrays under /dlckpt. Run the program under the preload, which routes
Python's own file I/O under /dlckpt into the rank's in-memory store:

    dlckpt-run --nodes 4 --spares 1 --preload -- python3 prog.py

    import dlckpt
    dlckpt.init()                        # MPI too, unless mpi4py is in use
    if dlckpt.restarted_epoch() > 0:
        u = dlckpt.load("u")             # this rank's array of the last checkpoint
    ...
    dlckpt.save("u", u)                  # /dlckpt/python/u.r<rank>.npy
    dlckpt.checkpoint()                  # collective: commit, encode, acknowledge
    ...
    dlckpt.finalize()

Or protect arrays in memory (dlckpt_protect): every checkpoint() stores them,
and recover() copies them back in place after a restart:

    dlckpt.protect(0, u)                 # a writable C-contiguous buffer
    if dlckpt.restarted_epoch() > 0:
        dlckpt.recover()

One MPI per process: the C library is bound to the MPI it was built with
(dlckpt.MPI_FLAVOR). Without mpi4py, init() initialises that MPI itself
(through ctypes) and finalize() finalises it. With mpi4py, init(comm) passes
comm.py2f() to dlckpt_init_f, and mpi4py must be built against the same MPI:
Debian's python3-mpi4py uses Open MPI, so it needs a dlckpt built with
-DDLCKPT_MPI=openmpi; init() refuses a mismatch with a RuntimeError saying so.

Not thread-safe, like the C API: call it from the thread that imported it.
"""

import atexit
import ctypes
import errno as _errno
import os
import re
import sys

from . import _build

__version__ = _build.VERSION
# The MPI the C library was built with: "mpich" or "openmpi".
MPI_FLAVOR = _build.MPI_FLAVOR

__all__ = [
    "init", "checkpoint", "checkpoint_wait", "restarted_epoch", "protected_epoch",
    "finalize", "rank", "size", "allreduce_sum", "path", "save", "load",
    "save_arrays", "load_arrays", "library_path", "DlckptError", "MPI_FLAVOR",
    "protect", "unprotect", "recover", "recover_region", "region_size",
]

_MPI_NAMES = {"mpich": "MPICH", "openmpi": "Open MPI"}

# MPICH's predefined handles are ints (mpi.h); Open MPI's are the addresses
# of these exported objects.
_MPICH_HANDLES = {"comm_world": 0x44000000, "double": 0x4C00080B, "sum": 0x58000003}
_OMPI_SYMBOLS = {"comm_world": "ompi_mpi_comm_world", "double": "ompi_mpi_double", "sum": "ompi_mpi_op_sum"}
_MPI_THREAD_FUNNELED = 1  # the same in MPICH and Open MPI


class DlckptError(OSError):
    """A dlckpt_* call failed: errno and dlckpt_last_error()'s message."""


class _State:
    lib = None            # ctypes.CDLL of the API (the process's own when preloaded)
    lib_path = None       # what was loaded ("(preloaded)" when already in the process)
    comm = None           # the mpi4py communicator given to init(), or None
    mpi4py = None         # the mpi4py.MPI module when in use
    mpi_initialized_here = False
    initialized = False   # dlckpt_init succeeded and dlckpt_finalize was not called
    finalized = False
    uncaught = False      # an exception reached sys.excepthook
    rank = None
    size = None
    regions = {}          # id -> the ctypes view holding the buffer protected as that region


_s = _State()


# --- Locating and loading the C library -----------------------------------

def library_path():
    """The libdlckpt_api.so this package loads when it is not already in the
    process: $DLCKPT_LIBRARY if set, else the one in the library directory the
    package was built or installed with."""
    env = os.environ.get("DLCKPT_LIBRARY")
    if env:
        return env
    libdir = _build.LIBDIR
    if not os.path.isabs(libdir):
        libdir = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), libdir))
    return os.path.join(libdir, "libdlckpt_api.so")


def _definer(symbol):
    """The file of the object whose `symbol` the process's global lookup finds
    (dladdr of dlsym(RTLD_DEFAULT)), or None if no object defines it."""
    proc = ctypes.CDLL(None)
    try:
        addr = ctypes.cast(getattr(proc, symbol), ctypes.c_void_p).value
    except AttributeError:
        return None

    class DlInfo(ctypes.Structure):
        _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                    ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]

    info = DlInfo()
    dladdr = proc.dladdr
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
    if dladdr(addr, ctypes.byref(info)) == 0 or not info.dli_fname:
        return None
    return os.fsdecode(info.dli_fname)


def _check_preloaded():
    """Raises RuntimeError unless libdlckpt_preload.so interposes the file I/O
    of this process (LD_PRELOAD, as dlckpt-run --preload sets it): otherwise
    Python's files under /dlckpt would reach the OS, not the rank's store."""
    owner = _definer("open64")
    if owner is None or not os.path.basename(owner).startswith("libdlckpt_preload"):
        raise RuntimeError(
            "dlckpt: Python's file I/O is not intercepted (open64 comes from %s, not "
            "libdlckpt_preload.so): run the program under `dlckpt-run --preload -- python3 ...`, "
            "or with LD_PRELOAD=%s"
            % (owner or "nowhere", os.path.join(os.path.dirname(library_path()), "libdlckpt_preload.so")))


def _load():
    """The API library: the process's own if dlckpt_init is already there
    (dlckpt-run --preload preloads libdlckpt_api.so), else library_path()
    loaded RTLD_GLOBAL (its store functions come from the preload)."""
    if _s.lib is not None:
        return _s.lib
    proc = ctypes.CDLL(None, use_errno=True)
    if hasattr(proc, "dlckpt_init_f"):
        lib, where = proc, "(preloaded: %s)" % _definer("dlckpt_init_f")
    else:
        where = library_path()
        if not os.path.exists(where):
            raise RuntimeError("dlckpt: %s: no such file (set DLCKPT_LIBRARY to libdlckpt_api.so)" % where)
        try:
            lib = ctypes.CDLL(where, mode=ctypes.RTLD_GLOBAL, use_errno=True)
        except OSError as e:
            raise RuntimeError("dlckpt: cannot load %s: %s (run under dlckpt-run --preload)" % (where, e)) from e
    for name in ("dlckpt_init_f", "dlckpt_checkpoint", "dlckpt_checkpoint_wait", "dlckpt_finalize"):
        getattr(lib, name).restype = ctypes.c_int
    lib.dlckpt_init_f.argtypes = [ctypes.c_int]
    for name in ("dlckpt_restarted_epoch", "dlckpt_protected_epoch"):
        getattr(lib, name).restype = ctypes.c_longlong
        getattr(lib, name).argtypes = []
    lib.dlckpt_last_error.restype = ctypes.c_char_p
    for name in ("dlckpt_protect", "dlckpt_unprotect", "dlckpt_recover", "dlckpt_recover_region"):
        getattr(lib, name).restype = ctypes.c_int
    lib.dlckpt_protect.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
    lib.dlckpt_unprotect.argtypes = [ctypes.c_int]
    lib.dlckpt_recover.argtypes = []
    lib.dlckpt_recover_region.argtypes = [ctypes.c_int]
    lib.dlckpt_region_size.restype = ctypes.c_longlong
    lib.dlckpt_region_size.argtypes = [ctypes.c_int]
    _s.lib, _s.lib_path = lib, where
    return lib


def _call(name, *args):
    """Calls dlckpt function `name`; raises DlckptError on -1."""
    lib = _load()
    rc = getattr(lib, name)(*args)
    if rc != 0:
        err = ctypes.get_errno() or _errno.EIO
        msg = (lib.dlckpt_last_error() or b"").decode(errors="replace") or os.strerror(err)
        raise DlckptError(err, "%s: %s" % (name, msg))


# --- One MPI per process --------------------------------------------------

def _loaded_mpis():
    """{flavour: path} of the MPI libraries mapped into this process."""
    found = {}
    try:
        with open("/proc/self/maps", "r") as maps:
            for line in maps:
                p = line.rstrip("\n").split(None, 5)
                if len(p) < 6:
                    continue
                base = os.path.basename(p[5])
                if re.match(r"libmpich\.so(\.|$)", base):
                    found.setdefault("mpich", p[5])
                elif re.match(r"libmpi\.so\.40(\.|$)", base):
                    found.setdefault("openmpi", p[5])
    except OSError:
        pass
    return found


def _flavour_of_version(text):
    if "Open MPI" in text:
        return "openmpi"
    if "MPICH" in text:
        return "mpich"
    return None


def _fix():
    return ("Use a dlckpt built with -DDLCKPT_MPI=openmpi for Debian's mpi4py (Open MPI), "
            "or mpi4py built against MPICH, or run without mpi4py (dlckpt.init() then "
            "initialises %s itself)" % _MPI_NAMES.get(MPI_FLAVOR, MPI_FLAVOR))


def _check_one_mpi(mpi4py_mpi):
    """Raises RuntimeError naming both MPIs and the fix when this process holds
    an MPI other than the one dlckpt was built with (both libraries mapped, or
    mpi4py's MPI another one): their calls would mix (an invalid communicator
    in MPI_Comm_dup at best)."""
    loaded = _loaded_mpis()
    if len(loaded) > 1:
        raise RuntimeError(
            "dlckpt: two MPI libraries in this process: %s and %s; dlckpt is built with %s. %s"
            % (loaded["mpich"] + " (MPICH)", loaded["openmpi"] + " (Open MPI)",
               _MPI_NAMES.get(MPI_FLAVOR, MPI_FLAVOR), _fix()))
    if mpi4py_mpi is not None:
        version = mpi4py_mpi.Get_library_version().replace("\0", "").strip().splitlines()[0]
        theirs = _flavour_of_version(version)
        if theirs != MPI_FLAVOR:
            raise RuntimeError(
                "dlckpt: mpi4py uses %s (%s) but dlckpt is built with %s. %s"
                % (_MPI_NAMES.get(theirs, "another MPI"), version,
                   _MPI_NAMES.get(MPI_FLAVOR, MPI_FLAVOR), _fix()))


# --- MPI through ctypes (no mpi4py) ---------------------------------------

def _handle(lib, what):
    """A predefined MPI handle of the library's MPI, with its ctypes type."""
    if MPI_FLAVOR == "openmpi":
        return ctypes.c_void_p(ctypes.addressof(ctypes.c_char.in_dll(lib, _OMPI_SYMBOLS[what])))
    return ctypes.c_int(_MPICH_HANDLES[what])


def _mpi_init(lib):
    flag = ctypes.c_int(0)
    lib.MPI_Initialized(ctypes.byref(flag))
    if not flag.value:
        provided = ctypes.c_int(0)
        rc = lib.MPI_Init_thread(None, None, _MPI_THREAD_FUNNELED, ctypes.byref(provided))
        if rc != 0:
            raise RuntimeError("dlckpt: MPI_Init_thread failed (error %d)" % rc)
        _s.mpi_initialized_here = True
    world = _handle(lib, "comm_world")
    out = ctypes.c_int(0)
    lib.MPI_Comm_rank(world, ctypes.byref(out))
    _s.rank = out.value
    lib.MPI_Comm_size(world, ctypes.byref(out))
    _s.size = out.value
    if MPI_FLAVOR == "openmpi":
        lib.MPI_Comm_c2f.restype = ctypes.c_int
        return lib.MPI_Comm_c2f(world)
    return world.value  # MPICH: the Fortran handle is the C handle


def _at_exit():
    """An interpreter that ends normally finalises what init() started; one
    that ends with an uncaught exception aborts the MPI job, so that the other
    ranks do not wait for this one in a collective."""
    if _s.mpi4py is None and _s.lib is not None and (_s.initialized or _s.mpi_initialized_here):
        if _s.uncaught:
            sys.stderr.flush()
            _s.lib.MPI_Abort(_handle(_s.lib, "comm_world"), 1)
            return
    if _s.initialized:
        try:
            finalize()
        except Exception as e:  # at exit there is nobody left to raise to
            print("dlckpt: finalize at exit: %s" % e, file=sys.stderr)
    elif _s.mpi_initialized_here and not _s.finalized:
        _mpi_finalize()


def _mpi_finalize():
    flag = ctypes.c_int(0)
    _s.lib.MPI_Finalized(ctypes.byref(flag))
    if not flag.value:
        _s.lib.MPI_Finalize()
    _s.mpi_initialized_here = False


def _excepthook(kind, value, tb):
    _s.uncaught = True
    _previous_excepthook(kind, value, tb)


_previous_excepthook = sys.excepthook


# --- The API --------------------------------------------------------------

def init(comm=None):
    """Collective. Starts dlckpt on `comm` (an mpi4py communicator) or, with
    comm None, on MPI_COMM_WORLD: mpi4py's if mpi4py.MPI is imported, else
    the MPI of the C library, which init() then initialises (MPI_Init_thread,
    FUNNELED) and finalize() finalises. Raises RuntimeError for a second MPI
    in the process or missing preload, DlckptError if dlckpt_init fails.
    At the interpreter's exit, finalize() runs if it was not called; an
    uncaught exception (sys.excepthook; not SystemExit) instead aborts the job
    with MPI_Abort when init() started MPI (`python3 -m mpi4py` does the same
    for mpi4py), so that no other rank waits for this one forever."""
    if _s.initialized:
        raise RuntimeError("dlckpt.init: already initialised")
    mpi = sys.modules.get("mpi4py.MPI")
    if comm is not None and mpi is None:
        raise TypeError("dlckpt.init: comm must be an mpi4py communicator, got %r" % (comm,))
    _check_one_mpi(mpi)
    _check_preloaded()
    lib = _load()
    _check_one_mpi(mpi)  # loading the library may have brought its MPI
    if mpi is not None:
        comm = mpi.COMM_WORLD if comm is None else comm
        _s.mpi4py, _s.comm = mpi, comm
        _s.rank, _s.size = comm.Get_rank(), comm.Get_size()
        handle = comm.py2f()
    else:
        handle = _mpi_init(lib)
    sys.excepthook = _excepthook
    _call("dlckpt_init_f", handle)
    _s.initialized, _s.finalized = True, False


def checkpoint():
    """Collective: commits every rank's files under /dlckpt (close them
    first; save() does) and, under dlckpt-run, protects them with parity."""
    _call("dlckpt_checkpoint")


def checkpoint_wait():
    """Collective: waits until the newest checkpoint is protected (async encode)."""
    _call("dlckpt_checkpoint_wait")


def restarted_epoch():
    """The epoch this run restarted from (0 for a fresh start); after init()."""
    return int(_load().dlckpt_restarted_epoch())


def protected_epoch():
    """The newest epoch known to be protected on this rank, or 0."""
    return int(_load().dlckpt_protected_epoch())


def finalize():
    """Collective: waits for an encode in flight, detaches from the service,
    then finalises MPI if init() initialised it."""
    if not _s.initialized:
        raise RuntimeError("dlckpt.finalize: not initialised")
    _s.initialized = False
    try:
        _call("dlckpt_finalize")
    finally:
        _s.finalized = True
        if _s.mpi_initialized_here:
            _mpi_finalize()


def rank():
    """This process's rank in the communicator given to init()."""
    if _s.rank is None:
        raise RuntimeError("dlckpt.rank: call dlckpt.init() first")
    return _s.rank


def size():
    """The size of the communicator given to init()."""
    if _s.size is None:
        raise RuntimeError("dlckpt.size: call dlckpt.init() first")
    return _s.size


def allreduce_sum(x):
    """Collective: the sum of float `x` over all ranks, on every rank (for a
    checksum; mpi4py's comm.allreduce when mpi4py is in use)."""
    if _s.rank is None:
        raise RuntimeError("dlckpt.allreduce_sum: call dlckpt.init() first")
    if _s.mpi4py is not None:
        return float(_s.comm.allreduce(float(x), op=_s.mpi4py.SUM))
    lib = _s.lib
    send, recv = ctypes.c_double(float(x)), ctypes.c_double(0.0)
    rc = lib.MPI_Allreduce(ctypes.byref(send), ctypes.byref(recv), 1, _handle(lib, "double"),
                           _handle(lib, "sum"), _handle(lib, "comm_world"))
    if rc != 0:
        raise RuntimeError("dlckpt: MPI_Allreduce failed (error %d)" % rc)
    return recv.value


# --- Protected memory (dlckpt_protect) ------------------------------------

def _region_id(fn, id):
    if isinstance(id, bool) or not isinstance(id, int) or id < 0 or id > 0x7FFFFFFF:
        raise ValueError("dlckpt.%s: the region id must be an int from 0 to 2**31-1, got %r" % (fn, id))
    return id


def protect(id, buf):
    """Protects `buf` as memory region `id` (an int >= 0): every checkpoint()
    from now on stores its bytes in this rank's store (as the store file
    /.dlckpt-mem/<id>, protected like any other file), and recover() copies
    them back in place. `buf` is any writable C-contiguous buffer: a numpy
    array, a bytearray, an array.array. It must keep its address and size
    while protected: the package holds a reference and a buffer export, so a
    bytearray or numpy array cannot be resized meanwhile (BufferError).
    Protecting `id` again replaces the region (another buffer or size).
    Local (no MPI); may be called before init(). ValueError for a bad id or
    a read-only or non-contiguous buffer."""
    _region_id("protect", id)
    try:
        view = memoryview(buf)
    except TypeError as e:
        raise ValueError("dlckpt.protect: region %d: %r has no buffer (a numpy array or bytearray)" % (id, type(buf).__name__)) from e
    if view.readonly:
        raise ValueError("dlckpt.protect: region %d: the buffer is read-only" % id)
    if not view.c_contiguous:
        raise ValueError("dlckpt.protect: region %d: the buffer is not C-contiguous (numpy.ascontiguousarray copies it)" % id)
    n = view.nbytes
    holder = (ctypes.c_char * n).from_buffer(view.cast("B")) if n > 0 else None
    _call("dlckpt_protect", id, ctypes.addressof(holder) if holder is not None else None, n)
    _s.regions[id] = holder


def unprotect(id):
    """Stops protecting region `id`: the next checkpoint no longer holds it,
    and the buffer is released. DlckptError (ENOENT) if it is not protected."""
    _call("dlckpt_unprotect", _region_id("unprotect", id))
    _s.regions.pop(id, None)


def recover():
    """After init(), typically when restarted_epoch() > 0: copies every
    protected region back from the checkpoint (after a relaunch, the
    restarted one). Every region is checked first (in the checkpoint, same
    size): on DlckptError (ENOENT, EINVAL naming the region and both sizes)
    no byte is written."""
    _call("dlckpt_recover")


def recover_region(id):
    """recover() for region `id` alone."""
    _call("dlckpt_recover_region", _region_id("recover_region", id))


def region_size(id):
    """The size in bytes of region `id` in the checkpoint recover() reads, or
    None if it holds none (protect a buffer of that size before recover())."""
    size = int(_load().dlckpt_region_size(_region_id("region_size", id)))
    return None if size < 0 else size


# --- numpy arrays under /dlckpt -------------------------------------------

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


def path(name, suffix=".npy"):
    """This rank's file for `name`: <first DLCKPT_PREFIX>/python/<name>.r<rank><suffix>
    (/dlckpt/python/u.r3.npy). Names are [A-Za-z0-9_.-], no directories."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError("dlckpt: bad name %r: want [A-Za-z0-9_.-], not starting with '.' or '-'" % (name,))
    root = (os.environ.get("DLCKPT_PREFIX") or "/dlckpt").split(":")[0].rstrip("/") or "/dlckpt"
    return "%s/python/%s.r%d%s" % (root, name, rank(), suffix)


def save(name, array):
    """Writes `array` (numpy's .npy format, no pickles) as this rank's file
    `name`, replacing it; part of the next checkpoint()."""
    import numpy as np
    p = path(name)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        np.save(f, np.asanyarray(array), allow_pickle=False)
    return p


def load(name):
    """This rank's array `name` as the store holds it (after a restart: as of
    the restarted checkpoint). FileNotFoundError if there is none."""
    import numpy as np
    with open(path(name), "rb") as f:
        return np.load(f, allow_pickle=False)


def save_arrays(name, **arrays):
    """Writes several arrays (scalars too) as one file (numpy's .npz)."""
    import numpy as np
    p = path(name, ".npz")
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        np.savez(f, **arrays)
    return p


def load_arrays(name):
    """{name: array} of save_arrays(name, ...), read whole."""
    import numpy as np
    with open(path(name, ".npz"), "rb") as f:
        with np.load(f, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}


atexit.register(_at_exit)

"""io_test.py write|check DIR: Python's own file I/O under the preload.

Run twice under LD_PRELOAD=libdlckpt_preload.so with one DLCKPT_JOB (no MPI:
the preload serves the store named from the environment). `write` makes a
tree under DIR (a /dlckpt path) with the calls CPython and numpy make for
files: open/os.open (open64, __open64_2), read/readinto, write, lseek64,
fstat64, close, isatty, fcntl, lockf64, stat/lstat, scandir (readdir64, fstatat64
through DirEntry), rename/replace, unlink, ftruncate/truncate, fsync,
sendfile (shutil), os.pread/pwrite, openat/fstatat/unlinkat on
directory descriptors (shutil.rmtree), mkstemp, os.dup and fdopen (numpy.fromfile), and
checks every result within the process; `check` (a second process) reads
it back, proving the files live in the store. The caller checks that nothing
reached the disk. Exits non-zero with the failing step named.
"""
import io
import os
import shutil
import sys
import tempfile

import numpy as np

mode, top = sys.argv[1], sys.argv[2].rstrip("/")
payload = bytes(range(256)) * 1000  # 256000 bytes: several memfs blocks


def step(what, cond):
    if not cond:
        print("FAIL: %s" % what, file=sys.stderr)
        sys.exit(1)


if mode == "write":
    os.makedirs(top + "/sub/deeper", exist_ok=True)
    step("isdir after makedirs", os.path.isdir(top + "/sub/deeper"))
    # Buffered binary write and read (FileIO: open64, fstat64, write, lseek64, close).
    with open(top + "/a.bin", "wb") as f:
        step("isatty is false", not f.isatty())
        f.write(payload[:1000])
        f.write(payload[1000:])
        step("tell after write", f.tell() == len(payload))
    with open(top + "/a.bin", "rb") as f:
        step("fstat size", os.fstat(f.fileno()).st_size == len(payload))
        step("read all", f.read() == payload)
        f.seek(1234)
        step("seek+read", f.read(10) == payload[1234:1244])
        buf = bytearray(100)
        f.seek(-100, io.SEEK_END)
        step("readinto at end", f.readinto(buf) == 100 and bytes(buf) == payload[-100:])
    # Unbuffered, r+b, append, truncate.
    with open(top + "/a.bin", "r+b", buffering=0) as f:
        f.seek(10)
        f.write(b"XYZ")
        f.truncate(5000)
    with open(top + "/a.bin", "ab") as f:
        f.write(b"tail")
    data = open(top + "/a.bin", "rb").read()
    step("r+b / truncate / append", data == payload[:10] + b"XYZ" + payload[13:5000] + b"tail")
    os.truncate(top + "/a.bin", 100)
    step("os.truncate", os.path.getsize(top + "/a.bin") == 100)
    # os-level calls.
    fd = os.open(top + "/sub/raw", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    step("os.write", os.write(fd, b"0123456789") == 10)
    step("os.pwrite", os.pwrite(fd, b"ab", 2) == 2)
    os.fsync(fd)
    # os.lockf (lockf64): locks succeed, as fcntl and flock locks do (the
    # store has one owner process).
    os.lockf(fd, os.F_TLOCK, 0)
    step("os.lockf F_TEST", os.lockf(fd, os.F_TEST, 0) is None)
    os.lockf(fd, os.F_ULOCK, 0)
    step("os.get_inheritable", os.get_inheritable(fd) is False)
    os.close(fd)
    fd = os.open(top + "/sub/raw", os.O_RDONLY)
    step("os.pread", os.pread(fd, 4, 1) == b"1ab4")
    step("os.lseek SEEK_END", os.lseek(fd, 0, os.SEEK_END) == 10)
    os.close(fd)
    # Text mode.
    with open(top + "/sub/t.txt", "w", encoding="utf-8") as f:
        f.write("h\u00e9llo\nw\u00f6rld\n")
    with open(top + "/sub/t.txt", encoding="utf-8") as f:
        step("text lines", f.readlines() == ["h\u00e9llo\n", "w\u00f6rld\n"])
    # Renames, copies (shutil: sendfile), removal, listings.
    shutil.copyfile(top + "/sub/t.txt", top + "/sub/copy.txt")
    step("shutil.copyfile", open(top + "/sub/copy.txt", "rb").read() == open(top + "/sub/t.txt", "rb").read())
    os.replace(top + "/sub/copy.txt", top + "/sub/moved.txt")
    step("os.replace", not os.path.exists(top + "/sub/copy.txt") and os.path.exists(top + "/sub/moved.txt"))
    with open(top + "/gone", "wb") as f:
        f.write(b"x")
    os.remove(top + "/gone")
    step("os.remove", not os.path.exists(top + "/gone"))
    step("os.listdir", sorted(os.listdir(top + "/sub")) == ["deeper", "moved.txt", "raw", "t.txt"])
    sizes = {e.name: e.stat().st_size for e in os.scandir(top + "/sub") if e.is_file()}
    step("os.scandir + DirEntry.stat", sizes == {"moved.txt": 14, "raw": 10, "t.txt": 14})
    walked = sorted(os.path.relpath(os.path.join(d, n), top) for d, _, ns in os.walk(top) for n in ns)
    step("os.walk", walked == ["a.bin", "sub/moved.txt", "sub/raw", "sub/t.txt"])
    # Directory descriptors (openat, fstatat, unlinkat: shutil.rmtree), tempfile.
    dfd = os.open(top + "/sub", os.O_RDONLY | os.O_DIRECTORY)
    step("os.stat(dir_fd=)", os.stat("raw", dir_fd=dfd).st_size == 10)
    step("os.open(dir_fd=)", os.read(os.open("raw", os.O_RDONLY, dir_fd=dfd), 3) == b"01a")
    os.close(dfd)
    shutil.copytree(top + "/sub", top + "/tree")
    step("shutil.copytree", sorted(os.listdir(top + "/tree")) == ["deeper", "moved.txt", "raw", "t.txt"])
    shutil.rmtree(top + "/tree")
    step("shutil.rmtree", not os.path.exists(top + "/tree"))
    tfd, tname = tempfile.mkstemp(dir=top)
    os.close(tfd)
    os.unlink(tname)
    # numpy: save/load through file objects and paths, tofile/fromfile (dup + fdopen), npz.
    a = np.arange(100000, dtype=np.float64).reshape(250, 400) * 0.5
    os.mkdir(top + "/np")
    np.save(top + "/np/a.npy", a)
    step("np.load path", np.array_equal(np.load(top + "/np/a.npy"), a))
    with open(top + "/np/b.npy", "wb") as f:
        np.save(f, a[::2])
    with open(top + "/np/b.npy", "rb") as f:
        step("np.load file object", np.array_equal(np.load(f), a[::2]))
    a.tofile(top + "/np/raw.f64")
    step("np.fromfile path", np.array_equal(np.fromfile(top + "/np/raw.f64").reshape(a.shape), a))
    with open(top + "/np/raw.f64", "rb") as f:
        f.seek(8 * 10)
        part = np.fromfile(f, count=5)
        step("np.fromfile file object", np.array_equal(part, a.ravel()[10:15]))
        step("file position after np.fromfile", f.tell() == 8 * 15)
    np.savez_compressed(top + "/np/z.npz", a=a, n=np.int64(7))
    with np.load(top + "/np/z.npz") as z:
        step("np.savez_compressed/np.load", np.array_equal(z["a"], a) and int(z["n"]) == 7)
    np.savetxt(top + "/np/t.txt", a[:3, :4])
    step("np.savetxt/np.loadtxt", np.array_equal(np.loadtxt(top + "/np/t.txt"), a[:3, :4]))
    print("io_test write: ok")
elif mode == "check":
    step("a.bin (second process)", open(top + "/a.bin", "rb").read() == (payload[:10] + b"XYZ" + payload[13:100]))
    step("raw (second process)", open(top + "/sub/raw", "rb").read() == b"01ab456789")
    a = np.arange(100000, dtype=np.float64).reshape(250, 400) * 0.5
    step("np (second process)", np.array_equal(np.load(top + "/np/a.npy"), a))
    step("listdir (second process)", sorted(os.listdir(top)) == ["a.bin", "np", "sub"])
    print("io_test check: ok")
else:
    sys.exit("usage: io_test.py write|check DIR")

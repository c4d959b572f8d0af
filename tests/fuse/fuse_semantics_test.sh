#!/usr/bin/env bash
# POSIX semantics of a dlckpt-fuse mount: rename of files and directories,
# unlink while open, O_APPEND, truncate, attributes, statfs, the hidden control
# directory, unsupported operations (EPERM / ENOTSUP), ENOSPC with the mount
# usable afterwards, in both the direct and the cached (writeback) paths.
# Usage: fuse_semantics_test.sh BIN_DIR
set -euo pipefail
BIN_DIR="$1"
source "$(dirname "$0")/lib.sh"

new_store store
new_mountpoint mnt
mount_fs "$mnt" "$store" --capacity 64M --block-size 64K --max-files 64
cd "$mnt"

# --- rename --------------------------------------------------------------------
echo one > a
echo two > b
mv a c
[ ! -e a ] && [ "$(cat c)" = one ] || fail "rename a -> c"
mv c b  # replaces b
[ "$(cat b)" = one ] && [ ! -e c ] || fail "rename over an existing file"
rm b
mkdir -p d/e/f
echo deep > d/e/f/g
echo top > d/t
exec 3< d/e/f/g  # open across the directory rename
mv d dd
[ ! -e d ] || fail "old directory still there"
[ "$(cat dd/e/f/g)" = deep ] && [ "$(cat dd/t)" = top ] || fail "paths below a renamed directory"
[ "$(cat <&3)" = deep ] || fail "descriptor open across a directory rename"
exec 3<&-
mkdir x
mv dd x/inner  # into another directory
[ "$(cat x/inner/e/f/g)" = deep ] || fail "directory moved into another directory"
echo more > x/inner/e/f/h  # create under the moved directory
[ "$(ls x/inner/e/f | tr '\n' ' ')" = "g h " ] || fail "listing of the moved directory"
if mv x x/inner/sub 2>/dev/null; then fail "moved a directory into itself"; fi
mkdir empty
mv -T x/inner/e/f empty  # a directory may replace an empty directory
[ "$(cat empty/g)" = deep ] || fail "directory renamed over an empty directory"
mkdir -p full/y
if mv -T empty full 2>/dev/null; then fail "renamed a directory over a non-empty directory"; fi
rm -rf x empty full
mkdir -p n/m && echo z > n/m/z
if out=$(rmdir n 2>&1); then fail "rmdir of a non-empty directory"; fi
grep -q "Directory not empty" <<< "$out" || fail "rmdir message: $out"
rm -r n
python3 - <<'EOF' || fail "renameat2 RENAME_NOREPLACE"
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
open("p1", "w").write("1")
open("p2", "w").write("2")
r = libc.renameat2(-100, b"p1", -100, b"p2", 1)  # RENAME_NOREPLACE
assert r == -1 and ctypes.get_errno() == errno.EEXIST, (r, ctypes.get_errno())
assert open("p2").read() == "2"
r = libc.renameat2(-100, b"p1", -100, b"p3", 1)
assert r == 0 and open("p3").read() == "1"
os.unlink("p2"); os.unlink("p3")
EOF

# --- unlink while open -------------------------------------------------------------
head -c 300000 /dev/urandom > "$TMP/u"
cp "$TMP/u" u
exec 3< u
exec 4>> u
rm u
[ ! -e u ] || fail "unlinked file still visible"
cmp <(cat <&3) "$TMP/u" || fail "unlinked file not readable through its descriptor"
echo tail >&4  # still writable
[ "$(stat -L -c %s /dev/fd/4)" = 300005 ] || fail "fstat of an unlinked file: $(stat -L -c %s /dev/fd/4)"
exec 3<&- 4>&-
echo again > u
[ "$(cat u)" = again ] || fail "name reuse after unlink"
rm u

# --- O_APPEND, truncate, attributes -------------------------------------------------
echo a > log
echo b >> log
printf 'c' >> log
[ "$(cat log)" = "$(printf 'a\nb\nc')" ] || fail "O_APPEND"
python3 - <<'EOF' || fail "O_APPEND through a read-write descriptor"
import os
fd = os.open("log", os.O_RDWR | os.O_APPEND)
os.pwrite(fd, b"Z", 0)  # Linux appends even with pwrite
os.write(fd, b"Y")
os.close(fd)
assert open("log", "rb").read() == b"a\nb\ncZY", open("log", "rb").read()
EOF
head -c 100000 /dev/urandom > t
truncate -s 1000 t
[ "$(stat -c %s t)" = 1000 ] || fail "truncate down"
truncate -s 5000 t
[ "$(stat -c %s t)" = 5000 ] || fail "truncate up"
[ "$(tail -c 4000 t | tr -d '\0' | wc -c)" = 0 ] || fail "truncate up did not zero-fill"
: > t
[ "$(stat -c %s t)" = 0 ] || fail "O_TRUNC"
chmod 640 t
[ "$(stat -c %a t)" = 640 ] || fail "chmod"
touch -d "2001-02-03 04:05:06" t
[ "$(stat -c %Y t)" = "$(date -d '2001-02-03 04:05:06' +%s)" ] || fail "utimens"
echo new >> t
[ "$(stat -c %Y t)" -gt 1000000000 ] && [ "$(stat -c %Y t)" != "$(date -d '2001-02-03 04:05:06' +%s)" ] ||
  fail "a write after utimens must update mtime"
chown 1234:5678 t
[ "$(stat -c %u:%g t)" = 1234:5678 ] || fail "chown"
[ "$(stat -c %i t)" = "$(ls -i t | awk '{print $1}')" ] || fail "inode numbers"
rm t log

# --- statfs ---------------------------------------------------------------------
read -r bsize blocks free files <<< "$(stat -f -c '%S %b %f %c' .)"
[ "$bsize" = 65536 ] || fail "statfs block size $bsize"
[ $((bsize * blocks)) = $((64 << 20)) ] || fail "statfs capacity $((bsize * blocks))"
[ "$files" = 64 ] || fail "statfs max files $files"
[ "$free" -le "$blocks" ] || fail "statfs free $free > $blocks"

# --- the control directory -----------------------------------------------------
[ -z "$(ls -A)" ] || fail "the mount is not empty: $(ls -A)"  # .dlckpt is not listed
[ "$(ls .dlckpt | tr '\n' ' ')" = "checkpoint epoch status " ] || fail "control directory listing"
if rm -f .dlckpt/status 2>/dev/null; then fail "removed the status file"; fi
if mkdir .dlckpt 2>/dev/null; then fail "mkdir over the control directory"; fi
if (echo x > .dlckpt/new) 2>/dev/null; then fail "created a file in the control directory"; fi
if mv .dlckpt hidden 2>/dev/null; then fail "renamed the control directory"; fi
python3 - <<'EOF' || fail "control file errors"
import errno, os
fd = os.open(".dlckpt/checkpoint", os.O_RDWR)
try:
    os.write(fd, b"bogus\n")
    raise SystemExit("a bogus command was accepted")
except OSError as e:
    assert e.errno == errno.EINVAL, e
assert b"unknown command 'bogus'" in os.pread(fd, 4096, 0), os.pread(fd, 4096, 0)
assert os.write(fd, b"1\n") == 2
assert os.pread(fd, 4096, 0) == b"epoch 1\n", os.pread(fd, 4096, 0)
os.close(fd)
# A local mount refuses the epoch commands of a job-wide checkpoint.
fd = os.open(".dlckpt/epoch", os.O_RDWR)
try:
    os.write(fd, b"commit 5\n")
    raise SystemExit("a local mount took an epoch command")
except OSError as e:
    assert e.errno == errno.EPERM, e
assert b"--checkpoint coordinated" in os.pread(fd, 4096, 0), os.pread(fd, 4096, 0)
os.close(fd)
try:
    os.open(".dlckpt/status", os.O_WRONLY)
    raise SystemExit("status opened for writing")
except OSError as e:
    assert e.errno == errno.EACCES, e
EOF

# --- unsupported operations -----------------------------------------------------------
echo s > s
expect_error() {  # expect_error MESSAGE COMMAND...
  local want="$1" out
  shift
  if out=$("$@" 2>&1); then fail "'$*' succeeded"; fi
  grep -q "$want" <<< "$out" || fail "'$*' said: $out (want $want)"
}
expect_error "Operation not permitted" ln -s s link
expect_error "Operation not permitted" ln s hard
expect_error "Operation not permitted" mkfifo fifo
expect_error "Operation not permitted" mknod dev c 1 3
python3 - <<'EOF' || fail "xattrs"
import errno, os
for op in (lambda: os.setxattr("s", "user.x", b"1"), lambda: os.getxattr("s", "user.x"),
           lambda: os.listxattr("s"), lambda: os.removexattr("s", "user.x")):
    try:
        op()
        raise SystemExit("an xattr call succeeded")
    except OSError as e:
        assert e.errno == errno.EOPNOTSUPP, e
os.mknod("regular", 0o644 | 0o100000)  # mknod of a regular file is a create
assert os.stat("regular").st_size == 0
os.unlink("regular")
EOF
expect_error "File name too long" touch "$(printf 'n%.0s' $(seq 300))"
rm s

# --- ENOSPC, then the mount is usable again ----------------------------------------
# A write-only writer (direct path) sees ENOSPC from write() itself.
expect_error "No space left on device" dd if=/dev/zero of=fill bs=1M count=100
rm fill
dd if=/dev/zero of=fill bs=1M count=40 status=none || fail "write after ENOSPC (direct)"
rm fill
# A read-write writer (page cache, writeback) sees it at fsync() or close().
python3 - <<'EOF' || fail "ENOSPC through the writeback cache"
import errno, os
fd = os.open("fill2", os.O_RDWR | os.O_CREAT, 0o644)
err = None
try:
    for _ in range(100):
        os.write(fd, b"\1" * (1 << 20))
    os.fsync(fd)
except OSError as e:
    err = e
try:
    os.close(fd)
except OSError as e:
    err = err or e
assert err is not None and err.errno == errno.ENOSPC, err
EOF
rm fill2
head -c $((30 << 20)) /dev/urandom > "$TMP/r"
cp "$TMP/r" r && cmp "$TMP/r" r || fail "write after ENOSPC (writeback)"
# The file table is full at --max-files: ENOSPC too.
mkdir many
expect_error "No space left on device" bash -c 'for i in $(seq 80); do : > many/f$i || exit 1; done'
rm -r many
echo fine > ok && [ "$(cat ok)" = fine ] || fail "mount unusable after ENOSPC"
# The lost writeback is reported once by the checkpoint tool, then it works.
expect_error "syncfs reports a write error: No space left on device" "$CTL_BIN" checkpoint "$mnt"
[ "$("$CTL_BIN" checkpoint "$mnt")" = 2 ] || fail "checkpoint after ENOSPC"
[ "$(cat ok)" = fine ] || fail "mount unusable after the checkpoint"

cd /
unmount_fs "$mnt"
echo "fuse_semantics_test: ok"

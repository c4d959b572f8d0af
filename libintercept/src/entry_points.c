/* entry_points.c — one body for every intercepted function (symbols.list),
 * compiled twice:
 *   DLCKPT_MODE_WRAP     the __wrap_X functions of libdlckpt_intercept.a; the
 *                        OS's X is __real_X (link with -Wl,--wrap=X);
 *   DLCKPT_MODE_PRELOAD  the interposers X of libdlckpt_preload.so; the OS's X
 *                        is found with dlsym(RTLD_NEXT, "X").
 * Each body asks the core (core_c.h) and, when the call is not for memfs,
 * passes it to the OS unchanged. Fortified variants keep their checks. */
#define _GNU_SOURCE
#undef _FILE_OFFSET_BITS
#undef _FORTIFY_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <spawn.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <utime.h>

#include "core_c.h"
#if !defined(DLCKPT_MODE_WRAP)  /* the preload's MPI_Init interposers */
#include "dlckpt/base/mpi_libraries.h"
#include "dlckpt/base/version.h"
#endif

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

/* Entry points glibc's headers no longer (or only when fortifying) declare. */
int __xstat(int ver, const char* path, struct stat* buf);
int __xstat64(int ver, const char* path, struct stat64* buf);
int __lxstat(int ver, const char* path, struct stat* buf);
int __lxstat64(int ver, const char* path, struct stat64* buf);
int __fxstat(int ver, int fd, struct stat* buf);
int __fxstat64(int ver, int fd, struct stat64* buf);
int __fxstatat(int ver, int dirfd, const char* path, struct stat* buf, int flags);
int __fxstatat64(int ver, int dirfd, const char* path, struct stat64* buf, int flags);
int __open_2(const char* path, int flags);
int __open64_2(const char* path, int flags);
int __openat_2(int dirfd, const char* path, int flags);
int __openat64_2(int dirfd, const char* path, int flags);
ssize_t __read_chk(int fd, void* buf, size_t len, size_t buflen);
ssize_t __pread_chk(int fd, void* buf, size_t len, off_t off, size_t buflen);
ssize_t __pread64_chk(int fd, void* buf, size_t len, off64_t off, size_t buflen);
char* __getcwd_chk(char* buf, size_t size, size_t buflen);
ssize_t __readlink_chk(const char* path, char* buf, size_t len, size_t buflen);
ssize_t __readlinkat_chk(int dirfd, const char* path, char* buf, size_t len, size_t buflen);
void __chk_fail(void) __attribute__((noreturn));

#if defined(DLCKPT_MODE_WRAP)

#define ENTRY(f) __wrap_##f
#define REAL_DECL(f) extern __typeof__(f) __real_##f;
#define REAL(f) __real_##f

#elif defined(DLCKPT_MODE_PRELOAD)

#define ENTRY(f) f
/* The next definition of `name` after this library; a missing one means a
 * broken C library, which is reported and ends the process. */
static void* dlckpt_resolve(const char* name) {
  void* p = dlsym(RTLD_NEXT, name);
  if (p == NULL) {
    static const char msg[] = "dlckpt: libdlckpt_preload.so: the C library lacks ";
    (void)!write(2, msg, sizeof msg - 1);
    (void)!write(2, name, strlen(name));
    (void)!write(2, "\n", 1);
    abort();
  }
  return p;
}
#define REAL_DECL(f)                                                 \
  __attribute__((unused)) static __typeof__(&f) real_##f(void) {    \
    static __typeof__(&f) cached;                                    \
    __typeof__(&f) v = __atomic_load_n(&cached, __ATOMIC_ACQUIRE);   \
    if (v == NULL) {                                                 \
      v = (__typeof__(&f))dlckpt_resolve(#f);                        \
      __atomic_store_n(&cached, v, __ATOMIC_RELEASE);                \
    }                                                                \
    return v;                                                        \
  }
#define REAL(f) (real_##f())

#else
#error "define DLCKPT_MODE_WRAP or DLCKPT_MODE_PRELOAD"
#endif

/* The path to give the OS: unchanged, or rewritten when the process sits in a
 * memfs working directory or the path climbs out of a prefix with "..". */
#define OSP(dirfd, path) dlckpt_ic_os_path((dirfd), (path))

/* The shape of almost every entry point:
 *
 *   ENTRY_POINT(prologue, T, f, (params), core, (args))
 *
 * defines f's entry point, returning T. It runs `prologue` (a fortified
 * variant's check, the reading of variadic arguments; may be empty), then
 * evaluates `core`, the core_c.h call: it stores its result in the local
 * `T r` and is true when the call was for memfs, in which case r is returned.
 * Otherwise the OS's f is called with `args`.
 * INTERCEPT is ENTRY_POINT without prologue; INTERCEPT_FD asks the core only
 * while memfs descriptors exist (one atomic load otherwise). */
#define ENTRY_POINT(prologue, T, f, params, core, args) \
  REAL_DECL(f)                                          \
  T ENTRY(f) params {                                   \
    prologue;                                           \
    T r;                                                \
    if (core) return r;                                 \
    return REAL(f) args;                                \
  }
#define INTERCEPT(T, f, params, core, args) ENTRY_POINT(, T, f, params, core, args)
#define INTERCEPT_FD(T, f, params, core, args) \
  ENTRY_POINT(, T, f, params, !DLCKPT_NO_MEMFS_FDS() && (core), args)

/* Prologues. CHECK: a fortified variant fails as glibc's does. VA_MODE: the
 * mode argument of open, present only when the flags need one. VA_PTR: the
 * optional third argument of fcntl and ioctl, as a pointer. */
#define CHECK(overflow) \
  if (overflow) __chk_fail()
#define NEEDS_MODE(flags) (((flags) & O_CREAT) || ((flags) & __O_TMPFILE) == __O_TMPFILE)
#define VA_MODE(flags)                       \
  mode_t mode = 0;                           \
  if (NEEDS_MODE(flags)) {                   \
    va_list ap;                              \
    va_start(ap, flags);                     \
    mode = (mode_t)va_arg(ap, int);          \
    va_end(ap);                              \
  }
#define VA_PTR(last)         \
  void* arg;                 \
  {                          \
    va_list ap;              \
    va_start(ap, last);      \
    arg = va_arg(ap, void*); \
    va_end(ap);              \
  }

/* ---- open ---- */

ENTRY_POINT(VA_MODE(flags), int, open, (const char* path, int flags, ...),
            dlckpt_ic_open(AT_FDCWD, path, flags, mode, &r), (OSP(AT_FDCWD, path), flags, mode))
ENTRY_POINT(VA_MODE(flags), int, open64, (const char* path, int flags, ...),
            dlckpt_ic_open(AT_FDCWD, path, flags, mode, &r), (OSP(AT_FDCWD, path), flags, mode))
ENTRY_POINT(VA_MODE(flags), int, openat, (int dirfd, const char* path, int flags, ...),
            dlckpt_ic_open(dirfd, path, flags, mode, &r), (dirfd, OSP(dirfd, path), flags, mode))
ENTRY_POINT(VA_MODE(flags), int, openat64, (int dirfd, const char* path, int flags, ...),
            dlckpt_ic_open(dirfd, path, flags, mode, &r), (dirfd, OSP(dirfd, path), flags, mode))
ENTRY_POINT(CHECK(NEEDS_MODE(flags)), int, __open_2, (const char* path, int flags),
            dlckpt_ic_open(AT_FDCWD, path, flags, 0, &r), (OSP(AT_FDCWD, path), flags))
ENTRY_POINT(CHECK(NEEDS_MODE(flags)), int, __open64_2, (const char* path, int flags),
            dlckpt_ic_open(AT_FDCWD, path, flags, 0, &r), (OSP(AT_FDCWD, path), flags))
ENTRY_POINT(CHECK(NEEDS_MODE(flags)), int, __openat_2, (int dirfd, const char* path, int flags),
            dlckpt_ic_open(dirfd, path, flags, 0, &r), (dirfd, OSP(dirfd, path), flags))
ENTRY_POINT(CHECK(NEEDS_MODE(flags)), int, __openat64_2, (int dirfd, const char* path, int flags),
            dlckpt_ic_open(dirfd, path, flags, 0, &r), (dirfd, OSP(dirfd, path), flags))
INTERCEPT(int, creat, (const char* path, mode_t mode),
          dlckpt_ic_open(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode, &r),
          (OSP(AT_FDCWD, path), mode))
INTERCEPT(int, creat64, (const char* path, mode_t mode),
          dlckpt_ic_open(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode, &r),
          (OSP(AT_FDCWD, path), mode))

/* ---- close ---- */

INTERCEPT_FD(int, close, (int fd), dlckpt_ic_close(fd, &r), (fd))

REAL_DECL(close_range)
int ENTRY(close_range)(unsigned int lo, unsigned int hi, int flags) {
  if (!(flags & CLOSE_RANGE_CLOEXEC) && lo <= hi && !DLCKPT_NO_MEMFS_FDS()) dlckpt_ic_forget_range(lo, hi);
  return REAL(close_range)(lo, hi, flags);
}

REAL_DECL(closefrom)
void ENTRY(closefrom)(int lo) {
  if (lo >= 0 && !DLCKPT_NO_MEMFS_FDS()) dlckpt_ic_forget_range((unsigned)lo, ~0u);
  REAL(closefrom)(lo);
}

/* ---- data ---- */

INTERCEPT_FD(ssize_t, read, (int fd, void* buf, size_t len),
             dlckpt_ic_read(fd, buf, len, &r), (fd, buf, len))
INTERCEPT_FD(ssize_t, write, (int fd, const void* buf, size_t len),
             dlckpt_ic_write(fd, buf, len, &r), (fd, buf, len))
INTERCEPT_FD(ssize_t, pread, (int fd, void* buf, size_t len, off_t off),
             dlckpt_ic_pread(fd, buf, len, off, &r), (fd, buf, len, off))
INTERCEPT_FD(ssize_t, pread64, (int fd, void* buf, size_t len, off64_t off),
             dlckpt_ic_pread(fd, buf, len, off, &r), (fd, buf, len, off))
INTERCEPT_FD(ssize_t, pwrite, (int fd, const void* buf, size_t len, off_t off),
             dlckpt_ic_pwrite(fd, buf, len, off, &r), (fd, buf, len, off))
INTERCEPT_FD(ssize_t, pwrite64, (int fd, const void* buf, size_t len, off64_t off),
             dlckpt_ic_pwrite(fd, buf, len, off, &r), (fd, buf, len, off))
INTERCEPT_FD(ssize_t, readv, (int fd, const struct iovec* iov, int cnt),
             dlckpt_ic_readv(fd, iov, cnt, -1, &r), (fd, iov, cnt))
INTERCEPT_FD(ssize_t, writev, (int fd, const struct iovec* iov, int cnt),
             dlckpt_ic_writev(fd, iov, cnt, -1, &r), (fd, iov, cnt))

/* Positioned vector calls: a negative offset is EINVAL (-2 to the core), except
 * -1 for the *v2 calls, which means the current offset. */
#define POS(off) ((off) < 0 ? -2 : (off))
#define POS2(off) ((off) == -1 ? -1 : POS(off))

INTERCEPT_FD(ssize_t, preadv, (int fd, const struct iovec* iov, int cnt, off_t off),
             dlckpt_ic_readv(fd, iov, cnt, POS(off), &r), (fd, iov, cnt, off))
INTERCEPT_FD(ssize_t, preadv64, (int fd, const struct iovec* iov, int cnt, off64_t off),
             dlckpt_ic_readv(fd, iov, cnt, POS(off), &r), (fd, iov, cnt, off))
INTERCEPT_FD(ssize_t, pwritev, (int fd, const struct iovec* iov, int cnt, off_t off),
             dlckpt_ic_writev(fd, iov, cnt, POS(off), &r), (fd, iov, cnt, off))
INTERCEPT_FD(ssize_t, pwritev64, (int fd, const struct iovec* iov, int cnt, off64_t off),
             dlckpt_ic_writev(fd, iov, cnt, POS(off), &r), (fd, iov, cnt, off))
INTERCEPT_FD(ssize_t, preadv2, (int fd, const struct iovec* iov, int cnt, off_t off, int flags),
             dlckpt_ic_readv(fd, iov, cnt, POS2(off), &r), (fd, iov, cnt, off, flags))
INTERCEPT_FD(ssize_t, preadv64v2,
             (int fd, const struct iovec* iov, int cnt, off64_t off, int flags),
             dlckpt_ic_readv(fd, iov, cnt, POS2(off), &r), (fd, iov, cnt, off, flags))
INTERCEPT_FD(ssize_t, pwritev2, (int fd, const struct iovec* iov, int cnt, off_t off, int flags),
             dlckpt_ic_writev(fd, iov, cnt, POS2(off), &r), (fd, iov, cnt, off, flags))
INTERCEPT_FD(ssize_t, pwritev64v2,
             (int fd, const struct iovec* iov, int cnt, off64_t off, int flags),
             dlckpt_ic_writev(fd, iov, cnt, POS2(off), &r), (fd, iov, cnt, off, flags))

ENTRY_POINT(CHECK(len > buflen), ssize_t, __read_chk,
            (int fd, void* buf, size_t len, size_t buflen),
            !DLCKPT_NO_MEMFS_FDS() && dlckpt_ic_read(fd, buf, len, &r), (fd, buf, len, buflen))
ENTRY_POINT(CHECK(len > buflen), ssize_t, __pread_chk,
            (int fd, void* buf, size_t len, off_t off, size_t buflen),
            !DLCKPT_NO_MEMFS_FDS() && dlckpt_ic_pread(fd, buf, len, off, &r),
            (fd, buf, len, off, buflen))
ENTRY_POINT(CHECK(len > buflen), ssize_t, __pread64_chk,
            (int fd, void* buf, size_t len, off64_t off, size_t buflen),
            !DLCKPT_NO_MEMFS_FDS() && dlckpt_ic_pread(fd, buf, len, off, &r),
            (fd, buf, len, off, buflen))

INTERCEPT_FD(off_t, lseek, (int fd, off_t off, int whence),
             dlckpt_ic_lseek(fd, off, whence, &r), (fd, off, whence))
INTERCEPT_FD(off64_t, lseek64, (int fd, off64_t off, int whence),
             dlckpt_ic_lseek(fd, off, whence, &r), (fd, off, whence))

/* ---- metadata (struct stat64 is struct stat on x86-64) ---- */

#define ST(st) ((struct stat*)(st))

INTERCEPT_FD(int, fstat, (int fd, struct stat* st), dlckpt_ic_fstat(fd, st, &r), (fd, st))
INTERCEPT_FD(int, fstat64, (int fd, struct stat64* st), dlckpt_ic_fstat(fd, ST(st), &r), (fd, st))
INTERCEPT(int, stat, (const char* path, struct stat* st),
          dlckpt_ic_stat(AT_FDCWD, path, st, 0, &r), (OSP(AT_FDCWD, path), st))
INTERCEPT(int, stat64, (const char* path, struct stat64* st),
          dlckpt_ic_stat(AT_FDCWD, path, ST(st), 0, &r), (OSP(AT_FDCWD, path), st))
INTERCEPT(int, lstat, (const char* path, struct stat* st),
          dlckpt_ic_stat(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW, &r), (OSP(AT_FDCWD, path), st))
INTERCEPT(int, lstat64, (const char* path, struct stat64* st),
          dlckpt_ic_stat(AT_FDCWD, path, ST(st), AT_SYMLINK_NOFOLLOW, &r),
          (OSP(AT_FDCWD, path), st))
INTERCEPT(int, fstatat, (int dirfd, const char* path, struct stat* st, int flags),
          dlckpt_ic_stat(dirfd, path, st, flags, &r), (dirfd, OSP(dirfd, path), st, flags))
INTERCEPT(int, fstatat64, (int dirfd, const char* path, struct stat64* st, int flags),
          dlckpt_ic_stat(dirfd, path, ST(st), flags, &r), (dirfd, OSP(dirfd, path), st, flags))
INTERCEPT(int, statx,
          (int dirfd, const char* path, int flags, unsigned int mask, struct statx* stx),
          dlckpt_ic_statx(dirfd, path, flags, mask, stx, &r),
          (dirfd, OSP(dirfd, path), flags, mask, stx))
/* struct statfs64 / statvfs64 are struct statfs / statvfs on x86-64. */
#define SFS(b) ((struct statfs*)(b))
#define SVFS(b) ((struct statvfs*)(b))
INTERCEPT(int, statfs, (const char* path, struct statfs* b),
          dlckpt_ic_statfs(-1, path, b, &r), (OSP(AT_FDCWD, path), b))
INTERCEPT(int, statfs64, (const char* path, struct statfs64* b),
          dlckpt_ic_statfs(-1, path, SFS(b), &r), (OSP(AT_FDCWD, path), b))
INTERCEPT(int, statvfs, (const char* path, struct statvfs* b),
          dlckpt_ic_statvfs(-1, path, b, &r), (OSP(AT_FDCWD, path), b))
INTERCEPT(int, statvfs64, (const char* path, struct statvfs64* b),
          dlckpt_ic_statvfs(-1, path, SVFS(b), &r), (OSP(AT_FDCWD, path), b))
INTERCEPT_FD(int, fstatfs, (int fd, struct statfs* b), dlckpt_ic_statfs(fd, NULL, b, &r), (fd, b))
INTERCEPT_FD(int, fstatfs64, (int fd, struct statfs64* b),
             dlckpt_ic_statfs(fd, NULL, SFS(b), &r), (fd, b))
INTERCEPT_FD(int, fstatvfs, (int fd, struct statvfs* b), dlckpt_ic_statvfs(fd, NULL, b, &r),
             (fd, b))
INTERCEPT_FD(int, fstatvfs64, (int fd, struct statvfs64* b),
             dlckpt_ic_statvfs(fd, NULL, SVFS(b), &r), (fd, b))
INTERCEPT(int, __xstat, (int ver, const char* path, struct stat* st),
          dlckpt_ic_stat(AT_FDCWD, path, st, 0, &r), (ver, OSP(AT_FDCWD, path), st))
INTERCEPT(int, __xstat64, (int ver, const char* path, struct stat64* st),
          dlckpt_ic_stat(AT_FDCWD, path, ST(st), 0, &r), (ver, OSP(AT_FDCWD, path), st))
INTERCEPT(int, __lxstat, (int ver, const char* path, struct stat* st),
          dlckpt_ic_stat(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW, &r),
          (ver, OSP(AT_FDCWD, path), st))
INTERCEPT(int, __lxstat64, (int ver, const char* path, struct stat64* st),
          dlckpt_ic_stat(AT_FDCWD, path, ST(st), AT_SYMLINK_NOFOLLOW, &r),
          (ver, OSP(AT_FDCWD, path), st))
INTERCEPT_FD(int, __fxstat, (int ver, int fd, struct stat* st),
             dlckpt_ic_fstat(fd, st, &r), (ver, fd, st))
INTERCEPT_FD(int, __fxstat64, (int ver, int fd, struct stat64* st),
             dlckpt_ic_fstat(fd, ST(st), &r), (ver, fd, st))
INTERCEPT(int, __fxstatat, (int ver, int dirfd, const char* path, struct stat* st, int flags),
          dlckpt_ic_stat(dirfd, path, st, flags, &r), (ver, dirfd, OSP(dirfd, path), st, flags))
INTERCEPT(int, __fxstatat64, (int ver, int dirfd, const char* path, struct stat64* st, int flags),
          dlckpt_ic_stat(dirfd, path, ST(st), flags, &r),
          (ver, dirfd, OSP(dirfd, path), st, flags))

INTERCEPT_FD(int, ftruncate, (int fd, off_t len), dlckpt_ic_ftruncate(fd, len, &r), (fd, len))
INTERCEPT_FD(int, ftruncate64, (int fd, off64_t len), dlckpt_ic_ftruncate(fd, len, &r), (fd, len))
INTERCEPT(int, truncate, (const char* path, off_t len),
          dlckpt_ic_truncate(path, len, &r), (OSP(AT_FDCWD, path), len))
INTERCEPT(int, truncate64, (const char* path, off64_t len),
          dlckpt_ic_truncate(path, len, &r), (OSP(AT_FDCWD, path), len))
INTERCEPT_FD(int, fsync, (int fd), dlckpt_ic_fsync(fd, &r), (fd))
INTERCEPT_FD(int, fdatasync, (int fd), dlckpt_ic_fsync(fd, &r), (fd))

INTERCEPT(int, access, (const char* path, int mode),
          dlckpt_ic_access(AT_FDCWD, path, mode, 0, &r), (OSP(AT_FDCWD, path), mode))
INTERCEPT(int, faccessat, (int dirfd, const char* path, int mode, int flags),
          dlckpt_ic_access(dirfd, path, mode, flags, &r), (dirfd, OSP(dirfd, path), mode, flags))
INTERCEPT(int, euidaccess, (const char* path, int mode),
          dlckpt_ic_access(AT_FDCWD, path, mode, AT_EACCESS, &r), (OSP(AT_FDCWD, path), mode))
INTERCEPT(int, eaccess, (const char* path, int mode),
          dlckpt_ic_access(AT_FDCWD, path, mode, AT_EACCESS, &r), (OSP(AT_FDCWD, path), mode))
INTERCEPT(int, chmod, (const char* path, mode_t mode),
          dlckpt_ic_chmod(AT_FDCWD, path, mode, 0, &r), (OSP(AT_FDCWD, path), mode))
INTERCEPT_FD(int, fchmod, (int fd, mode_t mode), dlckpt_ic_fchmod(fd, mode, &r), (fd, mode))
INTERCEPT(int, fchmodat, (int dirfd, const char* path, mode_t mode, int flags),
          dlckpt_ic_chmod(dirfd, path, mode, flags, &r), (dirfd, OSP(dirfd, path), mode, flags))

/* ---- descriptors ---- */

INTERCEPT_FD(int, dup, (int fd), dlckpt_ic_dup(fd, &r), (fd))
INTERCEPT_FD(int, dup2, (int oldfd, int newfd),
             dlckpt_ic_dup3(oldfd, newfd, 0, 1, &r), (oldfd, newfd))
INTERCEPT_FD(int, dup3, (int oldfd, int newfd, int flags),
             dlckpt_ic_dup3(oldfd, newfd, flags, 0, &r), (oldfd, newfd, flags))
ENTRY_POINT(VA_PTR(cmd), int, fcntl, (int fd, int cmd, ...),
            !DLCKPT_NO_MEMFS_FDS() && dlckpt_ic_fcntl(fd, cmd, arg, &r), (fd, cmd, arg))
ENTRY_POINT(VA_PTR(cmd), int, fcntl64, (int fd, int cmd, ...),
            !DLCKPT_NO_MEMFS_FDS() && dlckpt_ic_fcntl(fd, cmd, arg, &r), (fd, cmd, arg))
ENTRY_POINT(VA_PTR(request), int, ioctl, (int fd, unsigned long request, ...),
            !DLCKPT_NO_MEMFS_FDS() && dlckpt_ic_ioctl(fd, request, arg, &r), (fd, request, arg))
INTERCEPT_FD(int, flock, (int fd, int op), dlckpt_ic_flock(fd, op, &r), (fd, op))
INTERCEPT_FD(int, lockf, (int fd, int cmd, off_t len), dlckpt_ic_lockf(fd, cmd, &r), (fd, cmd, len))
INTERCEPT_FD(int, lockf64, (int fd, int cmd, off64_t len), dlckpt_ic_lockf(fd, cmd, &r), (fd, cmd, len))
INTERCEPT_FD(int, isatty, (int fd), dlckpt_ic_isatty(fd, &r), (fd))

/* posix_fallocate returns the error number and leaves errno alone. */
static int posix_fallocate_core(int fd, off_t off, off_t len, int* r) {
  int saved = errno;
  if (!dlckpt_ic_fallocate(fd, 0, off, len, r)) return 0;
  *r = *r < 0 ? errno : 0;
  errno = saved;
  return 1;
}

INTERCEPT_FD(int, posix_fallocate, (int fd, off_t off, off_t len),
             posix_fallocate_core(fd, off, len, &r), (fd, off, len))
INTERCEPT_FD(int, posix_fallocate64, (int fd, off64_t off, off64_t len),
             posix_fallocate_core(fd, off, len, &r), (fd, off, len))
INTERCEPT_FD(int, fallocate, (int fd, int mode, off_t off, off_t len),
             dlckpt_ic_fallocate(fd, mode, off, len, &r), (fd, mode, off, len))
INTERCEPT_FD(int, fallocate64, (int fd, int mode, off64_t off, off64_t len),
             dlckpt_ic_fallocate(fd, mode, off, len, &r), (fd, mode, off, len))
INTERCEPT_FD(int, posix_fadvise, (int fd, off_t off, off_t len, int advice),
             dlckpt_ic_fadvise(fd, &r), (fd, off, len, advice))
INTERCEPT_FD(int, posix_fadvise64, (int fd, off64_t off, off64_t len, int advice),
             dlckpt_ic_fadvise(fd, &r), (fd, off, len, advice))

/* mmap of a memfs descriptor fails with ENODEV: memfs files cannot be mapped. */
static int mmap_refused(int flags, int fd, void** r) {
  if ((flags & MAP_ANONYMOUS) || DLCKPT_NO_MEMFS_FDS() || !dlckpt_ic_mmap_refused(fd)) return 0;
  errno = ENODEV;
  *r = MAP_FAILED;
  return 1;
}

INTERCEPT(void*, mmap, (void* addr, size_t len, int prot, int flags, int fd, off_t off),
          mmap_refused(flags, fd, &r), (addr, len, prot, flags, fd, off))
INTERCEPT(void*, mmap64, (void* addr, size_t len, int prot, int flags, int fd, off64_t off),
          mmap_refused(flags, fd, &r), (addr, len, prot, flags, fd, off))

INTERCEPT(ssize_t, copy_file_range,
          (int in_fd, off64_t* in_off, int out_fd, off64_t* out_off, size_t len,
           unsigned int flags),
          flags == 0 && dlckpt_ic_copy(in_fd, in_off, out_fd, out_off, len, &r),
          (in_fd, in_off, out_fd, out_off, len, flags))
INTERCEPT_FD(ssize_t, sendfile, (int out_fd, int in_fd, off_t* offset, size_t count),
             dlckpt_ic_copy(in_fd, offset, out_fd, NULL, count, &r), (out_fd, in_fd, offset, count))
INTERCEPT_FD(ssize_t, sendfile64, (int out_fd, int in_fd, off64_t* offset, size_t count),
             dlckpt_ic_copy(in_fd, offset, out_fd, NULL, count, &r), (out_fd, in_fd, offset, count))

/* ---- names ---- */

INTERCEPT(int, unlink, (const char* path),
          dlckpt_ic_unlink(AT_FDCWD, path, 0, &r), (OSP(AT_FDCWD, path)))
INTERCEPT(int, unlinkat, (int dirfd, const char* path, int flags),
          dlckpt_ic_unlink(dirfd, path, flags, &r), (dirfd, OSP(dirfd, path), flags))
INTERCEPT(int, remove, (const char* path), dlckpt_ic_remove(path, &r), (OSP(AT_FDCWD, path)))
INTERCEPT(int, rename, (const char* from, const char* to),
          dlckpt_ic_rename(AT_FDCWD, from, AT_FDCWD, to, 0, &r),
          (OSP(AT_FDCWD, from), OSP(AT_FDCWD, to)))
INTERCEPT(int, renameat, (int fromfd, const char* from, int tofd, const char* to),
          dlckpt_ic_rename(fromfd, from, tofd, to, 0, &r),
          (fromfd, OSP(fromfd, from), tofd, OSP(tofd, to)))
INTERCEPT(int, renameat2,
          (int fromfd, const char* from, int tofd, const char* to, unsigned int flags),
          dlckpt_ic_rename(fromfd, from, tofd, to, flags, &r),
          (fromfd, OSP(fromfd, from), tofd, OSP(tofd, to), flags))
INTERCEPT(int, mkdir, (const char* path, mode_t mode),
          dlckpt_ic_mkdir(AT_FDCWD, path, mode, &r), (OSP(AT_FDCWD, path), mode))
INTERCEPT(int, mkdirat, (int dirfd, const char* path, mode_t mode),
          dlckpt_ic_mkdir(dirfd, path, mode, &r), (dirfd, OSP(dirfd, path), mode))
INTERCEPT(int, rmdir, (const char* path),
          dlckpt_ic_unlink(AT_FDCWD, path, AT_REMOVEDIR, &r), (OSP(AT_FDCWD, path)))

INTERCEPT(int, mkstemp, (char* tmpl), dlckpt_ic_mkstemp(tmpl, 0, 0, &r), (tmpl))
INTERCEPT(int, mkstemp64, (char* tmpl), dlckpt_ic_mkstemp(tmpl, 0, 0, &r), (tmpl))
INTERCEPT(int, mkostemp, (char* tmpl, int flags),
          dlckpt_ic_mkstemp(tmpl, 0, flags, &r), (tmpl, flags))
INTERCEPT(int, mkostemp64, (char* tmpl, int flags),
          dlckpt_ic_mkstemp(tmpl, 0, flags, &r), (tmpl, flags))
INTERCEPT(int, mkstemps, (char* tmpl, int suffixlen),
          dlckpt_ic_mkstemp(tmpl, suffixlen, 0, &r), (tmpl, suffixlen))
INTERCEPT(int, mkstemps64, (char* tmpl, int suffixlen),
          dlckpt_ic_mkstemp(tmpl, suffixlen, 0, &r), (tmpl, suffixlen))
INTERCEPT(int, mkostemps, (char* tmpl, int suffixlen, int flags),
          dlckpt_ic_mkstemp(tmpl, suffixlen, flags, &r), (tmpl, suffixlen, flags))
INTERCEPT(int, mkostemps64, (char* tmpl, int suffixlen, int flags),
          dlckpt_ic_mkstemp(tmpl, suffixlen, flags, &r), (tmpl, suffixlen, flags))

/* ---- directories ---- */

INTERCEPT(DIR*, opendir, (const char* path), dlckpt_ic_opendir(path, &r), (OSP(AT_FDCWD, path)))
INTERCEPT_FD(DIR*, fdopendir, (int fd), dlckpt_ic_fdopendir(fd, &r), (fd))

/* A call on a directory stream: the core's own streams (memfs directories)
 * go to `core`, the OS's to f. */
#define INTERCEPT_DIR(T, f, params, core, args) \
  REAL_DECL(f)                                  \
  T ENTRY(f) params {                           \
    if (dlckpt_ic_is_memdir(d)) return core;    \
    return REAL(f) args;                        \
  }

INTERCEPT_DIR(struct dirent*, readdir, (DIR* d), dlckpt_ic_readdir(d), (d))
INTERCEPT_DIR(struct dirent64*, readdir64, (DIR* d), dlckpt_ic_readdir64(d), (d))
INTERCEPT_DIR(int, readdir_r, (DIR* d, struct dirent* entry, struct dirent** result),
              dlckpt_ic_readdir_r(d, entry, result), (d, entry, result))
INTERCEPT_DIR(int, readdir64_r, (DIR* d, struct dirent64* entry, struct dirent64** result),
              dlckpt_ic_readdir64_r(d, entry, result), (d, entry, result))
INTERCEPT_DIR(int, closedir, (DIR* d), dlckpt_ic_closedir(d), (d))
INTERCEPT_DIR(int, dirfd, (DIR* d), dlckpt_ic_dirfd(d), (d))
INTERCEPT_DIR(long, telldir, (DIR* d), dlckpt_ic_telldir(d), (d))

REAL_DECL(rewinddir)
void ENTRY(rewinddir)(DIR* d) {
  if (dlckpt_ic_is_memdir(d)) {
    dlckpt_ic_rewinddir(d);
  } else {
    REAL(rewinddir)(d);
  }
}

REAL_DECL(seekdir)
void ENTRY(seekdir)(DIR* d, long loc) {
  if (dlckpt_ic_is_memdir(d)) {
    dlckpt_ic_seekdir(d, loc);
  } else {
    REAL(seekdir)(d, loc);
  }
}

INTERCEPT(int, scandir,
          (const char* path, struct dirent*** namelist, int (*filter)(const struct dirent*),
           int (*compar)(const struct dirent**, const struct dirent**)),
          dlckpt_ic_scandir(path, namelist, filter, compar, &r),
          (OSP(AT_FDCWD, path), namelist, filter, compar))
INTERCEPT(int, scandir64,
          (const char* path, struct dirent64*** namelist, int (*filter)(const struct dirent64*),
           int (*compar)(const struct dirent64**, const struct dirent64**)),
          dlckpt_ic_scandir64(path, namelist, filter, compar, &r),
          (OSP(AT_FDCWD, path), namelist, filter, compar))

/* ---- working directory ---- */

REAL_DECL(chdir)
int ENTRY(chdir)(const char* path) {
  int r;
  if (dlckpt_ic_chdir(path, &r)) return r;
  r = REAL(chdir)(OSP(AT_FDCWD, path));
  if (r == 0) dlckpt_ic_cwd_changed();
  return r;
}

REAL_DECL(fchdir)
int ENTRY(fchdir)(int fd) {
  int r;
  if (!DLCKPT_NO_MEMFS_FDS() && dlckpt_ic_fchdir(fd, &r)) return r;
  r = REAL(fchdir)(fd);
  if (r == 0) dlckpt_ic_cwd_changed();
  return r;
}

INTERCEPT(char*, getcwd, (char* buf, size_t size), dlckpt_ic_getcwd(buf, size, &r), (buf, size))
ENTRY_POINT(CHECK(size > buflen), char*, __getcwd_chk, (char* buf, size_t size, size_t buflen),
            dlckpt_ic_getcwd(buf, size, &r), (buf, size, buflen))
INTERCEPT(char*, get_current_dir_name, (void), dlckpt_ic_get_current_dir_name(&r), ())

/* ---- extended attributes: memfs files have none and take none ---- */

/* The xattr calls that return int (set, remove). */
static int xattr_set(int dirfd, const char* path, int* r) {
  ssize_t v;
  if (!dlckpt_ic_xattr(dirfd, path, DLCKPT_XATTR_SET, &v)) return 0;
  *r = (int)v;
  return 1;
}

INTERCEPT(ssize_t, getxattr, (const char* path, const char* name, void* value, size_t size),
          dlckpt_ic_xattr(AT_FDCWD, path, DLCKPT_XATTR_GET, &r),
          (OSP(AT_FDCWD, path), name, value, size))
INTERCEPT(ssize_t, lgetxattr, (const char* path, const char* name, void* value, size_t size),
          dlckpt_ic_xattr(AT_FDCWD, path, DLCKPT_XATTR_GET, &r),
          (OSP(AT_FDCWD, path), name, value, size))
INTERCEPT_FD(ssize_t, fgetxattr, (int fd, const char* name, void* value, size_t size),
             dlckpt_ic_xattr(fd, NULL, DLCKPT_XATTR_GET, &r), (fd, name, value, size))
INTERCEPT(ssize_t, listxattr, (const char* path, char* list, size_t size),
          dlckpt_ic_xattr(AT_FDCWD, path, DLCKPT_XATTR_LIST, &r), (OSP(AT_FDCWD, path), list, size))
INTERCEPT(ssize_t, llistxattr, (const char* path, char* list, size_t size),
          dlckpt_ic_xattr(AT_FDCWD, path, DLCKPT_XATTR_LIST, &r), (OSP(AT_FDCWD, path), list, size))
INTERCEPT_FD(ssize_t, flistxattr, (int fd, char* list, size_t size),
             dlckpt_ic_xattr(fd, NULL, DLCKPT_XATTR_LIST, &r), (fd, list, size))
INTERCEPT(int, setxattr,
          (const char* path, const char* name, const void* value, size_t size, int flags),
          xattr_set(AT_FDCWD, path, &r), (OSP(AT_FDCWD, path), name, value, size, flags))
INTERCEPT(int, lsetxattr,
          (const char* path, const char* name, const void* value, size_t size, int flags),
          xattr_set(AT_FDCWD, path, &r), (OSP(AT_FDCWD, path), name, value, size, flags))
INTERCEPT_FD(int, fsetxattr, (int fd, const char* name, const void* value, size_t size, int flags),
             xattr_set(fd, NULL, &r), (fd, name, value, size, flags))
INTERCEPT(int, removexattr, (const char* path, const char* name),
          xattr_set(AT_FDCWD, path, &r), (OSP(AT_FDCWD, path), name))
INTERCEPT(int, lremovexattr, (const char* path, const char* name),
          xattr_set(AT_FDCWD, path, &r), (OSP(AT_FDCWD, path), name))
INTERCEPT_FD(int, fremovexattr, (int fd, const char* name), xattr_set(fd, NULL, &r), (fd, name))

/* ---- links and times ---- */

INTERCEPT(ssize_t, readlink, (const char* path, char* buf, size_t len),
          dlckpt_ic_readlink(AT_FDCWD, path, &r), (OSP(AT_FDCWD, path), buf, len))
INTERCEPT(ssize_t, readlinkat, (int dirfd, const char* path, char* buf, size_t len),
          dlckpt_ic_readlink(dirfd, path, &r), (dirfd, OSP(dirfd, path), buf, len))
ENTRY_POINT(CHECK(len > buflen), ssize_t, __readlink_chk,
            (const char* path, char* buf, size_t len, size_t buflen),
            dlckpt_ic_readlink(AT_FDCWD, path, &r), (OSP(AT_FDCWD, path), buf, len, buflen))
ENTRY_POINT(CHECK(len > buflen), ssize_t, __readlinkat_chk,
            (int dirfd, const char* path, char* buf, size_t len, size_t buflen),
            dlckpt_ic_readlink(dirfd, path, &r), (dirfd, OSP(dirfd, path), buf, len, buflen))

INTERCEPT(int, utimensat, (int dirfd, const char* path, const struct timespec times[2], int flags),
          dlckpt_ic_utime(dirfd, path, &r), (dirfd, OSP(dirfd, path), times, flags))
INTERCEPT_FD(int, futimens, (int fd, const struct timespec times[2]),
             dlckpt_ic_utime(fd, NULL, &r), (fd, times))
INTERCEPT(int, utime, (const char* path, const struct utimbuf* times),
          dlckpt_ic_utime(AT_FDCWD, path, &r), (OSP(AT_FDCWD, path), times))
INTERCEPT(int, utimes, (const char* path, const struct timeval times[2]),
          dlckpt_ic_utime(AT_FDCWD, path, &r), (OSP(AT_FDCWD, path), times))

/* ---- exec and _exit: the store is detached cleanly first ---- */

#define INTERCEPT_EXIT(f)     \
  REAL_DECL(f)                \
  void ENTRY(f)(int status) { \
    dlckpt_ic_before_exec(1); \
    REAL(f)(status);          \
    __builtin_unreachable();  \
  }
#define INTERCEPT_EXEC(f, params, args) \
  REAL_DECL(f)                          \
  int ENTRY(f) params {                 \
    dlckpt_ic_before_exec(0);           \
    return REAL(f) args;                \
  }

INTERCEPT_EXIT(_exit)
INTERCEPT_EXIT(_Exit)
INTERCEPT_EXEC(execve, (const char* path, char* const argv[], char* const envp[]),
               (OSP(AT_FDCWD, path), argv, envp))
INTERCEPT_EXEC(execv, (const char* path, char* const argv[]), (OSP(AT_FDCWD, path), argv))
INTERCEPT_EXEC(execvp, (const char* file, char* const argv[]), (file, argv))
INTERCEPT_EXEC(execvpe, (const char* file, char* const argv[], char* const envp[]),
               (file, argv, envp))
INTERCEPT_EXEC(fexecve, (int fd, char* const argv[], char* const envp[]), (fd, argv, envp))
INTERCEPT_EXEC(execveat,
               (int dirfd, const char* path, char* const argv[], char* const envp[], int flags),
               (dirfd, OSP(dirfd, path), argv, envp, flags))

/* execl, execlp, execle: the argument list (up to its NULL) as the array
 * `argv`; with `env`, `envp` is the pointer after the NULL (else NULL). */
#define COLLECT_ARGS(first, argv, envp, env)                                     \
  size_t nargs_ = 1;                                                            \
  {                                                                             \
    va_list ap_;                                                                \
    va_start(ap_, first);                                                       \
    while (va_arg(ap_, const char*) != NULL) ++nargs_;                          \
    va_end(ap_);                                                                \
  }                                                                             \
  const char* argv[nargs_ + 1];                                                 \
  char* const* envp = NULL;                                                     \
  {                                                                             \
    va_list ap_;                                                                \
    va_start(ap_, first);                                                       \
    argv[0] = (first);                                                          \
    for (size_t i_ = 1; i_ < nargs_; ++i_) argv[i_] = va_arg(ap_, const char*); \
    argv[nargs_] = NULL;                                                        \
    if (env) {                                                                  \
      (void)va_arg(ap_, const char*);                                           \
      envp = va_arg(ap_, char* const*);                                         \
    }                                                                           \
    va_end(ap_);                                                                \
  }                                                                             \
  (void)envp

int ENTRY(execl)(const char* path, const char* arg, ...) {
  COLLECT_ARGS(arg, argv, envp, 0);
  dlckpt_ic_before_exec(0);
  return REAL(execv)(OSP(AT_FDCWD, path), (char* const*)argv);
}

int ENTRY(execlp)(const char* file, const char* arg, ...) {
  COLLECT_ARGS(arg, argv, envp, 0);
  dlckpt_ic_before_exec(0);
  return REAL(execvp)(file, (char* const*)argv);
}

int ENTRY(execle)(const char* path, const char* arg, ...) {
  COLLECT_ARGS(arg, argv, envp, 1);
  dlckpt_ic_before_exec(0);
  return REAL(execve)(OSP(AT_FDCWD, path), (char* const*)argv, envp);
}

/* ---- spawning: a store attached only for metadata is let go first ---- */

REAL_DECL(posix_spawn)
int ENTRY(posix_spawn)(pid_t* pid, const char* path, const posix_spawn_file_actions_t* actions,
                       const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  dlckpt_ic_before_spawn();
  return REAL(posix_spawn)(pid, OSP(AT_FDCWD, path), actions, attr, argv, envp);
}
REAL_DECL(posix_spawnp)
int ENTRY(posix_spawnp)(pid_t* pid, const char* file, const posix_spawn_file_actions_t* actions,
                        const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  dlckpt_ic_before_spawn();
  return REAL(posix_spawnp)(pid, file, actions, attr, argv, envp);
}
REAL_DECL(system)
int ENTRY(system)(const char* command) {
  dlckpt_ic_before_spawn();
  return REAL(system)(command);
}
REAL_DECL(popen)
FILE* ENTRY(popen)(const char* command, const char* type) {
  dlckpt_ic_before_spawn();
  return REAL(popen)(command, type);
}

/* vfork cannot be wrapped by a C function: the child would return through,
 * and clobber, the frame the parent resumes in. Its entry point calls
 * dlckpt_vfork_prepare, which lets the store go and returns the OS's vfork,
 * and jumps there with the stack exactly as the caller left it (x86-64, the
 * only architecture libintercept supports). */
REAL_DECL(vfork)
__attribute__((visibility("hidden"), used)) __typeof__(&vfork) dlckpt_vfork_prepare(void) {
  dlckpt_ic_before_spawn();
  return REAL(vfork);
}
#define DLCKPT_STR2(x) #x
#define DLCKPT_STR(x) DLCKPT_STR2(x)
#define VFORK_ENTRY DLCKPT_STR(ENTRY(vfork))
#if defined(__CET__) && (__CET__ & 1)
#define VFORK_ENDBR "  endbr64\n"
#else
#define VFORK_ENDBR ""
#endif
__asm__(".pushsection .text\n"
        ".globl " VFORK_ENTRY "\n"
        ".type " VFORK_ENTRY ", @function\n"
        VFORK_ENTRY ":\n"
        VFORK_ENDBR
        "  subq $8, %rsp\n" /* 16-byte alignment for the call */
        "  call dlckpt_vfork_prepare\n"
        "  addq $8, %rsp\n"
        "  jmp *%rax\n"
        ".size " VFORK_ENTRY ", .-" VFORK_ENTRY "\n"
        ".popsection\n");

/* ---- stdio ---- */

INTERCEPT(FILE*, fopen, (const char* path, const char* mode),
          dlckpt_ic_fopen(path, mode, &r), (OSP(AT_FDCWD, path), mode))
INTERCEPT(FILE*, fopen64, (const char* path, const char* mode),
          dlckpt_ic_fopen(path, mode, &r), (OSP(AT_FDCWD, path), mode))
INTERCEPT_FD(FILE*, fdopen, (int fd, const char* mode), dlckpt_ic_fdopen(fd, mode, &r), (fd, mode))
INTERCEPT(FILE*, freopen, (const char* path, const char* mode, FILE* stream),
          dlckpt_ic_freopen(path, mode, stream, &r), (OSP(AT_FDCWD, path), mode, stream))
INTERCEPT(FILE*, freopen64, (const char* path, const char* mode, FILE* stream),
          dlckpt_ic_freopen(path, mode, stream, &r), (OSP(AT_FDCWD, path), mode, stream))

/* ---- lifecycle ---- */

#if defined(DLCKPT_MODE_WRAP)

/* Found by libdlckpt_preload.so (the executable exports it, see
 * dlckpt_intercept()), which then stays out of the way. */
__attribute__((visibility("default"), used)) const int dlckpt_intercept_static_marker = 1;

/* Priority 101 runs after every default-priority destructor of the
 * executable, in particular libgfortran's unit cleanup. */
__attribute__((destructor(101))) static void dlckpt_wrap_fini(void) { dlckpt_ic_shutdown(); }

#else

int __cxa_atexit(void (*fn)(void*), void* arg, void* dso);

/* ---- MPI_Init: the store is made before the application's first I/O ----
 *
 * Only the preload library has these: an unmodified MPI program (IOR,
 * mdtest) never calls dlckpt_init, so without them its store was created and
 * pre-touched inside its first open, which IOR times (issue 36). A relinked
 * program calls dlckpt_init, which makes the store. MPI_Init and
 * MPI_Init_thread have had these signatures in every MPI standard; mpi.h is
 * not needed. Fortran's MPI_INIT reaches them too (MPICH's mpi_init_ calls
 * MPI_Init; Open MPI's calls PMPI_Init, interposed below). After the MPI library returned MPI_SUCCESS (0), the core
 * attaches or creates the store (dlckpt_ic_store_early; DLCKPT_STORE_EARLY=0
 * turns it off); the MPI library's result is returned unchanged. */
int MPI_Init(int* argc, char*** argv);
int MPI_Init_thread(int* argc, char*** argv, int required, int* provided);

/* The MPI library's `name`. RTLD_NEXT finds it when the MPI library is in
 * the global scope (linked by the executable, or dlopen'ed RTLD_GLOBAL).
 * A module loaded RTLD_LOCAL that links MPI (a Python extension) binds its
 * MPI_Init to this library too, while its MPI library is visible only in its
 * own scope: then every loaded object is asked for it (through a handle,
 * which searches the object's dependencies), skipping this library's own
 * `self`. The names are collected first and opened after dl_iterate_phdr
 * returned, since dlopen must not run under the loader lock it holds. */
struct dlckpt_objects {
  const char* names[1024];
  size_t count;
};
static int dlckpt_collect_object(struct dl_phdr_info* info, size_t size, void* data) {
  struct dlckpt_objects* o = (struct dlckpt_objects*)data;
  (void)size;
  if (info->dlpi_name != NULL && info->dlpi_name[0] != '\0' &&
      o->count < sizeof o->names / sizeof o->names[0]) {
    o->names[o->count++] = info->dlpi_name;
  }
  return 0;
}
static void* dlckpt_resolve_mpi(const char* name, void* self) {
  void* p = dlsym(RTLD_NEXT, name);
  if (p != NULL && p != self) return p;
  static struct dlckpt_objects objects; /* large for a stack; MPI_Init runs once */
  objects.count = 0;
  dl_iterate_phdr(dlckpt_collect_object, &objects);
  for (size_t i = 0; i < objects.count; ++i) {
    void* h = dlopen(objects.names[i], RTLD_LAZY | RTLD_NOLOAD);
    if (h == NULL) continue;
    p = dlsym(h, name);
    dlclose(h);
    if (p != NULL && p != self) return p;
  }
  static const char msg[] = "dlckpt: libdlckpt_preload.so: no MPI library defines ";
  (void)!write(2, msg, sizeof msg - 1);
  (void)!write(2, name, strlen(name));
  (void)!write(2, "\n", 1);
  abort();
}

/* Two MPI libraries in the process (dlckpt/base/mpi_libraries.h: a Python
 * whose mpi4py loaded Open MPI under a preloaded MPICH dlckpt) would bind
 * the application's MPI calls to either: MPI_Init then says so on stderr and
 * fails with MPI_ERR_OTHER (15 in MPICH, 16 in Open MPI; dlckpt's MPI's
 * value) without starting either MPI. mpi4py raises it at import. */
static int dlckpt_two_mpis(const char* fn) {
  static char msg[3 * PATH_MAX];
  if (!dlckpt_two_mpi_libraries(DLCKPT_MPI_FLAVOR, msg, sizeof msg)) return 0;
  static const char head[] = "dlckpt: libdlckpt_preload.so: ";
  (void)!write(2, head, sizeof head - 1);
  (void)!write(2, fn, strlen(fn));
  (void)!write(2, ": ", 2);
  (void)!write(2, msg, strlen(msg));
  (void)!write(2, "\n", 1);
  return strcmp(DLCKPT_MPI_FLAVOR, "openmpi") == 0 ? 16 : 15;
}

/* The next definition of MPI function `name` (resolved once into *slot). */
static void* dlckpt_real_mpi(void** slot, const char* name, void* self) {
  void* f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
  if (f == NULL) {
    f = dlckpt_resolve_mpi(name, self);
    __atomic_store_n(slot, f, __ATOMIC_RELEASE);
  }
  return f;
}

/* After the real MPI_Init*: the early store once MPI is up; rc unchanged. */
static int dlckpt_after_mpi_init(int rc) {
  if (rc == 0) dlckpt_ic_store_early();
  return rc;
}

int MPI_Init(int* argc, char*** argv) {
  int refused = dlckpt_two_mpis("MPI_Init");
  if (refused != 0) return refused;
  static void* real;
  __typeof__(&MPI_Init) f = (__typeof__(&MPI_Init))dlckpt_real_mpi(&real, "MPI_Init", (void*)&MPI_Init);
  return dlckpt_after_mpi_init(f(argc, argv));
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  int refused = dlckpt_two_mpis("MPI_Init_thread");
  if (refused != 0) return refused;
  static void* real;
  __typeof__(&MPI_Init_thread) f =
      (__typeof__(&MPI_Init_thread))dlckpt_real_mpi(&real, "MPI_Init_thread", (void*)&MPI_Init_thread);
  return dlckpt_after_mpi_init(f(argc, argv, required, provided));
}

/* Open MPI's Fortran MPI_INIT (libmpi_mpifh's ompi_init_f) calls PMPI_Init,
 * not MPI_Init, so the PMPI names are interposed too. A C MPI_Init reaches
 * the library's own PMPI_Init without passing through here (an internal
 * alias), and a tool that wraps MPI_Init and calls PMPI_Init passes both:
 * dlckpt_ic_store_early makes the store once either way. */
int PMPI_Init(int* argc, char*** argv);
int PMPI_Init_thread(int* argc, char*** argv, int required, int* provided);

int PMPI_Init(int* argc, char*** argv) {
  static __typeof__(&PMPI_Init) real;
  __typeof__(&PMPI_Init) f = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
  if (f == NULL) {
    f = (__typeof__(&PMPI_Init))dlckpt_resolve_mpi("PMPI_Init", (void*)&PMPI_Init);
    __atomic_store_n(&real, f, __ATOMIC_RELEASE);
  }
  int rc = f(argc, argv);
  if (rc == 0) dlckpt_ic_store_early();
  return rc;
}

int PMPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  static __typeof__(&PMPI_Init_thread) real;
  __typeof__(&PMPI_Init_thread) f = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
  if (f == NULL) {
    f = (__typeof__(&PMPI_Init_thread))dlckpt_resolve_mpi("PMPI_Init_thread", (void*)&PMPI_Init_thread);
    __atomic_store_n(&real, f, __ATOMIC_RELEASE);
  }
  int rc = f(argc, argv, required, provided);
  if (rc == 0) dlckpt_ic_store_early();
  return rc;
}

static void dlckpt_preload_exit(void* unused) {
  (void)unused;
  dlckpt_ic_shutdown();
}

__attribute__((constructor(101))) static void dlckpt_preload_init(void) {
  if (dlsym(RTLD_DEFAULT, "dlckpt_intercept_static_marker") != NULL) {
    dlckpt_ic_disable(
        "libdlckpt_preload.so stays inactive: this executable carries dlckpt's static wrappers");
  }
  /* Registered from a library constructor, before the C library registers
   * the dynamic linker's destructor pass, and with no DSO handle: runs after
   * every library destructor (libgfortran closes its units in one), just
   * before stdio's own exit flush. */
  __cxa_atexit(dlckpt_preload_exit, NULL, NULL);
}

#endif

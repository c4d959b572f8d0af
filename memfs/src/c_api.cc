// The C API of memfs: converts Status to errno exactly once, never throws.
#include <unistd.h>

#include <climits>
#include <cstring>
#include <new>

#include "dlckpt/memfs/memfs.h"
#include "dlckpt/memfs/store.h"

using dlckpt::Result;
using dlckpt::SetErrno;
using dlckpt::Status;
using dlckpt::memfs::Store;

struct dlckpt_store {
  std::unique_ptr<Store> store;
};

namespace {

// Runs `fn` returning Status or Result<T>, converting errors and exceptions
// (std::bad_alloc) to errno.
template <class Fn>
auto Guard(Fn&& fn, decltype(fn()) on_error) noexcept -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    SetErrno(Status::Error(ENOMEM, "out of memory"));
  } catch (...) {
    SetErrno(Status::Error(EIO, "unexpected exception"));
  }
  return on_error;
}

int Done(const Status& s) { return s.ok() ? 0 : SetErrno(s); }

bool BadStore(dlckpt_store_t* s) {
  if (s == nullptr || !s->store) {
    SetErrno(Status::Error(EBADF, "null store handle"));
    return true;
  }
  return false;
}

bool BadPath(const char* path) {
  if (path == nullptr) {
    SetErrno(Status::Error(EFAULT, "null path"));
    return true;
  }
  return false;
}

void FillStat(const dlckpt::memfs::FileInfo& fi, uint64_t block_size, const std::string& name,
              struct stat* st) {
  std::memset(st, 0, sizeof *st);
  st->st_dev = std::hash<std::string>{}(name);
  st->st_ino = fi.ino;
  st->st_mode = fi.mode;
  st->st_nlink = S_ISDIR(fi.mode) ? 2 : 1;
  st->st_uid = getuid();
  st->st_gid = getgid();
  st->st_size = static_cast<off_t>(fi.size);
  st->st_blksize = static_cast<blksize_t>(block_size);
  st->st_blocks = static_cast<blkcnt_t>((fi.size + block_size - 1) / block_size * (block_size / 512));
  st->st_mtim.tv_sec = fi.mtime_ns / 1000000000;
  st->st_mtim.tv_nsec = fi.mtime_ns % 1000000000;
  st->st_atim = st->st_mtim;
  st->st_ctim = st->st_mtim;
}

ssize_t SizeResult(const Result<size_t>& r) {
  if (!r.ok()) return SetErrno(r.status());
  return static_cast<ssize_t>(*r);
}

size_t ClampLen(size_t len) { return len > SSIZE_MAX ? SSIZE_MAX : len; }

// dlckpt_pread/dlckpt_pwrite: checks the handle and offset, then calls
// io(offset) returning Result<size_t>.
template <class Io>
ssize_t Positioned(dlckpt_store_t* s, off_t offset, Io&& io) {
  return Guard(
      [&]() -> ssize_t {
        if (BadStore(s)) return -1;
        if (offset < 0) return SetErrno(Status::InvalidArgument("negative offset"));
        return SizeResult(io(static_cast<uint64_t>(offset)));
      },
      -1);
}

}  // namespace

extern "C" {

void dlckpt_store_options_init(dlckpt_store_options_t* o) {
  dlckpt::memfs::StoreOptions d;
  o->capacity = d.capacity;
  o->block_size = d.block_size;
  o->max_files = d.max_files;
  o->max_open = d.max_open;
  o->prefault = d.prefault ? 1 : 0;
  o->job = nullptr;
  o->node = nullptr;
  o->rank = 0;
  o->compression = DLCKPT_COMPRESS_NONE;
  o->compress_threshold = d.compress_threshold;
  o->chunk_size = d.chunk_size;
}

int dlckpt_store_name(const char* job, const char* node, int rank, char* buf, size_t len) {
  return Guard(
      [&]() -> int {
        if (!job || !node || !buf) return SetErrno(Status::Error(EFAULT, "null argument"));
        auto r = dlckpt::StoreName(job, node, rank);
        if (!r.ok()) return SetErrno(r.status());
        if (r->size() + 1 > len) return SetErrno(Status::Error(ERANGE, "store name buffer too small"));
        std::memcpy(buf, r->c_str(), r->size() + 1);
        return 0;
      },
      -1);
}

dlckpt_store_t* dlckpt_store_create(const char* name, const dlckpt_store_options_t* options) {
  return Guard(
      [&]() -> dlckpt_store_t* {
        if (BadPath(name)) return nullptr;
        dlckpt::memfs::StoreOptions o;
        if (options) {
          o.capacity = options->capacity;
          o.block_size = options->block_size;
          o.max_files = options->max_files;
          o.max_open = options->max_open;
          o.prefault = options->prefault != 0;
          o.job = options->job ? options->job : "";
          o.node = options->node ? options->node : "";
          o.rank = options->rank;
          if (options->compression != DLCKPT_COMPRESS_NONE &&
              options->compression != DLCKPT_COMPRESS_LZ4) {
            SetErrno(Status::InvalidArgument("store " + std::string(name) + ": unknown compression " +
                                             std::to_string(options->compression)));
            return nullptr;
          }
          o.compression = static_cast<dlckpt::memfs::Compression>(options->compression);
          o.compress_threshold = options->compress_threshold;
          o.chunk_size = options->chunk_size;
        }
        auto r = Store::Create(name, o);
        if (!r.ok()) {
          SetErrno(r.status());
          return nullptr;
        }
        return new dlckpt_store{std::move(*r)};
      },
      nullptr);
}

dlckpt_store_t* dlckpt_store_attach(const char* name, int mode) {
  return Guard(
      [&]() -> dlckpt_store_t* {
        if (BadPath(name)) return nullptr;
        auto r = Store::Attach(name, mode == DLCKPT_ATTACH_OWNER ? dlckpt::memfs::AttachMode::kOwner
                                                                 : dlckpt::memfs::AttachMode::kReadOnly);
        if (!r.ok()) {
          SetErrno(r.status());
          return nullptr;
        }
        return new dlckpt_store{std::move(*r)};
      },
      nullptr);
}

int dlckpt_store_detach(dlckpt_store_t* s) {
  return Guard(
      [&]() -> int {
        if (BadStore(s)) return -1;
        delete s;
        return 0;
      },
      -1);
}

int dlckpt_store_destroy(dlckpt_store_t* s) {
  return Guard(
      [&]() -> int {
        if (BadStore(s)) return -1;
        Status st = Store::Destroy(s->store->name());
        delete s;
        return Done(st);
      },
      -1);
}

int dlckpt_store_unlink(const char* name) {
  return Guard([&]() -> int { return BadPath(name) ? -1 : Done(Store::Destroy(name)); }, -1);
}

int dlckpt_store_commit(dlckpt_store_t* s, uint64_t* epoch) {
  return Guard(
      [&]() -> int {
        if (BadStore(s)) return -1;
        auto r = s->store->Commit(epoch ? *epoch : 0);
        if (!r.ok()) return SetErrno(r.status());
        if (epoch) *epoch = *r;
        return 0;
      },
      -1);
}

int dlckpt_store_acknowledge(dlckpt_store_t* s, uint64_t epoch) {
  return Guard([&]() -> int { return BadStore(s) ? -1 : Done(s->store->Acknowledge(epoch)); }, -1);
}
int dlckpt_store_rollback(dlckpt_store_t* s) {
  return Guard([&]() -> int { return BadStore(s) ? -1 : Done(s->store->Rollback()); }, -1);
}
int dlckpt_store_restore(dlckpt_store_t* s, uint64_t epoch) {
  return Guard([&]() -> int { return BadStore(s) ? -1 : Done(s->store->Restore(epoch)); }, -1);
}
int dlckpt_store_verify(dlckpt_store_t* s, uint64_t epoch) {
  return Guard([&]() -> int { return BadStore(s) ? -1 : Done(s->store->Verify(epoch)); }, -1);
}
int dlckpt_store_epochs(dlckpt_store_t* s, uint64_t* acknowledged, uint64_t* pending) {
  return Guard(
      [&]() -> int {
        if (BadStore(s)) return -1;
        auto e = s->store->epochs();
        if (acknowledged) *acknowledged = e.acknowledged;
        if (pending) *pending = e.pending;
        return 0;
      },
      -1);
}

int dlckpt_open(dlckpt_store_t* s, const char* path, int flags, mode_t mode) {
  return Guard(
      [&]() -> int {
        if (BadStore(s) || BadPath(path)) return -1;
        auto r = s->store->Open(path, flags, mode);
        return r.ok() ? *r : SetErrno(r.status());
      },
      -1);
}
int dlckpt_close(dlckpt_store_t* s, int fd) {
  return Guard([&]() -> int { return BadStore(s) ? -1 : Done(s->store->Close(fd)); }, -1);
}
ssize_t dlckpt_read(dlckpt_store_t* s, int fd, void* buf, size_t len) {
  return Guard(
      [&]() -> ssize_t { return BadStore(s) ? -1 : SizeResult(s->store->Read(fd, buf, ClampLen(len))); },
      -1);
}
ssize_t dlckpt_write(dlckpt_store_t* s, int fd, const void* buf, size_t len) {
  return Guard(
      [&]() -> ssize_t { return BadStore(s) ? -1 : SizeResult(s->store->Write(fd, buf, ClampLen(len))); },
      -1);
}
ssize_t dlckpt_pread(dlckpt_store_t* s, int fd, void* buf, size_t len, off_t offset) {
  return Positioned(s, offset,
                    [&](uint64_t at) { return s->store->Pread(fd, buf, ClampLen(len), at); });
}
ssize_t dlckpt_pwrite(dlckpt_store_t* s, int fd, const void* buf, size_t len, off_t offset) {
  return Positioned(s, offset,
                    [&](uint64_t at) { return s->store->Pwrite(fd, buf, ClampLen(len), at); });
}
off_t dlckpt_lseek(dlckpt_store_t* s, int fd, off_t offset, int whence) {
  return Guard(
      [&]() -> off_t {
        if (BadStore(s)) return -1;
        auto r = s->store->Seek(fd, offset, whence);
        return r.ok() ? static_cast<off_t>(*r) : SetErrno(r.status());
      },
      -1);
}
int dlckpt_ftruncate(dlckpt_store_t* s, int fd, off_t size) {
  return Guard(
      [&]() -> int {
        if (BadStore(s)) return -1;
        if (size < 0) return SetErrno(Status::InvalidArgument("negative size"));
        return Done(s->store->Ftruncate(fd, static_cast<uint64_t>(size)));
      },
      -1);
}
int dlckpt_truncate(dlckpt_store_t* s, const char* path, off_t size) {
  return Guard(
      [&]() -> int {
        if (BadStore(s) || BadPath(path)) return -1;
        if (size < 0) return SetErrno(Status::InvalidArgument("negative size"));
        return Done(s->store->Truncate(path, static_cast<uint64_t>(size)));
      },
      -1);
}
int dlckpt_fstat(dlckpt_store_t* s, int fd, struct stat* st) {
  return Guard(
      [&]() -> int {
        if (BadStore(s)) return -1;
        auto r = s->store->Fstat(fd);
        if (!r.ok()) return SetErrno(r.status());
        FillStat(*r, s->store->stats().block_size, s->store->name(), st);
        return 0;
      },
      -1);
}
int dlckpt_stat(dlckpt_store_t* s, const char* path, struct stat* st) {
  return Guard(
      [&]() -> int {
        if (BadStore(s) || BadPath(path)) return -1;
        auto r = s->store->Stat(path);
        if (!r.ok()) return SetErrno(r.status());
        FillStat(*r, s->store->stats().block_size, s->store->name(), st);
        return 0;
      },
      -1);
}
int dlckpt_fsync(dlckpt_store_t* s, int fd) {
  return Guard([&]() -> int { return BadStore(s) ? -1 : Done(s->store->Fsync(fd)); }, -1);
}
int dlckpt_unlink(dlckpt_store_t* s, const char* path) {
  return Guard([&]() -> int { return BadStore(s) || BadPath(path) ? -1 : Done(s->store->Unlink(path)); },
               -1);
}
int dlckpt_rename(dlckpt_store_t* s, const char* from, const char* to) {
  return Guard(
      [&]() -> int {
        return BadStore(s) || BadPath(from) || BadPath(to) ? -1 : Done(s->store->Rename(from, to));
      },
      -1);
}


}  // extern "C"

// dir.cc — opendir/readdir on memfs directories.
//
// A memfs DIR* is a MemDir of ours (never a glibc DIR), recognised through a
// registry, so readdir & co. on ordinary directories go to glibc untouched.
// The listing is a snapshot taken at opendir/rewinddir: ".", "..", then the
// names directly below the directory, with implied directories (those that
// only have files below them) listed as DT_DIR.
#include <dirent.h>
#include <fcntl.h>
#include <stddef.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <unordered_set>
#include <vector>

#include "core.h"
#include "core_c.h"

namespace dlckpt::intercept::internal {

std::mutex& DirRegistryMutex() {
  static std::mutex* const mu = new std::mutex();
  return *mu;
}

namespace {

struct MemDir {
  struct Item {
    std::string name;
    uint64_t ino = 0;
    unsigned char type = DT_UNKNOWN;
  };
  int fd = -1;
  std::string path;
  std::vector<Item> items;
  size_t pos = 0;
  struct dirent ent;
  struct dirent64 ent64;
  std::mutex mu;
};

std::unordered_set<void*>& Dirs() {
  static auto* const set = new std::unordered_set<void*>();
  return *set;
}
std::atomic<int> g_dir_count{0};

MemDir* AsMemDir(DIR* d) {
  if (d == nullptr || g_dir_count.load(std::memory_order_acquire) == 0) return nullptr;
  std::lock_guard<std::mutex> lock(DirRegistryMutex());
  return Dirs().count(d) ? reinterpret_cast<MemDir*>(d) : nullptr;
}

// Fills d->items from the store. 0 or errno.
int Load(MemDir* d) {
  InternalScope in;
  StoreRef ref;
  int e = ref.Acquire(true, false);
  if (e != 0 && e != ENOENT) return e;
  std::map<std::string, MemDir::Item> children;
  memfs::Store* s = ref.store();
  if (s != nullptr) {
    std::string prefix = d->path == "/" ? "/" : d->path + "/";
    auto list = s->List(prefix);
    if (!list.ok()) return list.status().code();
    for (const auto& fi : *list) {
      std::string rest = fi.path.substr(prefix.size());
      if (rest.empty()) continue;
      size_t slash = rest.find('/');
      std::string name = rest.substr(0, slash);
      auto& item = children[name];
      item.name = name;
      if (slash == std::string::npos) {
        item.ino = fi.ino;
        item.type = S_ISDIR(fi.mode) ? DT_DIR : DT_REG;
      } else if (item.type == DT_UNKNOWN) {
        item.ino = SynthIno(prefix + name);
        item.type = DT_DIR;
      }
    }
  }
  // Prefixes below this directory exist even when empty.
  for (const auto& pre : Prefixes().prefixes()) {
    std::string prefix = d->path == "/" ? "/" : d->path + "/";
    if (pre.size() <= prefix.size() || pre.compare(0, prefix.size(), prefix) != 0) continue;
    std::string name = pre.substr(prefix.size(), pre.find('/', prefix.size()) - prefix.size());
    auto& item = children[name];
    if (item.type == DT_UNKNOWN) item = MemDir::Item{name, SynthIno(prefix + name), DT_DIR};
  }
  d->items.clear();
  d->items.push_back(MemDir::Item{".", SynthIno(d->path), DT_DIR});
  d->items.push_back(MemDir::Item{"..", SynthIno(std::string(ParentOf(d->path))), DT_DIR});
  for (auto& [name, item] : children) d->items.push_back(std::move(item));
  d->pos = 0;
  return 0;
}

// Takes ownership of memfs directory descriptor `fd`; nullptr with errno on
// failure (fd then still open).
DIR* MakeDir(int fd, const std::string& path) {
  auto* d = new (std::nothrow) MemDir();
  if (d == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  d->fd = fd;
  d->path = path;
  int e = Load(d);
  if (e != 0) {
    delete d;
    errno = e;
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(DirRegistryMutex());
  Dirs().insert(d);
  g_dir_count.fetch_add(1);
  return reinterpret_cast<DIR*>(d);
}

template <class Dirent>
void FillDirent(const MemDir::Item& item, size_t index, Dirent* e) {
  std::memset(e, 0, offsetof(Dirent, d_name));
  e->d_ino = item.ino;
  e->d_off = static_cast<decltype(e->d_off)>(index + 1);
  e->d_reclen = sizeof(Dirent);
  e->d_type = item.type;
  size_t n = std::min(item.name.size(), sizeof(e->d_name) - 1);
  std::memcpy(e->d_name, item.name.data(), n);
  e->d_name[n] = '\0';
}

template <class Dirent>
Dirent* Next(MemDir* d, Dirent* into) {
  std::lock_guard<std::mutex> lock(d->mu);
  if (d->pos >= d->items.size()) return nullptr;
  FillDirent(d->items[d->pos], d->pos, into);
  ++d->pos;
  return into;
}

template <class Dirent>
int ScanDir(const char* path, Dirent*** namelist, int (*filter)(const Dirent*),
            int (*compar)(const Dirent**, const Dirent**), int* out) {
  DIR* dir;
  if (!dlckpt_ic_opendir(path, &dir)) return 0;
  if (dir == nullptr) {
    *out = -1;
    return 1;
  }
  MemDir* d = reinterpret_cast<MemDir*>(dir);
  std::vector<Dirent*> kept;
  Dirent ent;
  bool failed = false;
  while (Next(d, &ent) != nullptr) {
    if (filter != nullptr && !filter(&ent)) continue;
    auto* copy = static_cast<Dirent*>(malloc(sizeof(Dirent)));
    if (copy == nullptr) {
      failed = true;
      break;
    }
    std::memcpy(copy, &ent, sizeof ent);
    kept.push_back(copy);
  }
  dlckpt_ic_closedir(dir);
  auto** list = failed ? nullptr : static_cast<Dirent**>(malloc(sizeof(Dirent*) * (kept.size() + 1)));
  if (list == nullptr) {
    for (Dirent* e : kept) free(e);
    errno = ENOMEM;
    *out = -1;
    return 1;
  }
  std::copy(kept.begin(), kept.end(), list);
  if (compar != nullptr) {
    qsort(list, kept.size(), sizeof(Dirent*),
          reinterpret_cast<int (*)(const void*, const void*)>(compar));
  }
  *namelist = list;
  *out = static_cast<int>(kept.size());
  return 1;
}

}  // namespace

}  // namespace dlckpt::intercept::internal

using namespace dlckpt::intercept::internal;  // NOLINT(google-build-using-namespace)

extern "C" {

int dlckpt_ic_opendir(const char* path, DIR** out) {
  try {
    std::string p;
    int err = 0;
    Route r = ResolveAppPath(AT_FDCWD, path, &p, &err);
    if (r == Route::kOs) return 0;
    *out = nullptr;
    if (r == Route::kError) {
      errno = err;
      return 1;
    }
    int fd = OpenPath(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (fd >= 0) {
      *out = MakeDir(fd, p);
      if (*out == nullptr) {
        int e = errno;
        FdClose(fd);
        errno = e;
      }
    }
  } catch (...) {
    errno = ENOMEM;
    *out = nullptr;
  }
  return 1;
}

int dlckpt_ic_fdopendir(int fd, DIR** out) {
  if (Disabled() || InInternal() || !Fds().Contains(fd)) return 0;
  *out = nullptr;
  try {
    std::string path;
    {
      InternalScope in;
      StoreRef ref;
      std::shared_ptr<OpenFile> f = FdFile(fd, &ref);
      if (f == nullptr) return 1;  // errno EBADF
      if (f->kind != OpenFile::Kind::kDir) {
        errno = ENOTDIR;
        return 1;
      }
      path = f->path;
    }
    *out = MakeDir(fd, path);
  } catch (...) {
    errno = ENOMEM;
  }
  return 1;
}

int dlckpt_ic_is_memdir(DIR* d) { return AsMemDir(d) != nullptr; }

struct dirent* dlckpt_ic_readdir(DIR* dir) {
  MemDir* d = AsMemDir(dir);
  return d ? Next(d, &d->ent) : nullptr;
}

struct dirent64* dlckpt_ic_readdir64(DIR* dir) {
  MemDir* d = AsMemDir(dir);
  return d ? Next(d, &d->ent64) : nullptr;
}

int dlckpt_ic_readdir_r(DIR* dir, struct dirent* entry, struct dirent** result) {
  MemDir* d = AsMemDir(dir);
  if (d == nullptr) return EBADF;
  *result = Next(d, entry);
  return 0;
}

int dlckpt_ic_readdir64_r(DIR* dir, struct dirent64* entry, struct dirent64** result) {
  MemDir* d = AsMemDir(dir);
  if (d == nullptr) return EBADF;
  *result = Next(d, entry);
  return 0;
}

int dlckpt_ic_closedir(DIR* dir) {
  MemDir* d = AsMemDir(dir);
  if (d == nullptr) {
    errno = EBADF;
    return -1;
  }
  {
    std::lock_guard<std::mutex> lock(DirRegistryMutex());
    Dirs().erase(dir);
    g_dir_count.fetch_sub(1);
  }
  int r = FdClose(d->fd);
  delete d;
  return r;
}

int dlckpt_ic_dirfd(DIR* dir) {
  MemDir* d = AsMemDir(dir);
  return d ? d->fd : -1;
}

void dlckpt_ic_rewinddir(DIR* dir) {
  MemDir* d = AsMemDir(dir);
  if (d == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(d->mu);
    if (Load(d) != 0) d->pos = d->items.size();
  }
}

long dlckpt_ic_telldir(DIR* dir) {
  MemDir* d = AsMemDir(dir);
  if (d == nullptr) return -1;
  std::lock_guard<std::mutex> lock(d->mu);
  return static_cast<long>(d->pos);
}

void dlckpt_ic_seekdir(DIR* dir, long loc) {
  MemDir* d = AsMemDir(dir);
  if (d == nullptr || loc < 0) return;
  std::lock_guard<std::mutex> lock(d->mu);
  d->pos = std::min(static_cast<size_t>(loc), d->items.size());
}

int dlckpt_ic_scandir(const char* path, struct dirent*** namelist,
                      int (*filter)(const struct dirent*),
                      int (*compar)(const struct dirent**, const struct dirent**), int* out) {
  try {
    return ScanDir(path, namelist, filter, compar, out);
  } catch (...) {
    errno = ENOMEM;
    *out = -1;
    return 1;
  }
}

int dlckpt_ic_scandir64(const char* path, struct dirent64*** namelist,
                        int (*filter)(const struct dirent64*),
                        int (*compar)(const struct dirent64**, const struct dirent64**),
                        int* out) {
  try {
    return ScanDir(path, namelist, filter, compar, out);
  } catch (...) {
    errno = ENOMEM;
    *out = -1;
    return 1;
  }
}

}  // extern "C"

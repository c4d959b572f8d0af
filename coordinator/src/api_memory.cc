// Protected memory regions: dlckpt_protect, dlckpt_unprotect, dlckpt_recover,
// dlckpt_recover_region, dlckpt_region_size (dlckpt/dlckpt.h), and the copy
// of every region into the store at dlckpt_checkpoint (api_memory.h).
#include "api_memory.h"

#include <fcntl.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "dlckpt/dlckpt.h"
#include "api_boundary.h"
#include "dirty_pages.h"

namespace dlckpt::api::memory {
namespace {

struct Region {
  void* ptr = nullptr;
  size_t bytes = 0;
  int handle = 0;  // the tracker's
  // The store's working file RegionPath(id) holds exactly the region's bytes
  // as of the last Collect, and still is the file written then (same inode,
  // mtime and size): the next checkpoint may write only the dirty ranges.
  bool stored = false;
  uint64_t ino = 0;
  int64_t mtime_ns = 0;
};

struct Table {
  std::map<int, Region> regions;
  bool selected = false;       // SelectNext: the next StoreRegions stores only `selection`
  std::set<int> selection;
  memfs::Store* store = nullptr;
  std::unique_ptr<dirty::Tracker> tracker;  // created at the first dlckpt_protect
};

Table& T() {
  static Table* const t = new Table();
  return *t;
}

// $DLCKPT_DIRTY_TRACE=1: one stderr line per region and checkpoint saying
// what was written.
bool Trace() {
  static const bool on = [] {
    const char* v = std::getenv("DLCKPT_DIRTY_TRACE");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return on;
}

dirty::Tracker& Tracker() {
  Table& t = T();
  if (!t.tracker) {
    // Opt-in (DLCKPT_DIRTY_TRACKING=on): writes the MMU never sees (a NIC's
    // RDMA into a registered region, another process through shared pages)
    // would be missed, and a write fault per page costs more than the copy
    // it saves on this platform (bench/README.md "Dirty pages").
    // "sync": the handler-thread mechanism (dirty_pages.h, kUffdSync).
    const char* v = std::getenv("DLCKPT_DIRTY_TRACKING");
    const bool sync = v != nullptr && strcasecmp(v, "sync") == 0;
    const bool on = sync || (v != nullptr && (strcasecmp(v, "on") == 0 || strcmp(v, "1") == 0 ||
                                              strcasecmp(v, "yes") == 0 || strcasecmp(v, "true") == 0));
    t.tracker = dirty::Tracker::Create(on ? (sync ? "sync" : nullptr) : (v != nullptr && *v != '\0' ? v : "off"));
    if (on) t.tracker->SayOnce();
    if (sync && !t.tracker->sync_refused().empty() && t.tracker->mode() != dirty::Tracker::Mode::kWhole) {
      std::fprintf(stderr, "dlckpt: DLCKPT_DIRTY_TRACKING=sync unavailable (%s): asynchronous write protection instead\n",
                   t.tracker->sync_refused().c_str());
    }
  }
  return *t.tracker;
}

std::string Name(int id) { return "region " + std::to_string(id); }

Status Protect(int id, void* ptr, size_t bytes) {
  if (id < 0) return Status::InvalidArgument("dlckpt_protect: " + Name(id) + ": ids are >= 0");
  if (ptr == nullptr && bytes > 0) {
    return Status::InvalidArgument("dlckpt_protect: " + Name(id) + ": NULL pointer for " + std::to_string(bytes) +
                                   " bytes");
  }
  if (bytes > static_cast<size_t>(PTRDIFF_MAX)) {
    return Status::InvalidArgument("dlckpt_protect: " + Name(id) + ": size " + std::to_string(bytes) +
                                   " is past PTRDIFF_MAX (a negative size?)");
  }
  auto it = T().regions.find(id);
  if (it != T().regions.end()) {
    // The same memory again keeps its tracking; moved or resized memory is
    // written whole at the next checkpoint.
    if (it->second.ptr == ptr && it->second.bytes == bytes) return Status::OK();
    Tracker().Unregister(it->second.handle);
  }
  Region r;
  r.ptr = ptr;
  r.bytes = bytes;
  r.handle = Tracker().Register(ptr, bytes);
  T().regions[id] = r;
  return Status::OK();
}

Status Unprotect(int id) {
  auto it = T().regions.find(id);
  if (it == T().regions.end()) return Status::NotFound("dlckpt_unprotect: " + Name(id) + " is not protected");
  Tracker().Unregister(it->second.handle);
  T().regions.erase(it);
  return Status::OK();
}

// Writes `ranges` of region `r` into the existing store file `path` in place
// (no truncation): memfs copies on write only the blocks they touch, and
// every other byte keeps the previous epoch's value, which is the region's.
Status WriteRanges(memfs::Store* store, std::string_view path, const Region& r,
                   const std::vector<dirty::Range>& ranges) {
  if (ranges.empty()) return Status::OK();
  DLCKPT_ASSIGN_OR_RETURN(int fd, store->Open(path, O_WRONLY));
  Status s;
  for (const dirty::Range& g : ranges) {
    for (uint64_t done = 0; done < g.len && s.ok();) {
      auto n = store->Pwrite(fd, static_cast<const char*>(r.ptr) + g.offset + done, g.len - done, g.offset + done);
      if (!n.ok()) {
        s = n.status();
      } else if (*n == 0) {
        s = Status::NoSpace(std::string(path) + ": the store took " + std::to_string(done) + " of " +
                            std::to_string(g.len) + " bytes at offset " + std::to_string(g.offset));
      } else {
        done += *n;
      }
    }
    if (!s.ok()) break;
  }
  Status c = store->Close(fd);
  return s.ok() ? c : s;
}

// Reads [0, len) of store file `path` into `out`; EIO if it holds fewer bytes.
Status ReadInto(memfs::Store* store, std::string_view path, void* out, size_t len) {
  DLCKPT_ASSIGN_OR_RETURN(int fd, store->Open(path, O_RDONLY));
  Status s;
  for (size_t done = 0; done < len && s.ok();) {
    auto n = store->Pread(fd, static_cast<char*>(out) + done, len - done, done);
    if (!n.ok()) {
      s = n.status();
    } else if (*n == 0) {
      s = Status::IOError(std::string(path) + ": ends at byte " + std::to_string(done) + " of " + std::to_string(len));
    } else {
      done += *n;
    }
  }
  Status c = store->Close(fd);
  return s.ok() ? c : s;
}

Result<memfs::Store*> Attached(std::string_view what) {
  if (T().store == nullptr) return Status::InvalidArgument(std::string(what) + ": call dlckpt_init first");
  return T().store;
}

}  // namespace

std::string RegionPath(int id) { return std::string(kRegionDir) + std::to_string(id); }

void Attach(memfs::Store* store) {
  T().store = store;
  for (auto& entry : T().regions) entry.second.stored = false;  // another store: whole
}

Status WriteStoreFile(memfs::Store* store, std::string_view path, const void* data, size_t len) {
  DLCKPT_ASSIGN_OR_RETURN(int fd, store->Open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600));
  Status s;
  for (size_t done = 0; done < len && s.ok();) {
    auto n = store->Pwrite(fd, static_cast<const char*>(data) + done, len - done, done);
    if (!n.ok()) {
      s = n.status();
    } else if (*n == 0) {
      s = Status::NoSpace(std::string(path) + ": the store took " + std::to_string(done) + " of " +
                          std::to_string(len) + " bytes");
    } else {
      done += *n;
    }
  }
  Status c = store->Close(fd);
  return s.ok() ? c : s;
}

Result<std::string> ReadStoreFile(memfs::Store* store, std::string_view path) {
  DLCKPT_ASSIGN_OR_RETURN(memfs::FileInfo info, store->Stat(path));
  std::string bytes(info.size, '\0');
  DLCKPT_RETURN_IF_ERROR(ReadInto(store, path, bytes.data(), bytes.size()));
  return bytes;
}

Status SelectNext(const std::vector<int>* ids) {
  Table& t = T();
  if (ids == nullptr) {
    t.selected = false;
    t.selection.clear();
    return Status::OK();
  }
  for (int id : *ids) {
    if (t.regions.count(id) == 0) return Status::InvalidArgument(Name(id) + " is not protected");
  }
  t.selected = true;
  t.selection = std::set<int>(ids->begin(), ids->end());
  return Status::OK();
}

Status StoreRegions(memfs::Store* store) {
  Table& t = T();
  const bool selected = t.selected;
  const std::set<int> selection = std::move(t.selection);
  t.selected = false;
  t.selection.clear();
  auto chosen = [&](int id) { return !selected || selection.count(id) != 0; };
  if (!t.regions.empty()) {
    // Collect re-arms the tracking: from here on, a region not written
    // successfully below must be written whole next time.
    std::map<int, dirty::Dirty> dirty = Tracker().Collect();
    std::map<int, bool> was_stored;
    for (auto& [id, r] : t.regions) {
      was_stored[id] = r.stored && t.store == store;
      r.stored = false;
    }
    for (auto& [id, r] : t.regions) {
      if (!chosen(id)) continue;  // not in this checkpoint: its file goes below
      const std::string path = RegionPath(id);
      const dirty::Dirty& d = dirty[r.handle];
      bool in_place = was_stored[id] && !d.whole;
      if (in_place) {
        // The working file must be the one written last time, unchanged.
        auto info = store->Stat(path);
        in_place = info.ok() && info->size == r.bytes && info->ino == r.ino && info->mtime_ns == r.mtime_ns &&
                   info->damage == 0;
      }
      Status s = in_place ? WriteRanges(store, path, r, d.ranges) : WriteStoreFile(store, path, r.ptr, r.bytes);
      if (Trace()) {
        uint64_t n = 0;
        for (const dirty::Range& g : d.ranges) n += g.len;
        std::fprintf(stderr, "dlckpt: %s: %s %llu of %zu bytes%s\n", Name(id).c_str(),
                     in_place ? "wrote in place" : "wrote whole", static_cast<unsigned long long>(in_place ? n : r.bytes),
                     r.bytes, in_place ? (" in " + std::to_string(d.ranges.size()) + " range(s)").c_str() : "");
      }
      if (!s.ok()) return s.Prefixed("storing " + Name(id) + " (" + std::to_string(r.bytes) + " bytes)");
      auto info = store->Stat(path);
      if (!info.ok()) return info.status().Prefixed("storing " + Name(id));
      r.ino = info->ino;
      r.mtime_ns = info->mtime_ns;
      r.stored = true;
    }
  }
  DLCKPT_ASSIGN_OR_RETURN(std::vector<memfs::FileInfo> files, store->List(kRegionDir));
  for (const memfs::FileInfo& f : files) {
    const int id = std::atoi(f.path.c_str() + kRegionDir.size());
    if (t.regions.count(id) != 0 && chosen(id) && f.path == RegionPath(id)) continue;
    Status s = store->Unlink(f.path);
    if (!s.ok() && s.code() != ENOENT) return s.Prefixed("dropping the unprotected region file " + f.path);
  }
  return Status::OK();
}

void CheckpointEnded(const Status& outcome) {
  if (outcome.ok()) return;
  for (auto& entry : T().regions) entry.second.stored = false;
}

std::vector<int> ProtectedIds() {
  std::vector<int> ids;
  for (const auto& entry : T().regions) ids.push_back(entry.first);
  return ids;
}

Result<uint64_t> CheckpointedSize(int id) {
  DLCKPT_ASSIGN_OR_RETURN(memfs::Store * store, Attached("dlckpt_region_size"));
  auto info = store->Stat(RegionPath(id));
  if (!info.ok() && info.status().code() == ENOENT) {
    return Status::NotFound(Name(id) + " is not in the checkpoint");
  }
  if (!info.ok()) return info.status().Prefixed(Name(id));
  return info->size;
}

Status Recover(const std::vector<int>& ids, std::string_view what) {
  DLCKPT_ASSIGN_OR_RETURN(memfs::Store * store, Attached(what));
  const Table& t = T();
  // Every region is checked before any is written.
  for (int id : ids) {
    auto r = t.regions.find(id);
    if (r == t.regions.end()) {
      return Status::NotFound(std::string(what) + ": " + Name(id) + " is not protected (dlckpt_protect it first)");
    }
    auto size = CheckpointedSize(id);
    if (!size.ok()) return size.status().Prefixed(what);
    if (*size != r->second.bytes) {
      return Status::InvalidArgument(std::string(what) + ": " + Name(id) + ": the checkpoint holds " +
                                     std::to_string(*size) + " bytes, the protected region " +
                                     std::to_string(r->second.bytes) + ": nothing copied (protect it with " +
                                     std::to_string(*size) + " bytes)");
    }
  }
  for (int id : ids) {
    const Region& r = t.regions.at(id);
    Status s = ReadInto(store, RegionPath(id), r.ptr, r.bytes);
    if (!s.ok()) return s.Prefixed(std::string(what) + ": " + Name(id));
  }
  return Status::OK();
}

}  // namespace dlckpt::api::memory

extern "C" {

int dlckpt_protect(int id, void* ptr, size_t bytes) {
  return dlckpt::api::Guarded([&] { return dlckpt::api::memory::Protect(id, ptr, bytes); });
}

int dlckpt_unprotect(int id) {
  return dlckpt::api::Guarded([&] { return dlckpt::api::memory::Unprotect(id); });
}

int dlckpt_recover(void) {
  return dlckpt::api::Guarded(
      [] { return dlckpt::api::memory::Recover(dlckpt::api::memory::ProtectedIds(), "dlckpt_recover"); });
}

int dlckpt_recover_region(int id) {
  return dlckpt::api::Guarded([&] { return dlckpt::api::memory::Recover({id}, "dlckpt_recover_region"); });
}

long long dlckpt_region_size(int id) {
  long long size = -1;
  int rc = dlckpt::api::Guarded([&] {
    auto s = dlckpt::api::memory::CheckpointedSize(id);
    if (s.ok()) size = static_cast<long long>(*s);
    return s.status().Prefixed("dlckpt_region_size");
  });
  return rc == 0 ? size : -1;
}

}  // extern "C"

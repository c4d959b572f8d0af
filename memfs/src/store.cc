// memfs store: see dlckpt/memfs.h for the contract and layout.h for the bytes.
//
// The owner keeps the working file set in process memory (a map of Nodes with
// their block lists) and a reference mask per block (acked / pending /
// working). Committed versions live in slots in shared memory and are never
// written again while referenced by the published state. Lock order: a Store
// has one mutex, mu_, held by every public method; nothing else is locked.
//
// Compressed stores: a Node also has one Chunk per chunk_size bytes, and its
// block list keeps one entry per block_size bytes of the file, so block i
// still holds bytes [i * bs, (i + 1) * bs) of a raw chunk; a compressed chunk
// has its LZ4 block in its first ceil(stored / bs) entries and kNoBlock in
// the rest. Chunk streams are never modified in place: compressing,
// decompressing (Expand) and copy-on-write give a chunk fresh blocks.
#include <fcntl.h>
#include <lz4.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>

#include "dlckpt/crc32c.h"
#include "dlckpt/memfs.h"
#include "layout.h"

namespace dlckpt::memfs {

using namespace layout;  // NOLINT(google-build-using-namespace)

namespace {

constexpr uint8_t kRefAcked = 1;
constexpr uint8_t kRefPending = 2;
constexpr uint8_t kRefWorking = 4;
constexpr uint8_t kRefFrozen = kRefAcked | kRefPending;
constexpr uint32_t kNoBlock = ~0u;  // an entry past the LZ4 block of a compressed chunk

constexpr uint64_t kMaxChunkSize = uint64_t{64} << 20;
constexpr uint64_t kDefaultChunkBlocks = 16;
// Incompressibility probe: three samples of kProbeBytes, for chunks of at
// least kProbeMinChunk bytes.
constexpr uint64_t kProbeBytes = 16 << 10;
constexpr uint64_t kProbeMinChunk = 8 * kProbeBytes;

// One chunk of a file in a compressed store.
struct Chunk {
  uint32_t stored = 0;      // compressed: bytes of its LZ4 block; raw: 0
  uint32_t crc = 0;         // CRC32C of its uncompressed bytes, if crc_valid
  bool compressed = false;
  bool crc_valid = false;
  bool decided = false;     // raw: compression judged since its last change
};

struct Node {
  std::string path;
  uint32_t mode = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  uint64_t ino = 0;
  std::vector<uint32_t> blocks;  // ceil(size / block_size) entries (kNoBlock: see above)
  std::vector<Chunk> chunks;     // compressed stores: ceil(size / chunk_size) entries
  uint32_t crc = 0;
  bool crc_valid = false;
  int open_count = 0;
  bool linked = true;
};
using NodePtr = std::shared_ptr<Node>;

struct Handle {
  NodePtr node;
  int flags = 0;
  uint64_t offset = 0;
};

// A committed (or saved working) version parsed and validated from a slot.
struct Version {
  uint64_t slot = kNoSlot;
  uint64_t epoch = 0;
  const ImageHeader* hdr = nullptr;
  const FileEntry* entries = nullptr;
  const uint32_t* blocks = nullptr;  // all files' blocks, in entry order
  uint64_t block_count = 0;
  const ChunkEntry* chunks = nullptr;  // compressed stores: all files' chunks, in entry order
};

// What undoes a compressed-store write that must not half-happen (see
// WriteCompressedLocked): the state of the chunk holding the old end of file.
// Blocks that chunk gives up during the operation are kept (still referenced)
// until the operation ends.
struct Undo {
  Node* node = nullptr;
  uint64_t size = 0;      // the file's size before
  uint64_t chunk = 0;     // size / chunk_size
  bool has_chunk = false; // the size is not chunk-aligned: that chunk exists
  Chunk saved;
  std::vector<uint32_t> saved_blocks;
  std::vector<uint32_t> kept;
};

uint64_t BlocksFor(uint64_t size, uint64_t bs) { return (size + bs - 1) / bs; }
bool PowerOfTwo(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// "" if the compression fields of a geometry or image header are consistent.
std::string CheckCompression(uint32_t compression, uint32_t chunk_size, uint32_t permille,
                             uint32_t block_size) {
  if (compression == kCompressNone) {
    if (chunk_size != 0 || permille != 0) return "compression fields set without compression";
    return "";
  }
  if (compression != kCompressLz4) return "unknown compression " + std::to_string(compression);
  if (!PowerOfTwo(chunk_size) || chunk_size < 2ull * block_size || chunk_size > kMaxChunkSize) {
    return "chunk size " + std::to_string(chunk_size) +
           " is not a power of two in [2 blocks, 64 MiB]";
  }
  if (permille == 0 || permille > 1000) return "compression threshold out of (0, 1]";
  return "";
}
bool Readable(int flags) { return (flags & O_ACCMODE) != O_WRONLY; }
bool Writable(int flags) { return (flags & O_ACCMODE) != O_RDONLY; }

void CopyIdentity(char (&dst)[kIdentityBytes], std::string_view s) {
  std::memset(dst, 0, sizeof dst);
  std::memcpy(dst, s.data(), std::min(s.size(), sizeof dst - 1));
}

std::string IdentityString(const char (&src)[kIdentityBytes]) {
  return std::string(src, strnlen(src, sizeof src));
}

bool ValidNodeName(std::string_view s) {
  if (s.empty() || s.size() >= kIdentityBytes) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

bool ValidJobName(std::string_view s) {
  return ValidNodeName(s) && s.find('.') == std::string_view::npos;
}

uint32_t GeometryCrc(const Geometry& g) {
  Geometry copy = g;
  copy.crc = 0;
  return Crc32c(&copy, sizeof copy);
}

uint32_t ImageHeaderCrc(const ImageHeader& h) {
  ImageHeader copy = h;
  copy.header_crc = 0;
  return Crc32c(&copy, sizeof copy);
}

uint64_t StateCrc(const StateRecord& r) { return Crc32c(&r, kStateWords * sizeof(uint64_t)); }

// Loads a state record word by word; the CRC tells a torn read.
StateRecord LoadState(const StateRecord* src) {
  StateRecord r;
  auto* in = reinterpret_cast<const uint64_t*>(src);
  auto* out = reinterpret_cast<uint64_t*>(&r);
  out[7] = __atomic_load_n(&in[7], __ATOMIC_ACQUIRE);
  for (size_t i = 0; i < kStateWords; ++i) out[i] = __atomic_load_n(&in[i], __ATOMIC_ACQUIRE);
  return r;
}

bool StateValid(const StateRecord& r) { return r.crc == StateCrc(r); }

// Checks a version's (or image's) file and chunk tables against its header:
// checksums, paths in order, modes, sizes, chunks, byte totals. Returns "" and
// the number of blocks the version fills in *blocks, or what is wrong. The
// header's own checksum and fields are the caller's to check.
std::string CheckTables(const ImageHeader& h, const FileEntry* entries, const ChunkEntry* chunks,
                        uint64_t* blocks) {
  const bool compressed = h.compression != kCompressNone;
  const uint64_t bs = h.block_size, cs = h.chunk_size, nblocks = h.capacity / bs;
  if (h.meta_bytes != sizeof(ImageHeader) + uint64_t{h.nfiles} * sizeof(FileEntry) +
                          h.nchunks * sizeof(ChunkEntry)) {
    return "metadata size mismatch";
  }
  if (compressed ? h.nchunks > nblocks : h.nchunks != 0) return "bad chunk count";
  if (h.entries_crc != Crc32c(entries, uint64_t{h.nfiles} * sizeof(FileEntry))) {
    return "file table checksum mismatch";
  }
  if (h.chunks_crc != Crc32c(chunks, h.nchunks * sizeof(ChunkEntry))) {
    return "chunk table checksum mismatch";
  }
  const uint64_t max_size = compressed ? nblocks * cs : h.capacity;
  uint64_t logical = 0, data = 0, nb = 0, ci = 0;
  for (uint32_t i = 0; i < h.nfiles; ++i) {
    const FileEntry& e = entries[i];
    size_t len = strnlen(e.path, sizeof e.path);
    if (len == 0 || len > kMaxPath) return "bad path in entry " + std::to_string(i);
    if (i > 0 && std::strcmp(entries[i - 1].path, e.path) >= 0) return "entries unsorted";
    if (!S_ISREG(e.mode) && !(S_ISDIR(e.mode) && e.size == 0)) {
      return std::string(e.path) + ": bad mode";
    }
    if (e.size > max_size) return std::string(e.path) + ": size beyond capacity";
    logical += e.size;
    if (!compressed) {
      data += e.size;
      nb += BlocksFor(e.size, bs);
      continue;
    }
    for (uint64_t off = 0; off < e.size; off += cs, ++ci) {
      if (ci >= h.nchunks) return "chunk table too short";
      uint64_t clen = std::min(cs, e.size - off), stored = chunks[ci].stored;
      if (stored > clen || stored == 0 ||
          (stored < clen && BlocksFor(stored, bs) >= BlocksFor(clen, bs))) {
        return std::string(e.path) + ": bad chunk at offset " + std::to_string(off);
      }
      data += stored;
      nb += BlocksFor(stored, bs);
    }
  }
  if (ci != h.nchunks) return "chunk count mismatch";
  if (logical != h.logical_bytes || data != h.data_bytes) return "sizes do not add up";
  *blocks = nb;
  return "";
}

}  // namespace

Result<std::string> StoreName(std::string_view job, std::string_view node, int rank) {
  if (!ValidJobName(job)) {
    return Status::InvalidArgument("invalid job id '" + std::string(job) +
                                   "' (want 1-63 of [A-Za-z0-9_-])");
  }
  if (!ValidNodeName(node)) {
    return Status::InvalidArgument("invalid node name '" + std::string(node) +
                                   "' (want 1-63 of [A-Za-z0-9._-])");
  }
  if (rank < 0) return Status::InvalidArgument("negative rank " + std::to_string(rank));
  return "/dlckpt." + std::string(job) + "." + std::string(node) + ".r" + std::to_string(rank);
}

std::string JobPrefix(std::string_view job) { return "/dlckpt." + std::string(job) + "."; }

Result<Compression> ParseCompression(std::string_view text) {
  std::string t(text);
  for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (t == "none" || t == "off" || t == "0") return Compression::kNone;
  if (t == "lz4") return Compression::kLz4;
  return Status::InvalidArgument("unknown compression '" + std::string(text) + "' (want none or lz4)");
}

const char* CompressionName(Compression c) { return c == Compression::kLz4 ? "lz4" : "none"; }

class Store::Impl {
 public:
  Impl(Env* env, std::unique_ptr<MappedShm> shm, bool owner)
      : env_(env), shm_(std::move(shm)), owner_(owner), base_(shm_->data()) {}

  ~Impl() {
    if (owner_ && !abandoned_) {
      std::lock_guard<std::mutex> lock(mu_);
      SaveWorkingLocked();
    }
  }

  // ---- construction ---------------------------------------------------------

  static Result<std::unique_ptr<Impl>> Create(const std::string& name, const StoreOptions& o,
                                              Env* env) {
    if (o.block_size < 4096 || o.block_size > (16u << 20) ||
        (o.block_size & (o.block_size - 1)) != 0) {
      return Status::InvalidArgument("store " + name + ": block size " +
                                     std::to_string(o.block_size) +
                                     " is not a power of two in [4 KiB, 16 MiB]");
    }
    if (o.capacity == 0) return Status::InvalidArgument("store " + name + ": capacity 0");
    if (o.max_files == 0 || o.max_files > (1u << 20)) {
      return Status::InvalidArgument("store " + name + ": max_files must be in [1, 2^20]");
    }
    if (o.max_open == 0 || o.max_open > (1u << 20)) {
      return Status::InvalidArgument("store " + name + ": max_open must be in [1, 2^20]");
    }
    uint64_t nblocks = BlocksFor(o.capacity, o.block_size);
    if (nblocks >= (uint64_t{1} << 32)) {
      return Status::InvalidArgument("store " + name + ": capacity too large for block size");
    }
    if (!o.job.empty() && !ValidJobName(o.job)) {
      return Status::InvalidArgument("store " + name + ": invalid job id '" + o.job + "'");
    }
    if (!o.node.empty() && !ValidNodeName(o.node)) {
      return Status::InvalidArgument("store " + name + ": invalid node name '" + o.node + "'");
    }
    uint32_t compression = kCompressNone, chunk = 0, permille = 0;
    if (o.compression == Compression::kLz4) {
      if (!(o.compress_threshold > 0 && o.compress_threshold <= 1)) {
        return Status::InvalidArgument("store " + name + ": compression threshold " +
                                       std::to_string(o.compress_threshold) +
                                       " is not in (0, 1]");
      }
      compression = kCompressLz4;
      chunk = o.chunk_size != 0
                  ? o.chunk_size
                  : static_cast<uint32_t>(std::min(kDefaultChunkBlocks * o.block_size, kMaxChunkSize));
      permille = static_cast<uint32_t>(std::lround(o.compress_threshold * 1000));
      permille = std::clamp<uint32_t>(permille, 1, 1000);
      std::string why = CheckCompression(compression, chunk, permille, o.block_size);
      if (!why.empty()) return Status::InvalidArgument("store " + name + ": " + why);
    } else if (o.compression != Compression::kNone) {
      return Status::InvalidArgument("store " + name + ": unknown compression");
    }
    Geometry g{};
    std::memcpy(g.magic, kStoreMagic, sizeof g.magic);
    g.format_version = kFormatVersion;
    g.header_bytes = kHeaderBytes;
    g.block_size = o.block_size;
    g.max_files = o.max_files;
    g.nblocks = nblocks;
    g.capacity = nblocks * o.block_size;
    g.slot_offset = kHeaderBytes;
    g.compression = compression;
    g.chunk_size = chunk;
    g.threshold_permille = permille;
    g.slot_size = SlotSize(o.max_files, nblocks, compression != kCompressNone);
    g.data_offset = AlignUp(g.slot_offset + kNumSlots * g.slot_size, 4096);
    g.shm_size = g.data_offset + g.capacity;
    g.nslots = kNumSlots;
    CopyIdentity(g.job, o.job);
    CopyIdentity(g.node, o.node);
    g.rank = o.rank;
    g.created_ns = env->WallNanos();
    g.crc = GeometryCrc(g);

    DLCKPT_ASSIGN_OR_RETURN(auto shm, env->CreateShm(name, g.shm_size, o.prefault));
    Status locked = shm->TryLockExclusive();
    if (!locked.ok()) {
      (void)env->UnlinkShm(name);
      return locked;
    }
    std::memcpy(shm->data(), &g, sizeof g);
    auto impl = std::make_unique<Impl>(env, std::move(shm), true);
    impl->SetGeometry(g);
    impl->max_open_ = o.max_open;
    impl->refs_.assign(nblocks, 0);
    impl->free_blocks_ = nblocks;
    StateRecord s{};
    s.acked_slot = s.pending_slot = s.working_slot = kNoSlot;
    s.next_epoch = 1;
    impl->state_ = s;
    impl->PublishStateLocked(s);
    impl->PublishStateLocked(s);  // both records valid
    return impl;
  }

  static Result<std::unique_ptr<Impl>> Attach(const std::string& name, AttachMode mode, Env* env,
                                              uint32_t max_open) {
    bool owner = mode == AttachMode::kOwner;
    DLCKPT_ASSIGN_OR_RETURN(auto shm, env->OpenShm(name, owner, mode != AttachMode::kReadOnly));
    if (owner) DLCKPT_RETURN_IF_ERROR(shm->TryLockExclusive());
    auto impl = std::make_unique<Impl>(env, std::move(shm), owner);
    impl->max_open_ = max_open;
    impl->abandoned_ = true;  // until loaded: never write into a store we refused
    DLCKPT_RETURN_IF_ERROR(impl->ValidateGeometry());
    if (owner) {
      DLCKPT_RETURN_IF_ERROR(impl->LoadAsOwner());
      impl->abandoned_ = false;
    } else {
      DLCKPT_RETURN_IF_ERROR(impl->LoadView(0));
    }
    return impl;
  }

  // ---- accessors -------------------------------------------------------------

  const std::string& name() const { return shm_->name(); }
  bool owner() const { return owner_; }

  StoreStats Stats() {
    std::lock_guard<std::mutex> lock(mu_);
    StoreStats st;
    st.capacity = geo_.capacity;
    st.block_size = geo_.block_size;
    st.blocks_total = geo_.nblocks;
    st.blocks_free = owner_ ? free_blocks_ : 0;
    st.blocks_used = owner_ ? geo_.nblocks - free_blocks_ : PublishedBlocksLocked();
    st.max_files = geo_.max_files;
    st.compression = compressed_ ? Compression::kLz4 : Compression::kNone;
    st.chunk_size = geo_.chunk_size;
    st.compress_threshold = geo_.threshold_permille / 1000.0;
    st.job = IdentityString(geo_.job);
    st.node = IdentityString(geo_.node);
    st.rank = geo_.rank;
    st.shm_bytes = geo_.shm_size;
    return st;
  }

  EpochState Epochs() {
    std::lock_guard<std::mutex> lock(mu_);
    StateRecord s;
    if (owner_) {
      s = state_;
    } else {
      auto r = ReadState();
      if (!r.ok()) return {};
      s = *r;
    }
    return EpochState{s.acked_epoch, s.pending_epoch, s.next_epoch};
  }

  // ---- file operations --------------------------------------------------------

  Result<int> Open(std::string_view path, int flags, mode_t mode) {
    std::lock_guard<std::mutex> lock(mu_);
    DLCKPT_RETURN_IF_ERROR(CheckPath(path));
    bool wants_write = Writable(flags) || (flags & (O_CREAT | O_TRUNC));
    if (!owner_ && wants_write) {
      return Status::Error(EROFS, Where(path) + ": store attached read-only");
    }
    NodePtr node;
    auto it = files_.find(path);
    if (it == files_.end()) {
      if (!(flags & O_CREAT)) return Status::NotFound(Where(path) + ": no such file");
      if (files_.size() >= geo_.max_files) {
        return Status::NoSpace(Where(path) + ": file table full (" +
                               std::to_string(geo_.max_files) + " files)");
      }
      node = std::make_shared<Node>();
      node->path = std::string(path);
      node->mode = S_IFREG | (mode & 07777);
      node->mtime_ns = env_->WallNanos();
      node->ino = next_ino_++;
      node->crc = Crc32c(nullptr, 0);
      node->crc_valid = true;
    } else {
      node = it->second;
      if ((flags & O_CREAT) && (flags & O_EXCL)) {
        return Status::Error(EEXIST, Where(path) + ": file exists");
      }
      if (S_ISDIR(node->mode)) {
        if (wants_write) return Status::Error(EISDIR, Where(path) + ": is a directory");
      } else if (flags & O_DIRECTORY) {
        return Status::Error(ENOTDIR, Where(path) + ": not a directory");
      }
    }
    int fd = FreeHandleLocked();
    if (fd < 0) {
      return Status::Error(EMFILE, Where(path) + ": too many open files (" +
                                       std::to_string(max_open_) + ")");
    }
    if (it == files_.end()) files_.emplace(node->path, node);
    if ((flags & O_TRUNC) && Writable(flags) && node->size > 0) {
      DLCKPT_RETURN_IF_ERROR(TruncateLocked(*node, 0));
    }
    handles_[fd] = Handle{node, flags, 0};
    node->open_count++;
    return fd;
  }

  Status Close(int fd) {
    std::lock_guard<std::mutex> lock(mu_);
    DLCKPT_ASSIGN_OR_RETURN(Handle * h, GetHandle(fd));
    NodePtr node = std::move(h->node);
    *h = Handle{};
    if (--node->open_count == 0 && !node->linked) ReleaseNodeLocked(*node);
    return Status::OK();
  }

  Result<size_t> Read(int fd, void* buf, size_t len, const uint64_t* at) {
    std::lock_guard<std::mutex> lock(mu_);
    DLCKPT_ASSIGN_OR_RETURN(Handle * h, GetHandle(fd));
    if (!Readable(h->flags)) return Status::Error(EBADF, Where(fd) + ": not open for reading");
    if (S_ISDIR(h->node->mode)) return Status::Error(EISDIR, Where(fd) + ": is a directory");
    uint64_t off = at ? *at : h->offset;
    DLCKPT_ASSIGN_OR_RETURN(size_t n, ReadAtLocked(*h->node, static_cast<uint8_t*>(buf), len, off));
    if (!at) h->offset = off + n;
    return n;
  }

  Result<size_t> Write(int fd, const void* buf, size_t len, const uint64_t* at) {
    std::lock_guard<std::mutex> lock(mu_);
    DLCKPT_ASSIGN_OR_RETURN(Handle * h, GetHandle(fd));
    if (!Writable(h->flags)) return Status::Error(EBADF, Where(fd) + ": not open for writing");
    if (len == 0) return size_t{0};  // as on Linux, even O_APPEND leaves the offset alone
    // As on Linux, O_APPEND writes at the end even through pwrite.
    uint64_t off = (h->flags & O_APPEND) ? h->node->size : (at ? *at : h->offset);
    DLCKPT_ASSIGN_OR_RETURN(size_t n,
                            WriteAtLocked(*h->node, static_cast<const uint8_t*>(buf), len, off));
    if (!at) h->offset = off + n;
    return n;
  }

  Result<uint64_t> Seek(int fd, int64_t offset, int whence) {
    std::lock_guard<std::mutex> lock(mu_);
    DLCKPT_ASSIGN_OR_RETURN(Handle * h, GetHandle(fd));
    int64_t base;
    switch (whence) {
      case SEEK_SET: base = 0; break;
      case SEEK_CUR: base = static_cast<int64_t>(h->offset); break;
      case SEEK_END: base = static_cast<int64_t>(h->node->size); break;
      case SEEK_DATA:
        if (offset < 0 || static_cast<uint64_t>(offset) >= h->node->size) {
          return Status::Error(ENXIO, Where(fd) + ": SEEK_DATA past end of file");
        }
        h->offset = static_cast<uint64_t>(offset);
        return h->offset;
      case SEEK_HOLE:
        if (offset < 0 || static_cast<uint64_t>(offset) >= h->node->size) {
          return Status::Error(ENXIO, Where(fd) + ": SEEK_HOLE past end of file");
        }
        h->offset = h->node->size;
        return h->offset;
      default: return Status::InvalidArgument(Where(fd) + ": bad whence " + std::to_string(whence));
    }
    int64_t pos;
    if (__builtin_add_overflow(base, offset, &pos)) {
      return Status::Error(EOVERFLOW, Where(fd) + ": offset overflow");
    }
    if (pos < 0) return Status::InvalidArgument(Where(fd) + ": negative offset");
    h->offset = static_cast<uint64_t>(pos);
    return h->offset;
  }

  Status Ftruncate(int fd, uint64_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    DLCKPT_ASSIGN_OR_RETURN(Handle * h, GetHandle(fd));
    if (!Writable(h->flags)) {
      return Status::InvalidArgument(Where(fd) + ": not open for writing");
    }
    if (S_ISDIR(h->node->mode)) return Status::Error(EISDIR, Where(fd) + ": is a directory");
    return TruncateLocked(*h->node, size);
  }

  Status Truncate(std::string_view path, uint64_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    DLCKPT_RETURN_IF_ERROR(CheckPath(path));
    if (!owner_) return Status::Error(EROFS, Where(path) + ": store attached read-only");
    auto it = files_.find(path);
    if (it == files_.end()) return Status::NotFound(Where(path) + ": no such file");
    if (S_ISDIR(it->second->mode)) return Status::Error(EISDIR, Where(path) + ": is a directory");
    return TruncateLocked(*it->second, size);
  }

  Result<FileInfo> Fstat(int fd) {
    std::lock_guard<std::mutex> lock(mu_);
    DLCKPT_ASSIGN_OR_RETURN(Handle * h, GetHandle(fd));
    return InfoLocked(*h->node);
  }

  Result<FileInfo> Stat(std::string_view path) {
    std::lock_guard<std::mutex> lock(mu_);
    DLCKPT_RETURN_IF_ERROR(CheckPath(path));
    auto it = files_.find(path);
    if (it == files_.end()) return Status::NotFound(Where(path) + ": no such file");
    return InfoLocked(*it->second);
  }

  Result<int> OpenFlags(int fd) {
    std::lock_guard<std::mutex> lock(mu_);
    DLCKPT_ASSIGN_OR_RETURN(Handle * h, GetHandle(fd));
    return h->flags;
  }

  Status Unlink(std::string_view path) {
    std::lock_guard<std::mutex> lock(mu_);
    DLCKPT_RETURN_IF_ERROR(CheckPath(path));
    if (!owner_) return Status::Error(EROFS, Where(path) + ": store attached read-only");
    auto it = files_.find(path);
    if (it == files_.end()) return Status::NotFound(Where(path) + ": no such file");
    if (S_ISDIR(it->second->mode)) return Status::Error(EISDIR, Where(path) + ": is a directory");
    DropLinkLocked(it);
    return Status::OK();
  }

  Status Rename(std::string_view from, std::string_view to) {
    std::lock_guard<std::mutex> lock(mu_);
    DLCKPT_RETURN_IF_ERROR(CheckPath(from));
    DLCKPT_RETURN_IF_ERROR(CheckPath(to));
    if (!owner_) return Status::Error(EROFS, Where(from) + ": store attached read-only");
    auto src = files_.find(from);
    if (src == files_.end()) return Status::NotFound(Where(from) + ": no such file");
    if (from == to) return Status::OK();
    NodePtr node = src->second;
    bool is_dir = S_ISDIR(node->mode);
    std::string from_dir = std::string(from) + "/";
    if (is_dir && to.substr(0, from_dir.size()) == from_dir) {
      return Status::InvalidArgument(Where(to) + ": cannot move a directory into itself");
    }
    if (is_dir) {
      for (auto it = files_.lower_bound(from_dir);
           it != files_.end() && it->first.compare(0, from_dir.size(), from_dir) == 0; ++it) {
        if (to.size() + it->first.size() - from.size() > kMaxPath) {
          return Status::Error(ENAMETOOLONG, Where(it->first) + ": path too long after rename");
        }
      }
    }
    auto dst = files_.find(to);
    if (dst != files_.end()) {
      bool dst_dir = S_ISDIR(dst->second->mode);
      if (is_dir && !dst_dir) return Status::Error(ENOTDIR, Where(to) + ": not a directory");
      if (!is_dir && dst_dir) return Status::Error(EISDIR, Where(to) + ": is a directory");
      if (dst_dir && HasChildrenLocked(to)) {
        return Status::Error(ENOTEMPTY, Where(to) + ": directory not empty");
      }
      DropLinkLocked(dst);
    }
    std::string new_path(to);
    files_.erase(files_.find(from));
    node->path = new_path;
    files_.emplace(new_path, node);
    if (is_dir) {
      // Move every path below the directory.
      std::vector<NodePtr> moved;
      for (auto it = files_.lower_bound(from_dir);
           it != files_.end() && it->first.compare(0, from_dir.size(), from_dir) == 0;) {
        moved.push_back(it->second);
        it = files_.erase(it);
      }
      for (auto& m : moved) {
        std::string p = new_path + m->path.substr(from.size());
        m->path = p;
        files_.emplace(p, m);
      }
    }
    return Status::OK();
  }

  Status Mkdir(std::string_view path, mode_t mode) {
    std::lock_guard<std::mutex> lock(mu_);
    DLCKPT_RETURN_IF_ERROR(CheckPath(path));
    if (!owner_) return Status::Error(EROFS, Where(path) + ": store attached read-only");
    if (files_.count(path)) return Status::Error(EEXIST, Where(path) + ": exists");
    if (files_.size() >= geo_.max_files) {
      return Status::NoSpace(Where(path) + ": file table full");
    }
    auto node = std::make_shared<Node>();
    node->path = std::string(path);
    node->mode = S_IFDIR | (mode & 07777);
    node->mtime_ns = env_->WallNanos();
    node->ino = next_ino_++;
    node->crc = Crc32c(nullptr, 0);
    node->crc_valid = true;
    files_.emplace(node->path, node);
    return Status::OK();
  }

  Status Rmdir(std::string_view path) {
    std::lock_guard<std::mutex> lock(mu_);
    DLCKPT_RETURN_IF_ERROR(CheckPath(path));
    if (!owner_) return Status::Error(EROFS, Where(path) + ": store attached read-only");
    auto it = files_.find(path);
    if (it == files_.end()) return Status::NotFound(Where(path) + ": no such directory");
    if (!S_ISDIR(it->second->mode)) return Status::Error(ENOTDIR, Where(path) + ": not a directory");
    if (HasChildrenLocked(path)) return Status::Error(ENOTEMPTY, Where(path) + ": not empty");
    DropLinkLocked(it);
    return Status::OK();
  }

  Result<std::vector<FileInfo>> List(std::string_view prefix) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<FileInfo> out;
    for (auto it = files_.lower_bound(prefix);
         it != files_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
      out.push_back(InfoLocked(*it->second));
    }
    return out;
  }

  // ---- epochs -----------------------------------------------------------------

  Result<uint64_t> Commit(uint64_t want_epoch) {
    std::lock_guard<std::mutex> lock(mu_);
    DLCKPT_RETURN_IF_ERROR(RequireOwner("commit"));
    if (state_.pending_epoch != 0) {
      return Status::Busy("store " + name() + ": epoch " + std::to_string(state_.pending_epoch) +
                          " still awaits acknowledgement");
    }
    uint64_t epoch = want_epoch == 0 ? state_.next_epoch : want_epoch;
    if (epoch < state_.next_epoch) {
      return Status::InvalidArgument("store " + name() + ": epoch " + std::to_string(epoch) +
                                     " is not newer than every epoch seen (next is " +
                                     std::to_string(state_.next_epoch) + ")");
    }
    for (auto& [path, node] : files_) {
      if (!node->crc_valid) {
        DLCKPT_ASSIGN_OR_RETURN(node->crc, NodeCrcLocked(*node));
        node->crc_valid = true;
      }
    }
    uint64_t slot = FreeSlotLocked();
    WriteSlotLocked(slot, epoch, nullptr);
    StateRecord s = state_;
    s.pending_epoch = epoch;
    s.pending_slot = slot;
    s.next_epoch = epoch + 1;
    PublishStateLocked(s);
    pending_blocks_.clear();
    for (auto& [path, node] : files_) {
      for (uint32_t b : node->blocks) {
        if (b == kNoBlock) continue;
        refs_[b] |= kRefPending;
        pending_blocks_.push_back(b);
      }
    }
    return epoch;
  }

  Status Acknowledge(uint64_t epoch) {
    std::lock_guard<std::mutex> lock(mu_);
    DLCKPT_RETURN_IF_ERROR(RequireOwner("acknowledge"));
    return AcknowledgeLocked(epoch);
  }

  Status AbortPending() {
    std::lock_guard<std::mutex> lock(mu_);
    DLCKPT_RETURN_IF_ERROR(RequireOwner("abort"));
    AbortPendingLocked();
    return Status::OK();
  }

  Status Rollback() {
    std::lock_guard<std::mutex> lock(mu_);
    DLCKPT_RETURN_IF_ERROR(RequireOwner("rollback"));
    AbortPendingLocked();
    return ResetWorkingToAckedLocked();
  }

  Status Restore(uint64_t epoch) {
    std::lock_guard<std::mutex> lock(mu_);
    DLCKPT_RETURN_IF_ERROR(RequireOwner("restore"));
    if (epoch != 0 && epoch == state_.pending_epoch) {
      DLCKPT_RETURN_IF_ERROR(AcknowledgeLocked(epoch));
    } else if (epoch == 0 || epoch != state_.acked_epoch) {
      return Status::NotFound("store " + name() + ": epoch " + std::to_string(epoch) +
                              " is not committed here (acknowledged " +
                              std::to_string(state_.acked_epoch) + ", pending " +
                              std::to_string(state_.pending_epoch) + ")");
    }
    AbortPendingLocked();
    return ResetWorkingToAckedLocked();
  }

  Status Verify(uint64_t epoch) {
    std::lock_guard<std::mutex> lock(mu_);
    DLCKPT_ASSIGN_OR_RETURN(Version v, CommittedVersionLocked(epoch));
    return VerifyVersionLocked(v);
  }

  Result<Image> GetImage(uint64_t epoch) {
    std::lock_guard<std::mutex> lock(mu_);
    DLCKPT_ASSIGN_OR_RETURN(Version v, CommittedVersionLocked(epoch));
    Image img;
    img.epoch = epoch;
    const uint64_t head = sizeof(ImageHeader) + uint64_t{v.hdr->nfiles} * sizeof(FileEntry);
    img.extents.push_back(Extent{reinterpret_cast<const uint8_t*>(v.hdr), head});
    if (v.hdr->nchunks > 0) {
      img.extents.push_back(Extent{reinterpret_cast<const uint8_t*>(v.chunks),
                                   v.hdr->nchunks * sizeof(ChunkEntry)});
    }
    img.size = v.hdr->meta_bytes;
    Status walked = ForEachPiece(v, [&](const Piece& pc) {
      uint64_t left = pc.stored;
      for (uint64_t k = 0; left > 0; ++k) {
        uint64_t n = std::min<uint64_t>(left, geo_.block_size);
        const uint8_t* p = BlockPtr(pc.blocks[k]);
        Extent& last = img.extents.back();
        if (last.data + last.len == p) {
          last.len += n;
        } else {
          img.extents.push_back(Extent{p, n});
        }
        img.size += n;
        left -= n;
      }
      return Status::OK();
    });
    DLCKPT_RETURN_IF_ERROR(walked);
    return img;
  }

  Status View(uint64_t epoch) {
    std::lock_guard<std::mutex> lock(mu_);
    if (owner_) return Status::InvalidArgument("store " + name() + ": View is for read-only attach");
    return LoadView(epoch);
  }

  // ---- used by ImageBuilder -----------------------------------------------------

  // Creates a node exactly as described by an image entry (owner, empty store).
  Status AddEntryLocked(const FileEntry& e) {
    auto node = std::make_shared<Node>();
    node->path = e.path;
    node->mode = e.mode;
    node->mtime_ns = e.mtime_ns;
    node->ino = e.ino;
    next_ino_ = std::max(next_ino_, e.ino + 1);
    files_.emplace(node->path, node);
    return Status::OK();
  }
  // Uncompressed stores: appends raw file bytes.
  Result<size_t> AppendLocked(const std::string& path, const uint8_t* p, size_t n) {
    Node& node = *files_.at(path);
    return WriteAtLocked(node, p, n, node.size);
  }
  // Compressed stores: appends bytes [at, at + n) of chunk `ci` of `path` as
  // stored in an image (verbatim, no recompression). Chunks arrive in order;
  // `at` 0 starts chunk ci, of `len` uncompressed bytes and `stored` bytes.
  Status AppendStoredLocked(const std::string& path, uint64_t ci, uint64_t len,
                            const ChunkEntry& ce, uint64_t at, const uint8_t* p, size_t n) {
    Node& node = *files_.at(path);
    const uint64_t bs = geo_.block_size, first = ci * cpb_;
    if (at == 0) {
      Chunk c;
      c.compressed = ce.stored < len;
      c.stored = c.compressed ? ce.stored : 0;
      c.crc = ce.crc32c;
      c.crc_valid = c.decided = true;
      node.chunks.push_back(c);
      node.blocks.resize(first + BlocksFor(len, bs), kNoBlock);
      node.size = ci * geo_.chunk_size + len;
    }
    while (n > 0) {
      uint64_t j = first + at / bs, bo = at % bs;
      size_t piece = static_cast<size_t>(std::min<uint64_t>(bs - bo, n));
      if (node.blocks[j] == kNoBlock) {
        if (free_blocks_ == 0) return Status::NoSpace("rebuilt store " + name() + ": full");
        node.blocks[j] = AllocBlockLocked();
      }
      std::memcpy(BlockPtr(node.blocks[j]) + bo, p, piece);
      at += piece;
      p += piece;
      n -= piece;
    }
    return Status::OK();
  }
  // Publishes the version with the given image metadata bytes as acknowledged.
  Status PublishImageLocked(const uint8_t* meta, uint64_t epoch) {
    uint64_t slot = 0;
    WriteSlotLocked(slot, epoch, meta);
    StateRecord s = state_;
    s.acked_epoch = epoch;
    s.acked_slot = slot;
    s.next_epoch = epoch + 1;
    PublishStateLocked(s);
    acked_blocks_.clear();
    for (auto& [path, node] : files_) {
      node->crc_valid = false;
      for (uint32_t b : node->blocks) {
        if (b == kNoBlock) continue;
        refs_[b] |= kRefAcked;
        acked_blocks_.push_back(b);
      }
    }
    return Status::OK();
  }
  // Verifies the published acknowledged version (every CRC, over the
  // uncompressed bytes).
  Status VerifyAckedLocked() {
    DLCKPT_ASSIGN_OR_RETURN(Version v, ParseSlotLocked(state_.acked_slot, state_.acked_epoch));
    return VerifyVersionLocked(v);
  }
  std::mutex& mu() { return mu_; }
  const Geometry& geometry() const { return geo_; }
  void Abandon() { abandoned_ = true; }

 private:
  // ---- helpers ------------------------------------------------------------------

  std::string Where(std::string_view path) const {
    return "store " + name() + ": " + std::string(path);
  }
  std::string Where(int fd) const {
    return "store " + name() + ": fd " + std::to_string(fd);
  }
  static std::string Hex(uint32_t v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%08x", v);
    return buf;
  }

  Status CheckPath(std::string_view path) const {
    if (path.empty()) return Status::NotFound("store " + name() + ": empty path");
    if (path.size() > kMaxPath) {
      return Status::Error(ENAMETOOLONG, "store " + name() + ": path of " +
                                             std::to_string(path.size()) +
                                             " bytes exceeds " + std::to_string(kMaxPath));
    }
    if (path.find('\0') != std::string_view::npos) {
      return Status::InvalidArgument("store " + name() + ": path contains NUL");
    }
    return Status::OK();
  }

  Status RequireOwner(const char* what) const {
    if (owner_) return Status::OK();
    return Status::Error(EROFS, "store " + name() + ": " + what + " needs the owner attachment");
  }

  uint8_t* BlockPtr(uint32_t b) const { return data_ + uint64_t{b} * geo_.block_size; }

  int FreeHandleLocked() {
    for (size_t i = 0; i < handles_.size(); ++i) {
      if (!handles_[i].node) return static_cast<int>(i);
    }
    if (handles_.size() >= max_open_) return -1;
    handles_.emplace_back();
    return static_cast<int>(handles_.size() - 1);
  }

  Result<Handle*> GetHandle(int fd) {
    if (fd < 0 || static_cast<size_t>(fd) >= handles_.size() || !handles_[fd].node) {
      return Status::Error(EBADF, Where(fd) + ": bad file descriptor");
    }
    return &handles_[fd];
  }

  FileInfo InfoLocked(const Node& n) const {
    FileInfo fi;
    fi.path = n.path;
    fi.size = n.size;
    fi.mode = n.mode;
    fi.mtime_ns = n.mtime_ns;
    fi.ino = n.ino;
    fi.crc32c = n.crc_valid ? n.crc : 0;
    fi.blocks = static_cast<uint64_t>(n.blocks.size()) -
                static_cast<uint64_t>(std::count(n.blocks.begin(), n.blocks.end(), kNoBlock));
    return fi;
  }

  bool HasChildrenLocked(std::string_view dir) const {
    std::string prefix = std::string(dir) + "/";
    auto it = files_.lower_bound(prefix);
    return it != files_.end() && it->first.compare(0, prefix.size(), prefix) == 0;
  }

  template <class It>
  void DropLinkLocked(It it) {
    NodePtr node = it->second;
    files_.erase(it);
    node->linked = false;
    if (node->open_count == 0) ReleaseNodeLocked(*node);
  }

  void ReleaseBlockLocked(uint32_t b) {
    refs_[b] &= static_cast<uint8_t>(~kRefWorking);
    if (refs_[b] == 0) free_blocks_++;
  }

  void ReleaseNodeLocked(Node& node) {
    for (uint32_t b : node.blocks) {
      if (b != kNoBlock) ReleaseBlockLocked(b);
    }
    node.blocks.clear();
    node.chunks.clear();
    node.size = 0;
  }

  // Finds a free block (one must exist), preferring the one after the last.
  uint32_t AllocBlockLocked() {
    uint64_t n = geo_.nblocks;
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t b = cursor_ + i;
      if (b >= n) b -= n;
      if (refs_[b] == 0) {
        refs_[b] = kRefWorking;
        free_blocks_--;
        cursor_ = b + 1 == n ? 0 : b + 1;
        if (b == cache_block_) cache_block_ = kNoBlock;  // the cached chunk's block is reused
        return static_cast<uint32_t>(b);
      }
    }
    std::abort();  // free_blocks_ said there was one: the allocator's invariant broke
  }

  Result<size_t> ReadAtLocked(const Node& node, uint8_t* out, size_t len, uint64_t off) {
    if (off >= node.size) return size_t{0};
    size_t n = static_cast<size_t>(std::min<uint64_t>(len, node.size - off));
    const uint64_t bs = geo_.block_size;
    size_t done = 0;
    while (done < n) {
      uint64_t pos = off + done;
      if (compressed_) {
        uint64_t ci = pos / geo_.chunk_size;
        if (node.chunks[ci].compressed) {
          DLCKPT_ASSIGN_OR_RETURN(const uint8_t* raw, DecompressedLocked(node, ci));
          uint64_t co = pos - ci * geo_.chunk_size;
          size_t piece = static_cast<size_t>(std::min<uint64_t>(ChunkLen(node, ci) - co, n - done));
          std::memcpy(out + done, raw + co, piece);
          done += piece;
          continue;
        }
      }
      uint64_t bi = pos / bs, bo = pos % bs;
      size_t piece = static_cast<size_t>(std::min<uint64_t>(bs - bo, n - done));
      std::memcpy(out + done, BlockPtr(node.blocks[bi]) + bo, piece);
      done += piece;
    }
    return n;
  }

  // The largest size a file may have: a compressed chunk fills one block at
  // least, so a compressed store holds at most nblocks chunks.
  uint64_t MaxFileSize() const {
    return compressed_ ? geo_.nblocks * geo_.chunk_size : geo_.capacity;
  }

  // Writes `len` bytes of `src` (zeros if null) at `off`, zero-filling any gap
  // between the old end of file and `off`. Writes as much as fits: returns the
  // count written, or ENOSPC if nothing fits. Never leaves a partial block
  // allocation behind.
  Result<size_t> WriteAtLocked(Node& node, const uint8_t* src, size_t len, uint64_t off) {
    if (len == 0) return size_t{0};
    if (S_ISDIR(node.mode)) return Status::Error(EISDIR, Where(node.path) + ": is a directory");
    const uint64_t limit = MaxFileSize();
    if (off >= limit) {
      return Status::NoSpace(Where(node.path) + ": offset " + std::to_string(off) +
                             " beyond the store's capacity");
    }
    uint64_t end = std::min<uint64_t>(off + std::min<uint64_t>(len, limit), limit);
    if (compressed_) return WriteCompressedLocked(node, src, off, end, off + 1);
    uint64_t reached = WriteRangeLocked(node, src, off, std::min(off, node.size), end, off + 1);
    if (reached <= off) return FullLocked(node);
    return static_cast<size_t>(reached - off);
  }

  Status FullLocked(const Node& node) const {
    return Status::NoSpace(Where(node.path) + ": store full (" + std::to_string(geo_.capacity) +
                           " bytes, " + std::to_string(free_blocks_) + " blocks free)");
  }

  // Writes file positions [from, to) (from <= size) block by block: bytes
  // below `off` are zeros, the others src[pos - off] (zeros if src is null).
  // Counts the blocks first and writes only up to the first block that does
  // not fit, and nothing at all if that end would be below `need`. Returns
  // the position reached. Compressed stores: no compressed chunk may overlap
  // the range; the chunks written become raw and undecided.
  uint64_t WriteRangeLocked(Node& node, const uint8_t* src, uint64_t off, uint64_t from,
                            uint64_t to, uint64_t need) {
    const uint64_t bs = geo_.block_size;
    uint64_t budget = free_blocks_;
    uint64_t first_b = from / bs, last_b = (to - 1) / bs;
    uint64_t end = to;
    for (uint64_t b = first_b; b <= last_b; ++b) {
      bool fresh = b >= node.blocks.size() || node.blocks[b] == kNoBlock ||
                   (refs_[node.blocks[b]] & kRefFrozen);
      if (!fresh) continue;
      if (budget == 0) {
        end = b * bs;
        break;
      }
      budget--;
    }
    if (end < need || end <= from) return from;
    for (uint64_t pos = from; pos < end;) {
      uint64_t bi = pos / bs, bo = pos % bs;
      uint64_t piece = std::min(bs - bo, end - pos);
      uint8_t* blk;
      if (bi >= node.blocks.size()) {
        uint32_t b = AllocBlockLocked();
        node.blocks.push_back(b);
        blk = BlockPtr(b);
      } else if (node.blocks[bi] == kNoBlock) {
        // A dropped compressed chunk: its old bytes are all being overwritten.
        node.blocks[bi] = AllocBlockLocked();
        blk = BlockPtr(node.blocks[bi]);
      } else if (refs_[node.blocks[bi]] & kRefFrozen) {
        // Copy-on-write: the committed bytes stay where they are.
        uint32_t old = node.blocks[bi];
        uint32_t b = AllocBlockLocked();
        blk = BlockPtr(b);
        if (piece < bs) std::memcpy(blk, BlockPtr(old), bs);
        node.blocks[bi] = b;
        DropWorkingRefLocked(node, bi, old);
      } else {
        blk = BlockPtr(node.blocks[bi]);
      }
      // [pos, pos + piece) splits into a hole part (< off) and a data part.
      uint64_t hole_end = std::min(std::max(pos, off), pos + piece);
      if (hole_end > pos) std::memset(blk + bo, 0, hole_end - pos);
      if (pos + piece > hole_end) {
        uint64_t n = pos + piece - hole_end;
        if (src) {
          std::memcpy(blk + bo + (hole_end - pos), src + (hole_end - off), n);
        } else {
          std::memset(blk + bo + (hole_end - pos), 0, n);
        }
      }
      pos += piece;
      if (pos > node.size) node.size = pos;
    }
    if (compressed_) {
      const uint64_t cs = geo_.chunk_size;
      node.chunks.resize(BlocksFor(node.size, cs));
      for (uint64_t ci = from / cs; ci <= (end - 1) / cs; ++ci) {
        node.chunks[ci].decided = false;
        node.chunks[ci].crc_valid = false;
      }
    }
    node.crc_valid = false;
    node.mtime_ns = env_->WallNanos();
    return end;
  }

  Status TruncateLocked(Node& node, uint64_t size) {
    if (size > node.size) {
      // Extend with zeros; all-or-nothing.
      uint64_t old = node.size;
      if (compressed_) {
        if (size > MaxFileSize()) return TooBigLocked(node, size);
        return WriteCompressedLocked(node, nullptr, old, size, size).status();
      }
      DLCKPT_ASSIGN_OR_RETURN(size_t n, WriteAtLocked(node, nullptr, size - old, old));
      if (old + n < size) {
        // Undo the partial extension.
        DLCKPT_RETURN_IF_ERROR(ShrinkLocked(node, old));
        return TooBigLocked(node, size);
      }
      return Status::OK();
    }
    if (size < node.size) DLCKPT_RETURN_IF_ERROR(ShrinkLocked(node, size));
    node.mtime_ns = env_->WallNanos();
    return Status::OK();
  }

  Status TooBigLocked(const Node& node, uint64_t size) const {
    return Status::NoSpace(Where(node.path) + ": store full, cannot extend to " +
                           std::to_string(size) + " bytes");
  }

  // Cuts the file to `size` bytes. Cannot fail in an uncompressed store; in a
  // compressed one, a cut inside a compressed chunk decompresses it (ENOSPC).
  Status ShrinkLocked(Node& node, uint64_t size) {
    const uint64_t cs = geo_.chunk_size;
    if (compressed_ && size % cs != 0 && node.chunks[size / cs].compressed) {
      DLCKPT_RETURN_IF_ERROR(ExpandLocked(node, size / cs));
    }
    uint64_t keep = BlocksFor(size, geo_.block_size);
    for (uint64_t i = keep; i < node.blocks.size(); ++i) {
      if (node.blocks[i] != kNoBlock) ReleaseBlockLocked(node.blocks[i]);
    }
    node.blocks.resize(keep);
    node.size = size;
    node.crc_valid = false;
    if (compressed_) {
      node.chunks.resize(BlocksFor(size, cs));
      if (size % cs != 0) {
        node.chunks.back().decided = false;
        node.chunks.back().crc_valid = false;
      }
    }
    return Status::OK();
  }

  // The CRC32C of a file's bytes. Compressed stores: from the chunks' CRCs,
  // compressing (or judging) the chunks still undecided first.
  Result<uint32_t> NodeCrcLocked(Node& node) {
    if (!compressed_) {
      uint32_t crc = 0;
      uint64_t left = node.size;
      for (uint32_t b : node.blocks) {
        uint64_t n = std::min<uint64_t>(left, geo_.block_size);
        crc = Crc32c(BlockPtr(b), n, crc);
        left -= n;
      }
      return crc;
    }
    uint32_t crc = 0;
    for (uint64_t ci = 0; ci < node.chunks.size(); ++ci) {
      Chunk& c = node.chunks[ci];
      uint64_t len = ChunkLen(node, ci);
      if (!c.compressed && !c.decided) TryCompressLocked(node, ci);
      if (!c.crc_valid) {
        const uint8_t* raw;
        if (c.compressed) {
          DLCKPT_ASSIGN_OR_RETURN(raw, DecompressedLocked(node, ci));
        } else {
          raw = ContiguousLocked(&node.blocks[ci * cpb_], len, &gather_);
        }
        c.crc = Crc32c(raw, len);
        c.crc_valid = true;
      }
      crc = Crc32cCombine(crc, c.crc, len);
    }
    return crc;
  }

  // ---- compression --------------------------------------------------------------
  //
  // Chunk ci of a node covers bytes [ci * chunk_size, ...) and block entries
  // [ci * cpb_, ...). Its blocks are given up through DropWorkingRefLocked, so
  // that an Undo in progress can keep them.

  uint64_t ChunkLen(const Node& node, uint64_t ci) const {
    return std::min<uint64_t>(geo_.chunk_size, node.size - ci * geo_.chunk_size);
  }

  uint64_t ChunkEntries(const Node& node, uint64_t ci) const {
    return std::min<uint64_t>(cpb_, node.blocks.size() - ci * cpb_);
  }

  bool UndoKeepsLocked(const Node& node, uint64_t bi) const {
    return undo_ != nullptr && undo_->node == &node && undo_->has_chunk && bi / cpb_ == undo_->chunk;
  }

  // The working copy stops using block `b` (entry `bi` of `node`).
  void DropWorkingRefLocked(const Node& node, uint64_t bi, uint32_t b) {
    if (compressed_ && UndoKeepsLocked(node, bi)) {
      undo_->kept.push_back(b);
    } else {
      ReleaseBlockLocked(b);
    }
  }

  // Blocks that dropping chunk ci would free now.
  uint64_t ReclaimableLocked(const Node& node, uint64_t ci) const {
    uint64_t first = ci * cpb_;
    if (ci >= node.chunks.size() || UndoKeepsLocked(node, first)) return 0;
    uint64_t n = 0;
    for (uint64_t i = first; i < first + ChunkEntries(node, ci); ++i) {
      uint32_t b = node.blocks[i];
      if (b != kNoBlock && refs_[b] == kRefWorking) ++n;
    }
    return n;
  }

  // Gives up every block of chunk ci; its entries become kNoBlock and it a
  // raw, undecided chunk without bytes (the caller fills it at once).
  void DropChunkLocked(Node& node, uint64_t ci) {
    uint64_t first = ci * cpb_;
    for (uint64_t i = first; i < first + ChunkEntries(node, ci); ++i) {
      if (node.blocks[i] != kNoBlock) DropWorkingRefLocked(node, i, node.blocks[i]);
      node.blocks[i] = kNoBlock;
    }
    node.chunks[ci] = Chunk{};
  }

  // Copies `n` bytes into fresh blocks set as entries first, first + 1, ...
  void FillFreshLocked(Node& node, uint64_t first, const uint8_t* p, uint64_t n) {
    const uint64_t bs = geo_.block_size;
    for (uint64_t j = 0; j * bs < n; ++j) {
      uint32_t b = AllocBlockLocked();
      node.blocks[first + j] = b;
      std::memcpy(BlockPtr(b), p + j * bs, std::min(bs, n - j * bs));
    }
  }

  // `n` bytes held by `blocks`: in place if the blocks are consecutive, else
  // gathered into *buf.
  const uint8_t* ContiguousLocked(const uint32_t* blocks, uint64_t n, std::vector<uint8_t>* buf) const {
    const uint64_t bs = geo_.block_size, k = BlocksFor(n, bs);
    bool consecutive = true;
    for (uint64_t j = 1; j < k && consecutive; ++j) consecutive = blocks[j] == blocks[0] + j;
    if (consecutive) return BlockPtr(blocks[0]);
    if (buf->size() < k * bs) buf->resize(k * bs);
    for (uint64_t j = 0; j < k; ++j) {
      std::memcpy(buf->data() + j * bs, BlockPtr(blocks[j]), std::min(bs, n - j * bs));
    }
    return buf->data();
  }

  // Decompresses the `stored`-byte LZ4 block held in `blocks` into out[len].
  Status DecompressLocked(const uint32_t* blocks, uint64_t stored, uint8_t* out, uint64_t len,
                          const std::string& what) {
    const uint8_t* src = ContiguousLocked(blocks, stored, &gather_);
    int r = LZ4_decompress_safe(reinterpret_cast<const char*>(src), reinterpret_cast<char*>(out),
                                static_cast<int>(stored), static_cast<int>(len));
    if (r < 0 || static_cast<uint64_t>(r) != len) {
      return Status::Corruption(what + ": damaged compressed data (" + std::to_string(stored) +
                                " bytes do not decompress to " + std::to_string(len) + ")");
    }
    return Status::OK();
  }

  // The uncompressed bytes of compressed chunk ci, through a one-chunk cache
  // keyed by the chunk's first block (blocks of a chunk stream never change
  // while allocated; AllocBlockLocked and LoadView invalidate the key).
  Result<const uint8_t*> DecompressedLocked(const Node& node, uint64_t ci) {
    const Chunk& c = node.chunks[ci];
    const uint32_t* blocks = &node.blocks[ci * cpb_];
    uint64_t len = ChunkLen(node, ci);
    if (cache_block_ == blocks[0] && cache_stored_ == c.stored && cache_len_ == len) {
      return cache_.data();
    }
    cache_block_ = kNoBlock;
    if (cache_.size() < geo_.chunk_size) cache_.resize(geo_.chunk_size);
    DLCKPT_RETURN_IF_ERROR(DecompressLocked(blocks, c.stored, cache_.data(), len,
                                            Where(node.path) + ": chunk at offset " +
                                                std::to_string(ci * geo_.chunk_size)));
    cache_block_ = blocks[0];
    cache_stored_ = c.stored;
    cache_len_ = len;
    return cache_.data();
  }

  // Compresses in[0, len) into cbuf_ if that is worth it: returns the LZ4
  // block's size, or 0 to keep the chunk raw (it would not fill at most
  // threshold * its raw blocks and fewer blocks than raw, or the probe says it
  // is incompressible).
  uint32_t CompressLocked(const uint8_t* in, uint64_t len) {
    const uint64_t bs = geo_.block_size, nraw = BlocksFor(len, bs);
    if (nraw < 2) return 0;
    uint64_t max_blocks = std::min(nraw - 1, nraw * geo_.threshold_permille / 1000);
    if (max_blocks == 0) return 0;
    if (cbuf_.empty()) cbuf_.resize(static_cast<size_t>(LZ4_compressBound(static_cast<int>(geo_.chunk_size))));
    auto* out = reinterpret_cast<char*>(cbuf_.data());
    if (len >= kProbeMinChunk) {
      // Three samples (start, middle, end): if they do not shrink to halfway
      // between the threshold and 1, do not try the whole chunk.
      uint64_t sampled = 0;
      for (uint64_t k = 0; k < 3; ++k) {
        uint64_t at = (len - kProbeBytes) * k / 2;
        int r = LZ4_compress_default(reinterpret_cast<const char*>(in + at), out,
                                     static_cast<int>(kProbeBytes), static_cast<int>(cbuf_.size()));
        sampled += r > 0 ? static_cast<uint64_t>(r) : kProbeBytes;
      }
      if (sampled * 2000 > 3 * kProbeBytes * (1000 + geo_.threshold_permille)) return 0;
    }
    // The unbounded output path: 2-3x faster than LZ4's bounded one on
    // compressible data, which is what passes the probe.
    int r = LZ4_compress_default(reinterpret_cast<const char*>(in), out, static_cast<int>(len),
                                 static_cast<int>(cbuf_.size()));
    if (r <= 0 || BlocksFor(static_cast<uint64_t>(r), bs) > max_blocks) return 0;
    return static_cast<uint32_t>(r);
  }

  // Judges raw, undecided chunk ci (and computes its CRC): compresses it into
  // fewer blocks if that is worth it and the blocks are there.
  void TryCompressLocked(Node& node, uint64_t ci) {
    Chunk& c = node.chunks[ci];
    if (c.compressed || c.decided) return;
    uint64_t len = ChunkLen(node, ci), first = ci * cpb_;
    const uint8_t* in = ContiguousLocked(&node.blocks[first], len, &gather_);
    c.crc = Crc32c(in, len);
    c.crc_valid = true;
    c.decided = true;
    uint32_t n = CompressLocked(in, len);
    if (n == 0 || BlocksFor(n, geo_.block_size) > free_blocks_ + ReclaimableLocked(node, ci)) return;
    uint32_t crc = c.crc;
    DropChunkLocked(node, ci);
    FillFreshLocked(node, first, cbuf_.data(), n);
    node.chunks[ci] = Chunk{n, crc, true, true, true};
  }

  // Writes a whole chunk ci (chunk_size bytes: `data`, or zeros if null)
  // straight from the buffer, compressed if worth it. False if the blocks are
  // not there (nothing changed).
  bool StoreWholeChunkLocked(Node& node, uint64_t ci, const uint8_t* data) {
    const uint64_t cs = geo_.chunk_size;
    if (data == nullptr) {
      if (zeros_.size() < cs) zeros_.assign(cs, 0);
      data = zeros_.data();
    }
    uint32_t crc = Crc32c(data, cs);
    uint32_t n = CompressLocked(data, cs);
    uint64_t need = n ? BlocksFor(n, geo_.block_size) : cpb_;
    if (need > free_blocks_ + ReclaimableLocked(node, ci)) return false;
    uint64_t first = ci * cpb_;
    if (ci < node.chunks.size()) DropChunkLocked(node, ci);
    if (node.blocks.size() < first + cpb_) node.blocks.resize(first + cpb_, kNoBlock);
    FillFreshLocked(node, first, n ? cbuf_.data() : data, n ? n : cs);
    node.size = std::max(node.size, (ci + 1) * cs);
    if (node.chunks.size() < ci + 1) node.chunks.resize(ci + 1);
    node.chunks[ci] = Chunk{n, crc, n != 0, true, true};
    node.crc_valid = false;
    node.mtime_ns = env_->WallNanos();
    return true;
  }

  // Compressed chunk ci becomes raw (same bytes) in fresh blocks; ENOSPC if
  // they are not there (nothing changed).
  Status ExpandLocked(Node& node, uint64_t ci) {
    uint64_t len = ChunkLen(node, ci), nraw = BlocksFor(len, geo_.block_size);
    uint64_t avail = free_blocks_ + ReclaimableLocked(node, ci);
    if (nraw > avail) {
      return Status::NoSpace(Where(node.path) + ": store full (decompressing the chunk at offset " +
                             std::to_string(ci * geo_.chunk_size) + " needs " +
                             std::to_string(nraw) + " blocks, " + std::to_string(avail) +
                             " available)");
    }
    DLCKPT_ASSIGN_OR_RETURN(const uint8_t* raw, DecompressedLocked(node, ci));
    Chunk keep = node.chunks[ci];
    DropChunkLocked(node, ci);
    FillFreshLocked(node, ci * cpb_, raw, len);  // cache_ stays intact while blocks are allocated
    node.chunks[ci] = Chunk{0, keep.crc, false, keep.crc_valid, false};
    return Status::OK();
  }

  // Compressed stores: the write of [off, end) (zeros below off from the old
  // end of file, src or zeros from off). Chunk by chunk: whole chunks go
  // straight from the buffer; others are written raw (a compressed chunk is
  // dropped if all its bytes are overwritten, else decompressed first) and
  // compressed when the write reaches their end. If less than up to `need`
  // is written, everything is undone (the chunk holding the old end of file
  // included) and the result is ENOSPC; otherwise the byte count from off.
  Result<size_t> WriteCompressedLocked(Node& node, const uint8_t* src, uint64_t off, uint64_t end,
                                       uint64_t need) {
    const uint64_t cs = geo_.chunk_size;
    Undo u;
    u.node = &node;
    u.size = node.size;
    u.chunk = node.size / cs;
    u.has_chunk = node.size % cs != 0;
    if (u.has_chunk) {
      u.saved = node.chunks[u.chunk];
      u.saved_blocks.assign(node.blocks.begin() + static_cast<long>(u.chunk * cpb_), node.blocks.end());
    }
    undo_ = &u;
    Result<uint64_t> reached = WriteChunksLocked(node, src, off, end);
    undo_ = nullptr;
    if (!reached.ok() || *reached < need) {
      RollBackLocked(node, u);
      if (!reached.ok()) return reached.status();
      return FullLocked(node);
    }
    for (uint32_t b : u.kept) ReleaseBlockLocked(b);
    return static_cast<size_t>(*reached - off);
  }

  Result<uint64_t> WriteChunksLocked(Node& node, const uint8_t* src, uint64_t off, uint64_t end) {
    const uint64_t cs = geo_.chunk_size;
    uint64_t pos = std::min(off, node.size);
    while (pos < end) {
      uint64_t ci = pos / cs, c0 = ci * cs, c1 = c0 + cs, b = std::min(end, c1);
      if (pos == c0 && b == c1 && (b <= off || pos >= off)) {
        const uint8_t* data = (b <= off || src == nullptr) ? nullptr : src + (pos - off);
        if (StoreWholeChunkLocked(node, ci, data)) {
          pos = c1;
          continue;
        }
      }
      if (ci < node.chunks.size() && node.chunks[ci].compressed) {
        if (pos == c0 && b >= c0 + ChunkLen(node, ci)) {
          // Every byte of the chunk is overwritten: no need to decompress.
          if (BlocksFor(b - c0, geo_.block_size) > free_blocks_ + ReclaimableLocked(node, ci)) {
            return pos;
          }
          DropChunkLocked(node, ci);
        } else {
          Status s = ExpandLocked(node, ci);
          if (s.code() == ENOSPC) return pos;
          DLCKPT_RETURN_IF_ERROR(s);
        }
      }
      uint64_t r = WriteRangeLocked(node, src, off, pos, b, pos + 1);
      if (r < b) return r;
      pos = b;
      if (b == c1) TryCompressLocked(node, ci);
    }
    return pos;
  }

  // Restores the file as it was before the write that `u` journaled.
  void RollBackLocked(Node& node, const Undo& u) {
    auto saved = [&](uint32_t b) {
      return std::find(u.saved_blocks.begin(), u.saved_blocks.end(), b) != u.saved_blocks.end();
    };
    uint64_t first = u.chunk * cpb_;
    for (uint64_t i = first; i < node.blocks.size(); ++i) {
      uint32_t b = node.blocks[i];
      if (b != kNoBlock && !saved(b)) ReleaseBlockLocked(b);
    }
    for (uint32_t b : u.kept) {
      if (!saved(b)) ReleaseBlockLocked(b);
    }
    node.blocks.resize(first);
    node.blocks.insert(node.blocks.end(), u.saved_blocks.begin(), u.saved_blocks.end());
    node.chunks.resize(u.chunk);
    if (u.has_chunk) node.chunks.push_back(u.saved);
    node.size = u.size;
  }

  // ---- slots and state ------------------------------------------------------

  uint8_t* SlotPtr(uint64_t slot) const { return base_ + geo_.slot_offset + slot * geo_.slot_size; }

  uint64_t FreeSlotLocked() const {
    for (uint64_t s = 0; s < kNumSlots; ++s) {
      if (s != state_.acked_slot && s != state_.pending_slot && s != state_.working_slot) return s;
    }
    std::abort();  // at most two slots are referenced while the owner runs
  }

  // Serialises the working files into `slot`. With `meta`, the image header and
  // entries are copied verbatim from it (an image being rebuilt).
  void WriteSlotLocked(uint64_t slot, uint64_t epoch, const uint8_t* meta) {
    uint8_t* p = SlotPtr(slot);
    auto* hdr = reinterpret_cast<ImageHeader*>(p);
    auto* entries = reinterpret_cast<FileEntry*>(p + sizeof(ImageHeader));
    auto* ctab = reinterpret_cast<ChunkEntry*>(p + ChunkTableOffset(geo_.max_files));
    uint32_t nfiles = static_cast<uint32_t>(files_.size());
    if (meta) {
      const auto* mh = reinterpret_cast<const ImageHeader*>(meta);
      uint64_t head = sizeof(ImageHeader) + uint64_t{mh->nfiles} * sizeof(FileEntry);
      std::memcpy(p, meta, head);
      if (mh->nchunks > 0) std::memcpy(ctab, meta + head, mh->nchunks * sizeof(ChunkEntry));
    } else {
      ImageHeader h{};
      std::memcpy(h.magic, kImageMagic, sizeof h.magic);
      h.format_version = kFormatVersion;
      h.nfiles = nfiles;
      h.epoch = epoch;
      h.capacity = geo_.capacity;
      h.block_size = geo_.block_size;
      h.max_files = geo_.max_files;
      std::memcpy(h.job, geo_.job, sizeof h.job);
      h.rank = geo_.rank;
      h.commit_ns = env_->WallNanos();
      h.compression = geo_.compression;
      h.chunk_size = geo_.chunk_size;
      h.threshold_permille = geo_.threshold_permille;
      uint32_t i = 0;
      for (auto& [path, node] : files_) {
        FileEntry e{};
        std::memcpy(e.path, path.data(), path.size());
        e.size = node->size;
        e.ino = node->ino;
        e.mtime_ns = node->mtime_ns;
        e.mode = node->mode;
        e.crc32c = (epoch != 0 && node->crc_valid) ? node->crc : 0;
        h.logical_bytes += node->size;
        if (compressed_) {
          for (uint64_t ci = 0; ci < node->chunks.size(); ++ci) {
            const Chunk& c = node->chunks[ci];
            ChunkEntry ce{};
            ce.stored = c.compressed ? c.stored : static_cast<uint32_t>(ChunkLen(*node, ci));
            ce.crc32c = (epoch != 0 && c.crc_valid) ? c.crc : 0;
            h.data_bytes += ce.stored;
            std::memcpy(&ctab[h.nchunks++], &ce, sizeof ce);
          }
        } else {
          h.data_bytes += node->size;
        }
        std::memcpy(&entries[i++], &e, sizeof e);
      }
      h.meta_bytes = sizeof(ImageHeader) + uint64_t{nfiles} * sizeof(FileEntry) +
                     h.nchunks * sizeof(ChunkEntry);
      h.entries_crc = Crc32c(entries, uint64_t{nfiles} * sizeof(FileEntry));
      h.chunks_crc = Crc32c(ctab, h.nchunks * sizeof(ChunkEntry));
      h.header_crc = ImageHeaderCrc(h);
      std::memcpy(hdr, &h, sizeof h);
    }
    auto* blh = reinterpret_cast<BlockListHeader*>(p + BlockListOffset(geo_.max_files, geo_.nblocks, compressed_));
    auto* list = reinterpret_cast<uint32_t*>(blh + 1);
    uint64_t count = 0;
    for (auto& [path, node] : files_) {
      for (uint32_t b : node->blocks) {
        if (b != kNoBlock) list[count++] = b;
      }
    }
    BlockListHeader b{};
    b.count = count;
    b.crc = Crc32c(list, count * 4);
    std::memcpy(blh, &b, sizeof b);
  }

  void PublishStateLocked(StateRecord s) {
    auto* recs = reinterpret_cast<StateRecord*>(base_ + kStateOffset);
    StateRecord r0 = LoadState(&recs[0]), r1 = LoadState(&recs[1]);
    // Overwrite the older (or invalid) record so the newer stays readable.
    int target;
    if (!StateValid(r0)) {
      target = 0;
    } else if (!StateValid(r1)) {
      target = 1;
    } else {
      target = r0.seq <= r1.seq ? 0 : 1;
    }
    uint64_t top = std::max(StateValid(r0) ? r0.seq : 0, StateValid(r1) ? r1.seq : 0);
    s.seq = top + 1;
    s.crc = StateCrc(s);
    auto* out = reinterpret_cast<uint64_t*>(&recs[target]);
    const auto* in = reinterpret_cast<const uint64_t*>(&s);
    __atomic_store_n(&out[7], ~in[7], __ATOMIC_RELEASE);  // invalidate first
    for (size_t i = 0; i < kStateWords; ++i) __atomic_store_n(&out[i], in[i], __ATOMIC_RELEASE);
    __atomic_store_n(&out[7], in[7], __ATOMIC_RELEASE);
    state_ = s;
  }

  Result<StateRecord> ReadState() const {
    const auto* recs = reinterpret_cast<const StateRecord*>(base_ + kStateOffset);
    for (int attempt = 0; attempt < 100; ++attempt) {
      StateRecord r0 = LoadState(&recs[0]), r1 = LoadState(&recs[1]);
      bool v0 = StateValid(r0), v1 = StateValid(r1);
      if (v0 || v1) {
        if (v0 && v1) return r0.seq >= r1.seq ? r0 : r1;
        return v0 ? r0 : r1;
      }
      env_->SleepForMicros(100);  // an owner may be rewriting both in turn
    }
    return Status::Corruption("store " + name() + ": no valid state record (damaged header)");
  }

  Status ValidateGeometry() {
    if (shm_->size() < kHeaderBytes) {
      return Status::Corruption("store " + name() + ": too small to be a store (" +
                                std::to_string(shm_->size()) + " bytes)");
    }
    Geometry g;
    std::memcpy(&g, base_, sizeof g);
    auto bad = [&](const std::string& why) {
      return Status::Corruption("store " + name() + ": not a valid dlckpt store: " + why);
    };
    if (std::memcmp(g.magic, kStoreMagic, sizeof g.magic) != 0) return bad("bad magic");
    if (g.format_version != kFormatVersion) {
      return bad("format version " + std::to_string(g.format_version) + " (this build reads format " +
                 std::to_string(kFormatVersion) + "; recreate the store)");
    }
    if (g.crc != GeometryCrc(g)) return bad("header checksum mismatch");
    std::string why = CheckCompression(g.compression, g.chunk_size, g.threshold_permille, g.block_size);
    if (!why.empty()) return bad(why);
    if (g.header_bytes != kHeaderBytes || g.nslots != kNumSlots || g.block_size < 4096 ||
        (g.block_size & (g.block_size - 1)) != 0 || g.nblocks * g.block_size != g.capacity ||
        g.slot_offset != kHeaderBytes ||
        g.slot_size != SlotSize(g.max_files, g.nblocks, g.compression != kCompressNone) ||
        g.data_offset != AlignUp(g.slot_offset + kNumSlots * g.slot_size, 4096) ||
        g.shm_size != g.data_offset + g.capacity) {
      return bad("inconsistent geometry");
    }
    if (g.shm_size != shm_->size()) {
      return bad("size " + std::to_string(shm_->size()) + " differs from header's " +
                 std::to_string(g.shm_size));
    }
    SetGeometry(g);
    return Status::OK();
  }

  void SetGeometry(const Geometry& g) {
    geo_ = g;
    data_ = base_ + g.data_offset;
    compressed_ = g.compression != kCompressNone;
    cpb_ = compressed_ ? g.chunk_size / g.block_size : 0;
  }

  // Parses and validates the version in `slot`; `epoch` 0 expects a working slot.
  Result<Version> ParseSlotLocked(uint64_t slot, uint64_t epoch) const {
    auto bad = [&](const std::string& why) {
      return Status::Corruption("store " + name() + ": version slot " + std::to_string(slot) +
                                " (epoch " + std::to_string(epoch) + ") is damaged: " + why);
    };
    if (slot >= kNumSlots) return bad("slot index out of range");
    const uint8_t* p = SlotPtr(slot);
    ImageHeader h;
    std::memcpy(&h, p, sizeof h);
    if (std::memcmp(h.magic, kImageMagic, sizeof h.magic) != 0) return bad("bad magic");
    if (h.header_crc != ImageHeaderCrc(h)) return bad("header checksum mismatch");
    if (h.format_version != kFormatVersion || h.epoch != epoch || h.nfiles > geo_.max_files ||
        h.capacity != geo_.capacity || h.block_size != geo_.block_size ||
        h.max_files != geo_.max_files || h.rank != geo_.rank ||
        std::memcmp(h.job, geo_.job, sizeof h.job) != 0 || h.compression != geo_.compression ||
        h.chunk_size != geo_.chunk_size || h.threshold_permille != geo_.threshold_permille) {
      return bad("header does not match the store");
    }
    const auto* entries = reinterpret_cast<const FileEntry*>(p + sizeof(ImageHeader));
    const auto* chunks = reinterpret_cast<const ChunkEntry*>(p + ChunkTableOffset(geo_.max_files));
    uint64_t blocks = 0;
    std::string why = CheckTables(h, entries, chunks, &blocks);
    if (!why.empty()) return bad(why);
    const auto* blh = reinterpret_cast<const BlockListHeader*>(
        p + BlockListOffset(geo_.max_files, geo_.nblocks, compressed_));
    BlockListHeader bl;
    std::memcpy(&bl, blh, sizeof bl);
    const auto* list = reinterpret_cast<const uint32_t*>(blh + 1);
    if (bl.count != blocks || bl.count > geo_.nblocks) return bad("block count mismatch");
    if (bl.crc != Crc32c(list, bl.count * 4)) return bad("block list checksum mismatch");
    std::vector<bool> seen(geo_.nblocks);
    for (uint64_t i = 0; i < bl.count; ++i) {
      if (list[i] >= geo_.nblocks || seen[list[i]]) return bad("bad or repeated block index");
      seen[list[i]] = true;
    }
    Version v;
    v.slot = slot;
    v.epoch = epoch;
    v.hdr = reinterpret_cast<const ImageHeader*>(p);
    v.entries = entries;
    v.blocks = list;
    v.block_count = bl.count;
    v.chunks = compressed_ ? chunks : nullptr;
    return v;
  }

  Result<Version> CommittedVersionLocked(uint64_t epoch) const {
    StateRecord s = state_;
    if (!owner_) {
      DLCKPT_ASSIGN_OR_RETURN(s, ReadState());
    }
    uint64_t slot = kNoSlot;
    if (epoch != 0 && epoch == s.acked_epoch) slot = s.acked_slot;
    if (epoch != 0 && epoch == s.pending_epoch) slot = s.pending_slot;
    if (slot == kNoSlot) {
      return Status::NotFound("store " + name() + ": epoch " + std::to_string(epoch) +
                              " is not committed here (acknowledged " +
                              std::to_string(s.acked_epoch) + ", pending " +
                              std::to_string(s.pending_epoch) + ")");
    }
    return ParseSlotLocked(slot, epoch);
  }

  std::map<std::string, NodePtr, std::less<>> NodesFrom(const Version& v) {
    std::map<std::string, NodePtr, std::less<>> out;
    const uint64_t bs = geo_.block_size;
    uint64_t bi = 0, ci = 0;
    for (uint32_t i = 0; i < v.hdr->nfiles; ++i) {
      const FileEntry& e = v.entries[i];
      auto n = std::make_shared<Node>();
      n->path = e.path;
      n->mode = e.mode;
      n->size = e.size;
      n->mtime_ns = e.mtime_ns;
      n->ino = e.ino;
      n->crc = e.crc32c;
      n->crc_valid = v.epoch != 0;
      if (!compressed_) {
        uint64_t nb = BlocksFor(e.size, bs);
        n->blocks.assign(v.blocks + bi, v.blocks + bi + nb);
        bi += nb;
      } else {
        n->blocks.reserve(BlocksFor(e.size, bs));
        for (uint64_t off = 0; off < e.size; off += geo_.chunk_size, ++ci) {
          uint64_t len = std::min<uint64_t>(geo_.chunk_size, e.size - off);
          const ChunkEntry& ce = v.chunks[ci];
          Chunk c;
          c.compressed = ce.stored < len;
          c.stored = c.compressed ? ce.stored : 0;
          c.crc = ce.crc32c;
          c.crc_valid = v.epoch != 0;
          c.decided = v.epoch != 0;
          uint64_t k = BlocksFor(ce.stored, bs);
          n->blocks.insert(n->blocks.end(), v.blocks + bi, v.blocks + bi + k);
          n->blocks.resize(n->blocks.size() + BlocksFor(len, bs) - k, kNoBlock);
          bi += k;
          n->chunks.push_back(c);
        }
      }
      next_ino_ = std::max(next_ino_, e.ino + 1);
      out.emplace(n->path, n);
    }
    return out;
  }

  // Read-only attachers: the blocks of the versions the published state names.
  uint64_t PublishedBlocksLocked() const {
    auto s = ReadState();
    if (!s.ok()) return 0;
    std::vector<bool> used(geo_.nblocks);
    uint64_t count = 0;
    auto add = [&](uint64_t slot, uint64_t epoch) {
      if (slot == kNoSlot) return;
      auto v = ParseSlotLocked(slot, epoch);
      if (!v.ok()) return;
      for (uint64_t i = 0; i < v->block_count; ++i) {
        if (!used[v->blocks[i]]) {
          used[v->blocks[i]] = true;
          ++count;
        }
      }
    };
    if (s->acked_epoch != 0) add(s->acked_slot, s->acked_epoch);
    if (s->pending_epoch != 0) add(s->pending_slot, s->pending_epoch);
    add(s->working_slot, 0);
    return count;
  }

  // One stretch of a version's file data as stored: a whole file of an
  // uncompressed store, or one chunk.
  struct Piece {
    uint32_t file;           // entry index
    uint64_t offset;         // in the file
    uint64_t len;            // uncompressed bytes
    uint64_t stored;         // bytes in the image (== len unless compressed)
    uint32_t crc;            // compressed stores: the chunk entry's CRC
    const uint32_t* blocks;  // ceil(stored / block_size) blocks
  };

  // Calls fn(piece) for every piece in image order; stops at the first error.
  template <class Fn>
  Status ForEachPiece(const Version& v, Fn&& fn) const {
    uint64_t bi = 0, ci = 0;
    for (uint32_t i = 0; i < v.hdr->nfiles; ++i) {
      const FileEntry& e = v.entries[i];
      if (!v.chunks) {
        if (e.size > 0) DLCKPT_RETURN_IF_ERROR(fn(Piece{i, 0, e.size, e.size, 0, v.blocks + bi}));
        bi += BlocksFor(e.size, geo_.block_size);
        continue;
      }
      for (uint64_t off = 0; off < e.size; off += geo_.chunk_size, ++ci) {
        uint64_t len = std::min<uint64_t>(geo_.chunk_size, e.size - off);
        const ChunkEntry& ce = v.chunks[ci];
        DLCKPT_RETURN_IF_ERROR(fn(Piece{i, off, len, ce.stored, ce.crc32c, v.blocks + bi}));
        bi += BlocksFor(ce.stored, geo_.block_size);
      }
    }
    return Status::OK();
  }

  // Recomputes every CRC of a committed version over the uncompressed bytes.
  Status VerifyVersionLocked(const Version& v) {
    const uint64_t bs = geo_.block_size;
    std::vector<uint8_t> raw;
    std::vector<uint32_t> crcs(v.hdr->nfiles, 0);
    DLCKPT_RETURN_IF_ERROR(ForEachPiece(v, [&](const Piece& pc) -> Status {
      const FileEntry& e = v.entries[pc.file];
      std::string where = "store " + name() + " epoch " + std::to_string(v.epoch) + ": " + e.path;
      uint32_t crc = 0;
      if (pc.stored < pc.len) {
        if (raw.size() < pc.len) raw.resize(pc.len);
        DLCKPT_RETURN_IF_ERROR(DecompressLocked(pc.blocks, pc.stored, raw.data(), pc.len,
                                                where + ": chunk at offset " + std::to_string(pc.offset)));
        crc = Crc32c(raw.data(), pc.len);
      } else {
        uint64_t left = pc.len;
        for (uint64_t k = 0; left > 0; ++k) {
          uint64_t n = std::min(left, bs);
          crc = Crc32c(BlockPtr(pc.blocks[k]), n, crc);
          left -= n;
        }
      }
      if (v.chunks && crc != pc.crc) {
        return Status::Corruption(where + ": checksum mismatch in the chunk at offset " +
                                  std::to_string(pc.offset) + " (stored " + Hex(pc.crc) +
                                  ", computed " + Hex(crc) + ")");
      }
      crcs[pc.file] = Crc32cCombine(crcs[pc.file], crc, pc.len);
      return Status::OK();
    }));
    for (uint32_t i = 0; i < v.hdr->nfiles; ++i) {
      const FileEntry& e = v.entries[i];
      if (crcs[i] != e.crc32c) {
        return Status::Corruption("store " + name() + " epoch " + std::to_string(v.epoch) + ": " +
                                  e.path + ": checksum mismatch (stored " + Hex(e.crc32c) +
                                  ", computed " + Hex(crcs[i]) + ")");
      }
    }
    return Status::OK();
  }

  Status LoadAsOwner() {
    std::lock_guard<std::mutex> lock(mu_);
    DLCKPT_ASSIGN_OR_RETURN(StateRecord s, ReadState());
    refs_.assign(geo_.nblocks, 0);
    std::map<std::string, NodePtr, std::less<>> working;
    bool have_working = false;
    if (s.acked_epoch != 0) {
      DLCKPT_ASSIGN_OR_RETURN(Version v, ParseSlotLocked(s.acked_slot, s.acked_epoch));
      acked_blocks_.assign(v.blocks, v.blocks + v.block_count);
      for (uint32_t b : acked_blocks_) refs_[b] |= kRefAcked;
      working = NodesFrom(v);
    }
    if (s.pending_epoch != 0) {
      DLCKPT_ASSIGN_OR_RETURN(Version v, ParseSlotLocked(s.pending_slot, s.pending_epoch));
      pending_blocks_.assign(v.blocks, v.blocks + v.block_count);
      for (uint32_t b : pending_blocks_) refs_[b] |= kRefPending;
      NodesFrom(v);  // for next_ino_
    }
    if (s.working_slot != kNoSlot) {
      auto v = ParseSlotLocked(s.working_slot, 0);
      if (v.ok()) {
        working = NodesFrom(*v);
        have_working = true;
      }
    }
    (void)have_working;
    files_ = std::move(working);
    for (auto& [path, node] : files_) {
      for (uint32_t b : node->blocks) {
        if (b != kNoBlock) refs_[b] |= kRefWorking;
      }
    }
    free_blocks_ = static_cast<uint64_t>(std::count(refs_.begin(), refs_.end(), 0));
    state_ = s;
    if (s.working_slot != kNoSlot) {
      s.working_slot = kNoSlot;  // this owner's writes now diverge from the saved copy
      PublishStateLocked(s);
    }
    return Status::OK();
  }

  // Read-only: loads the version `epoch` sees (0: the newest one: a cleanly
  // saved working set, else pending, else acknowledged).
  Status LoadView(uint64_t epoch) {
    DLCKPT_ASSIGN_OR_RETURN(StateRecord s, ReadState());
    handles_.clear();
    cache_block_ = kNoBlock;  // the owner may have reused any block since
    if (epoch == 0) {
      if (s.working_slot != kNoSlot) {
        auto v = ParseSlotLocked(s.working_slot, 0);
        if (v.ok()) {
          files_ = NodesFrom(*v);
          view_epoch_ = 0;
          return Status::OK();
        }
      }
      epoch = s.pending_epoch != 0 ? s.pending_epoch : s.acked_epoch;
      if (epoch == 0) {
        files_.clear();
        view_epoch_ = 0;
        return Status::OK();
      }
    }
    state_ = s;
    DLCKPT_ASSIGN_OR_RETURN(Version v, CommittedVersionLocked(epoch));
    files_ = NodesFrom(v);
    view_epoch_ = epoch;
    return Status::OK();
  }

  Status AcknowledgeLocked(uint64_t epoch) {
    if (epoch == 0 || epoch != state_.pending_epoch) {
      return Status::InvalidArgument("store " + name() + ": cannot acknowledge epoch " +
                                     std::to_string(epoch) + " (pending is " +
                                     std::to_string(state_.pending_epoch) + ")");
    }
    StateRecord s = state_;
    s.acked_epoch = s.pending_epoch;
    s.acked_slot = s.pending_slot;
    s.pending_epoch = 0;
    s.pending_slot = kNoSlot;
    PublishStateLocked(s);
    for (uint32_t b : acked_blocks_) {
      refs_[b] &= static_cast<uint8_t>(~kRefAcked);
      if (refs_[b] == 0) free_blocks_++;
    }
    for (uint32_t b : pending_blocks_) {
      refs_[b] = static_cast<uint8_t>((refs_[b] & ~kRefPending) | kRefAcked);
    }
    acked_blocks_ = std::move(pending_blocks_);
    pending_blocks_.clear();
    return Status::OK();
  }

  void AbortPendingLocked() {
    if (state_.pending_epoch == 0) return;
    StateRecord s = state_;
    s.pending_epoch = 0;
    s.pending_slot = kNoSlot;
    PublishStateLocked(s);
    for (uint32_t b : pending_blocks_) {
      refs_[b] &= static_cast<uint8_t>(~kRefPending);
      if (refs_[b] == 0) free_blocks_++;
    }
    pending_blocks_.clear();
  }

  Status ResetWorkingToAckedLocked() {
    for (auto& h : handles_) {
      // An unlinked file lives only while open: it goes with its last handle.
      if (h.node && --h.node->open_count == 0 && !h.node->linked) ReleaseNodeLocked(*h.node);
      h = Handle{};
    }
    for (auto& [path, node] : files_) ReleaseNodeLocked(*node);
    files_.clear();
    if (state_.acked_epoch != 0) {
      DLCKPT_ASSIGN_OR_RETURN(Version v, ParseSlotLocked(state_.acked_slot, state_.acked_epoch));
      files_ = NodesFrom(v);
      for (auto& [path, node] : files_) {
        for (uint32_t b : node->blocks) {
          if (b == kNoBlock) continue;
          if (refs_[b] == 0) free_blocks_--;
          refs_[b] |= kRefWorking;
        }
      }
    }
    return Status::OK();
  }

  void SaveWorkingLocked() {
    uint64_t slot = FreeSlotLocked();
    WriteSlotLocked(slot, 0, nullptr);
    StateRecord s = state_;
    s.working_slot = slot;
    PublishStateLocked(s);
  }

  Env* env_;
  std::unique_ptr<MappedShm> shm_;
  bool owner_;
  bool abandoned_ = false;  // owner that must not save working files on detach
  uint8_t* base_;
  uint8_t* data_ = nullptr;
  Geometry geo_{};
  uint32_t max_open_ = 1024;

  mutable std::mutex mu_;
  StateRecord state_{};  // owner: as published; read-only: as last read
  std::map<std::string, NodePtr, std::less<>> files_;
  std::vector<Handle> handles_;
  std::vector<uint8_t> refs_;
  std::vector<uint32_t> acked_blocks_, pending_blocks_;
  uint64_t free_blocks_ = 0;
  uint64_t cursor_ = 0;
  uint64_t next_ino_ = 1;
  uint64_t view_epoch_ = 0;

  // Compression (see the top of this file); buffers are allocated on first use.
  bool compressed_ = false;
  uint64_t cpb_ = 0;             // blocks per chunk
  Undo* undo_ = nullptr;         // the write being journaled, if any
  std::vector<uint8_t> gather_;  // a chunk or LZ4 block gathered from scattered blocks
  std::vector<uint8_t> cbuf_;    // compressor output
  std::vector<uint8_t> zeros_;   // a chunk of zeros
  std::vector<uint8_t> cache_;   // the last decompressed chunk
  uint32_t cache_block_ = kNoBlock;
  uint64_t cache_stored_ = 0, cache_len_ = 0;
};

// ---- Store ----------------------------------------------------------------------

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Store::~Store() = default;

Result<std::unique_ptr<Store>> Store::Create(const std::string& name, const StoreOptions& options,
                                             Env* env) {
  DLCKPT_ASSIGN_OR_RETURN(auto impl, Impl::Create(name, options, env));
  return std::unique_ptr<Store>(new Store(std::move(impl)));
}

Result<std::unique_ptr<Store>> Store::Attach(const std::string& name, AttachMode mode, Env* env) {
  DLCKPT_ASSIGN_OR_RETURN(auto impl, Impl::Attach(name, mode, env, 1024));
  return std::unique_ptr<Store>(new Store(std::move(impl)));
}

Status Store::Destroy(const std::string& name, Env* env) { return env->UnlinkShm(name); }

const std::string& Store::name() const { return impl_->name(); }
bool Store::is_owner() const { return impl_->owner(); }
StoreStats Store::stats() const { return impl_->Stats(); }
EpochState Store::epochs() const { return impl_->Epochs(); }
Result<int> Store::Open(std::string_view path, int flags, mode_t mode) {
  return impl_->Open(path, flags, mode);
}
Status Store::Close(int fd) { return impl_->Close(fd); }
Result<size_t> Store::Read(int fd, void* buf, size_t len) {
  return impl_->Read(fd, buf, len, nullptr);
}
Result<size_t> Store::Write(int fd, const void* buf, size_t len) {
  return impl_->Write(fd, buf, len, nullptr);
}
Result<size_t> Store::Pread(int fd, void* buf, size_t len, uint64_t offset) {
  return impl_->Read(fd, buf, len, &offset);
}
Result<size_t> Store::Pwrite(int fd, const void* buf, size_t len, uint64_t offset) {
  return impl_->Write(fd, buf, len, &offset);
}
Result<uint64_t> Store::Seek(int fd, int64_t offset, int whence) {
  return impl_->Seek(fd, offset, whence);
}
Status Store::Ftruncate(int fd, uint64_t size) { return impl_->Ftruncate(fd, size); }
Status Store::Truncate(std::string_view path, uint64_t size) { return impl_->Truncate(path, size); }
Result<FileInfo> Store::Fstat(int fd) { return impl_->Fstat(fd); }
Result<FileInfo> Store::Stat(std::string_view path) { return impl_->Stat(path); }
Status Store::Fsync(int fd) { return impl_->Fstat(fd).status(); }
Result<int> Store::OpenFlags(int fd) { return impl_->OpenFlags(fd); }
Status Store::Unlink(std::string_view path) { return impl_->Unlink(path); }
Status Store::Rename(std::string_view from, std::string_view to) {
  return impl_->Rename(from, to);
}
Status Store::Mkdir(std::string_view path, mode_t mode) { return impl_->Mkdir(path, mode); }
Status Store::Rmdir(std::string_view path) { return impl_->Rmdir(path); }
Result<std::vector<FileInfo>> Store::List(std::string_view prefix) { return impl_->List(prefix); }
Result<uint64_t> Store::Commit(uint64_t epoch) { return impl_->Commit(epoch); }
Status Store::Acknowledge(uint64_t epoch) { return impl_->Acknowledge(epoch); }
Status Store::AbortPending() { return impl_->AbortPending(); }
Status Store::Rollback() { return impl_->Rollback(); }
Status Store::Restore(uint64_t epoch) { return impl_->Restore(epoch); }
Status Store::Verify(uint64_t epoch) { return impl_->Verify(epoch); }
Result<Image> Store::GetImage(uint64_t epoch) { return impl_->GetImage(epoch); }
Status Store::View(uint64_t epoch) { return impl_->View(epoch); }

void CopyFromImage(const Image& image, uint64_t offset, void* out, size_t len) {
  auto* dst = static_cast<uint8_t*>(out);
  uint64_t pos = 0;
  for (const Extent& e : image.extents) {
    if (len == 0) break;
    if (offset < pos + e.len) {
      uint64_t in = offset - pos;
      size_t n = static_cast<size_t>(std::min<uint64_t>(e.len - in, len));
      std::memcpy(dst, e.data + in, n);
      dst += n;
      offset += n;
      len -= n;
    }
    pos += e.len;
  }
  if (len > 0) std::memset(dst, 0, len);
}

// ---- ImageBuilder ------------------------------------------------------------------

class ImageBuilder::Impl {
 public:
  Impl(std::string name, std::string node, Env* env)
      : name_(std::move(name)), node_(std::move(node)), env_(env) {}

  ~Impl() {
    if (store_ && !finished_) {
      store_->Abandon();
      store_.reset();
      (void)env_->UnlinkShm(name_);
    }
  }

  uint64_t image_size() const { return image_size_; }

  Status Append(const uint8_t* p, size_t n) {
    if (!error_.ok()) return error_;
    if (finished_) return Status::InvalidArgument("image for " + name_ + " already finished");
    Status s = AppendInner(p, n);
    if (!s.ok()) error_ = s;
    return s;
  }

  Result<uint64_t> Finish() {
    if (!error_.ok()) return error_;
    if (!store_ || received_ < image_size_) {
      return Status::Error(ENODATA, "image for " + name_ + ": incomplete (" +
                                        std::to_string(received_) + " of " +
                                        (image_size_ ? std::to_string(image_size_) : "?") +
                                        " bytes)");
    }
    const auto* h = reinterpret_cast<const ImageHeader*>(meta_.data());
    std::lock_guard<std::mutex> lock(store_->mu());
    // Published into a store that is removed unless the check passes.
    DLCKPT_RETURN_IF_ERROR(store_->PublishImageLocked(meta_.data(), h->epoch));
    Status verified = store_->VerifyAckedLocked();
    if (!verified.ok()) {
      return Status::Corruption("rebuilt store " + name_ + ": " + verified.message());
    }
    finished_ = true;
    store_->Abandon();  // the published version is the store: no working copy to save
    return h->epoch;
  }

 private:
  // One stretch of file data in the image: a whole file of an uncompressed
  // image, or one chunk.
  struct Piece {
    uint32_t file;
    uint64_t chunk;
    uint64_t len;     // uncompressed
    uint64_t stored;  // bytes in the image
    ChunkEntry entry;
  };

  Status Bad(const std::string& why) const {
    return Status::Corruption("image for " + name_ + " is not a valid store image: " + why);
  }

  Status AppendInner(const uint8_t* p, size_t n) {
    while (n > 0) {
      if (!store_) {
        // Collect the metadata first.
        size_t want = meta_.size() < sizeof(ImageHeader) ? sizeof(ImageHeader) : meta_bytes_;
        size_t take = std::min(n, want - meta_.size());
        meta_.insert(meta_.end(), p, p + take);
        p += take;
        n -= take;
        received_ += take;
        if (meta_.size() == sizeof(ImageHeader) && meta_bytes_ == 0) {
          DLCKPT_RETURN_IF_ERROR(ParseHeader());
          if (meta_bytes_ > meta_.size()) continue;
        }
        if (meta_bytes_ != 0 && meta_.size() == meta_bytes_) {
          DLCKPT_RETURN_IF_ERROR(CreateStore());
        }
        continue;
      }
      if (received_ >= image_size_ || piece_ >= pieces_.size()) return Status::OK();  // padding
      const Piece& pc = pieces_[piece_];
      size_t take = static_cast<size_t>(std::min<uint64_t>(n, pc.stored - written_));
      const FileEntry& e = Entry(pc.file);
      std::lock_guard<std::mutex> lock(store_->mu());
      if (compressed_) {
        DLCKPT_RETURN_IF_ERROR(store_->AppendStoredLocked(e.path, pc.chunk, pc.len, pc.entry,
                                                          written_, p, take));
      } else {
        DLCKPT_ASSIGN_OR_RETURN(size_t wrote, store_->AppendLocked(e.path, p, take));
        if (wrote != take) return Status::NoSpace("rebuilt store " + name_ + ": full");
      }
      p += take;
      n -= take;
      written_ += take;
      received_ += take;
      if (written_ == pc.stored) {
        ++piece_;
        written_ = 0;
      }
    }
    return Status::OK();
  }

  const FileEntry& Entry(uint32_t i) const {
    return reinterpret_cast<const FileEntry*>(meta_.data() + sizeof(ImageHeader))[i];
  }

  Status ParseHeader() {
    ImageHeader h;
    std::memcpy(&h, meta_.data(), sizeof h);
    if (std::memcmp(h.magic, kImageMagic, sizeof h.magic) != 0) return Bad("bad magic");
    if (h.header_crc != ImageHeaderCrc(h)) return Bad("header checksum mismatch");
    if (h.format_version != kFormatVersion) {
      return Bad("format version " + std::to_string(h.format_version) + " (this build reads " +
                 std::to_string(kFormatVersion) + ")");
    }
    if (h.block_size < 4096 || !PowerOfTwo(h.block_size) || h.capacity % h.block_size != 0 ||
        !CheckCompression(h.compression, h.chunk_size, h.threshold_permille, h.block_size).empty()) {
      return Bad("bad geometry or compression settings");
    }
    if (h.epoch == 0 || h.nfiles > h.max_files || h.nchunks > h.capacity / h.block_size ||
        h.meta_bytes != sizeof(ImageHeader) + uint64_t{h.nfiles} * sizeof(FileEntry) +
                            h.nchunks * sizeof(ChunkEntry) ||
        h.data_bytes > h.capacity) {
      return Bad("inconsistent header");
    }
    meta_bytes_ = h.meta_bytes;
    image_size_ = h.meta_bytes + h.data_bytes;
    compressed_ = h.compression != kCompressNone;
    meta_.reserve(meta_bytes_);
    return Status::OK();
  }

  Status CreateStore() {
    ImageHeader h;
    std::memcpy(&h, meta_.data(), sizeof h);
    const auto* entries = reinterpret_cast<const FileEntry*>(meta_.data() + sizeof(ImageHeader));
    const auto* chunks = reinterpret_cast<const ChunkEntry*>(
        meta_.data() + sizeof(ImageHeader) + uint64_t{h.nfiles} * sizeof(FileEntry));
    uint64_t blocks = 0;
    std::string why = CheckTables(h, entries, chunks, &blocks);
    if (!why.empty()) return Bad(why);
    StoreOptions o;
    o.capacity = h.capacity;
    o.block_size = h.block_size;
    o.max_files = h.max_files;
    o.job = IdentityString(h.job);
    o.node = node_;
    o.rank = h.rank;
    if (compressed_) {
      o.compression = Compression::kLz4;
      o.chunk_size = h.chunk_size;
      o.compress_threshold = h.threshold_permille / 1000.0;
    }
    uint64_t ci = 0;
    for (uint32_t i = 0; i < h.nfiles; ++i) {
      const FileEntry& e = entries[i];
      if (!compressed_) {
        if (e.size > 0) pieces_.push_back(Piece{i, 0, e.size, e.size, ChunkEntry{}});
        continue;
      }
      for (uint64_t off = 0, k = 0; off < e.size; off += h.chunk_size, ++k, ++ci) {
        uint64_t len = std::min<uint64_t>(h.chunk_size, e.size - off);
        pieces_.push_back(Piece{i, k, len, chunks[ci].stored, chunks[ci]});
      }
    }
    DLCKPT_ASSIGN_OR_RETURN(store_, Store::Impl::Create(name_, o, env_));
    std::lock_guard<std::mutex> lock(store_->mu());
    for (uint32_t i = 0; i < h.nfiles; ++i) DLCKPT_RETURN_IF_ERROR(store_->AddEntryLocked(entries[i]));
    return Status::OK();
  }

  std::string name_, node_;
  Env* env_;
  std::unique_ptr<Store::Impl> store_;
  std::vector<uint8_t> meta_;
  uint64_t meta_bytes_ = 0;
  uint64_t image_size_ = 0;
  uint64_t received_ = 0;
  bool compressed_ = false;
  std::vector<Piece> pieces_;
  size_t piece_ = 0;
  uint64_t written_ = 0;  // of the current piece
  bool finished_ = false;
  Status error_;
};

ImageBuilder::ImageBuilder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ImageBuilder::~ImageBuilder() = default;

Result<std::unique_ptr<ImageBuilder>> ImageBuilder::Begin(const std::string& name, std::string node,
                                                          Env* env) {
  if (!ValidNodeName(node)) {
    return Status::InvalidArgument("invalid node name '" + node + "' for rebuilt store " + name);
  }
  return std::unique_ptr<ImageBuilder>(
      new ImageBuilder(std::make_unique<Impl>(name, std::move(node), env)));
}
Status ImageBuilder::Append(const void* data, size_t len) {
  return impl_->Append(static_cast<const uint8_t*>(data), len);
}
uint64_t ImageBuilder::image_size() const { return impl_->image_size(); }
Result<uint64_t> ImageBuilder::Finish() { return impl_->Finish(); }

}  // namespace dlckpt::memfs

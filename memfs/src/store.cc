// store.cc — creating, attaching and describing a store, and the Store
// facade (see dlckpt/memfs/memfs.h for the contract, store_impl.h for
// Store::Impl and layout.h for the bytes).
//
// Ownership: Create makes a new shared memory object and owns it exclusively
// (an advisory lock the kernel drops when the process dies); if locking
// fails, the object is removed again. Attach maps an existing object: kOwner
// takes the same lock (EBUSY while another live process owns the store),
// read-only modes take none. The Store object owns its Impl; ~Impl saves an
// owner's working files for the next owner.
//
// Thread safety: Store's methods forward to Impl, which serialises them on
// its mutex. Create and Attach run before the Impl is shared.
//
// Failure: EINVAL naming the store and the bad option; EBADMSG ("not a valid
// dlckpt store") for a header, geometry or version that does not check out —
// a damaged store is refused, never read or written; errors of the Env
// (shared memory, locking) pass through, among them EPERM / EACCES for an
// object another uid planted or left readable by others (never adopted).
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "dlckpt/base/units.h"
#include "store_impl.h"

namespace dlckpt::memfs {

using namespace layout;  // NOLINT(google-build-using-namespace)

namespace {

constexpr uint64_t kDefaultChunkBlocks = 16;
constexpr uint64_t kTouchPage = 4096;

}  // namespace

bool PretouchEnabled() { return EnvSwitchOn("DLCKPT_PRETOUCH"); }

uint64_t PretouchWord(uint64_t off) {
  // "DLPT" in the high half, the page number in the low: nonzero, and no two
  // pages alike (a host that merges identical pages would undo the touch).
  return (uint64_t{0x444c5054} << 32) | ((off / kTouchPage) & 0xffffffffu);
}

void PretouchPages(uint8_t* base, uint64_t len) {
  for (uint64_t off = 0; off + sizeof(uint64_t) <= len; off += kTouchPage) {
    uint64_t w = PretouchWord(off);
    std::memcpy(base + off, &w, sizeof w);
  }
}

Result<Compression> ParseCompression(std::string_view text) {
  std::string t(text);
  for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (t == "none" || t == "off" || t == "0") return Compression::kNone;
  if (t == "lz4") return Compression::kLz4;
  return Status::InvalidArgument("unknown compression '" + std::string(text) + "' (want none or lz4)");
}

const char* CompressionName(Compression c) { return c == Compression::kLz4 ? "lz4" : "none"; }

uint32_t DefaultMaxFiles(uint64_t capacity) {
  constexpr uint64_t kBytesPerFile = 32u << 10;
  return static_cast<uint32_t>(
      std::clamp<uint64_t>(capacity / kBytesPerFile, 1024, uint64_t{1} << 20));
}

Store::Impl::Impl(Env* env, std::unique_ptr<MappedShm> shm, bool owner)
    : env_(env),
      shm_(std::move(shm)),
      owner_(owner),
      base_(shm_->data()),
      versions_(shm_->name(), env, owner, base_, &blocks_),
      images_(shm_->name(), &blocks_) {}

Store::Impl::~Impl() {
  if (owner_ && !abandoned_) {
    std::lock_guard<std::mutex> lock(mu_);
    versions_.SaveWorking(files_);
  }
}

Result<std::unique_ptr<Store::Impl>> Store::Impl::Create(const std::string& name,
                                                         const StoreOptions& options, Env* env) {
  StoreOptions o = options;
  if (o.max_files == 0) o.max_files = DefaultMaxFiles(o.capacity);
  if (o.block_size < 4096 || o.block_size > (16u << 20) ||
      (o.block_size & (o.block_size - 1)) != 0) {
    return Status::InvalidArgument("store " + name + ": block size " +
                                   std::to_string(o.block_size) +
                                   " is not a power of two in [4 KiB, 16 MiB]");
  }
  if (o.capacity == 0) return Status::InvalidArgument("store " + name + ": capacity 0");
  if (o.max_files > (1u << 20)) {
    return Status::InvalidArgument("store " + name + ": max_files " + std::to_string(o.max_files) +
                                   " is not in [1, 2^20] (0: the default for the capacity)");
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
  if (o.prefault && o.pretouch && PretouchEnabled()) {
    // Pre-touch (memfs.h): the first write into a fresh page is slow on some
    // virtual machines; pay it here, not in the first checkpoints. Contract:
    // every block is free now (nothing is allocated before ResetRefs below), so
    // this destroys no data; never call it on a block that may hold data.
    // Only with prefault: fallocate made every page exist (no SIGBUS).
    auto t0 = std::chrono::steady_clock::now();
    PretouchPages(impl->blocks_.Ptr(0), g.capacity);
    impl->pretouch_bytes_ = g.capacity;
    impl->pretouch_seconds_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  impl->max_open_ = o.max_open;
  impl->blocks_.ResetRefs();
  StateRecord s{};
  s.acked_slot = s.pending_slot = s.working_slot = kNoSlot;
  s.next_epoch = 1;
  impl->versions_.Publish(s);
  impl->versions_.Publish(s);  // both records valid
  return impl;
}

Result<std::unique_ptr<Store::Impl>> Store::Impl::Attach(const std::string& name,
                                                         AttachMode mode, Env* env,
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

StoreStats Store::Impl::Stats() {
  std::lock_guard<std::mutex> lock(mu_);
  StoreStats st;
  st.capacity = geo_.capacity;
  st.block_size = geo_.block_size;
  st.blocks_total = geo_.nblocks;
  st.blocks_free = owner_ ? blocks_.free() : 0;
  st.blocks_used = owner_ ? blocks_.used() : versions_.PublishedBlocks();
  st.max_files = geo_.max_files;
  st.compression = compressed_ ? Compression::kLz4 : Compression::kNone;
  st.chunk_size = geo_.chunk_size;
  st.compress_threshold = geo_.threshold_permille / 1000.0;
  st.job = IdentityString(geo_.job);
  st.node = IdentityString(geo_.node);
  st.rank = geo_.rank;
  st.shm_bytes = geo_.shm_size;
  st.pretouch_bytes = pretouch_bytes_;
  st.pretouch_seconds = pretouch_seconds_;
  st.crc_reread_bytes = crc_reread_bytes_;
  st.equal_blocks_kept = equal_blocks_kept_;
  return st;
}

Status Store::Impl::ValidateGeometry() {
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

void Store::Impl::SetGeometry(const Geometry& g) {
  geo_ = g;
  blocks_.SetArea(base_ + g.data_offset, g.block_size, g.nblocks);
  versions_.SetGeometry(g);
  images_.SetGeometry(g);
  compressed_ = g.compression != kCompressNone;
  cpb_ = compressed_ ? g.chunk_size / g.block_size : 0;
}

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
Result<Extent> Store::ReadInPlace(int fd, uint64_t offset, size_t len) {
  return impl_->ReadInPlace(fd, offset, len);
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
Result<uint64_t> Store::VerifyFile(std::string_view path) { return impl_->VerifyFile(path); }
Status Store::CheckSlots() { return impl_->CheckSlots(); }
Result<Image> Store::GetImage(uint64_t epoch) { return impl_->GetImage(epoch); }
Status Store::View(uint64_t epoch) { return impl_->View(epoch); }
Status Store::Hold(uint64_t epoch) { return impl_->Hold(epoch); }
Status Store::Release(uint64_t epoch) { return impl_->Release(epoch); }
uint64_t Store::held_epoch() const { return impl_->HeldEpoch(); }

}  // namespace dlckpt::memfs

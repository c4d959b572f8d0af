// image_builder.cc — ImageBuilder: a whole store rebuilt from an image
// stream (see dlckpt/memfs/memfs.h), and the Store::Impl methods it fills the
// new store with.
//
// Ownership: the builder owns the new store (an owner Store::Impl) and the
// image's metadata bytes (meta_) until Finish(). If it is destroyed before
// Finish() succeeded, it abandons the store (no working copy is saved) and
// removes its shared memory object.
//
// Thread safety: an ImageBuilder is used by one thread at a time; it holds the
// new store's mu_ while it writes into it.
//
// Failure: EBADMSG naming the store for an image that is not valid (header,
// tables, CRCs), ENOSPC if its data does not fit, ENODATA from Finish() on an
// incomplete image; the first error sticks and every later call returns it.
#include <algorithm>
#include <cstring>

#include "store_impl.h"

namespace dlckpt::memfs {

using namespace layout;  // NOLINT(google-build-using-namespace)

// ---- Store::Impl methods used by ImageBuilder ------------------------------------

// Creates a node exactly as described by an image entry (owner, empty store).
Status Store::Impl::AddEntryLocked(const FileEntry& e) {
  auto node = std::make_shared<Node>();
  node->path = e.path;
  node->mode = e.mode;
  node->mtime_ns = e.mtime_ns;
  node->ino = e.ino;
  files_.Insert(std::move(node));
  return Status::OK();
}

// Uncompressed stores: appends raw file bytes.
Result<size_t> Store::Impl::AppendLocked(const std::string& path, const uint8_t* p, size_t n) {
  auto it = files_.find(path);
  if (it == files_.end()) return Status::NotFound("rebuilt store " + name() + ": no entry " + path);
  Node& node = *it->second;
  return WriteAtLocked(node, p, n, node.size);
}

// Compressed stores: appends bytes [at, at + n) of chunk `ci` of `path` as
// stored in an image (verbatim, no recompression). Chunks arrive in order;
// `at` 0 starts chunk ci, of `len` uncompressed bytes and `stored` bytes.
Status Store::Impl::AppendStoredLocked(const std::string& path, uint64_t ci, uint64_t len,
                                       const ChunkEntry& ce, uint64_t at, const uint8_t* p,
                                       size_t n) {
  auto it = files_.find(path);
  if (it == files_.end()) return Status::NotFound("rebuilt store " + name() + ": no entry " + path);
  Node& node = *it->second;
  const uint64_t bs = geo_.block_size, first = ci * cpb_;
  if (at == 0) {
    Chunk c = ChunkFrom(ce, len);
    c.crc_valid = c.decided = true;
    node.chunks.push_back(c);
    node.blocks.resize(first + BlocksFor(len, bs), kNoBlock);
    node.size = ci * geo_.chunk_size + len;
  }
  while (n > 0) {
    uint64_t j = first + at / bs, bo = at % bs;
    size_t piece = static_cast<size_t>(std::min<uint64_t>(bs - bo, n));
    if (node.blocks[j] == kNoBlock) {
      if (blocks_.free() == 0) return Status::NoSpace("rebuilt store " + name() + ": full");
      node.blocks[j] = AllocBlockLocked();
    }
    std::memcpy(blocks_.Ptr(node.blocks[j]) + bo, p, piece);
    at += piece;
    p += piece;
    n -= piece;
  }
  return Status::OK();
}

// Publishes the version with the given image metadata bytes as acknowledged.
Status Store::Impl::PublishImageLocked(const uint8_t* meta, uint64_t epoch) {
  versions_.Freeze(0, epoch, meta, kRefAcked, files_);
  for (auto& [path, node] : files_) node->crc_valid = false;
  return Status::OK();
}

// Verifies the published acknowledged version (every CRC, over the
// uncompressed bytes).
Status Store::Impl::VerifyAckedLocked() {
  const StateRecord& s = versions_.state();
  DLCKPT_ASSIGN_OR_RETURN(Version v, versions_.ParseSlot(s.acked_slot, s.acked_epoch));
  return VerifyVersionLocked(v);
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

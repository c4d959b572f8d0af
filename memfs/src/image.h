// memfs/src/image.h — the encoding view of a store's versions (see "Image"
// in dlckpt/memfs/memfs.h): a version's bytes as extents of the store's
// mapping, and the verification of its CRCs (VersionImage). Private to
// memfs/src.
//
// An image is a version's metadata (image header, file entries, chunk table)
// followed by its file data as stored, file by file in entry order: whole
// files in an uncompressed store, chunk by chunk (raw or one LZ4 block) in a
// compressed one.
//
// Ownership: a VersionImage owns nothing; it reads block addresses through
// the BlockAllocator it is given, which must outlive it. The Versions it is
// handed (VersionSet::ParseSlot / Committed) and the Images it returns point
// into the store's mapping: they stay valid while the mapping lives and the
// version stays published. Nothing here writes shared memory.
//
// Thread safety: no state of its own beyond its construction; in a store it
// is called with Store::Impl::mu_ held, like every collaborator.
//
// Failure: EBADMSG naming the store, epoch, file (and chunk offset) for a
// checksum mismatch, or what the decompressor returns for an LZ4 block that
// does not decompress. The Version must have been validated (ParseSlot): its
// tables are trusted.
#ifndef DLCKPT_MEMFS_IMAGE_H_
#define DLCKPT_MEMFS_IMAGE_H_

#include <cstdint>
#include <functional>
#include <string>

#include "dlckpt/base/status.h"
#include "dlckpt/memfs/memfs.h"
#include "block_allocator.h"
#include "layout.h"
#include "versions.h"

namespace dlckpt::memfs {

class VersionImage {
 public:
  // Decompresses the `stored`-byte LZ4 block held in `blocks` into out[len];
  // an error names `what`.
  using Decompress = std::function<Status(const uint32_t* blocks, uint64_t stored, uint8_t* out,
                                          uint64_t len, const std::string& what)>;

  // The images of store `name` (for messages), whose blocks are `blocks`'.
  VersionImage(std::string name, const BlockAllocator* blocks);
  VersionImage(const VersionImage&) = delete;
  VersionImage& operator=(const VersionImage&) = delete;

  // The store's geometry (validated by the caller).
  void SetGeometry(const layout::Geometry& g);

  // The image of version v: its metadata, then its data; adjacent extents
  // are merged.
  Result<Image> Extents(const Version& v) const;
  // Recomputes every CRC of v (each chunk's, in a compressed store, and each
  // file's) over the uncompressed bytes and compares them with its tables.
  Status Verify(const Version& v, const Decompress& decompress) const;

 private:
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

  // Calls fn(piece) for every piece of v in image order; stops at the first error.
  template <class Fn>
  Status ForEachPiece(const Version& v, Fn&& fn) const;

  const std::string name_;
  const BlockAllocator* const blocks_;
  uint64_t block_size_ = 0;
  uint64_t chunk_size_ = 0;  // compressed stores
};

}  // namespace dlckpt::memfs

#endif  // DLCKPT_MEMFS_IMAGE_H_

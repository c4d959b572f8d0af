// memfs/src/layout.h — the bytes of a store in shared memory (format 1).
//
//   [0, 4096)          StoreHeader: immutable Geometry + two StateRecords
//   [slot_offset, ..)  3 version slots of slot_size bytes each
//   [data_offset, ..)  nblocks data blocks of block_size bytes
//
// A version slot holds one version of the file set:
//   ImageHeader | FileEntry[nfiles] | ... | BlockListHeader | uint32 blocks[]
// The first meta_bytes (ImageHeader + entries) are the start of the version's
// image (see memfs.h): placement-independent and node-independent. The block
// list (at a fixed offset after room for max_files entries) is store-private:
// the blocks of every file in entry order, ceil(size / block_size) each.
//
// Only the owner writes. It never writes a slot or block referenced by the
// published state, and publishes a new state by writing the older of the two
// StateRecords (seq + 1, CRC last); readers take the valid record with the
// higher seq and re-check after reading. All integers are native x86-64
// little-endian; the magics reject other layouts.
#ifndef DLCKPT_MEMFS_LAYOUT_H_
#define DLCKPT_MEMFS_LAYOUT_H_

#include <cstddef>
#include <cstdint>

namespace dlckpt::memfs::layout {

inline constexpr char kStoreMagic[8] = {'D', 'L', 'C', 'K', 'P', 'T', 'S', '1'};
inline constexpr char kImageMagic[8] = {'D', 'L', 'C', 'K', 'P', 'T', 'I', '1'};
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr size_t kHeaderBytes = 4096;
inline constexpr size_t kStateOffset = 1024;
inline constexpr int kNumSlots = 3;
inline constexpr uint64_t kNoSlot = ~0ull;
inline constexpr size_t kIdentityBytes = 64;

struct Geometry {
  char magic[8];
  uint32_t format_version;
  uint32_t header_bytes;
  uint64_t shm_size;
  uint64_t capacity;  // nblocks * block_size
  uint64_t nblocks;
  uint64_t slot_offset;
  uint64_t slot_size;
  uint64_t data_offset;
  uint32_t block_size;
  uint32_t max_files;
  char job[kIdentityBytes];
  char node[kIdentityBytes];
  int32_t rank;
  uint32_t nslots;
  int64_t created_ns;
  uint32_t reserved;
  uint32_t crc;  // CRC32C of this struct with crc = 0
};
static_assert(sizeof(Geometry) == 224);

struct StateRecord {
  uint64_t seq;
  uint64_t acked_epoch;  // 0: none
  uint64_t acked_slot;
  uint64_t pending_epoch;  // 0: none
  uint64_t pending_slot;
  uint64_t working_slot;  // kNoSlot unless the last owner detached cleanly
  uint64_t next_epoch;    // the smallest epoch a commit may take
  uint64_t crc;           // CRC32C of the seven words above
};
static_assert(sizeof(StateRecord) == 64);
inline constexpr size_t kStateWords = 7;

struct ImageHeader {
  char magic[8];
  uint32_t format_version;
  uint32_t nfiles;
  uint64_t epoch;       // 0 in a working slot
  uint64_t meta_bytes;  // sizeof(ImageHeader) + nfiles * sizeof(FileEntry)
  uint64_t data_bytes;  // sum of the files' sizes
  uint64_t capacity;
  uint32_t block_size;
  uint32_t max_files;
  char job[kIdentityBytes];
  int32_t rank;
  uint32_t entries_crc;  // CRC32C of the nfiles entries
  int64_t commit_ns;
  uint8_t reserved[76];
  uint32_t header_crc;  // CRC32C of this struct with header_crc = 0
};
static_assert(sizeof(ImageHeader) == 216);

struct FileEntry {
  char path[256];  // NUL-terminated, at most 255 bytes
  uint64_t size;
  uint64_t ino;
  int64_t mtime_ns;
  uint32_t mode;
  uint32_t crc32c;  // of the file's bytes; 0 in a working slot
  uint8_t reserved[32];
};
static_assert(sizeof(FileEntry) == 320);

struct BlockListHeader {
  uint64_t count;
  uint32_t crc;  // CRC32C of the count uint32 block indices
  uint32_t reserved;
};
static_assert(sizeof(BlockListHeader) == 16);

inline uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

inline uint64_t BlockListOffset(uint32_t max_files) {
  return sizeof(ImageHeader) + uint64_t{max_files} * sizeof(FileEntry);
}

inline uint64_t SlotSize(uint32_t max_files, uint64_t nblocks) {
  return AlignUp(BlockListOffset(max_files) + sizeof(BlockListHeader) + nblocks * 4, 4096);
}

}  // namespace dlckpt::memfs::layout

#endif  // DLCKPT_MEMFS_LAYOUT_H_

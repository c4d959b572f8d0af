// memfs/src/layout.h — the bytes of a store in shared memory (format 2).
//
//   [0, 4096)          StoreHeader: immutable Geometry + two StateRecords + LostCreate
//   [slot_offset, ..)  3 version slots of slot_size bytes each
//   [data_offset, ..)  nblocks data blocks of block_size bytes
//
// A version slot holds one version of the file set:
//   ImageHeader | FileEntry[nfiles] | ... | ChunkEntry[nchunks] | ... |
//   BlockListHeader | uint32 blocks[]
// ImageHeader and the entries, then the chunk table (compressed stores only,
// at a fixed offset after room for max_files entries), are the start of the
// version's image (see memfs.h): placement-independent and node-independent.
// The block list (at a fixed offset after room for max_files entries and, in
// compressed stores, nblocks chunk entries) is store-private: the blocks of
// every file in entry order.
//
// Uncompressed stores: a file's bytes are in ceil(size / block_size) blocks.
// Compressed stores (Geometry.compression != 0): a file is cut into chunks of
// chunk_size bytes (the last one shorter); chunk i has one ChunkEntry. A
// chunk stored raw (stored == its length) fills ceil(length / block_size)
// blocks; a chunk stored as one LZ4 block (stored < its length, and always in
// fewer blocks than raw) fills ceil(stored / block_size) blocks. The block
// list holds, per chunk in order, only the blocks the chunk fills.
//
// Only the owner writes. It never writes a slot or block referenced by the
// published state, and publishes a new state by writing the older of the two
// StateRecords (seq + 1, CRC last); readers take the valid record with the
// higher seq and re-check after reading. All integers are native x86-64
// little-endian; the magics reject other layouts, the format version other
// formats.
//
// The functions at the end (layout.cc) check and checksum these structs. They
// are pure and thread-safe; the checks report what is wrong as text ("" when
// valid) or false, leaving the Status (and the store name) to the caller.
#ifndef DLCKPT_MEMFS_LAYOUT_H_
#define DLCKPT_MEMFS_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dlckpt::memfs::layout {

inline constexpr char kStoreMagic[8] = {'D', 'L', 'C', 'K', 'P', 'T', 'S', '1'};
inline constexpr char kImageMagic[8] = {'D', 'L', 'C', 'K', 'P', 'T', 'I', '1'};
// 1: no compression fields, no chunk table. 2: this layout.
inline constexpr uint32_t kFormatVersion = 2;
inline constexpr size_t kHeaderBytes = 4096;
inline constexpr size_t kStateOffset = 1024;
inline constexpr int kNumSlots = 3;
inline constexpr uint64_t kNoSlot = ~0ull;
inline constexpr size_t kIdentityBytes = 64;

inline constexpr uint32_t kCompressNone = 0;
inline constexpr uint32_t kCompressLz4 = 1;

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
  uint32_t compression;         // kCompressNone or kCompressLz4
  uint32_t chunk_size;          // compressed stores: bytes per chunk; else 0
  uint32_t threshold_permille;  // compressed stores: see StoreOptions; else 0
  uint32_t reserved[2];
  uint32_t crc;  // CRC32C of this struct with crc = 0
};
static_assert(sizeof(Geometry) == 240);

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
  uint64_t meta_bytes;  // sizeof(ImageHeader) + nfiles * sizeof(FileEntry) + nchunks * sizeof(ChunkEntry)
  uint64_t data_bytes;  // bytes of file data in the image: sum of sizes, or of chunks' stored bytes
  uint64_t capacity;
  uint32_t block_size;
  uint32_t max_files;
  char job[kIdentityBytes];
  int32_t rank;
  uint32_t entries_crc;  // CRC32C of the nfiles entries
  int64_t commit_ns;
  uint64_t nchunks;        // chunk entries (compressed stores), else 0
  uint64_t logical_bytes;  // sum of the files' sizes
  uint32_t compression;    // as Geometry
  uint32_t chunk_size;
  uint32_t threshold_permille;
  uint32_t chunks_crc;  // CRC32C of the nchunks chunk entries
  uint8_t reserved[44];
  uint32_t header_crc;  // CRC32C of this struct with header_crc = 0
};
static_assert(sizeof(ImageHeader) == 216);

struct FileEntry {
  char path[256];  // NUL-terminated, at most 255 bytes
  uint64_t size;
  uint64_t ino;
  int64_t mtime_ns;
  uint32_t mode;
  uint32_t crc32c;  // of the file's (uncompressed) bytes; 0 in a working slot
  // A failed write left the file incomplete ("Failed writes" in memfs.h):
  // the errno, the failed operation (DamageOp), where it began and how many
  // bytes it asked for. Only in a working slot: a committed version never
  // holds a damaged file (CheckTables refuses one).
  uint32_t damage_errno;  // 0: whole
  uint32_t damage_op;
  uint64_t damage_offset;
  uint64_t damage_len;
  uint8_t reserved[8];
};
static_assert(sizeof(FileEntry) == 320);

// What failed in a damaged file (FileEntry::damage_op).
enum DamageOp : uint32_t { kDamageWrite = 1, kDamageShortWrite = 2, kDamageResize = 3 };

// A create the working files lost to a full file table ("Failed writes" in
// memfs.h): the first such path since the working files were last reset or
// a refused commit reported it, and how many were lost. Kept in the header
// page at kLostCreateOffset, written by the owner when a create fails and
// cleared (all zeros) when reported or reset; valid only with kLostMagic and
// its CRC. Read by the next owner only with a saved working set.
struct LostCreate {
  char magic[8];
  uint32_t err;
  uint32_t count;
  char path[256];  // NUL-terminated
  uint32_t reserved;
  uint32_t crc;  // CRC32C of this struct with crc = 0
};
static_assert(sizeof(LostCreate) == 280);
inline constexpr char kLostMagic[8] = {'D', 'L', 'C', 'K', 'P', 'T', 'L', '1'};
inline constexpr size_t kLostCreateOffset = 2048;
static_assert(kLostCreateOffset >= kStateOffset + 2 * 64 &&
              kLostCreateOffset + sizeof(LostCreate) <= kHeaderBytes);

struct ChunkEntry {
  uint32_t stored;  // bytes in the image: the chunk's length if raw, else its LZ4 block's
  uint32_t crc32c;  // of the chunk's uncompressed bytes; 0 in a working slot
};
static_assert(sizeof(ChunkEntry) == 8);

struct BlockListHeader {
  uint64_t count;
  uint32_t crc;  // CRC32C of the count uint32 block indices
  uint32_t reserved;
};
static_assert(sizeof(BlockListHeader) == 16);

inline uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

inline uint64_t ChunkTableOffset(uint32_t max_files) {
  return sizeof(ImageHeader) + uint64_t{max_files} * sizeof(FileEntry);
}

// Every chunk of a version fills at least one block, so nblocks entries suffice.
inline uint64_t BlockListOffset(uint32_t max_files, uint64_t nblocks, bool compressed) {
  return ChunkTableOffset(max_files) + (compressed ? nblocks * sizeof(ChunkEntry) : 0);
}

inline uint64_t SlotSize(uint32_t max_files, uint64_t nblocks, bool compressed) {
  return AlignUp(BlockListOffset(max_files, nblocks, compressed) + sizeof(BlockListHeader) +
                     nblocks * 4,
                 4096);
}

// ---- checks and checksums (layout.cc) ------------------------------------------

inline constexpr uint64_t kMaxChunkSize = uint64_t{64} << 20;

inline uint64_t BlocksFor(uint64_t size, uint64_t bs) { return (size + bs - 1) / bs; }
inline bool PowerOfTwo(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// "" if the compression fields of a geometry or image header are consistent.
std::string CheckCompression(uint32_t compression, uint32_t chunk_size, uint32_t permille,
                             uint32_t block_size);

// Identity fields: NUL-padded, truncated to kIdentityBytes - 1 bytes.
void CopyIdentity(char (&dst)[kIdentityBytes], std::string_view s);
std::string IdentityString(const char (&src)[kIdentityBytes]);
// Node names and job ids fit the identity fields: dlckpt::ValidNodeName and
// dlckpt::ValidJobName (dlckpt/base/names.h) allow at most 63 bytes.
static_assert(kIdentityBytes == 64);

uint32_t GeometryCrc(const Geometry& g);
uint32_t ImageHeaderCrc(const ImageHeader& h);
uint64_t StateCrc(const StateRecord& r);
uint32_t LostCreateCrc(const LostCreate& l);
// Loads a state record word by word; the CRC tells a torn read.
StateRecord LoadState(const StateRecord* src);
bool StateValid(const StateRecord& r);

// Checks a version's (or image's) file and chunk tables against its header:
// checksums, paths in order, modes, sizes, chunks, byte totals. Returns "" and
// the number of blocks the version fills in *blocks, or what is wrong. The
// header's own checksum and fields are the caller's to check.
std::string CheckTables(const ImageHeader& h, const FileEntry* entries, const ChunkEntry* chunks,
                        uint64_t* blocks);

}  // namespace dlckpt::memfs::layout

#endif  // DLCKPT_MEMFS_LAYOUT_H_

// dlckpt/memfs/memfs.h — memfs, the in-memory file system of one application rank.
//
// A Store lives in one POSIX shared memory object, named from job, node and
// rank (StoreName), created with a fixed capacity and pre-faulted. Files are
// named by full path (no directory tree is needed; directories exist only as
// optional entries for FUSE) and have POSIX regular-file semantics.
//
// Epochs. Everything written between two commits is one epoch. Commit()
// freezes the working files as the *pending* epoch and computes a CRC32C per
// file; Acknowledge() makes it the *acknowledged* epoch once its parity exists
// everywhere. Bytes of a committed epoch are never modified: later writes go
// to fresh blocks (copy-on-write), so at most the acknowledged epoch, one
// pending epoch and the working files coexist. Rollback() returns to the
// acknowledged epoch; Restore(e) selects the epoch a recovery decided on.
//
// Memory cost: the data area holds `capacity` bytes. A file rewritten every
// checkpoint costs its size once per live version: about twice the checkpoint
// while the next one is written or encoded (acknowledged + working/pending),
// three times only if the application writes while an epoch awaits its
// acknowledgement. Metadata: 3 version slots of (232 + max_files * 320 +
// blocks * 4, + blocks * 8 for the chunk table of a compressed store) bytes,
// each rounded up to 4 KiB, plus one 4 KiB header (StoreStats::shm_bytes =
// that + capacity); with the default max_files (DefaultMaxFiles) about 3% of
// the capacity.
//
// Compression (StoreOptions::compression = kLz4). File data is cut into
// chunks of chunk_size bytes (a power of two, at least 2 blocks); each chunk
// is stored either raw or as one LZ4 block in fewer blocks, and only if that
// takes at most threshold * (its raw blocks), so incompressible chunks stay
// raw and cost what they cost uncompressed. Chunks are compressed as written:
// a write that fills a whole chunk compresses it straight from the caller's
// buffer; a chunk filled piece by piece is compressed when a write reaches
// its end; whatever remains (a file's last partial chunk, chunks changed in
// place) at Commit(). Before compressing a chunk of 128 KiB or more in full,
// three 16 KiB samples are compressed; if they do not shrink below
// (1 + threshold) / 2 of their size the chunk stays raw, for about 5% of the
// cost of a full attempt. A write into a compressed chunk first decompresses
// it into raw blocks (the committed copy, if any, stays untouched); it is
// compressed again when a write reaches its end or at the next Commit(). CRCs
// are over the uncompressed bytes: one per chunk, taken when the chunk is
// judged, combined into the file's; Verify() and a rebuild decompress and
// recompute both.
//
// Memory with compression. With r the stored/raw ratio of a checkpoint of S
// bytes (in whole blocks: at best 1 / blocks-per-chunk), the "rewrite every
// checkpoint" pattern costs
//   after Acknowledge:             r*S
//   while the next one is written: r*S + r*S' (S' written so far) + one raw
//                                  chunk per file written in pieces smaller
//                                  than a chunk
//   from Commit to Acknowledge:    2*r*S (3*r*S if writes continue meanwhile)
// instead of S, 2*S and 2*S (3*S). The encoding view carries the chunks as
// stored, so parity, its double buffers on the spares and the encode traffic
// are r*S too. Reads of a compressed chunk decompress it into a one-chunk
// cache. Logical file sizes may exceed `capacity` (up to blocks * chunk_size).
// ENOSPC can come from operations that need no new block in an uncompressed
// store: a write or truncate inside a compressed chunk needs the chunk's raw
// blocks.
// Pre-touch. On some virtual machines a page of shared memory is slow the
// first time it is written even after fallocate and MAP_POPULATE (the host
// backs it lazily): the first checkpoints, which copy-on-write into blocks
// never used before, then ran 15-20x slower than later ones. A created store
// therefore writes one nonzero word into every 4 KiB page of its data area
// before it returns (StoreOptions::pretouch, on by default; only with
// prefault, whose fallocate guarantees the pages exist; a store rebuilt by
// ImageBuilder too). At creation every block is free, so nothing is
// overwritten; the contract stays that the bytes of a free block, and those
// of a file's last block past its end, are unspecified (a hole or an
// extension reads as zeros because memfs writes the zeros). $DLCKPT_PRETOUCH=0
// (or off, no, false) turns it off for every store and parity slot this
// process creates; StoreStats::pretouch_bytes / pretouch_seconds say what it
// did. Cost: about 0.01 s per GiB on top of the prefault's ~1 s per GiB
// (measured on the development VM, bench/README.md "Cold checkpoints").
//
// Processes. One *owner* process (the rank, FUSE daemon, or a restarted rank)
// writes a store; it holds an advisory lock the kernel drops when it dies.
// Any number of read-only attachers (the codec, dlckpt-store) read committed
// epochs concurrently without locks. When the owner dies, its uncommitted
// writes are lost: the next owner starts from the acknowledged epoch. A clean
// detach (destructor of an owner Store) keeps the working files for the next
// owner (so `cp` then `cat` through the preload library see the same files).
//
// Failed writes. A store remembers every write into the working files that
// failed, so that a checkpoint the application did not manage to write is
// never committed (an application may check fclose but not fwrite). A write
// that failed (ENOSPC when the store is full, ENOSPC past the capacity,
// EBADMSG from a damaged compressed chunk: any error of the data path) or
// stored fewer bytes than asked (a short write: the store filled up), and a
// truncate or ftruncate that could not resize the file (an extension that
// does not fit) mark that file *damaged*. A create (Open with O_CREAT)
// refused because the file table is full is recorded as a *lost create*.
// Errors that reach no data (EBADF, EROFS, a bad path, EMFILE) mark nothing.
// While any working file is damaged or a create was lost, Commit() refuses:
// it returns the first failure's errno (ENOSPC for a full store) with a
// message naming the store, the files (and what failed in each), the
// capacity and file-table size and how to raise them, and changes nothing:
// the acknowledged and pending epochs stay exactly as they were. A file's
// damage ends when every byte it holds is one the application wrote or
// asked for again: an Open with O_TRUNC, a successful truncate to a size at
// most the offset of the first byte the failure left wrong (0 always is),
// successful writes that cover [0, size) after the failure (a full
// rewrite), or the file going away (unlink, rename over it). A lost create
// ends when that path is created after all, when it or a directory above it
// is removed (Unlink, even of the missing path, or Rmdir), or once a refused
// Commit has reported it (the path is not among the working files, so
// nothing of it could be committed); after several lost creates only the
// refused Commit ends them. Rollback(), Restore() and a new
// owner without a saved working set start from a committed epoch: no
// failure. The marks belong to the working files: in the owner's memory and,
// when it detaches, in the saved working set (a lost create in the store's
// header at once), so the next owner (dlckpt-store commit, a preloaded tool)
// refuses the same commit. FileInfo::damage shows a file's mark.
//
// Thread safety: every method of Store is thread-safe. Errors: Status with the
// store name and path, errno-valued codes (ENOENT, EBADF, ENOSPC, EMFILE,
// ENAMETOOLONG, EINVAL, EISDIR, EEXIST, EBUSY, EBADMSG for corruption).
#ifndef DLCKPT_MEMFS_MEMFS_H_
#define DLCKPT_MEMFS_MEMFS_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dlckpt/base/names.h"
#include "dlckpt/base/env.h"
#include "dlckpt/memfs/extent.h"
#include "dlckpt/base/status.h"

namespace dlckpt::memfs {

inline constexpr size_t kMaxPath = 255;  // bytes, without the terminating NUL

enum class Compression { kNone = 0, kLz4 = 1 };

// "none" or "lz4" (case-insensitive); EINVAL naming the text otherwise.
Result<Compression> ParseCompression(std::string_view text);
const char* CompressionName(Compression c);

struct StoreOptions {
  uint64_t capacity = 256ull << 20;  // bytes of file data, all versions together
  uint32_t block_size = 64u << 10;   // power of two in [4 KiB, 16 MiB]
  // Files (and directories) per version, at most 2^20; 0 takes
  // DefaultMaxFiles(capacity). Fixed when the store is created.
  uint32_t max_files = 0;
  uint32_t max_open = 1024;          // open descriptors per Store object
  bool prefault = true;              // allocate and map every page at creation
  // Write one nonzero word into every page of the data area at creation (see
  // "Pre-touch" above); only with prefault; $DLCKPT_PRETOUCH=0 overrides it.
  bool pretouch = true;
  // Compression of file data (see "Compression" above); recorded in the store.
  Compression compression = Compression::kNone;
  // A chunk is stored compressed only if it then fills at most this fraction
  // of its raw blocks, in (0, 1]. 0.875: at least 1/8 saved (as ZFS demands),
  // i.e. at most 14 of 16 blocks with the default chunk.
  double compress_threshold = 0.875;
  // Bytes per chunk: a power of two, >= 2 * block_size, <= 64 MiB; 0 picks
  // 16 blocks (1 MiB with 64 KiB blocks), capped at 64 MiB.
  uint32_t chunk_size = 0;
  // Identity recorded in the store (and in its images).
  std::string job;
  std::string node;
  int rank = 0;
};

// The file table size a store gets when StoreOptions::max_files is 0: one
// entry per 32 KiB of capacity, at least 1024 and at most 2^20 (8192 for the
// default 256 MiB, whose three tables then take 7.5 MiB, 2.9% of it). The
// preload library, the static wrappers ($DLCKPT_MAX_FILES overrides it),
// dlckpt-fuse and dlckpt-store all use this rule.
uint32_t DefaultMaxFiles(uint64_t capacity);

// A store's name ("/dlckpt.<job>.<node>.r<rank>"): dlckpt::StoreName of
// dlckpt/base/names.h, the one place where shared-memory names are made.

// kReadOnly maps pages as they are touched (tools that look at metadata);
// kReadAll is read-only with every page mapped at attach (the codec, which
// reads whole epochs); kOwner maps every page too, so a restarted owner
// writes at full speed at once.
enum class AttachMode { kReadOnly, kReadAll, kOwner };

struct FileInfo {
  std::string path;
  uint64_t size = 0;
  uint32_t mode = 0;  // includes S_IFREG or S_IFDIR
  int64_t mtime_ns = 0;
  uint64_t ino = 0;
  uint32_t crc32c = 0;  // of the file's bytes, valid in committed epochs
  uint64_t blocks = 0;  // data blocks the file fills (compressed chunks: their LZ4 blocks)
  // Working files: the errno of the failed write that left the file
  // incomplete ("Failed writes" above), 0 if it is whole.
  int damage = 0;
};

struct EpochState {
  uint64_t acknowledged = 0;  // 0: none
  uint64_t pending = 0;       // 0: none
  uint64_t next = 1;          // the smallest epoch a commit may take (never reused)
};

struct StoreStats {
  uint64_t capacity = 0;     // data bytes
  uint64_t block_size = 0;
  uint64_t blocks_total = 0;
  uint64_t blocks_free = 0;  // in the owner's view; read-only attachers: 0
  // Owner: blocks_total - blocks_free. Read-only attachers: the blocks of the
  // published versions (acknowledged, pending, a cleanly saved working set).
  uint64_t blocks_used = 0;
  uint32_t max_files = 0;
  Compression compression = Compression::kNone;
  uint32_t chunk_size = 0;  // compressed stores
  double compress_threshold = 0;
  std::string job, node;
  int rank = 0;
  uint64_t shm_bytes = 0;  // size of the shared memory object
  // Data-area bytes this Store object pre-touched when it created the store,
  // and the seconds that took (0 when attached, or pre-touch was off).
  uint64_t pretouch_bytes = 0;
  double pretouch_seconds = 0;
  // Owner, uncompressed stores: file bytes that this Store object's commits
  // read again to compute CRCs. A write computes the CRC of the bytes it
  // puts in a block while they are in cache; a commit reads only what those
  // do not cover (bytes overwritten inside a block, after a shrink, or of
  // files loaded from a committed version and changed since).
  uint64_t crc_reread_bytes = 0;
  // Owner: blocks that commits found rewritten with the bytes they held and
  // kept shared with the committed epoch (FileNode::Shadow), since creation.
  uint64_t equal_blocks_kept = 0;
};

// Pre-touch (see above). False if $DLCKPT_PRETOUCH is 0, off, no or false.
bool PretouchEnabled();
// Writes a nonzero 8-byte word (PretouchWord of the page's offset from
// `base`) at the start of every 4 KiB page of [base, base + len). Contract:
// only into memory that holds no data (a store's free blocks at creation, a
// fresh parity slot); it destroys whatever was there.
void PretouchPages(uint8_t* base, uint64_t len);
// The word PretouchPages writes at offset `off` (a multiple of 4096): never
// zero, and different for every page, so no two pre-touched pages are alike.
uint64_t PretouchWord(uint64_t off);

// The encoding view of one committed epoch: a canonical byte image holding
// the epoch's metadata (a header, one entry per file and, in a compressed
// store, one entry per chunk, independent of block placement and node)
// followed by every file's bytes in entry order, as stored: raw, or chunk by
// chunk raw or LZ4-compressed. A store rebuilt from an image (ImageBuilder)
// stores every chunk exactly as the image does, so its image of that epoch is
// byte-identical and parity computed over images rebuilds a store byte for
// byte, again and again. (Uncompressed stores holding the same epoch content
// have identical images; compressed ones may differ in which chunks are
// compressed.) The extents point into the store's mapping: valid while the
// Store object lives and the epoch stays committed (an acknowledged epoch
// stays until a newer one is acknowledged).
struct Image {
  uint64_t epoch = 0;
  uint64_t size = 0;  // sum of extent lengths
  std::vector<Extent> extents;
};

class Store final {
 public:
  // Creates a new store (EEXIST if the name exists) owned by this process.
  static Result<std::unique_ptr<Store>> Create(const std::string& name, const StoreOptions& options,
                                               Env* env = Env::Default());
  // Attaches to an existing store. The header, geometry and committed version
  // metadata are checked; a damaged store is refused (EBADMSG), never read.
  // kOwner fails with EBUSY while another live process owns the store. Only
  // a store this uid created is attached (see Env::OpenShm): another uid's is
  // refused with EPERM, one whose mode is not 0600 with EACCES, the message
  // naming the object, the owner or mode found and the one expected.
  static Result<std::unique_ptr<Store>> Attach(const std::string& name, AttachMode mode,
                                               Env* env = Env::Default());
  // Removes the shared memory object (mappings stay valid until detached).
  static Status Destroy(const std::string& name, Env* env = Env::Default());

  // Detaches. An owner saves its working files for the next owner first.
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const std::string& name() const;
  bool is_owner() const;
  StoreStats stats() const;
  EpochState epochs() const;

  // --- files. Owners act on the working files. Read-only attachers see one
  // committed epoch (the newest, or the one chosen with View) and may only
  // open O_RDONLY. Descriptors are small integers private to this object.
  Result<int> Open(std::string_view path, int flags, mode_t mode = 0644);
  Status Close(int fd);
  Result<size_t> Read(int fd, void* buf, size_t len);
  Result<size_t> Write(int fd, const void* buf, size_t len);
  Result<size_t> Pread(int fd, void* buf, size_t len, uint64_t offset);
  Result<size_t> Pwrite(int fd, const void* buf, size_t len, uint64_t offset);
  // Read-only attachers: up to `len` bytes of the file from `offset` without
  // copying them: a piece of the store's mapping (blocks that lie next to
  // each other form one piece), or for an LZ4 chunk this object's cache of
  // it decompressed. Empty at or past the end of file. The bytes stay valid
  // while the epoch stays committed (or held) and, for a decompressed chunk,
  // until the next read through this object. Owners get EPERM: their files
  // change under a pointer. Not for concurrent use with other reads.
  Result<Extent> ReadInPlace(int fd, uint64_t offset, size_t len);
  Result<uint64_t> Seek(int fd, int64_t offset, int whence);
  Status Ftruncate(int fd, uint64_t size);
  Status Truncate(std::string_view path, uint64_t size);
  Result<FileInfo> Fstat(int fd);
  Result<FileInfo> Stat(std::string_view path);
  Status Fsync(int fd);  // data is already in memory: checks fd only
  Result<int> OpenFlags(int fd);  // the flags given to Open
  Status Unlink(std::string_view path);
  Status Rename(std::string_view from, std::string_view to);
  Status Mkdir(std::string_view path, mode_t mode);
  Status Rmdir(std::string_view path);  // ENOTEMPTY if any path lies below it
  // Files (and directories) whose path starts with `prefix`, sorted by path.
  Result<std::vector<FileInfo>> List(std::string_view prefix);

  // --- epochs (owner only, except Verify/GetImage/View).
  // Freezes the working files as a new pending epoch and computes CRCs.
  // `epoch` 0 takes the next number; an explicit one (agreed by all ranks)
  // must be newer than every epoch this store has seen, else EINVAL. Epoch
  // numbers are never reused, even after AbortPending. EBUSY if an epoch is
  // still pending. Refused, changing nothing, while a working file is
  // damaged or a create was lost (see "Failed writes"): the failure's errno,
  // usually ENOSPC, with a message naming the file.
  Result<uint64_t> Commit(uint64_t epoch = 0);
  // The pending epoch `epoch` becomes the acknowledged one; the previous
  // acknowledged epoch's blocks are released.
  Status Acknowledge(uint64_t epoch);
  // Drops the pending epoch (its parity was never completed).
  Status AbortPending();
  // Working files := the acknowledged epoch; the pending epoch is dropped.
  Status Rollback();
  // Makes committed `epoch` (acknowledged or pending) the acknowledged epoch,
  // drops the other, and resets the working files to it. Used by recovery.
  Status Restore(uint64_t epoch);
  // Recomputes every file CRC of committed `epoch` over the uncompressed
  // bytes (decompressing compressed chunks, whose own CRCs are checked too);
  // EBADMSG naming the file (and chunk offset) on a mismatch or damaged data.
  Status Verify(uint64_t epoch);
  // Recomputes the CRC32C of `path` as this object sees it (a read-only
  // attacher: its view; an owner: the working file) and compares it with the
  // CRC recorded at commit: a committed view's own, or for working files that
  // of the newest committed version still holding exactly the same blocks.
  // Returns the epoch whose CRC matched, or 0 when no commit vouches for the
  // bytes (a working file changed since, or never committed). EBADMSG naming
  // the store, epoch and path on a mismatch; ENOENT if the file is not there.
  Result<uint64_t> VerifyFile(std::string_view path);
  // Checks the metadata (not the file data: see Verify) of every version the
  // store's published state names: the acknowledged and pending epochs and a
  // saved working set. EBADMSG naming the store, slot and epoch of the first
  // damaged one. A read-only attach checks only the version it views, and
  // silently shows a committed epoch when the saved working set is damaged;
  // tools call this to report the rest.
  Status CheckSlots();
  // The encoding view of committed `epoch`.
  Result<Image> GetImage(uint64_t epoch);
  // Read-only attachers: choose the committed epoch that Open/List/Stat see.
  Status View(uint64_t epoch);
  // Owner only: keeps the blocks of the acknowledged `epoch` from being
  // reused after a newer epoch is acknowledged, until Release(epoch), so that
  // a read-only attacher that loaded it with View(epoch) before can read it
  // to the end (a drain to disk). One epoch is held at a time: EBUSY if
  // another is; EINVAL if `epoch` is not the acknowledged epoch. Held blocks
  // count as used (a long hold can make writes fail with ENOSPC). A hold is
  // not published: it ends with the owner process, and a clean detach
  // releases it.
  Status Hold(uint64_t epoch);
  // Ends the hold of `epoch` (no-op if it is not held); its blocks that no
  // committed or working version uses become free.
  Status Release(uint64_t epoch);
  // The epoch held, 0 if none.
  uint64_t held_epoch() const;

  // --- incremental encode
  // [offset, offset + len) of an encoding image.
  struct ByteRange {
    uint64_t offset = 0;
    uint64_t len = 0;
  };
  // Which bytes of the image of epoch `to` may differ from the image of
  // epoch `from` (each read as zeros past its own end). Contract: every byte
  // at an offset x < max(from_size, to_size) that lies in no range is equal
  // in both images; the ranges are sorted, disjoint, non-adjacent and inside
  // [0, max(from_size, to_size)). They are conservative (a range may hold
  // equal bytes), never missing a difference.
  struct ImageDelta {
    uint64_t from_epoch = 0, to_epoch = 0;
    uint64_t from_size = 0, to_size = 0;  // image lengths
    // The file set, a file's size or a chunk's stored size differ: image
    // offsets after the first such difference moved, so the bytes from there
    // on count as changed (delta only where the layout is stable).
    bool layout_changed = false;
    uint64_t changed_bytes = 0;  // sum of the ranges' lengths
    std::vector<ByteRange> ranges;
  };
  // The delta between two images of this store (Diff of GetImage(from) and
  // GetImage(to)); both epochs committed here (ENOENT otherwise).
  Result<ImageDelta> Delta(uint64_t from, uint64_t to);
  // The delta between two images taken from the same Store object while both
  // epochs stay committed. Data bytes: copy-on-write never modifies a
  // committed block, so a byte read from the same address at the same image
  // offset in both is equal; every other data byte counts as changed (block
  // granularity; a chunk recompressed to another stored size is changed).
  // Metadata (header, file and chunk tables) is compared byte by byte in
  // 256-byte granules. Cost: one pass over both extent lists plus the
  // metadata; the data bytes are not read.
  static ImageDelta Diff(const Image& from, const Image& to);

  class Impl;

 private:
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Builds a whole store from an image stream (the inverse of GetImage), e.g.
// on a spare node from bytes rebuilt by the codec. Bytes are appended in image
// order; bytes past the image's own length (zero padding of parity) are
// ignored. The new store has the image's geometry and compression settings,
// and stores every chunk as the image does (no recompression). Finish()
// checks every CRC over the uncompressed bytes and the header, and leaves a
// store whose acknowledged epoch is the image's epoch. If the builder is
// destroyed before Finish() succeeded, the half-built store is removed.
class ImageBuilder final {
 public:
  // `name`: the new store's shared memory name; `node`: its node. The job,
  // rank, geometry and epoch come from the image.
  static Result<std::unique_ptr<ImageBuilder>> Begin(const std::string& name, std::string node,
                                                     Env* env = Env::Default());
  ~ImageBuilder();
  ImageBuilder(const ImageBuilder&) = delete;
  ImageBuilder& operator=(const ImageBuilder&) = delete;

  Status Append(const void* data, size_t len);
  // The image's length once its header has arrived (0 before).
  uint64_t image_size() const;
  // Verifies and publishes; returns the epoch.
  Result<uint64_t> Finish();

  class Impl;

 private:
  explicit ImageBuilder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Reads `len` bytes at `offset` of an image into `out` (zero past its end).
void CopyFromImage(const Image& image, uint64_t offset, void* out, size_t len);

}  // namespace dlckpt::memfs

#endif  // DLCKPT_MEMFS_MEMFS_H_

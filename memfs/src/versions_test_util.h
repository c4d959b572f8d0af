// Helpers of memfs's unit tests of VersionSet and VersionImage (not
// installed, not a library): a small uncompressed store laid out in a plain
// buffer (no shared memory), with a file table and the owner's VersionSet.
#ifndef DLCKPT_MEMFS_VERSIONS_TEST_UTIL_H_
#define DLCKPT_MEMFS_VERSIONS_TEST_UTIL_H_

#include <sys/stat.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dlckpt/base/crc32c.h"
#include "dlckpt/base/env.h"
#include "block_allocator.h"
#include "file_table.h"
#include "layout.h"
#include "versions.h"

namespace dlckpt::memfs::testing {

// Store "t" of kBlocks blocks of kBs bytes, 8 files at most, rank 3, with
// both state records published (no epoch yet).
struct SmallStore {
  static constexpr uint32_t kBs = 4096;
  static constexpr uint64_t kBlocks = 16;

  SmallStore() {
    using namespace layout;  // NOLINT(google-build-using-namespace)
    geo.block_size = kBs;
    geo.max_files = 8;
    geo.nblocks = kBlocks;
    geo.capacity = kBlocks * kBs;
    geo.slot_offset = kHeaderBytes;
    geo.slot_size = SlotSize(geo.max_files, kBlocks, false);
    geo.data_offset = AlignUp(geo.slot_offset + kNumSlots * geo.slot_size, 4096);
    geo.rank = 3;
    mem.assign(geo.data_offset + geo.capacity, 0);
    blocks.SetArea(data(), kBs, kBlocks);
    blocks.ResetRefs();
    versions = NewSet(true, &blocks);
    StateRecord s{};
    s.acked_slot = s.pending_slot = s.working_slot = kNoSlot;
    s.next_epoch = 1;
    versions->Publish(s);
    versions->Publish(s);
  }

  uint8_t* data() { return mem.data() + geo.data_offset; }

  // Another VersionSet on the same memory: a reader (owner false, blocks
  // null) or a next owner.
  std::unique_ptr<VersionSet> NewSet(bool owner, BlockAllocator* b) {
    auto v = std::make_unique<VersionSet>("t", Env::Default(), owner, mem.data(), b);
    v->SetGeometry(geo);
    return v;
  }

  // A file of `nblocks` new working blocks, each filled with `fill`, with
  // its CRC.
  NodePtr AddFile(const std::string& path, uint64_t nblocks, uint8_t fill) {
    NodePtr n = files.NewNode(path, S_IFREG | 0644, 1);
    for (uint64_t i = 0; i < nblocks; ++i) {
      uint32_t b = blocks.Allocate();
      std::memset(blocks.Ptr(b), fill, kBs);
      n->blocks.push_back(b);
      n->crc = Crc32c(blocks.Ptr(b), kBs, i == 0 ? 0 : n->crc);
    }
    n->size = nblocks * kBs;
    files.Insert(n);
    return n;
  }

  layout::Geometry geo{};
  std::vector<uint8_t> mem;
  BlockAllocator blocks;
  FileTable files;
  std::unique_ptr<VersionSet> versions;
};

}  // namespace dlckpt::memfs::testing

#endif  // DLCKPT_MEMFS_VERSIONS_TEST_UTIL_H_

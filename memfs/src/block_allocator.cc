// block_allocator.cc — BlockAllocator (see block_allocator.h).
#include "block_allocator.h"

#include <cstdlib>

namespace dlckpt::memfs {

void BlockAllocator::SetArea(uint8_t* data, uint32_t block_size, uint64_t nblocks) {
  data_ = data;
  block_size_ = block_size;
  nblocks_ = nblocks;
}

void BlockAllocator::ResetRefs() {
  refs_.assign(nblocks_, 0);
  free_ = nblocks_;
}

uint32_t BlockAllocator::Allocate() {
  const uint64_t n = nblocks_;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t b = cursor_ + i;
    if (b >= n) b -= n;
    if (refs_[b] == 0) {
      refs_[b] = kRefWorking;
      free_--;
      cursor_ = b + 1 == n ? 0 : b + 1;
      return static_cast<uint32_t>(b);
    }
  }
  std::abort();  // free_ said there was one: the allocator's invariant broke
}

void BlockAllocator::AddRef(uint32_t b, uint8_t ref) {
  if (refs_[b] == 0) free_--;
  refs_[b] |= ref;
}

void BlockAllocator::DropRef(uint32_t b, uint8_t ref) {
  if (refs_[b] == 0) return;
  refs_[b] &= static_cast<uint8_t>(~ref);
  if (refs_[b] == 0) free_++;
}

}  // namespace dlckpt::memfs

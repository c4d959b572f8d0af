// reduce_transport_impl.h — private to the codec's MPI data path
// (dlckpt/codec/reduce_transport.h): the engine ReduceTransport::Impl, its
// message-buffer Region and the helpers its files share. The engine is split
// by concern:
//   reduce_transport.cc  the sinks, Run (agreement on the spec and the
//                        outcome), the public ReduceTransport and spec builders;
//   reduce_plan.cc       spec validation, the rings, their buffers and geometry;
//   reduce_loop.cc       the event loop: the pipelined ring reduce-scatter and
//                        the delivery of reduced slices to output owners.
// Thread safety: none; an Impl is used by one thread, one Run at a time.
// Failures: a Status naming the Run's label and rank; an MPI error or a
// timeout marks the engine broken (requests may be in flight) and every later
// Run fails. Nothing aborts.
#ifndef DLCKPT_CODEC_REDUCE_TRANSPORT_IMPL_H_
#define DLCKPT_CODEC_REDUCE_TRANSPORT_IMPL_H_

#include <mpi.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dlckpt/codec/reduce_transport.h"

namespace dlckpt::codec {

namespace internal {

// Ring i uses tag kTagBase + 2i for partial sums travelling around the ring
// and kTagBase + 2i + 1 for reduced slices sent to output owners.
inline constexpr int kTagBase = 0x7d0;
inline constexpr int kOwnerWindow = 4;  // receives an owner keeps posted per source
inline constexpr uint64_t kAlign = 64;  // segment and chunk offsets are multiples of this
inline constexpr size_t kPage = 4096;

inline uint64_t DivUp(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
inline uint64_t RoundUp(uint64_t a, uint64_t b) { return DivUp(a, b) * b; }

// Monotonic seconds.
double NowSeconds();
// Sleeps `us` microseconds (nothing when not positive).
void SleepMicros(int us);
// MPI's text for error code `rc`.
std::string MpiErrorString(int rc);

// Anonymous memory, pre-faulted, released on destruction.
class Region {
 public:
  Region() = default;
  ~Region() { Reset(); }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  // Makes at least `size` bytes available (contents undefined).
  Status Reserve(size_t size) {
    if (size <= size_) return Status::OK();
    Reset();
    size = RoundUp(size, kPage);
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) {
      return Status::FromErrno(errno, "mapping " + std::to_string(size) +
                                          " bytes of codec message buffers");
    }
    data_ = static_cast<uint8_t*>(p);
    size_ = size;
    return Status::OK();
  }
  uint8_t* data() const { return data_; }

 private:
  void Reset() {
    if (data_) munmap(data_, size_);
    data_ = nullptr;
    size_ = 0;
  }
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace internal

// --------------------------------------------------------------- the engine
//
// Outputs are grouped by owner into rings. The outputs of an owner that is
// itself a source form a ring of the other sources; that owner (the ring's
// folder) adds its own contribution to each reduced slice as it arrives, so
// it never sends. Outputs of owners that are not sources share one ring of
// all sources. Every ring is an independent pipelined reduce-scatter with
// its own buffers and tags; one event loop drives them all.

class ReduceTransport::Impl {
 public:
  Impl(MPI_Comm comm, int rank, int size, const Options& options)
      : comm_(comm), rank_(rank), size_(size), options_(options) {}

  Result<ReduceStats> Run(const ReduceSpec& spec, std::span<const Extent> input, OutputSink* sink,
                          std::span<const Extent> input_xor = {});
  void set_progress(ReduceTransport::ProgressFn fn) { progress_ = std::move(fn); }

 private:
  // Where an owned output's bytes go.
  enum class Mode { kDirect, kWrite, kDiscard };

  struct Item {  // one step of a ring member's pipeline
    int t;       // hop: 0 = first contribution, S-1 = fully reduced
    int step;    // t + chunk: the order of processing
    uint64_t off;
    size_t len;
  };
  struct OwnerMsg {  // one slice an owner receives
    uint64_t off;
    size_t len;
    int output;  // index in the spec's combination
  };

  struct Ring {
    std::vector<int> outputs;                 // indices in the spec's combination
    std::shared_ptr<const Combination> comb;  // rows `outputs`, all s sources
    int folder = -1;                          // source index folding in at the owner, or -1
    std::vector<int> members;                 // source indices, in ring order
    int pos = -1;                             // this rank's position in members, or -1
    bool owner = false;                       // this rank owns outputs of this ring
    int m = 0;
    int tag_ring = 0, tag_out = 0;
    uint64_t seg_len = 0;
    size_t chunk = 0;
    int nc = 0;
    int pred = -1, succ = -1;  // ranks
    // Member side.
    std::vector<Item> items;
    std::vector<int> recv_items;  // indices of items with t >= 1, in order
    std::vector<uint8_t> recv_done;
    std::vector<uint8_t*> bufs;  // m x chunk bytes each
    int recv_bufs = 0;
    std::vector<int> free_recv, free_send, refs;
    std::deque<std::pair<int, int>> posted;  // (item, buffer) of posted receives
    size_t next_item = 0, next_recv = 0;
    // Owner side.
    std::vector<std::vector<OwnerMsg>> owner_msgs;  // per ring position, in arrival order
    std::vector<size_t> owner_next;
    std::vector<int> owner_outstanding;
    std::vector<uint8_t*> owner_bufs;  // chunk bytes each
    std::vector<int> free_owner;

    int size() const { return static_cast<int>(members.size()); }
    // Buffers of a member: receives two steps ahead (2S-1) and sends (2S).
    int member_buffers() const { return (size() > 1 ? 2 * size() - 1 : 0) + 2 * size(); }
    bool done() const {
      if (next_item != items.size() || next_recv != recv_items.size()) return false;
      for (size_t q = 0; q < owner_msgs.size(); ++q)
        if (owner_next[q] != owner_msgs[q].size()) return false;
      return true;
    }
  };

  enum class Kind : uint8_t { kRingRecv, kRingSend, kOutSend, kOwnerRecv };
  struct Pending {
    Kind kind;
    int ring;
    int a;  // kRingRecv: item; kRingSend/kOutSend: buffer; kOwnerRecv: ring position
    int b;  // kOwnerRecv: message index
    int c;  // kOwnerRecv: owner buffer or -1
  };

  Status Fail(const std::string& what, int rc) {
    broken_ = true;
    return Status::IOError(where_ + ": " + what + ": " + internal::MpiErrorString(rc));
  }
  Status Validate(const ReduceSpec& spec, OutputSink* sink);
  uint64_t SpecHash(const ReduceSpec& spec) const;
  Status BuildRings(const ReduceSpec& spec);
  Status Reserve();
  void Setup(Ring& r, uint64_t length);
  Status Loop(const ReduceSpec& spec, OutputSink* sink, ReduceStats* stats, double t_start);
  Status Step(const ReduceSpec& spec, int ri, OutputSink* sink, ReduceStats* stats,
              bool* progress);
  // Seconds left of the Run's timeout (0: no timeout; tiny but positive when over).
  double TimeLeft(double t_start) const {
    if (options_.timeout_ms <= 0) return 0;
    return std::max(1e-6, t_start + options_.timeout_ms / 1000.0 - internal::NowSeconds());
  }
  void Post(Kind kind, int ring, int a, int b, int c, MPI_Request req) {
    reqs_.push_back(req);
    pending_.push_back({kind, ring, a, b, c});
  }
  // Calls fn(a, b, offset - off, len) for the pieces of this source's image
  // within [off, off + len): its bytes are a xor b; a or b is null for a
  // hole (zeros), b always without a second input (input_xor).
  template <class Fn>
  void ForEachPiece(uint64_t off, size_t len, Fn fn) const;
  void ComputeItem(const Ring& r, const Item& item, uint8_t* buf, ReduceStats* stats);
  void Deliver(OutputSink* sink, int output, uint64_t off, const uint8_t* data, size_t len);
  // Tells the sink that bytes of a direct output are final.
  void Landed(OutputSink* sink, int output, uint64_t off, size_t len) {
    if (failed_[output]) return;
    if (Status st = sink->Landed(output, off, len); !st.ok()) {
      failed_[output] = 1;
      if (sink_error_.ok()) sink_error_ = st.Prefixed(where_ + ": output " + std::to_string(output));
    }
  }

  MPI_Comm comm_;
  int rank_, size_;
  Options options_;
  ReduceTransport::ProgressFn progress_;  // see ReduceTransport::set_progress
  double last_progress_ = 0;
  bool broken_ = false;
  std::string where_;
  std::vector<std::unique_ptr<internal::Region>> regions_;  // 2 per ring: member, owner buffers

  // Per Run.
  const Combination* comb_ = nullptr;
  int m_ = 0, s_ = 0;
  bool scatter_ = false;  // ReduceSpec::scatter
  int src_ = -1;  // this rank's source index (coefficient column), -1 if none
  std::vector<int> owned_;
  std::vector<Ring> rings_;
  size_t chunk_ = 0;  // the largest chunk, the same on every rank
  std::vector<Mode> mode_;  // per output (owned ones only meaningful)
  std::vector<uint8_t*> target_;
  std::vector<uint8_t> failed_;  // per output: the sink reported an error
  Status sink_error_;
  uint64_t length_ = 0, my_len_ = 0;
  std::vector<Extent> extents_;    // non-empty input extents
  std::vector<uint64_t> ext_off_;  // their offsets in the image
  std::vector<Extent> extents2_;    // the same of input_xor (empty: none)
  std::vector<uint64_t> ext_off2_;

  std::vector<MPI_Request> reqs_;
  std::vector<Pending> pending_;
  std::vector<int> done_idx_;
};

template <class Fn>
void ReduceTransport::Impl::ForEachPiece(uint64_t off, size_t len, Fn fn) const {
  const uint64_t end = std::min<uint64_t>(off + len, my_len_);
  if (off >= end) return;
  // Both lists cover [0, my_len_) without gaps (Run checks the lengths).
  const bool two = !extents2_.empty();
  size_t e = std::upper_bound(ext_off_.begin(), ext_off_.end(), off) - ext_off_.begin() - 1;
  size_t f = two ? std::upper_bound(ext_off2_.begin(), ext_off2_.end(), off) - ext_off2_.begin() - 1 : 0;
  for (uint64_t pos = off; pos < end;) {
    const uint64_t ext_end = ext_off_[e] + extents_[e].len;
    const uint64_t ext2_end = two ? ext_off2_[f] + extents2_[f].len : ext_end;
    const uint64_t stop = std::min({end, ext_end, ext2_end});
    const uint8_t* a = extents_[e].data;  // null: a hole
    const uint8_t* b = two ? extents2_[f].data : nullptr;
    fn(a != nullptr ? a + (pos - ext_off_[e]) : nullptr, b != nullptr ? b + (pos - ext_off2_[f]) : nullptr,
       static_cast<size_t>(pos - off), static_cast<size_t>(stop - pos));
    pos = stop;
    if (pos == ext_end) ++e;
    if (two && pos == ext2_end) ++f;
  }
}

// Adds this source's contribution to chunk [item.off, +len) of the ring's

}  // namespace dlckpt::codec

#endif  // DLCKPT_CODEC_REDUCE_TRANSPORT_IMPL_H_

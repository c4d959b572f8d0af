#include "dlckpt/reduce_transport.h"

#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>

namespace dlckpt::codec {

namespace {

// Ring i uses tag kTagBase + 2i for partial sums travelling around the ring
// and kTagBase + 2i + 1 for reduced slices sent to output owners.
constexpr int kTagBase = 0x7d0;
constexpr int kOwnerWindow = 4;  // receives an owner keeps posted per source
constexpr uint64_t kAlign = 64;  // segment and chunk offsets are multiples of this
constexpr size_t kPage = 4096;

uint64_t DivUp(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
uint64_t RoundUp(uint64_t a, uint64_t b) { return DivUp(a, b) * b; }

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void SleepMicros(int us) {
  if (us <= 0) return;
  timespec ts{us / 1000000, (us % 1000000) * 1000L};
  nanosleep(&ts, nullptr);
}

std::string MpiErrorString(int rc) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(buf, len);
}

uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

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

}  // namespace

// ------------------------------------------------------------------- sinks

Status OutputSink::Write(int output, uint64_t, const uint8_t*, size_t) {
  return Status::Unsupported("sink of output " + std::to_string(output) +
                             " returned no buffer but does not implement Write");
}

Status OutputSink::Landed(int, uint64_t, size_t) { return Status::OK(); }

Status OutputSink::Finish(int) { return Status::OK(); }

Result<uint8_t*> BufferSink::Begin(int output, uint64_t length) {
  if (output < 0) return Status::InvalidArgument("negative output index");
  if (buffers_.size() <= static_cast<size_t>(output)) buffers_.resize(output + 1);
  Buffer& b = buffers_[output];
  if (b.capacity < length) {
    b.data.reset(new (std::nothrow) uint8_t[length]);
    if (!b.data) {
      b.capacity = 0;
      return Status::NoSpace("cannot allocate " + std::to_string(length) + " bytes for output " +
                             std::to_string(output));
    }
    std::memset(b.data.get(), 0, length);  // pre-fault
    b.capacity = length;
  }
  b.size = length;
  return b.data.get();
}

std::span<const uint8_t> BufferSink::output(int output) const {
  if (output < 0 || static_cast<size_t>(output) >= buffers_.size()) return {};
  const Buffer& b = buffers_[output];
  return {b.data.get(), b.size};
}

Result<uint8_t*> OrderedSink::Begin(int output, uint64_t length) {
  if (output < 0) return Status::InvalidArgument("negative output index");
  if (states_.size() <= static_cast<size_t>(output)) states_.resize(output + 1);
  states_[output] = State{length, 0, {}};
  return staging_.Begin(output, length);
}

Status OrderedSink::Landed(int output, uint64_t offset, size_t len) {
  State& st = states_[output];
  if (len == 0) return Status::OK();
  st.landed[offset] = offset + len;
  const uint8_t* base = staging_.output(output).data();
  uint64_t end = st.appended;
  for (auto it = st.landed.begin(); it != st.landed.end() && it->first == end;
       it = st.landed.erase(it)) {
    end = it->second;
  }
  if (end == st.appended) return Status::OK();
  const uint64_t from = st.appended;
  st.appended = end;
  return append_(output, base + from, static_cast<size_t>(end - from));
}

Status OrderedSink::Finish(int output) {
  const State& st = states_[output];
  if (st.appended != st.length) {
    return Status::Corruption("output " + std::to_string(output) + ": " +
                              std::to_string(st.appended) + " of " + std::to_string(st.length) +
                              " bytes appended at the end");
  }
  return Status::OK();
}

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

  Result<ReduceStats> Run(const ReduceSpec& spec, std::span<const Extent> input, OutputSink* sink);

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
    return Status::IOError(where_ + ": " + what + ": " + MpiErrorString(rc));
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
    return std::max(1e-6, t_start + options_.timeout_ms / 1000.0 - NowSeconds());
  }
  void Post(Kind kind, int ring, int a, int b, int c, MPI_Request req) {
    reqs_.push_back(req);
    pending_.push_back({kind, ring, a, b, c});
  }
  // Calls fn(src, offset - off, len) for the pieces of this source's image
  // within [off, off + len).
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
  bool broken_ = false;
  std::string where_;
  std::vector<std::unique_ptr<Region>> regions_;  // 2 per ring: member, owner buffers

  // Per Run.
  const Combination* comb_ = nullptr;
  int m_ = 0, s_ = 0;
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

  std::vector<MPI_Request> reqs_;
  std::vector<Pending> pending_;
  std::vector<int> done_idx_;
};

Status ReduceTransport::Impl::Validate(const ReduceSpec& spec, OutputSink* sink) {
  if (!spec.combination) return Status::InvalidArgument(where_ + ": spec has no combination");
  const int m = spec.combination->outputs(), s = spec.combination->sources();
  if (spec.source_ranks.size() != static_cast<size_t>(s) ||
      spec.output_ranks.size() != static_cast<size_t>(m)) {
    return Status::InvalidArgument(
        where_ + ": spec lists " + std::to_string(spec.source_ranks.size()) + " source and " +
        std::to_string(spec.output_ranks.size()) + " output ranks for a combination of " +
        std::to_string(s) + " sources and " + std::to_string(m) + " outputs");
  }
  std::vector<int> seen;
  for (int r : spec.source_ranks) {
    if (r < 0 || r >= size_) {
      return Status::InvalidArgument(where_ + ": source rank " + std::to_string(r) +
                                     " outside the communicator of " + std::to_string(size_));
    }
    if (std::find(seen.begin(), seen.end(), r) != seen.end()) {
      return Status::InvalidArgument(where_ + ": rank " + std::to_string(r) +
                                     " listed as two sources");
    }
    seen.push_back(r);
  }
  for (int r : spec.output_ranks) {
    if (r < 0 || r >= size_) {
      return Status::InvalidArgument(where_ + ": output rank " + std::to_string(r) +
                                     " outside the communicator of " + std::to_string(size_));
    }
    if (r == rank_ && sink == nullptr) {
      return Status::InvalidArgument(where_ + ": this rank owns an output but has no sink");
    }
  }
  return Status::OK();
}

uint64_t ReduceTransport::Impl::SpecHash(const ReduceSpec& spec) const {
  uint64_t h = 0x64636b7074ull;
  h = Mix(h, options_.chunk_bytes);
  h = Mix(h, options_.max_buffer_bytes);
  if (!spec.combination) return h;
  const Combination& c = *spec.combination;
  h = Mix(h, static_cast<uint64_t>(c.outputs()) << 32 | static_cast<uint64_t>(c.sources()));
  for (int j = 0; j < c.outputs(); ++j)
    for (int i = 0; i < c.sources(); ++i) h = Mix(h, c.coefficient(j, i));
  for (int r : spec.source_ranks) h = Mix(h, static_cast<uint64_t>(r));
  h = Mix(h, 0xffff);
  for (int r : spec.output_ranks) h = Mix(h, static_cast<uint64_t>(r));
  return h;
}

// Rings and the chunk size, computed alike on every rank from the spec.
Status ReduceTransport::Impl::BuildRings(const ReduceSpec& spec) {
  std::map<int, std::vector<int>> by_folder;  // folder source index (or -1) -> outputs
  for (int j = 0; j < m_; ++j) {
    int folder = -1;
    for (int i = 0; i < s_ && s_ >= 2; ++i)
      if (spec.source_ranks[i] == spec.output_ranks[j]) folder = i;
    by_folder[folder].push_back(j);
  }
  rings_.clear();
  size_t units = 0;  // member buffers x outputs, summed over rings
  for (auto& [folder, outputs] : by_folder) {
    Ring r;
    r.folder = folder;
    r.outputs = outputs;
    r.m = static_cast<int>(outputs.size());
    const int idx = static_cast<int>(rings_.size());
    r.tag_ring = kTagBase + 2 * idx;
    r.tag_out = kTagBase + 2 * idx + 1;
    for (int i = 0; i < s_; ++i) {
      if (i == folder) continue;
      if (i == src_) r.pos = r.size();
      r.members.push_back(i);
    }
    for (int j : outputs) r.owner = r.owner || spec.output_ranks[j] == rank_;
    if (r.m == m_) {
      r.comb = spec.combination;
    } else {
      std::vector<uint8_t> coef;
      for (int j : outputs)
        for (int i = 0; i < s_; ++i) coef.push_back(comb_->coefficient(j, i));
      auto comb = Combination::Create(r.m, s_, std::move(coef));
      if (!comb.ok()) return comb.status().Prefixed(where_);
      r.comb = *comb;
    }
    units += static_cast<size_t>(r.member_buffers()) * r.m;
    rings_.push_back(std::move(r));
  }
  size_t chunk = RoundUp(std::max<size_t>(options_.chunk_bytes, kPage), kPage);
  const size_t cap = options_.max_buffer_bytes / units / kPage * kPage;
  chunk_ = std::min(chunk, std::max<size_t>(cap, 64 << 10));
  // A message of m chunks must fit MPI's int count.
  chunk_ = std::min<size_t>(chunk_, static_cast<size_t>(INT_MAX) / m_ / kPage * kPage);
  return Status::OK();
}

// Message buffers for this rank's roles, before the ranks agree on the Run,
// so that an allocation failure is reported everywhere instead of stranding
// peers. Sized for the largest chunk; Setup may use smaller ones.
Status ReduceTransport::Impl::Reserve() {
  if (regions_.size() < 2 * rings_.size()) regions_.resize(2 * rings_.size());
  for (size_t ri = 0; ri < rings_.size(); ++ri) {
    Ring& r = rings_[ri];
    for (int k = 0; k < 2; ++k)
      if (!regions_[2 * ri + k]) regions_[2 * ri + k] = std::make_unique<Region>();
    if (r.pos >= 0) {
      const size_t buf_bytes = static_cast<size_t>(r.m) * chunk_;
      const int nbuf = r.member_buffers();
      Region& region = *regions_[2 * ri];
      DLCKPT_RETURN_IF_ERROR(region.Reserve(buf_bytes * nbuf).Prefixed(where_));
      r.bufs.resize(nbuf);
      for (int b = 0; b < nbuf; ++b) r.bufs[b] = region.data() + buf_bytes * b;
      r.recv_bufs = r.size() > 1 ? 2 * r.size() - 1 : 0;
    }
    if (r.owner) {
      const int nown = kOwnerWindow * r.size();
      Region& region = *regions_[2 * ri + 1];
      DLCKPT_RETURN_IF_ERROR(region.Reserve(chunk_ * nown).Prefixed(where_));
      r.owner_bufs.resize(nown);
      for (int b = 0; b < nown; ++b) r.owner_bufs[b] = region.data() + chunk_ * b;
    }
  }
  return Status::OK();
}

// Geometry, items and owner expectations of a ring for a Run of length L > 0.
void ReduceTransport::Impl::Setup(Ring& r, uint64_t length) {
  const int S = r.size();
  r.seg_len = RoundUp(DivUp(length, S), kAlign);
  r.chunk = static_cast<size_t>(std::min<uint64_t>(chunk_, r.seg_len));
  r.nc = static_cast<int>(DivUp(r.seg_len, r.chunk));

  auto chunk_range = [&](int seg, int c, uint64_t* off, size_t* len) {
    uint64_t seg_begin = static_cast<uint64_t>(seg) * r.seg_len;
    uint64_t seg_end = std::min(length, seg_begin + r.seg_len);
    uint64_t a = seg_begin + static_cast<uint64_t>(c) * r.chunk;
    *off = a;
    *len = a >= seg_end ? 0 : static_cast<size_t>(std::min<uint64_t>(r.chunk, seg_end - a));
  };

  if (r.pos >= 0) {
    // Item (t, c): chunk c of segment (pos - t) mod S, processed in order of
    // step = t + c; its input (t >= 1) is the predecessor's item (t - 1, c).
    for (int step = 0; step < r.nc + S - 1; ++step) {
      for (int t = 0; t < S; ++t) {
        int c = step - t;
        if (c < 0 || c >= r.nc) continue;
        Item item{t, step, 0, 0};
        chunk_range(((r.pos - t) % S + S) % S, c, &item.off, &item.len);
        if (item.len == 0) continue;
        if (t >= 1) r.recv_items.push_back(static_cast<int>(r.items.size()));
        r.items.push_back(item);
      }
    }
    r.recv_done.assign(r.items.size(), 0);
    const int nbuf = static_cast<int>(r.bufs.size());
    for (int b = 0; b < r.recv_bufs; ++b) r.free_recv.push_back(b);
    for (int b = r.recv_bufs; b < nbuf; ++b) r.free_send.push_back(b);
    r.refs.assign(nbuf, 0);
  }

  // Member q ends with segment (q + 1) mod S and sends its chunks in order,
  // each chunk's slices in output order.
  r.owner_msgs.assign(S, {});
  r.owner_next.assign(S, 0);
  r.owner_outstanding.assign(S, 0);
  if (r.owner) {
    for (int q = 0; q < S; ++q) {
      if (q == r.pos) continue;
      for (int c = 0; c < r.nc; ++c) {
        uint64_t off;
        size_t len;
        chunk_range((q + 1) % S, c, &off, &len);
        if (len == 0) continue;
        for (int j : r.outputs)
          if (std::count(owned_.begin(), owned_.end(), j)) r.owner_msgs[q].push_back({off, len, j});
      }
    }
    for (int b = 0; b < static_cast<int>(r.owner_bufs.size()); ++b) r.free_owner.push_back(b);
  }
}

void ReduceTransport::Impl::Deliver(OutputSink* sink, int output, uint64_t off,
                                    const uint8_t* data, size_t len) {
  switch (mode_[output]) {
    case Mode::kDirect:
      std::memcpy(target_[output] + off, data, len);
      Landed(sink, output, off, len);
      break;
    case Mode::kWrite:
      if (Status st = sink->Write(output, off, data, len); !st.ok()) {
        if (sink_error_.ok()) sink_error_ = st.Prefixed(where_ + ": output " + std::to_string(output));
        mode_[output] = Mode::kDiscard;
        failed_[output] = 1;
      }
      break;
    case Mode::kDiscard:
      break;
  }
}

template <class Fn>
void ReduceTransport::Impl::ForEachPiece(uint64_t off, size_t len, Fn fn) const {
  const uint64_t end = std::min<uint64_t>(off + len, my_len_);
  if (off >= end) return;
  size_t e = std::upper_bound(ext_off_.begin(), ext_off_.end(), off) - ext_off_.begin() - 1;
  for (uint64_t pos = off; pos < end; ++e) {
    const uint64_t ext_end = ext_off_[e] + extents_[e].len;
    const size_t take = static_cast<size_t>(std::min(end, ext_end) - pos);
    fn(extents_[e].data + (pos - ext_off_[e]), static_cast<size_t>(pos - off), take);
    pos += take;
  }
}

// Adds this source's contribution to chunk [item.off, +len) of the ring's
// outputs into buf (output j at buf + j*len): Set for the first hop, else
// Accumulate.
void ReduceTransport::Impl::ComputeItem(const Ring& r, const Item& item, uint8_t* buf,
                                        ReduceStats* stats) {
  const double t0 = NowSeconds();
  uint8_t* outs[ErasureCode::kMaxChunks];
  const std::span<uint8_t* const> out_span(outs, static_cast<size_t>(r.m));
  ForEachPiece(item.off, item.len, [&](const uint8_t* src, size_t at, size_t take) {
    for (int j = 0; j < r.m; ++j) outs[j] = buf + j * item.len + at;
    if (item.t == 0) {
      r.comb->Set(src_, src, take, out_span);
    } else {
      r.comb->Accumulate(src_, src, take, out_span);
    }
  });
  if (item.t == 0) {  // past the end of this source's image: zeros
    const size_t covered =
        my_len_ > item.off ? static_cast<size_t>(std::min<uint64_t>(my_len_ - item.off, item.len))
                           : 0;
    for (int j = 0; j < r.m; ++j)
      std::memset(buf + j * item.len + covered, 0, item.len - covered);
  }
  stats->compute_seconds += NowSeconds() - t0;
}

// Posts what ring `ri` can post and processes its next item if ready.
Status ReduceTransport::Impl::Step(const ReduceSpec& spec, int ri, OutputSink* sink,
                                   ReduceStats* stats, bool* progress) {
  Ring& r = rings_[ri];
  const int S = r.size();

  // 1. Ring receives, two steps ahead at most: this bounds the buffers they
  // hold (2S-1), so they never wait for send buffers (no cyclic wait).
  if (r.pos >= 0) {
    const int cur_step = r.next_item < r.items.size() ? r.items[r.next_item].step : 1 << 30;
    while (r.next_recv < r.recv_items.size() && !r.free_recv.empty() &&
           r.items[r.recv_items[r.next_recv]].step <= cur_step + 1) {
      const int idx = r.recv_items[r.next_recv];
      const int b = r.free_recv.back();
      r.free_recv.pop_back();
      MPI_Request req;
      int rc = MPI_Irecv(r.bufs[b], static_cast<int>(r.m * r.items[idx].len), MPI_BYTE, r.pred,
                         r.tag_ring, comm_, &req);
      if (rc != MPI_SUCCESS) return Fail("MPI_Irecv from rank " + std::to_string(r.pred), rc);
      Post(Kind::kRingRecv, ri, idx, 0, 0, req);
      r.posted.emplace_back(idx, b);
      ++r.next_recv;
      *progress = true;
    }
  }

  // 2. Owner receives: a window per ring member.
  for (int q = 0; q < S && r.owner; ++q) {
    const auto& msgs = r.owner_msgs[q];
    while (r.owner_next[q] < msgs.size() && r.owner_outstanding[q] < kOwnerWindow) {
      const OwnerMsg& msg = msgs[r.owner_next[q]];
      uint8_t* dst;
      int ob = -1;
      if (mode_[msg.output] == Mode::kDirect) {
        dst = target_[msg.output] + msg.off;
      } else {
        if (r.free_owner.empty()) break;
        ob = r.free_owner.back();
        r.free_owner.pop_back();
        dst = r.owner_bufs[ob];
      }
      const int from = spec.source_ranks[r.members[q]];
      MPI_Request req;
      int rc = MPI_Irecv(dst, static_cast<int>(msg.len), MPI_BYTE, from, r.tag_out, comm_, &req);
      if (rc != MPI_SUCCESS) return Fail("MPI_Irecv from rank " + std::to_string(from), rc);
      Post(Kind::kOwnerRecv, ri, q, static_cast<int>(r.owner_next[q]), ob, req);
      ++r.owner_next[q];
      ++r.owner_outstanding[q];
      *progress = true;
    }
  }

  // 3. The next item, if its input and a send buffer are ready.
  if (r.pos < 0 || r.next_item >= r.items.size() || r.free_send.empty()) return Status::OK();
  const Item& item = r.items[r.next_item];
  int b = -1;
  if (item.t == 0) {
    b = r.free_send.back();
    r.free_send.pop_back();
  } else if (!r.posted.empty() && r.posted.front().first == static_cast<int>(r.next_item) &&
             r.recv_done[r.next_item]) {
    // The received buffer becomes a send buffer; a free send buffer takes its
    // place among the receive buffers.
    b = r.posted.front().second;
    r.posted.pop_front();
    r.free_recv.push_back(r.free_send.back());
    r.free_send.pop_back();
  }
  if (b < 0) return Status::OK();
  ComputeItem(r, item, r.bufs[b], stats);
  const size_t len = item.len;
  if (item.t < S - 1) {
    MPI_Request req;
    int rc = MPI_Isend(r.bufs[b], static_cast<int>(r.m * len), MPI_BYTE, r.succ, r.tag_ring,
                       comm_, &req);
    if (rc != MPI_SUCCESS) return Fail("MPI_Isend to rank " + std::to_string(r.succ), rc);
    Post(Kind::kRingSend, ri, b, 0, 0, req);
    stats->bytes_sent += r.m * len;
  } else {
    for (int jl = 0; jl < r.m; ++jl) {
      const int j = r.outputs[jl];
      const int owner = spec.output_ranks[j];
      const uint8_t* slice = r.bufs[b] + jl * len;
      if (owner == rank_) {
        Deliver(sink, j, item.off, slice, len);
        continue;
      }
      MPI_Request req;
      int rc = MPI_Isend(slice, static_cast<int>(len), MPI_BYTE, owner, r.tag_out, comm_, &req);
      if (rc != MPI_SUCCESS) return Fail("MPI_Isend to rank " + std::to_string(owner), rc);
      Post(Kind::kOutSend, ri, b, 0, 0, req);
      ++r.refs[b];
      stats->bytes_sent += len;
    }
    if (r.refs[b] == 0) r.free_send.push_back(b);
  }
  ++r.next_item;
  *progress = true;
  return Status::OK();
}

Status ReduceTransport::Impl::Loop(const ReduceSpec& spec, OutputSink* sink, ReduceStats* stats,
                                   double t_start) {
  const double deadline = options_.timeout_ms > 0 ? t_start + options_.timeout_ms / 1000.0 : 0;
  for (;;) {
    bool progress = false;
    for (int ri = 0; ri < static_cast<int>(rings_.size()); ++ri)
      DLCKPT_RETURN_IF_ERROR(Step(spec, ri, sink, stats, &progress));

    if (!reqs_.empty()) {
      int count = 0;
      done_idx_.resize(reqs_.size());
      int rc = MPI_Testsome(static_cast<int>(reqs_.size()), reqs_.data(), &count,
                            done_idx_.data(), MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS) return Fail("MPI_Testsome", rc);
      if (count > 0 && count != MPI_UNDEFINED) {
        progress = true;
        for (int d = 0; d < count; ++d) {
          const Pending& p = pending_[done_idx_[d]];
          Ring& r = rings_[p.ring];
          switch (p.kind) {
            case Kind::kRingRecv:
              r.recv_done[p.a] = 1;
              stats->bytes_received += r.m * r.items[p.a].len;
              break;
            case Kind::kRingSend:
              r.free_send.push_back(p.a);
              break;
            case Kind::kOutSend:
              if (--r.refs[p.a] == 0) r.free_send.push_back(p.a);
              break;
            case Kind::kOwnerRecv: {
              const OwnerMsg& msg = r.owner_msgs[p.a][p.b];
              stats->bytes_received += msg.len;
              uint8_t* slice = p.c >= 0 ? r.owner_bufs[p.c] : target_[msg.output] + msg.off;
              if (r.folder >= 0 && r.folder == src_ && mode_[msg.output] != Mode::kDiscard) {
                const double t0 = NowSeconds();  // add this rank's own contribution
                ForEachPiece(msg.off, msg.len, [&](const uint8_t* src, size_t at, size_t take) {
                  comb_->AccumulateOne(msg.output, src_, src, take, slice + at);
                });
                stats->compute_seconds += NowSeconds() - t0;
              }
              if (p.c >= 0) {
                Deliver(sink, msg.output, msg.off, slice, msg.len);
                r.free_owner.push_back(p.c);
              } else {
                Landed(sink, msg.output, msg.off, msg.len);
              }
              --r.owner_outstanding[p.a];
              break;
            }
          }
        }
        // Drop completed entries (their requests are now MPI_REQUEST_NULL).
        size_t w = 0;
        for (size_t i = 0; i < reqs_.size(); ++i) {
          if (reqs_[i] == MPI_REQUEST_NULL) continue;
          reqs_[w] = reqs_[i];
          pending_[w] = pending_[i];
          ++w;
        }
        reqs_.resize(w);
        pending_.resize(w);
      }
    }

    if (reqs_.empty() && std::all_of(rings_.begin(), rings_.end(),
                                     [](const Ring& r) { return r.done(); })) {
      return Status::OK();
    }
    if (!progress) {
      if (deadline > 0 && NowSeconds() > deadline) {
        broken_ = true;
        return Status::Timeout(where_ + ": not finished after " +
                               std::to_string(options_.timeout_ms) + " ms (" +
                               std::to_string(reqs_.size()) + " transfers pending)");
      }
      SleepMicros(options_.idle_sleep_us);
    }
  }
}

Result<ReduceStats> ReduceTransport::Impl::Run(const ReduceSpec& spec,
                                               std::span<const Extent> input, OutputSink* sink) {
  const double t_start = NowSeconds();
  where_ = (spec.label.empty() ? std::string("codec transport") : spec.label) + " (rank " +
           std::to_string(rank_) + ")";
  if (broken_) {
    return Status::IOError(where_ + ": transport unusable after an earlier MPI error or timeout");
  }
  ReduceStats stats;
  Status local = Validate(spec, sink);
  src_ = -1;
  rings_.clear();
  owned_.clear();
  my_len_ = 0;
  extents_.clear();
  ext_off_.clear();
  sink_error_ = Status::OK();
  if (local.ok()) {
    comb_ = spec.combination.get();
    m_ = comb_->outputs();
    s_ = comb_->sources();
    for (int i = 0; i < s_; ++i)
      if (spec.source_ranks[i] == rank_) src_ = i;
    for (int j = 0; j < m_; ++j)
      if (spec.output_ranks[j] == rank_) owned_.push_back(j);
    if (src_ >= 0) {
      for (const Extent& e : input) {
        if (e.len == 0) continue;
        if (e.data == nullptr) {
          local = Status::InvalidArgument(where_ + ": input extent at offset " +
                                          std::to_string(my_len_) + " has no data");
          break;
        }
        extents_.push_back(e);
        ext_off_.push_back(my_len_);
        my_len_ += e.len;
      }
    }
    if (local.ok()) local = BuildRings(spec);
    if (local.ok()) local = Reserve();
  }

  // Agree on L and on the spec; a rank that rejected it makes all return.
  const uint64_t h = SpecHash(spec);
  uint64_t in[4] = {my_len_, h, ~h, local.ok() ? 0u : 1u}, out[4];
  MPI_Request req;
  int rc = MPI_Iallreduce(in, out, 4, MPI_UINT64_T, MPI_MAX, comm_, &req);
  if (rc != MPI_SUCCESS) return Fail("MPI_Iallreduce", rc);
  if (Status st = WaitQuietly(&req, options_.idle_sleep_us, TimeLeft(t_start)); !st.ok()) {
    broken_ = true;
    return st.Prefixed(where_ + ": agreeing on the spec");
  }
  if (!local.ok()) return local;
  if (out[3] != 0) {
    return Status::InvalidArgument(where_ + ": another rank rejected the spec (see its error)");
  }
  if (out[1] != h || out[2] != ~h) {
    return Status::InvalidArgument(where_ +
                                   ": ranks called Run with different specs or options");
  }
  stats.length = length_ = out[0];
  stats.chunk_bytes = chunk_;

  mode_.assign(m_, Mode::kDiscard);
  target_.assign(m_, nullptr);
  failed_.assign(m_, 0);
  for (int j : owned_) {
    Result<uint8_t*> buf = sink->Begin(j, stats.length);
    if (!buf.ok()) {
      if (sink_error_.ok())
        sink_error_ = buf.status().Prefixed(where_ + ": output " + std::to_string(j));
      failed_[j] = 1;
      continue;  // receive and drop, so that no message stays in flight
    }
    target_[j] = *buf;
    mode_[j] = *buf ? Mode::kDirect : Mode::kWrite;
  }

  Status status;
  if (stats.length > 0) {
    for (Ring& r : rings_) {
      const int S = r.size();
      if (r.pos >= 0) {
        r.succ = spec.source_ranks[r.members[(r.pos + 1) % S]];
        r.pred = spec.source_ranks[r.members[(r.pos + S - 1) % S]];
      }
      Setup(r, stats.length);
    }
    status = Loop(spec, sink, &stats, t_start);
    if (broken_) return status;  // requests may still be in flight
  }
  for (int j : owned_) {
    if (failed_[j]) continue;
    if (Status st = sink->Finish(j); !st.ok() && sink_error_.ok())
      sink_error_ = st.Prefixed(where_ + ": output " + std::to_string(j));
  }
  if (status.ok()) status = sink_error_;

  // Every rank learns whether every output was delivered.
  uint64_t failed = status.ok() ? 0 : static_cast<uint64_t>(rank_) + 1, any_failed = 0;
  rc = MPI_Iallreduce(&failed, &any_failed, 1, MPI_UINT64_T, MPI_MAX, comm_, &req);
  if (rc != MPI_SUCCESS) return Fail("MPI_Iallreduce", rc);
  if (Status st = WaitQuietly(&req, options_.idle_sleep_us, TimeLeft(t_start)); !st.ok()) {
    broken_ = true;
    return st.Prefixed(where_ + ": agreeing on the outcome");
  }
  if (!status.ok()) return status;
  if (any_failed != 0) {
    return Status::IOError(where_ + ": rank " + std::to_string(any_failed - 1) +
                           " failed its part (see its error)");
  }
  stats.seconds = NowSeconds() - t_start;
  return stats;
}

// ---------------------------------------------------------------- public

ReduceTransport::ReduceTransport(MPI_Comm comm, int rank, int size, const Options& options)
    : comm_(comm), rank_(rank), size_(size), options_(options),
      impl_(std::make_unique<Impl>(comm, rank, size, options)) {}

ReduceTransport::~ReduceTransport() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

Result<std::unique_ptr<ReduceTransport>> ReduceTransport::Create(MPI_Comm comm,
                                                                 const Options& options) {
  if (options.chunk_bytes == 0 || options.max_buffer_bytes == 0 || options.idle_sleep_us < 0) {
    return Status::InvalidArgument("codec transport: chunk_bytes and max_buffer_bytes must be "
                                   "positive, idle_sleep_us not negative");
  }
  MPI_Comm dup;
  MPI_Request req;
  int rc = MPI_Comm_idup(comm, &dup, &req);
  if (rc != MPI_SUCCESS) return Status::IOError("MPI_Comm_idup: " + MpiErrorString(rc));
  DLCKPT_RETURN_IF_ERROR(WaitQuietly(&req, options.idle_sleep_us));
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  int rank = 0, size = 0;
  MPI_Comm_rank(dup, &rank);
  MPI_Comm_size(dup, &size);
  return std::unique_ptr<ReduceTransport>(new ReduceTransport(dup, rank, size, options));
}

Result<ReduceStats> ReduceTransport::Run(const ReduceSpec& spec, std::span<const Extent> input,
                                         OutputSink* sink) {
  return impl_->Run(spec, input, sink);
}

ReduceSpec EncodeSpec(const ErasureCode& code, std::string label) {
  ReduceSpec spec;
  spec.label = std::move(label);
  spec.combination = code.encoder();
  for (int i = 0; i < code.n(); ++i) spec.source_ranks.push_back(i);
  for (int j = 0; j < code.k(); ++j) spec.output_ranks.push_back(code.n() + j);
  return spec;
}

Result<ReduceSpec> RebuildSpec(const ErasureCode& code, std::span<const int> chunk_ranks,
                               std::span<const int> wanted, std::span<const int> target_ranks,
                               std::string label) {
  const int total = code.n() + code.k();
  if (wanted.empty()) return Status::InvalidArgument(label + ": no chunk to rebuild");
  if (chunk_ranks.size() != static_cast<size_t>(total)) {
    return Status::InvalidArgument(label + ": " + std::to_string(chunk_ranks.size()) +
                                   " chunk ranks given for a stripe of " + std::to_string(total));
  }
  if (wanted.size() != target_ranks.size()) {
    return Status::InvalidArgument(label + ": " + std::to_string(wanted.size()) +
                                   " chunks to rebuild but " +
                                   std::to_string(target_ranks.size()) + " target ranks");
  }
  std::vector<int> erased;
  for (int c = 0; c < total; ++c)
    if (chunk_ranks[c] < 0) erased.push_back(c);
  auto plan = code.PlanDecode(erased, std::vector<int>(wanted.begin(), wanted.end()));
  if (!plan.ok()) return plan.status().Prefixed(label);
  ReduceSpec spec;
  spec.label = std::move(label);
  spec.combination = (*plan)->combination;
  for (int c : (*plan)->sources) spec.source_ranks.push_back(chunk_ranks[c]);
  spec.output_ranks.assign(target_ranks.begin(), target_ranks.end());
  return spec;
}

Status WaitQuietly(MPI_Request* request, int idle_sleep_us, double timeout_seconds) {
  const double deadline = timeout_seconds > 0 ? NowSeconds() + timeout_seconds : 0;
  for (;;) {
    int done = 0;
    int rc = MPI_Test(request, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return Status::IOError("MPI_Test: " + MpiErrorString(rc));
    if (done) return Status::OK();
    if (deadline > 0 && NowSeconds() > deadline) {
      return Status::Timeout("MPI request not complete after " +
                             std::to_string(timeout_seconds) + " s");
    }
    SleepMicros(idle_sleep_us);
  }
}

}  // namespace dlckpt::codec

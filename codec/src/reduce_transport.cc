#include "dlckpt/reduce_transport.h"

#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>

namespace dlckpt::codec {

namespace {

constexpr int kTagRing = 0x7d1;  // partial sums travelling around the ring
constexpr int kTagOut = 0x7d2;   // reduced slices sent to output owners
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

// --------------------------------------------------------------- the engine

class ReduceTransport::Impl {
 public:
  Impl(MPI_Comm comm, int rank, int size, const Options& options)
      : comm_(comm), rank_(rank), size_(size), options_(options) {}

  Result<ReduceStats> Run(const ReduceSpec& spec, std::span<const Extent> input, OutputSink* sink);

 private:
  // Where an owned output's bytes go.
  enum class Mode { kDirect, kWrite, kDiscard };

  struct Item {  // one step of this source's pipeline
    int t;       // hop: 0 = first contribution, s-1 = fully reduced
    int step;    // t + chunk: the order of processing
    uint64_t off;
    size_t len;
  };
  struct OwnerMsg {  // one slice an owner receives
    uint64_t off;
    size_t len;
    int output;
  };
  enum class Kind : uint8_t { kRingRecv, kRingSend, kOutSend, kOwnerRecv };
  struct Pending {
    Kind kind;
    int a;  // kRingRecv: item; kRingSend/kOutSend: buffer; kOwnerRecv: source
    int b;  // kOwnerRecv: message index
    int c;  // kOwnerRecv: owner buffer or -1
  };

  Status Fail(const std::string& what, int rc) {
    broken_ = true;
    return Status::IOError(where_ + ": " + what + ": " + MpiErrorString(rc));
  }
  Status Validate(const ReduceSpec& spec, OutputSink* sink);
  uint64_t SpecHash(const ReduceSpec& spec) const;
  Status Reserve();
  void Setup(uint64_t length);
  Status Loop(const ReduceSpec& spec, OutputSink* sink, ReduceStats* stats, double t_start);
  // Seconds left of the Run's timeout (0: no timeout; tiny but positive when over).
  double TimeLeft(double t_start) const {
    if (options_.timeout_ms <= 0) return 0;
    return std::max(1e-6, t_start + options_.timeout_ms / 1000.0 - NowSeconds());
  }
  void Post(Kind kind, int a, int b, int c, MPI_Request req) {
    reqs_.push_back(req);
    pending_.push_back({kind, a, b, c});
  }
  bool ComputeItem(const Item& item, uint8_t* buf, ReduceStats* stats);
  void Deliver(OutputSink* sink, int output, uint64_t off, const uint8_t* data, size_t len);

  MPI_Comm comm_;
  int rank_, size_;
  Options options_;
  bool broken_ = false;
  std::string where_;
  Region ring_region_, owner_region_;

  // Per Run.
  const Combination* comb_ = nullptr;
  int m_ = 0, s_ = 0;
  int me_ = -1;  // this rank's source index (ring position), -1 if none
  std::vector<int> owned_;
  std::vector<Mode> mode_;  // per output (owned ones only meaningful)
  std::vector<uint8_t*> target_;
  Status sink_error_;
  uint64_t length_ = 0, seg_len_ = 0, my_len_ = 0;
  size_t chunk_ = 0, max_chunk_ = 0;
  int recv_bufs_ = 0;
  int nc_ = 0;
  std::vector<Extent> extents_;   // non-empty input extents
  std::vector<uint64_t> ext_off_;  // their offsets in the image

  std::vector<Item> items_;
  std::vector<int> recv_items_;  // indices of items with t >= 1, in order
  std::vector<uint8_t> recv_done_;
  std::vector<uint8_t*> bufs_;  // ring buffers (m x chunk bytes each)
  std::vector<int> free_recv_, free_send_, refs_;
  std::deque<std::pair<int, int>> posted_;  // (item, buffer) of posted ring receives

  std::vector<std::vector<OwnerMsg>> owner_msgs_;  // per source
  std::vector<size_t> owner_next_;
  std::vector<int> owner_outstanding_;
  std::vector<uint8_t*> owner_bufs_;
  std::vector<int> free_owner_;

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

// Message buffers for this rank's roles, before the ranks agree on the Run,
// so that an allocation failure is reported everywhere instead of stranding
// peers. Sized for the largest chunk; Setup may use smaller ones.
Status ReduceTransport::Impl::Reserve() {
  const int S = s_;
  recv_bufs_ = me_ >= 0 && S > 1 ? 2 * S - 1 : 0;  // lookahead of two steps, see Loop
  const int send_bufs = me_ >= 0 ? 2 * S : 0;
  const int nbuf = recv_bufs_ + send_bufs;
  size_t chunk = RoundUp(std::max<size_t>(options_.chunk_bytes, kPage), kPage);
  if (nbuf > 0) {
    size_t cap = options_.max_buffer_bytes / (static_cast<size_t>(nbuf) * m_) / kPage * kPage;
    chunk = std::min(chunk, std::max<size_t>(cap, 64 << 10));
  }
  max_chunk_ = chunk;
  const size_t buf_bytes = static_cast<size_t>(m_) * chunk;
  if (nbuf > 0) DLCKPT_RETURN_IF_ERROR(ring_region_.Reserve(buf_bytes * nbuf).Prefixed(where_));
  bufs_.resize(nbuf);
  for (int b = 0; b < nbuf; ++b) bufs_[b] = ring_region_.data() + buf_bytes * b;
  const int nown = owned_.empty() ? 0 : kOwnerWindow * S;
  if (nown > 0) DLCKPT_RETURN_IF_ERROR(owner_region_.Reserve(chunk * nown).Prefixed(where_));
  owner_bufs_.resize(nown);
  for (int b = 0; b < nown; ++b) owner_bufs_[b] = owner_region_.data() + chunk * b;
  return Status::OK();
}

// Geometry, items and owner expectations for a Run of length L > 0.
void ReduceTransport::Impl::Setup(uint64_t length) {
  const int S = s_;
  length_ = length;
  seg_len_ = RoundUp(DivUp(length, S), kAlign);
  chunk_ = static_cast<size_t>(std::min<uint64_t>(max_chunk_, seg_len_));
  nc_ = static_cast<int>(DivUp(seg_len_, chunk_));

  auto chunk_range = [&](int seg, int c, uint64_t* off, size_t* len) {
    uint64_t seg_begin = static_cast<uint64_t>(seg) * seg_len_;
    uint64_t seg_end = std::min(length_, seg_begin + seg_len_);
    uint64_t a = seg_begin + static_cast<uint64_t>(c) * chunk_;
    *off = a;
    *len = a >= seg_end ? 0 : static_cast<size_t>(std::min<uint64_t>(chunk_, seg_end - a));
  };

  items_.clear();
  recv_items_.clear();
  posted_.clear();
  free_recv_.clear();
  free_send_.clear();
  if (me_ >= 0) {
    // Item (t, c): chunk c of segment (me - t) mod S, processed in order of
    // step = t + c; its input (t >= 1) is the predecessor's item (t - 1, c).
    for (int step = 0; step < nc_ + S - 1; ++step) {
      for (int t = 0; t < S; ++t) {
        int c = step - t;
        if (c < 0 || c >= nc_) continue;
        Item item{t, step, 0, 0};
        chunk_range(((me_ - t) % S + S) % S, c, &item.off, &item.len);
        if (item.len == 0) continue;
        if (t >= 1) recv_items_.push_back(static_cast<int>(items_.size()));
        items_.push_back(item);
      }
    }
    recv_done_.assign(items_.size(), 0);
    const int nbuf = static_cast<int>(bufs_.size());
    for (int b = 0; b < recv_bufs_; ++b) free_recv_.push_back(b);
    for (int b = recv_bufs_; b < nbuf; ++b) free_send_.push_back(b);
    refs_.assign(nbuf, 0);
  }

  // Source q ends with segment (q + 1) mod S and sends its chunks in order,
  // each chunk's slices in output order.
  owner_msgs_.assign(S, {});
  owner_next_.assign(S, 0);
  owner_outstanding_.assign(S, 0);
  free_owner_.clear();
  if (!owned_.empty()) {
    for (int q = 0; q < S; ++q) {
      if (q == me_) continue;
      for (int c = 0; c < nc_; ++c) {
        uint64_t off;
        size_t len;
        chunk_range((q + 1) % S, c, &off, &len);
        if (len == 0) continue;
        for (int j : owned_) owner_msgs_[q].push_back({off, len, j});
      }
    }
    for (int b = 0; b < static_cast<int>(owner_bufs_.size()); ++b) free_owner_.push_back(b);
  }
  reqs_.clear();
  pending_.clear();
}

void ReduceTransport::Impl::Deliver(OutputSink* sink, int output, uint64_t off,
                                    const uint8_t* data, size_t len) {
  switch (mode_[output]) {
    case Mode::kDirect:
      std::memcpy(target_[output] + off, data, len);
      break;
    case Mode::kWrite:
      if (Status st = sink->Write(output, off, data, len); !st.ok() && sink_error_.ok()) {
        sink_error_ = st.Prefixed(where_ + ": output " + std::to_string(output));
        mode_[output] = Mode::kDiscard;
      }
      break;
    case Mode::kDiscard:
      break;
  }
}

// Adds this source's contribution to chunk [item.off, +len) of every output
// into buf (output j at buf + j*len): Set for the first hop, else Accumulate.
bool ReduceTransport::Impl::ComputeItem(const Item& item, uint8_t* buf, ReduceStats* stats) {
  double t0 = NowSeconds();
  uint8_t* outs[ErasureCode::kMaxChunks];
  const uint64_t end = std::min<uint64_t>(item.off + item.len, my_len_);
  if (item.off < end) {
    size_t e = std::upper_bound(ext_off_.begin(), ext_off_.end(), item.off) - ext_off_.begin() - 1;
    uint64_t pos = item.off;
    while (pos < end) {
      const uint64_t ext_end = ext_off_[e] + extents_[e].len;
      const size_t take = static_cast<size_t>(std::min(end, ext_end) - pos);
      const uint8_t* src = extents_[e].data + (pos - ext_off_[e]);
      for (int j = 0; j < m_; ++j) outs[j] = buf + j * item.len + (pos - item.off);
      if (item.t == 0) {
        comb_->Set(me_, src, take, {outs, static_cast<size_t>(m_)});
      } else {
        comb_->Accumulate(me_, src, take, {outs, static_cast<size_t>(m_)});
      }
      pos += take;
      ++e;
    }
  }
  if (item.t == 0) {  // past the end of this source's image: zeros
    size_t covered = item.off < end ? static_cast<size_t>(end - item.off) : 0;
    for (int j = 0; j < m_; ++j)
      std::memset(buf + j * item.len + covered, 0, item.len - covered);
  }
  stats->compute_seconds += NowSeconds() - t0;
  return true;
}

Status ReduceTransport::Impl::Loop(const ReduceSpec& spec, OutputSink* sink, ReduceStats* stats,
                                   double t_start) {
  const int S = s_;
  const int succ = me_ >= 0 ? spec.source_ranks[(me_ + 1) % S] : -1;
  const int pred = me_ >= 0 ? spec.source_ranks[(me_ + S - 1) % S] : -1;
  size_t next_item = 0, next_recv = 0;
  const double deadline = options_.timeout_ms > 0 ? t_start + options_.timeout_ms / 1000.0 : 0;

  for (;;) {
    bool progress = false;

    // 1. Ring receives, two steps ahead at most: this bounds the buffers they
    // hold (2S-1) so they never wait for send buffers (no cyclic wait).
    if (me_ >= 0) {
      const int cur_step = next_item < items_.size() ? items_[next_item].step : 1 << 30;
      while (next_recv < recv_items_.size() && !free_recv_.empty() &&
             items_[recv_items_[next_recv]].step <= cur_step + 1) {
        const int idx = recv_items_[next_recv];
        const int b = free_recv_.back();
        free_recv_.pop_back();
        MPI_Request req;
        int rc = MPI_Irecv(bufs_[b], static_cast<int>(m_ * items_[idx].len), MPI_BYTE, pred,
                           kTagRing, comm_, &req);
        if (rc != MPI_SUCCESS) return Fail("MPI_Irecv from rank " + std::to_string(pred), rc);
        Post(Kind::kRingRecv, idx, 0, 0, req);
        posted_.emplace_back(idx, b);
        ++next_recv;
        progress = true;
      }
    }

    // 2. Owner receives: a window per source.
    for (int q = 0; q < S; ++q) {
      auto& msgs = owner_msgs_[q];
      while (owner_next_[q] < msgs.size() && owner_outstanding_[q] < kOwnerWindow) {
        const OwnerMsg& msg = msgs[owner_next_[q]];
        uint8_t* dst;
        int ob = -1;
        if (mode_[msg.output] == Mode::kDirect) {
          dst = target_[msg.output] + msg.off;
        } else {
          if (free_owner_.empty()) break;
          ob = free_owner_.back();
          free_owner_.pop_back();
          dst = owner_bufs_[ob];
        }
        MPI_Request req;
        int rc = MPI_Irecv(dst, static_cast<int>(msg.len), MPI_BYTE, spec.source_ranks[q],
                           kTagOut, comm_, &req);
        if (rc != MPI_SUCCESS) {
          return Fail("MPI_Irecv from rank " + std::to_string(spec.source_ranks[q]), rc);
        }
        Post(Kind::kOwnerRecv, q, static_cast<int>(owner_next_[q]), ob, req);
        ++owner_next_[q];
        ++owner_outstanding_[q];
        progress = true;
      }
    }

    // 3. Completions.
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
          switch (p.kind) {
            case Kind::kRingRecv:
              recv_done_[p.a] = 1;
              stats->bytes_received += m_ * items_[p.a].len;
              break;
            case Kind::kRingSend:
              free_send_.push_back(p.a);
              break;
            case Kind::kOutSend:
              if (--refs_[p.a] == 0) free_send_.push_back(p.a);
              break;
            case Kind::kOwnerRecv: {
              const OwnerMsg& msg = owner_msgs_[p.a][p.b];
              stats->bytes_received += msg.len;
              if (p.c >= 0) {
                Deliver(sink, msg.output, msg.off, owner_bufs_[p.c], msg.len);
                free_owner_.push_back(p.c);
              }
              --owner_outstanding_[p.a];
              break;
            }
          }
        }
        // Drop completed entries (their requests are now MPI_REQUEST_NULL).
        size_t w = 0;
        for (size_t r = 0; r < reqs_.size(); ++r) {
          if (reqs_[r] == MPI_REQUEST_NULL) continue;
          reqs_[w] = reqs_[r];
          pending_[w] = pending_[r];
          ++w;
        }
        reqs_.resize(w);
        pending_.resize(w);
      }
    }

    // 4. The next item of this source, if its input and a send buffer are ready.
    if (me_ >= 0 && next_item < items_.size() && !free_send_.empty()) {
      const Item& item = items_[next_item];
      int b = -1;
      if (item.t == 0) {
        b = free_send_.back();
        free_send_.pop_back();
      } else if (!posted_.empty() && posted_.front().first == static_cast<int>(next_item) &&
                 recv_done_[next_item]) {
        // The received buffer becomes a send buffer; a free send buffer takes
        // its place among the receive buffers.
        b = posted_.front().second;
        posted_.pop_front();
        free_recv_.push_back(free_send_.back());
        free_send_.pop_back();
      }
      if (b >= 0) {
        ComputeItem(item, bufs_[b], stats);
        const size_t len = item.len;
        if (item.t < S - 1) {
          MPI_Request req;
          int rc = MPI_Isend(bufs_[b], static_cast<int>(m_ * len), MPI_BYTE, succ, kTagRing,
                             comm_, &req);
          if (rc != MPI_SUCCESS) return Fail("MPI_Isend to rank " + std::to_string(succ), rc);
          Post(Kind::kRingSend, b, 0, 0, req);
          stats->bytes_sent += m_ * len;
        } else {
          for (int j = 0; j < m_; ++j) {
            const int owner = spec.output_ranks[j];
            const uint8_t* slice = bufs_[b] + j * len;
            if (owner == rank_) {
              Deliver(sink, j, item.off, slice, len);
              continue;
            }
            MPI_Request req;
            int rc = MPI_Isend(slice, static_cast<int>(len), MPI_BYTE, owner, kTagOut, comm_,
                               &req);
            if (rc != MPI_SUCCESS) return Fail("MPI_Isend to rank " + std::to_string(owner), rc);
            Post(Kind::kOutSend, b, 0, 0, req);
            ++refs_[b];
            stats->bytes_sent += len;
          }
          if (refs_[b] == 0) free_send_.push_back(b);
        }
        ++next_item;
        progress = true;
      }
    }

    bool owner_done = true;
    for (int q = 0; q < S; ++q) owner_done = owner_done && owner_next_[q] == owner_msgs_[q].size();
    if (next_item == items_.size() && next_recv == recv_items_.size() && owner_done &&
        reqs_.empty()) {
      return Status::OK();
    }
    if (!progress) {
      if (deadline > 0 && NowSeconds() > deadline) {
        broken_ = true;
        return Status::Timeout(where_ + ": not finished after " +
                               std::to_string(options_.timeout_ms) + " ms (" +
                               std::to_string(reqs_.size()) + " transfers pending, item " +
                               std::to_string(next_item) + " of " +
                               std::to_string(items_.size()) + ")");
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
  me_ = -1;
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
      if (spec.source_ranks[i] == rank_) me_ = i;
    for (int j = 0; j < m_; ++j)
      if (spec.output_ranks[j] == rank_) owned_.push_back(j);
    if (me_ >= 0) {
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
  stats.length = out[0];

  mode_.assign(m_, Mode::kDiscard);
  target_.assign(m_, nullptr);
  for (int j : owned_) {
    Result<uint8_t*> buf = sink->Begin(j, stats.length);
    if (!buf.ok()) {
      if (sink_error_.ok())
        sink_error_ = buf.status().Prefixed(where_ + ": output " + std::to_string(j));
      continue;  // receive and drop, so that no message stays in flight
    }
    target_[j] = *buf;
    mode_[j] = *buf ? Mode::kDirect : Mode::kWrite;
  }

  Status status;
  if (stats.length > 0) {
    Setup(stats.length);
    stats.chunk_bytes = chunk_;
    status = Loop(spec, sink, &stats, t_start);
    if (broken_) return status;  // requests may still be in flight
  }
  for (int j : owned_) {
    if (mode_[j] == Mode::kDiscard) continue;
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

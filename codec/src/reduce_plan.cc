// Planning of a ReduceTransport Run (ReduceTransport::Impl,
// reduce_transport_impl.h): the spec's validation and hash, the rings (one
// per folding owner, one for owners that are not sources) and the chunk
// size, the pre-faulted message buffers (Regions, kept for the next Run) and
// each ring's geometry (segments, chunks, the items of its pipeline, what an
// owner expects to receive). Computed alike on every rank from the spec.
// Thread safety: none; called by Run on its thread. Failures: an invalid spec
// or a failed allocation is a Status naming the Run's label and rank,
// returned before any message is sent so that every rank can be told.
#include <climits>
#include <map>

#include "reduce_transport_impl.h"

namespace dlckpt::codec {

namespace {

uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

}  // namespace

uint64_t ScatterSegment(uint64_t length, int sources) {
  return sources > 0 ? internal::RoundUp(internal::DivUp(length, static_cast<uint64_t>(sources)), internal::kAlign) : 0;
}

using internal::DivUp;
using internal::kAlign;
using internal::kOwnerWindow;
using internal::kPage;
using internal::kTagBase;
using internal::Region;
using internal::RoundUp;

Status ReduceTransport::Impl::Validate(const ReduceSpec& spec, OutputSink* sink) {
  if (!spec.combination) return Status::InvalidArgument(where_ + ": spec has no combination");
  const int m = spec.combination->outputs(), s = spec.combination->sources();
  if (spec.scatter && (!spec.output_ranks.empty() || spec.source_ranks.size() != static_cast<size_t>(s))) {
    return Status::InvalidArgument(where_ + ": a scatter spec lists " + std::to_string(spec.output_ranks.size()) +
                                   " output ranks (must be none) and " + std::to_string(spec.source_ranks.size()) +
                                   " source ranks for a combination of " + std::to_string(s) + " sources");
  }
  if (spec.scatter && sink == nullptr &&
      std::find(spec.source_ranks.begin(), spec.source_ranks.end(), rank_) != spec.source_ranks.end()) {
    return Status::InvalidArgument(where_ + ": this rank owns a segment of a scatter but has no sink");
  }
  if (spec.source_ranks.size() != static_cast<size_t>(s) ||
      (!spec.scatter && spec.output_ranks.size() != static_cast<size_t>(m))) {
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
  return Mix(h, spec.scatter ? 1 : 0);
}

// Rings and the chunk size, computed alike on every rank from the spec.
Status ReduceTransport::Impl::BuildRings(const ReduceSpec& spec) {
  std::map<int, std::vector<int>> by_folder;  // folder source index (or -1) -> outputs
  for (int j = 0; j < m_; ++j) {
    int folder = -1;
    for (int i = 0; i < s_ && s_ >= 2 && !spec.scatter; ++i)
      if (spec.source_ranks[i] == spec.output_ranks[j]) folder = i;
    by_folder[folder].push_back(j);
  }
  scatter_ = spec.scatter;
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
    for (int j : outputs) r.owner = r.owner || (!spec.scatter && spec.output_ranks[j] == rank_);
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
    // A scatter ring's member q ends with segment q (not q + 1): the segments
    // are rotated by one.
    if (scatter_) seg = (seg + S - 1) % S;
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

}  // namespace dlckpt::codec

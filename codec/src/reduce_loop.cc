// The event loop of a ReduceTransport Run (ReduceTransport::Impl,
// reduce_transport_impl.h): the pipelined ring reduce-scatter (receives two
// steps ahead, this source's contribution added in place with the ISA-L
// kernels, partial sums forwarded to the successor) and the delivery of
// fully reduced slices to the output owners, where a folding owner adds its
// own contribution as each slice arrives. All rings progress in one loop over
// MPI_Testsome; when nothing progressed it sleeps Options::idle_sleep_us.
// Thread safety: none; called by Run on its thread. Failures: an MPI error or
// the Run's timeout returns a Status and marks the engine broken (requests may
// be in flight); a sink error is recorded for its output, whose remaining
// bytes are received and dropped so that no message stays in flight.
#include <cstring>
#include <utility>

#include "reduce_transport_impl.h"

namespace dlckpt::codec {

using internal::kOwnerWindow;
using internal::NowSeconds;
using internal::SleepMicros;

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

// outputs into buf (output j at buf + j*len): Set for the first hop, else
// Accumulate.
void ReduceTransport::Impl::ComputeItem(const Ring& r, const Item& item, uint8_t* buf,
                                        ReduceStats* stats) {
  const double t0 = NowSeconds();
  uint8_t* outs[ErasureCode::kMaxChunks];
  const std::span<uint8_t* const> out_span(outs, static_cast<size_t>(r.m));
  ForEachPiece(item.off, item.len, [&](const uint8_t* a, const uint8_t* b, size_t at, size_t take) {
    for (int j = 0; j < r.m; ++j) outs[j] = buf + j * item.len + at;
    if (a == nullptr) std::swap(a, b);
    if (a == nullptr) {  // a hole: zeros, which add nothing
      if (item.t == 0)
        for (int j = 0; j < r.m; ++j) std::memset(outs[j], 0, take);
      return;
    }
    if (item.t == 0) {
      if (b != nullptr) {
        r.comb->Set2(src_, a, b, take, out_span);
      } else {
        r.comb->Set(src_, a, take, out_span);
      }
    } else if (b != nullptr) {
      r.comb->Accumulate2(src_, a, b, take, out_span);
    } else {
      r.comb->Accumulate(src_, a, take, out_span);
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
  } else if (scatter_) {
    // This source's own segment (ScatterSegment), fully reduced.
    const uint64_t seg_begin = static_cast<uint64_t>(src_) * r.seg_len;
    for (int jl = 0; jl < r.m; ++jl) Deliver(sink, r.outputs[jl], item.off - seg_begin, r.bufs[b] + jl * len, len);
    r.free_send.push_back(b);
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
    if (progress_ && stats->length > 0) {
      const double now = NowSeconds();
      if (now - last_progress_ >= 0.25) {
        last_progress_ = now;
        uint64_t done = 0, total = 0;
        for (const Ring& r : rings_) {
          done += r.next_item + r.next_recv;
          total += r.items.size() + r.recv_items.size();
          if (!r.owner) continue;
          for (size_t q = 0; q < r.owner_msgs.size() && q < r.owner_next.size(); ++q) {
            done += r.owner_next[q] - static_cast<size_t>(r.owner_outstanding[q]);  // received
            total += r.owner_msgs[q].size();
          }
        }
        if (total > 0) progress_(stats->length / total * done + stats->length % total * done / total, stats->length);
      }
    }

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
                ForEachPiece(msg.off, msg.len, [&](const uint8_t* a, const uint8_t* b, size_t at, size_t take) {
                  if (a == nullptr) std::swap(a, b);
                  if (a != nullptr && b != nullptr) {
                    comb_->AccumulateOne2(msg.output, src_, a, b, take, slice + at);
                  } else if (a != nullptr) {
                    comb_->AccumulateOne(msg.output, src_, a, take, slice + at);
                  }
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

}  // namespace dlckpt::codec

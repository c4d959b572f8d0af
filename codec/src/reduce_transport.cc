// The codec's MPI data path (dlckpt/codec/reduce_transport.h): the output
// sinks, ReduceTransport::Impl::Run (the agreement on the spec and on the
// outcome around the event loop), the public ReduceTransport, the spec
// builders and WaitQuietly. The rings are planned in reduce_plan.cc and
// driven in reduce_loop.cc; the engine is declared in reduce_transport_impl.h.
// Thread safety: none; one Run at a time, from one thread. Failures: see the
// contracts in reduce_transport.h (every rank learns whether every output was
// delivered; an MPI error or a timeout makes the transport refuse later Runs).
#include <time.h>

#include <chrono>
#include <cstring>
#include <new>

#include "dlckpt/base/mpi.h"
#include "reduce_transport_impl.h"

namespace dlckpt::codec {

namespace internal {

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

}  // namespace internal

using internal::MpiErrorString;
using internal::NowSeconds;
using internal::SleepMicros;

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

Result<ReduceStats> ReduceTransport::Impl::Run(const ReduceSpec& spec, std::span<const Extent> input,
                                               OutputSink* sink, std::span<const Extent> input_xor) {
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
  extents2_.clear();
  ext_off2_.clear();
  sink_error_ = Status::OK();
  if (local.ok()) {
    comb_ = spec.combination.get();
    m_ = comb_->outputs();
    s_ = comb_->sources();
    for (int i = 0; i < s_; ++i)
      if (spec.source_ranks[i] == rank_) src_ = i;
    for (int j = 0; j < m_; ++j)
      if (spec.scatter ? src_ >= 0 : spec.output_ranks[j] == rank_) owned_.push_back(j);
    if (src_ >= 0) {
      for (const Extent& e : input) {
        if (e.len == 0) continue;
        extents_.push_back(e);
        ext_off_.push_back(my_len_);
        my_len_ += e.len;
      }
      uint64_t len2 = 0;
      for (const Extent& e : input_xor) {
        if (e.len == 0) continue;
        extents2_.push_back(e);
        ext_off2_.push_back(len2);
        len2 += e.len;
      }
      if (!input_xor.empty() && len2 != my_len_) {
        local = Status::InvalidArgument(where_ + ": the second input has " + std::to_string(len2) +
                                        " bytes, the first " + std::to_string(my_len_));
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
  // A scatter source owns its segment of each output (ScatterSegment).
  uint64_t owned_len = stats.length;
  if (spec.scatter && src_ >= 0) {
    const uint64_t seg = ScatterSegment(stats.length, s_);
    const uint64_t begin = std::min<uint64_t>(stats.length, static_cast<uint64_t>(src_) * seg);
    owned_len = std::min(seg, stats.length - begin);
  }
  for (int j : owned_) {
    Result<uint8_t*> buf = sink->Begin(j, owned_len);
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
  // ECANCELED is reserved for "another rank failed": a failing rank's own error never carries it.
  if (!status.ok()) return status.code() == ECANCELED ? Status::IOError(status.message()) : status;
  if (any_failed != 0) {
    return Status::Error(ECANCELED, where_ + ": rank " + std::to_string(any_failed - 1) +
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
                                         OutputSink* sink, std::span<const Extent> input_xor) {
  return impl_->Run(spec, input, sink, input_xor);
}

void ReduceTransport::set_progress(ProgressFn fn) { impl_->set_progress(std::move(fn)); }

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
                               std::string label, std::vector<RebuildSource>* sources) {
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
  // The n chunks read: one per rank first, then a rank's further chunks.
  std::vector<bool> read(static_cast<size_t>(total), false);
  std::vector<int> ranks_read;
  int nread = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (int c = 0; c < total && nread < code.n(); ++c) {
      const int r = chunk_ranks[c];
      if (r < 0 || read[c]) continue;
      const bool first = std::find(ranks_read.begin(), ranks_read.end(), r) == ranks_read.end();
      if (pass == 0 && !first) continue;
      read[c] = true;
      ++nread;
      if (first) ranks_read.push_back(r);
    }
  }
  // The chunks not read count as erased (when fewer than n survive, only the
  // lost ones are, and PlanDecode names them).
  std::vector<int> erased;
  for (int c = 0; c < total; ++c) {
    if (chunk_ranks[c] < 0 || (nread == code.n() && !read[c])) erased.push_back(c);
  }
  auto plan = code.PlanDecode(erased, std::vector<int>(wanted.begin(), wanted.end()));
  if (!plan.ok()) return plan.status().Prefixed(label);
  const std::vector<int>& read_ids = (*plan)->sources;
  const Combination& decode = *(*plan)->combination;
  // Group the chunks read by rank, ranks in the order of their first chunk.
  std::vector<int> src_ranks;
  std::vector<std::vector<int>> src_chunks;  // source -> positions in read_ids
  for (size_t i = 0; i < read_ids.size(); ++i) {
    const int r = chunk_ranks[read_ids[i]];
    auto at = std::find(src_ranks.begin(), src_ranks.end(), r);
    if (at == src_ranks.end()) {
      src_ranks.push_back(r);
      src_chunks.push_back({static_cast<int>(i)});
    } else {
      src_chunks[static_cast<size_t>(at - src_ranks.begin())].push_back(static_cast<int>(i));
    }
  }
  ReduceSpec spec;
  spec.label = std::move(label);
  spec.output_ranks.assign(target_ranks.begin(), target_ranks.end());
  spec.source_ranks = src_ranks;
  if (src_ranks.size() == read_ids.size()) {  // one chunk per rank
    spec.combination = (*plan)->combination;
    if (sources) {
      sources->clear();
      for (int c : read_ids) sources->push_back(RebuildSource{{c}, {}});
    }
    return spec;
  }
  for (size_t s = 0; s < src_ranks.size(); ++s) {
    if (src_chunks[s].size() < 2) continue;
    std::vector<int> ids;
    for (int i : src_chunks[s]) ids.push_back(read_ids[static_cast<size_t>(i)]);
    if (wanted.size() != 1) {
      return Status::InvalidArgument(spec.label + ": rank " + std::to_string(src_ranks[s]) + " would give " +
                                     DescribeChunks(ids, code.n()) + " to a rebuild of " +
                                     DescribeChunks(wanted, code.n()) +
                                     ": two lost chunks of one stripe need their sources on distinct ranks");
    }
    if (!sources) {
      return Status::InvalidArgument(spec.label + ": rank " + std::to_string(src_ranks[s]) + " gives " +
                                     DescribeChunks(ids, code.n()) + " but the caller cannot fold them");
    }
  }
  // One output: a rank giving several chunks sends Σ D[c]·chunk_c (its
  // coefficient 1), the others their chunk with its coefficient D[c].
  std::vector<uint8_t> coef;
  sources->clear();
  for (size_t s = 0; s < src_ranks.size(); ++s) {
    RebuildSource given;
    for (int i : src_chunks[s]) given.chunks.push_back(read_ids[static_cast<size_t>(i)]);
    if (src_chunks[s].size() == 1) {
      coef.push_back(decode.coefficient(0, src_chunks[s][0]));
    } else {
      coef.push_back(1);
      for (int i : src_chunks[s]) given.coefficients.push_back(decode.coefficient(0, i));
    }
    sources->push_back(std::move(given));
  }
  auto comb = Combination::Create(1, static_cast<int>(src_ranks.size()), std::move(coef));
  if (!comb.ok()) return comb.status().Prefixed(spec.label);
  spec.combination = *comb;
  return spec;
}

Result<FoldedChunk> FoldChunks(std::span<const uint8_t> coefficients,
                               std::span<const std::vector<Extent>> chunks) {
  if (coefficients.size() != chunks.size() || chunks.empty()) {
    return Status::InvalidArgument("fold of " + std::to_string(chunks.size()) + " chunks with " +
                                   std::to_string(coefficients.size()) + " coefficients");
  }
  FoldedChunk out;
  for (const auto& chunk : chunks) {
    uint64_t len = 0;
    for (const Extent& e : chunk) len += e.len;
    out.length = std::max(out.length, len);
  }
  auto comb = Combination::Create(1, static_cast<int>(chunks.size()),
                                  std::vector<uint8_t>(coefficients.begin(), coefficients.end()));
  if (!comb.ok()) return comb.status();
  out.data.reset(new (std::nothrow) uint8_t[std::max<uint64_t>(out.length, 1)]);
  if (!out.data) {
    return Status::Error(ENOMEM, "no memory for a folded rebuild source of " + std::to_string(out.length) + " bytes");
  }
  std::memset(out.data.get(), 0, static_cast<size_t>(out.length));
  for (size_t t = 0; t < chunks.size(); ++t) {
    uint64_t off = 0;
    for (const Extent& e : chunks[t]) {
      if (e.data) (*comb)->AccumulateOne(0, static_cast<int>(t), e.data, e.len, out.data.get() + off);
      off += e.len;
    }
  }
  return out;
}

Status WaitQuietly(MPI_Request* request, int idle_sleep_us, double timeout_seconds) {
  const long sleep_ns = static_cast<long>(idle_sleep_us) * 1000;
  return mpi::Wait(request, "MPI request", {sleep_ns, sleep_ns}, timeout_seconds);
}

}  // namespace dlckpt::codec

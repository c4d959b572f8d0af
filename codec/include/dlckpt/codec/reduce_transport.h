// dlckpt/codec/reduce_transport.h — the codec's data path over MPI: computes a
// Combination (erasure.h) whose sources live on different ranks and delivers
// each output to the rank that owns it. Encode and rebuild are the same call
// with different specs (EncodeSpec, RebuildSpec).
//
// Algorithm. A pipelined ring reduce-scatter: the padded length L (the
// longest source input) is cut into one segment per ring member, each
// segment into chunks of about Options::chunk_bytes. A message carries the
// partial sums of the ring's m outputs for one chunk (m x chunk bytes); each
// member adds its own contribution with the ISA-L kernels (XOR or GF(2^8)
// multiply-accumulate) in place and forwards it, computing the next chunk
// while earlier ones are in flight (MPI_Isend/Irecv + MPI_Testsome). After
// S - 1 hops a member holds one fully reduced segment and sends slice j of it
// to the owner of output j. Outputs whose owner is itself a source get a ring
// of the other sources, and that owner adds its own contribution to each
// slice as it arrives instead of sending (so a rebuild onto a spare holding
// parity costs what an encode costs); outputs of owners that are not sources
// share a ring of all sources. All rings run at once in one event loop. Waits
// never spin: when nothing progressed the thread sleeps
// Options::idle_sleep_us (MPICH busy-polls inside blocking calls).
//
// Per process of a ring of S members with m outputs, about (S-1)/S·m·L bytes
// are received and m·L sent; an owner receives L per output.
//
// Contracts.
// - A ReduceTransport owns a duplicate of the communicator it was created
//   with (freed by the destructor, which must run before MPI_Finalize) and
//   pre-allocated, pre-faulted message buffers reused by every Run. It is not
//   thread-safe; one Run at a time, called by the same thread.
// - Run is collective over the communicator: every rank calls it with the
//   same spec (checked: a mismatch is an error on every rank) and the same
//   options. Ranks that neither contribute nor own an output return quickly.
// - Sources: `input` is this rank's image as a list of extents read in place
//   (zero-copy, any lengths and alignment, empty extents allowed); it must
//   stay valid and unchanged until Run returns. Inputs shorter than L are
//   implicitly zero-padded, and an extent whose data is null reads as its
//   length of zeros (a hole, added for nothing). Non-source ranks pass an
//   empty span.
// - Owners: `sink` receives every byte of [0, L) of each owned output exactly
//   once, in arbitrary order (see OutputSink; OrderedSink restores order);
//   L = 0 calls Begin and Finish only.
// - Outcome: Run returns OK on a rank only if every rank finished its part
//   and every output was delivered and Finished (a final agreement), so the
//   caller may commit (e.g. flip its parity double buffer) on OK.
// - Memory: pre-faulted message buffers of at most Options::max_buffer_bytes
//   per rank and Run (chunks shrink to fit, never below 64 KiB), plus, on an
//   owner, 4 chunks per ring member; all kept for the next Run.
// - Errors: a Status naming spec.label and the rank. Invalid specs and sink
//   errors are reported on every rank without leaving messages in flight:
//   the rank whose sink failed returns its error, every other rank
//   ECANCELED ("rank R failed its part"), so that an agreement on the
//   outcome can name the cause (see internal::OwnError in the service). An
//   MPI error or a timeout leaves requests in flight: the transport refuses
//   further Runs and the caller should end the MPI job (MPI_Abort); MPICH may
//   also treat an MPI error as fatal itself.
#ifndef DLCKPT_CODEC_REDUCE_TRANSPORT_H_
#define DLCKPT_CODEC_REDUCE_TRANSPORT_H_

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dlckpt/codec/erasure.h"
#include "dlckpt/memfs/extent.h"
#include "dlckpt/base/status.h"

namespace dlckpt::codec {

struct ReduceSpec {
  std::string label;                               // names the operation in errors
  std::shared_ptr<const Combination> combination;  // m outputs x s sources
  std::vector<int> source_ranks;  // s distinct ranks; rank of source i (also the ring order)
  std::vector<int> output_ranks;  // m ranks; owner of output j (may repeat, may be a source)
  // Reduce-scatter instead: output_ranks is empty, every output is cut into
  // s segments of ScatterSegment(L, s) bytes (the last one shorter or empty)
  // and source i owns segment i of each output. Its sink sees that segment as
  // the whole output: Begin(j, segment length), offsets from the segment's
  // start. One ring of all sources; nothing is sent after its last hop.
  bool scatter = false;
};

// The segment length of a scatter Run of padded length L over s sources.
uint64_t ScatterSegment(uint64_t length, int sources);

// Where an owner's outputs go. Called only on the thread running Run.
class OutputSink {
 public:
  virtual ~OutputSink() = default;
  // Once per owned output per Run, before any of its bytes, with the output
  // length L. Return a buffer of at least L bytes to receive into directly
  // (zero-copy), or nullptr to receive the bytes through Write().
  virtual Result<uint8_t*> Begin(int output, uint64_t length) = 0;
  // Bytes [offset, offset + len) of `output`, in arbitrary order, each byte
  // exactly once; `data` is valid during the call only. Only called when
  // Begin returned nullptr.
  virtual Status Write(int output, uint64_t offset, const uint8_t* data, size_t len);
  // When Begin returned a buffer: bytes [offset, offset + len) of it are
  // final (arbitrary order, each byte once). After an error no further
  // Landed or Finish call is made for that output.
  virtual Status Landed(int output, uint64_t offset, size_t len);
  // Every byte of `output` has been delivered (into the buffer or by Write).
  // Not called for an output whose Begin, Write or Landed failed.
  virtual Status Finish(int output);
};

// Keeps each owned output in memory it owns; memory is pre-faulted once and
// reused across Runs (a buffer shrinks never). Used by tests and benchmarks.
class BufferSink final : public OutputSink {
 public:
  Result<uint8_t*> Begin(int output, uint64_t length) override;
  // The bytes of `output` from the last Run (empty if not owned).
  std::span<const uint8_t> output(int output) const;

 private:
  struct Buffer {
    std::unique_ptr<uint8_t[]> data;
    size_t capacity = 0;
    size_t size = 0;
  };
  std::vector<Buffer> buffers_;
};

// Hands each output's bytes to `append` in offset order, as soon as a prefix
// of [0, L) is complete: the bytes land in place in a staging buffer of L
// bytes per output (pre-faulted, reused across Runs), and every newly
// contiguous range is appended. Made for memfs::ImageBuilder::Append; the
// output's zero padding past the image's own length is appended too.
class OrderedSink final : public OutputSink {
 public:
  using AppendFn = std::function<Status(int output, const uint8_t* data, size_t len)>;
  explicit OrderedSink(AppendFn append) : append_(std::move(append)) {}

  Result<uint8_t*> Begin(int output, uint64_t length) override;
  Status Landed(int output, uint64_t offset, size_t len) override;
  Status Finish(int output) override;

 private:
  struct State {
    uint64_t length = 0;
    uint64_t appended = 0;                // bytes [0, appended) handed to append_
    std::map<uint64_t, uint64_t> landed;  // offset -> end, beyond `appended`
  };
  AppendFn append_;
  BufferSink staging_;
  std::vector<State> states_;
};

struct ReduceStats {
  uint64_t length = 0;          // L, the padded length of every output
  size_t chunk_bytes = 0;       // chunk size used
  double seconds = 0;           // wall time of Run on this rank
  double compute_seconds = 0;   // time in the erasure kernels on this rank
  uint64_t bytes_sent = 0;      // by this rank
  uint64_t bytes_received = 0;  // by this rank
};

class ReduceTransport final {
 public:
  struct Options {
    size_t chunk_bytes = 512 << 10;        // bytes of image per chunk (rounded to 4 KiB)
    size_t max_buffer_bytes = 64u << 20;   // cap on message buffers; chunks shrink to fit
    int idle_sleep_us = 50;                // sleep when a poll made no progress
    int64_t timeout_ms = 0;                // per Run; 0 = none
  };

  // Duplicates `comm` (collective, without spinning).
  static Result<std::unique_ptr<ReduceTransport>> Create(MPI_Comm comm, const Options& options);
  static Result<std::unique_ptr<ReduceTransport>> Create(MPI_Comm comm) {
    return Create(comm, Options());
  }
  ~ReduceTransport();
  ReduceTransport(const ReduceTransport&) = delete;
  ReduceTransport& operator=(const ReduceTransport&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // `input_xor` (optional, sources only): a second list of extents of the
  // same total length as `input`; this source's image is then input xor
  // input_xor, never formed (an incremental encode passes the new and the
  // old bytes of its changed ranges). Same contract as `input`.
  Result<ReduceStats> Run(const ReduceSpec& spec, std::span<const Extent> input,
                          OutputSink* sink, std::span<const Extent> input_xor = {});

  // Called on this rank during every Run, at most every 0.25 s, with an
  // estimate of its work done as bytes of the padded output length L (from
  // the pipeline steps handled) and L. Runs on the calling thread inside
  // Run; must not call into the transport. Null: none.
  using ProgressFn = std::function<void(uint64_t done, uint64_t total)>;
  void set_progress(ProgressFn fn);

  class Impl;

 private:
  ReduceTransport(MPI_Comm comm, int rank, int size, const Options& options);
  MPI_Comm comm_;
  int rank_, size_;
  Options options_;
  std::unique_ptr<Impl> impl_;
};

// Encode in a group communicator laid out in chunk order (groups.h: data
// member i at rank i, spare j at rank n + j): sources = ranks 0..n-1,
// output j (parity j) on rank n + j.
ReduceSpec EncodeSpec(const ErasureCode& code, std::string label);

// What source i of a rebuild spec (rank spec.source_ranks[i]) gives to Run:
// chunk chunks[0] as it is (coefficients empty), or, when that rank holds
// several of the chunks read and the rebuild has one output, their
// combination Σ_t coefficients[t]·chunk chunks[t], computed locally
// (FoldChunks), whose coefficient in the spec is 1.
struct RebuildSource {
  std::vector<int> chunks;
  std::vector<uint8_t> coefficients;
};

// Rebuild. chunk_ranks[c] (n + k entries) is the rank holding chunk c, or -1
// if the chunk is lost; wanted[w] (lost chunk ids) is rebuilt on
// target_ranks[w]. n chunks are read: in chunk order, first one per rank,
// then (when that is fewer than n) the others. ENODATA with a message naming
// `label` and the lost chunks when more than k chunks are lost. A rank may
// hold several chunks: when it must give more than one of the n, the rebuild
// must have a single output (EINVAL otherwise: two outputs need two
// different combinations of its chunks, and a source gives one input), and
// `sources` must be given (EINVAL otherwise). `sources`, when given,
// receives one entry per spec source saying what it gives; the result is the
// same on every rank for the same arguments.
Result<ReduceSpec> RebuildSpec(const ErasureCode& code, std::span<const int> chunk_ranks,
                               std::span<const int> wanted, std::span<const int> target_ranks,
                               std::string label, std::vector<RebuildSource>* sources = nullptr);

// A folded source's input (RebuildSource with coefficients): bytes
// [0, length) of Σ_t coefficients[t]·chunks[t], each chunk a list of
// extents read in place (an extent with null data reads as zeros) padded
// with zeros to `length`, the longest chunk's length. Memory: one buffer of
// `length` bytes, owned by the result. EINVAL when the counts differ,
// ENOMEM when the buffer cannot be allocated. No MPI.
struct FoldedChunk {
  std::unique_ptr<uint8_t[]> data;
  uint64_t length = 0;
  Extent extent() const { return Extent{data.get(), static_cast<size_t>(length)}; }
};
Result<FoldedChunk> FoldChunks(std::span<const uint8_t> coefficients,
                               std::span<const std::vector<Extent>> chunks);

// Completes `request` by MPI_Test + sleeping `idle_sleep_us` between tests.
// ETIMEDOUT after `timeout_seconds` (0: never); the request stays active then.
Status WaitQuietly(MPI_Request* request, int idle_sleep_us = 50, double timeout_seconds = 0);

}  // namespace dlckpt::codec

#endif  // DLCKPT_CODEC_REDUCE_TRANSPORT_H_

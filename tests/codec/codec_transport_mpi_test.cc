// MPI integration test of the codec transport on plain in-memory images.
//
// Every process is one (virtual) node: the first ranks are data nodes, the
// last --spare-nodes are spares. Groups come from FormGroups; each group gets
// its own communicator (key = chunk id) and transport. Images have different,
// odd, tiny and empty sizes and are split into extents of random lengths held
// in separate allocations. Scenarios, per epoch: encode and check the parity
// against the whole-stripe math; lose 1 (XOR) or k (RS) chunks, rebuild on
// spares (which are also sources, in the ring or folding their parity in) or
// on a fresh rank (owner only), with the zero-copy, the Write() and the
// in-order (OrderedSink) sinks, and byte-compare; a reduce-scatter of the
// data chunks with holes in their images (ReduceSpec::scatter), each segment
// compared with the whole-stripe parity; lose k + 1 chunks in group
// 0: a clean error naming the group; mismatched specs: an error on every
// rank, after which the transport still works; standby ranks must not spin.
//
// Usage: codec_transport_mpi_test --spare-nodes P --group-size G --spares K
//          [--max-size BYTES] [--chunk BYTES] [--max-buffer BYTES]
//          [--expect-config-error TEXT]
// Exit status 0 when every check passed on every rank.
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dlckpt/codec/erasure.h"
#include "dlckpt/codec/groups.h"
#include "dlckpt/codec/reduce_transport.h"
#include "mpi_check.h"

using namespace dlckpt;
using namespace dlckpt::codec;

namespace {

using mpitest::g_failures;
using mpitest::g_rank;

using Bytes = std::vector<uint8_t>;

uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Size of the image of data chunk `chunk` of group `group` at `epoch`.
uint64_t ImageSize(int group, int chunk, int epoch, uint64_t max_size) {
  if (epoch == 1 || max_size == 0) return 0;  // an epoch where every store is empty
  uint64_t h = Mix64(static_cast<uint64_t>(group) << 40 ^ static_cast<uint64_t>(chunk) << 20 ^
                     static_cast<uint64_t>(epoch));
  switch ((chunk + epoch) % 5) {
    case 0: return 0;                         // an empty store
    case 1: return 1 + h % 3;                 // tiny
    case 2: return max_size;                  // the longest
    default: return (h % max_size) | 1;       // odd
  }
}

Bytes ImageBytes(int group, int chunk, int epoch, uint64_t max_size) {
  Bytes b(ImageSize(group, chunk, epoch, max_size));
  const uint64_t seed = Mix64(static_cast<uint64_t>(group * 1000 + chunk) * 7919 + epoch);
  for (size_t i = 0; i < b.size(); i += 8) {
    uint64_t w = Mix64(seed + i / 8);
    std::memcpy(b.data() + i, &w, std::min<size_t>(8, b.size() - i));
  }
  return b;
}

// The bytes cut into extents of random lengths (some empty), each in its own
// allocation, as a memfs image would be scattered over blocks.
struct Scattered {
  std::vector<Bytes> pieces;
  std::vector<Extent> extents;
};
Scattered Scatter(const Bytes& bytes, uint64_t seed) {
  Scattered s;
  size_t pos = 0;
  uint64_t h = seed;
  while (pos < bytes.size()) {
    h = Mix64(h);
    size_t len = h % 4 == 0 ? 0 : std::min<size_t>(bytes.size() - pos, 1 + (h >> 8) % 300000);
    s.pieces.emplace_back(bytes.begin() + pos, bytes.begin() + pos + len);
    pos += len;
  }
  s.pieces.emplace_back();  // a trailing empty extent
  for (auto& p : s.pieces) s.extents.push_back({p.data(), p.size()});
  return s;
}

// The bytes as two inputs whose xor they are (ReduceTransport::Run's
// input_xor, as an incremental encode passes new and old bytes): a = bytes
// xor m, b = m, each scattered its own way; m is zero over a middle stretch,
// given there as a hole (a null extent) in b.
struct SplitInput {
  Scattered a, b;
};
SplitInput SplitXor(const Bytes& bytes, uint64_t seed) {
  Bytes m(bytes.size()), x(bytes.size());
  const size_t lo = bytes.size() / 3, hi = 2 * bytes.size() / 3;
  for (size_t i = 0; i < bytes.size(); ++i) {
    m[i] = i >= lo && i < hi ? 0 : static_cast<uint8_t>(Mix64(seed + i));
    x[i] = bytes[i] ^ m[i];
  }
  SplitInput s;
  s.a = Scatter(x, seed * 3 + 1);
  Bytes head(m.begin(), m.begin() + static_cast<std::ptrdiff_t>(lo)), tail(m.begin() + static_cast<std::ptrdiff_t>(hi), m.end());
  s.b = Scatter(head, seed * 5 + 2);
  Scattered t = Scatter(tail, seed * 7 + 3);
  s.b.extents.push_back(Extent{nullptr, hi - lo});
  for (auto& p : t.pieces) s.b.pieces.push_back(std::move(p));
  for (size_t i = s.b.pieces.size() - t.pieces.size(); i < s.b.pieces.size(); ++i) {
    s.b.extents.push_back({s.b.pieces[i].data(), s.b.pieces[i].size()});
  }
  return s;
}

// A sink that takes bytes through Write() and checks each arrives once.
class CountingSink final : public OutputSink {
 public:
  Result<uint8_t*> Begin(int output, uint64_t length) override {
    if (data_.size() <= static_cast<size_t>(output)) {
      data_.resize(output + 1);
      count_.resize(output + 1);
    }
    data_[output].assign(length, 0);
    count_[output].assign(length, 0);
    return static_cast<uint8_t*>(nullptr);
  }
  Status Write(int output, uint64_t offset, const uint8_t* data, size_t len) override {
    if (offset + len > data_[output].size()) return Status::InvalidArgument("write past the end");
    std::memcpy(data_[output].data() + offset, data, len);
    for (size_t i = 0; i < len; ++i) ++count_[output][offset + i];
    return Status::OK();
  }
  Status Finish(int output) override {
    for (size_t i = 0; i < count_[output].size(); ++i) {
      if (count_[output][i] != 1) {
        return Status::Corruption("byte " + std::to_string(i) + " of output " +
                                  std::to_string(output) + " delivered " +
                                  std::to_string(count_[output][i]) + " times");
      }
    }
    finished_ = true;
    return Status::OK();
  }
  std::span<const uint8_t> output(int j) const { return data_[j]; }
  bool finished_ = false;

 private:
  std::vector<Bytes> data_;
  std::vector<std::vector<uint8_t>> count_;
};

struct Args {
  int spare_nodes = 1, group_size = 4, spares = 1;
  uint64_t max_size = (2u << 20) + 5;
  size_t chunk = 64 << 10;
  size_t max_buffer = 64u << 20;
  std::string expect_config_error;
};

double CpuSeconds() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

class GroupTest {
 public:
  GroupTest(const Group& group, int chunk, ReduceTransport* transport, const ErasureCode& code,
            const Args& args)
      : g_(group), chunk_(chunk), t_(transport), code_(code), args_(args) {}

  int n() const { return code_.n(); }
  int k() const { return code_.k(); }
  bool is_data() const { return chunk_ < n(); }

  Bytes Data(int chunk, int epoch) const { return ImageBytes(g_.id, chunk, epoch, args_.max_size); }

  // Parity of the whole stripe computed locally (the reference).
  std::vector<Bytes> ExpectedParity(int epoch) const {
    std::vector<Bytes> data;
    size_t len = 0;
    for (int i = 0; i < n(); ++i) {
      data.push_back(Data(i, epoch));
      len = std::max(len, data.back().size());
    }
    std::vector<Bytes> parity(k(), Bytes(len));
    std::vector<std::span<const uint8_t>> dv(data.begin(), data.end());
    std::vector<std::span<uint8_t>> pv(parity.begin(), parity.end());
    Status st = code_.Encode(dv, pv);
    CHECK(st.ok(), "%s", st.ToString().c_str());
    return parity;
  }

  // `split`: every data chunk's image given as two inputs (SplitXor).
  void Encode(int epoch, bool split = false) {
    std::string label = "group " + std::to_string(g_.id) + " encode epoch " + std::to_string(epoch) +
                        (split ? " (split input)" : "");
    Scattered input;
    SplitInput two;
    if (is_data() && !split) input = Scatter(Data(chunk_, epoch), epoch * 131 + chunk_);
    if (is_data() && split) two = SplitXor(Data(chunk_, epoch), epoch * 131 + chunk_);
    BufferSink sink;
    auto stats = split ? t_->Run(EncodeSpec(code_, label), two.a.extents, is_data() ? nullptr : &sink, two.b.extents)
                       : t_->Run(EncodeSpec(code_, label), input.extents, is_data() ? nullptr : &sink);
    CHECK(stats.ok(), "%s", stats.status().ToString().c_str());
    if (stats.ok() && epoch == 0 && g_.id == 0 && chunk_ == 0) {
      std::printf("group 0 encode epoch 0: L = %llu, chunk %zu bytes\n",
                  static_cast<unsigned long long>(stats->length), stats->chunk_bytes);
    }
    if (!stats.ok() || is_data()) return;
    const int j = chunk_ - n();
    std::vector<Bytes> want = ExpectedParity(epoch);
    auto got = sink.output(j);
    CHECK(got.size() == want[j].size() && std::equal(got.begin(), got.end(), want[j].begin()),
          "%s: parity %d differs (%zu vs %zu bytes)", label.c_str(), j, got.size(),
          want[j].size());
    parity_ = Bytes(got.begin(), got.end());
    parity_epoch_ = epoch;
  }

  // A reduce-scatter of the stripe (ReduceSpec::scatter): every data chunk
  // holds a hole (a null extent, zeros) in its image, and owns its segment of
  // every parity, compared with the whole-stripe math.
  void ScatterEncode(int epoch, bool counting_sink) {
    std::string label = "group " + std::to_string(g_.id) + " scatter epoch " + std::to_string(epoch);
    const uint64_t hole = 4096 * static_cast<uint64_t>(1 + chunk_ % 3) + static_cast<uint64_t>(epoch);
    auto with_hole = [&](int c) {  // chunk c's image with the hole in its middle, as bytes
      Bytes b = Data(c, epoch);
      const uint64_t h = 4096 * static_cast<uint64_t>(1 + c % 3) + static_cast<uint64_t>(epoch);
      b.insert(b.begin() + static_cast<std::ptrdiff_t>(b.size() / 2), h, 0);
      return b;
    };
    Scattered head, tail;
    std::vector<Extent> input;
    if (is_data()) {
      const Bytes mine = Data(chunk_, epoch);
      const size_t half = mine.size() / 2;
      head = Scatter(Bytes(mine.begin(), mine.begin() + static_cast<std::ptrdiff_t>(half)), epoch * 31 + chunk_);
      tail = Scatter(Bytes(mine.begin() + static_cast<std::ptrdiff_t>(half), mine.end()), epoch * 37 + chunk_);
      input = head.extents;
      input.push_back({nullptr, hole});
      input.insert(input.end(), tail.extents.begin(), tail.extents.end());
    }
    ReduceSpec spec;
    spec.label = label;
    spec.combination = code_.encoder();
    for (int i = 0; i < n(); ++i) spec.source_ranks.push_back(i);
    spec.scatter = true;
    BufferSink buffer_sink;
    CountingSink counting;
    OutputSink* sink = counting_sink ? static_cast<OutputSink*>(&counting) : &buffer_sink;
    auto stats = t_->Run(spec, input, is_data() ? sink : nullptr);
    CHECK(stats.ok(), "%s", stats.status().ToString().c_str());
    if (!stats.ok() || !is_data()) return;
    std::vector<Bytes> data;
    size_t len = 0;
    for (int i = 0; i < n(); ++i) {
      data.push_back(with_hole(i));
      len = std::max(len, data.back().size());
    }
    CHECK(stats->length == len, "%s: L = %llu, expected %zu", label.c_str(),
          static_cast<unsigned long long>(stats->length), len);
    std::vector<Bytes> parity(k(), Bytes(len));
    std::vector<std::span<const uint8_t>> dv(data.begin(), data.end());
    std::vector<std::span<uint8_t>> pv(parity.begin(), parity.end());
    CHECK(code_.Encode(dv, pv).ok(), "reference encode");
    const uint64_t seg = ScatterSegment(len, n());
    const uint64_t begin = std::min<uint64_t>(len, seg * static_cast<uint64_t>(chunk_));
    const uint64_t end = std::min<uint64_t>(len, begin + seg);
    for (int j = 0; j < k(); ++j) {
      std::span<const uint8_t> got = counting_sink ? counting.output(j) : buffer_sink.output(j);
      CHECK(got.size() == end - begin &&
                std::equal(got.begin(), got.end(), parity[j].begin() + static_cast<std::ptrdiff_t>(begin)),
            "%s: segment %d of parity %d differs (%zu bytes, expected %llu)", label.c_str(), chunk_, j,
            got.size(), static_cast<unsigned long long>(end - begin));
    }
    CHECK(!counting_sink || counting.finished_ || end == begin, "%s: segment not finished", label.c_str());
  }

  enum class SinkKind { kBuffer, kCounting, kOrdered };

  // Loses `lost` chunks and rebuilds `lost` on `targets` (chunk ids = ranks).
  void Rebuild(int epoch, const std::vector<int>& lost, const std::vector<int>& targets,
               SinkKind kind, bool split = false) {
    std::string label = "group " + std::to_string(g_.id) + " rebuild epoch " + std::to_string(epoch);
    std::vector<int> chunk_ranks(n() + k());
    for (int c = 0; c < n() + k(); ++c) chunk_ranks[c] = c;
    for (int c : lost) chunk_ranks[c] = -1;
    auto spec = RebuildSpec(code_, chunk_ranks, lost, targets, label);
    CHECK(spec.ok(), "%s", spec.status().ToString().c_str());
    if (!spec.ok()) return;
    const bool i_am_lost = std::find(lost.begin(), lost.end(), chunk_) != lost.end();
    Scattered input;
    SplitInput two;
    if (!i_am_lost) {
      if (is_data()) {
        if (split) {
          two = SplitXor(Data(chunk_, epoch), epoch * 977 + chunk_);
        } else {
          input = Scatter(Data(chunk_, epoch), epoch * 977 + chunk_);
        }
      } else {
        CHECK(parity_epoch_ == epoch, "no parity of epoch %d", epoch);
        if (split) {
          two = SplitXor(parity_, epoch * 17 + chunk_);
        } else {
          input = Scatter(parity_, epoch * 17 + chunk_);
        }
      }
    }
    BufferSink buffer_sink;
    CountingSink counting;
    std::vector<Bytes> appended(lost.size());
    std::vector<int> appends(lost.size(), 0);
    OrderedSink ordered([&](int output, const uint8_t* data, size_t len) {
      appended[output].insert(appended[output].end(), data, data + len);
      ++appends[output];
      return Status::OK();
    });
    OutputSink* sink = kind == SinkKind::kCounting ? static_cast<OutputSink*>(&counting)
                       : kind == SinkKind::kOrdered ? static_cast<OutputSink*>(&ordered)
                                                    : &buffer_sink;
    auto stats = split ? t_->Run(*spec, two.a.extents, sink, two.b.extents) : t_->Run(*spec, input.extents, sink);
    CHECK(stats.ok(), "%s", stats.status().ToString().c_str());
    if (!stats.ok()) return;
    for (size_t w = 0; w < lost.size(); ++w) {
      if (targets[w] != chunk_) continue;
      std::span<const uint8_t> got =
          kind == SinkKind::kCounting  ? counting.output(static_cast<int>(w))
          : kind == SinkKind::kOrdered ? std::span<const uint8_t>(appended[w])
                                       : buffer_sink.output(static_cast<int>(w));
      Bytes want;
      if (lost[w] < n()) {
        want = Data(lost[w], epoch);
        want.resize(stats->length, 0);  // the rebuilt image is zero-padded to L
      } else {
        want = ExpectedParity(epoch)[lost[w] - n()];
      }
      CHECK(got.size() == want.size() && std::equal(got.begin(), got.end(), want.begin()),
            "%s: chunk %d rebuilt on rank %d differs (%zu vs %zu bytes)", label.c_str(), lost[w],
            chunk_, got.size(), want.size());
      if (kind == SinkKind::kCounting) {
        CHECK(counting.finished_, "%s: Finish not called", label.c_str());
      }
      if (kind == SinkKind::kOrdered && stats->length > 4 * stats->chunk_bytes) {
        CHECK(appends[w] > 1, "%s: ordered sink appended all at once", label.c_str());
      }
      ++rebuilt_;
    }
  }

  // k + 1 losses: every rank of the group gets the same clear error.
  void TooManyLosses() {
    std::vector<int> chunk_ranks(n() + k());
    for (int c = 0; c < n() + k(); ++c) chunk_ranks[c] = c;
    std::vector<int> lost;
    for (int c = 0; c <= k() && c < n() + k(); ++c) {
      chunk_ranks[c] = -1;
      lost.push_back(c);
    }
    std::vector<int> targets(lost.size(), n());
    auto spec = RebuildSpec(code_, chunk_ranks, lost, targets,
                            "group " + std::to_string(g_.id) + " rebuild epoch 0");
    CHECK(!spec.ok(), "rebuilding %zu losses with k=%d succeeded", lost.size(), k());
    if (spec.ok()) return;
    const std::string msg = spec.status().message();
    CHECK(spec.status().code() == ENODATA, "code %d", spec.status().code());
    CHECK(msg.find("group " + std::to_string(g_.id) + " rebuild epoch 0: ") == 0 &&
              msg.find("unrecoverable") != std::string::npos,
          "message: %s", msg.c_str());
    if (chunk_ == 0) std::printf("group %d, k+1 losses: %s\n", g_.id, msg.c_str());
  }

  // One rank passes a different spec: every rank must fail, nothing hangs.
  void MismatchedSpec() {
    ReduceSpec spec = EncodeSpec(code_, "group " + std::to_string(g_.id) + " mismatch");
    if (chunk_ == 0) std::reverse(spec.source_ranks.begin(), spec.source_ranks.end());
    if (n() == 1 && chunk_ == 0) spec.output_ranks[0] = 0;
    Bytes data = is_data() ? Data(chunk_, 0) : Bytes();
    Extent e{data.data(), data.size()};
    BufferSink sink;
    auto stats = t_->Run(spec, std::span<const Extent>(&e, is_data() ? 1 : 0), &sink);
    CHECK(!stats.ok(), "a mismatched spec ran");
    if (!stats.ok()) {
      CHECK(stats.status().code() == EINVAL, "%s", stats.status().ToString().c_str());
    }
  }

  int rebuilt_ = 0;

 private:
  const Group& g_;
  int chunk_;
  ReduceTransport* t_;
  const ErasureCode& code_;
  const Args& args_;
  Bytes parity_;
  int parity_epoch_ = -1;
};

bool ParseArgs(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (f == "--help") return false;
    if ((v = (f == "--spare-nodes" || f == "--group-size" || f == "--spares" ||
              f == "--max-size" || f == "--chunk" || f == "--max-buffer" ||
              f == "--expect-config-error")
                 ? next()
                 : nullptr) == nullptr) {
      std::fprintf(stderr, "unknown or incomplete option %s\n", f.c_str());
      return false;
    }
    if (f == "--spare-nodes") a->spare_nodes = std::atoi(v);
    if (f == "--group-size") a->group_size = std::atoi(v);
    if (f == "--spares") a->spares = std::atoi(v);
    if (f == "--max-size") a->max_size = std::strtoull(v, nullptr, 10);
    if (f == "--chunk") a->chunk = std::strtoull(v, nullptr, 10);
    if (f == "--max-buffer") a->max_buffer = std::strtoull(v, nullptr, 10);
    if (f == "--expect-config-error") a->expect_config_error = v;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const int size = mpitest::Start(&argc, &argv);
  Args args;
  if (!ParseArgs(argc, argv, &args)) {
    if (g_rank == 0) {
      std::fprintf(stderr,
                   "usage: codec_transport_mpi_test --spare-nodes P --group-size G --spares K "
                   "[--max-size BYTES] [--chunk BYTES] [--max-buffer BYTES] "
                   "[--expect-config-error TEXT]\n");
    }
    MPI_Finalize();
    return 2;
  }

  // One virtual node per process; the last spare_nodes have no application rank.
  const int data_nodes = size - args.spare_nodes;
  std::vector<NodeInfo> nodes;
  for (int r = 0; r < size; ++r) {
    NodeInfo info{r, "vnode" + std::to_string(r), {}};
    if (r < data_nodes) info.app_ranks.push_back(r);
    nodes.push_back(info);
  }
  auto layout = FormGroups(nodes, {args.group_size, args.spares});
  if (!args.expect_config_error.empty()) {
    CHECK(!layout.ok(), "configuration unexpectedly accepted");
    if (!layout.ok()) {
      CHECK(layout.status().message().find(args.expect_config_error) != std::string::npos,
            "message: %s", layout.status().message().c_str());
      if (g_rank == 0) std::printf("configuration error: %s\n", layout.status().message().c_str());
    }
    return mpitest::Finish("codec_transport_mpi_test");
  }
  CHECK(layout.ok(), "%s", layout.status().ToString().c_str());
  if (!layout.ok()) return mpitest::Finish("codec_transport_mpi_test");
  if (g_rank == 0) std::printf("%s", DescribeLayout(*layout).c_str());
  auto role = FindRole(*layout, g_rank);
  CHECK(role.ok(), "%s", role.status().ToString().c_str());

  MPI_Comm group_comm = MPI_COMM_NULL;
  const bool in_group = role.ok() && role->group >= 0;
  MPI_Comm_split(MPI_COMM_WORLD, in_group ? role->group : MPI_UNDEFINED, in_group ? role->chunk : 0,
                 &group_comm);
  if (!in_group) {
    // A standby spare waits for the others; it must not spin meanwhile.
    const double cpu0 = CpuSeconds(), wall0 = MPI_Wtime();
    int failures = g_failures;
    int total = 0;
    MPI_Request req;
    MPI_Iallreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
    Status st = WaitQuietly(&req);
    const double cpu = CpuSeconds() - cpu0, wall = MPI_Wtime() - wall0;
    std::printf("standby rank %d waited %.2f s using %.3f s of CPU\n", g_rank, wall, cpu);
    CHECK(wall < 0.2 || cpu < 0.3 * wall, "standby spun: %.3f s CPU in %.3f s", cpu, wall);
    if (g_rank == 0) std::printf("%s\n", total == 0 ? "PASS" : "FAIL");
    MPI_Finalize();
    return st.ok() && total == 0 && g_failures == 0 ? 0 : 1;
  }

  const Group& group = layout->groups[role->group];
  auto code = ErasureCode::Create(group.scheme(), group.n(), group.k());
  CHECK(code.ok(), "%s", code.status().ToString().c_str());
  ReduceTransport::Options options;
  options.chunk_bytes = args.chunk;
  options.max_buffer_bytes = args.max_buffer;
  options.timeout_ms = 120000;  // a hang fails instead of waiting for ctest
  auto transport = ReduceTransport::Create(group_comm, options);
  CHECK(transport.ok(), "%s", transport.status().ToString().c_str());
  if (!code.ok() || !transport.ok()) return mpitest::Finish("codec_transport_mpi_test");

  GroupTest t(group, role->chunk, transport->get(), **code, args);
  const int n = group.n(), k = group.k();
  for (int epoch = 0; epoch < 3; ++epoch) {
    t.Encode(epoch);
    t.ScatterEncode(epoch, epoch % 2 == 1);
    // k data chunks lost (fewer if the group is small), rebuilt on the spares,
    // each spare both a source (its parity) and the owner of one output.
    std::vector<int> lost, targets;
    for (int i = 0; i < std::min(n, k); ++i) {
      lost.push_back((epoch + i) % n);
      targets.push_back(n + i);
    }
    std::sort(lost.begin(), lost.end());
    const auto kind = [&](int salt) {
      return static_cast<GroupTest::SinkKind>((epoch + salt) % 3);
    };
    t.Rebuild(epoch, lost, targets, kind(0));
    // One data chunk rebuilt on its own (fresh) rank, which only receives;
    // with k >= 2 a spare is lost as well.
    lost = {(epoch + 1) % n};
    targets = {lost[0]};
    if (k >= 2) lost.push_back(n + k - 1), targets.push_back(lost[0]);
    t.Rebuild(epoch, lost, targets, kind(1));
    // One data chunk rebuilt on the first spare, which owns the only output
    // and is a source: it folds its parity in instead of joining the ring.
    t.Rebuild(epoch, {(epoch + 2) % n}, {n}, kind(2));
    // The same and the encode with every source's bytes given as two inputs
    // whose xor they are (ring and fold).
    t.Rebuild(epoch, {(epoch + 2) % n}, {n}, kind(1), true);
    t.Encode(epoch, true);
    // Two outputs, one owned by a spare that is a source (its own ring), one
    // by a rank that is not (a ring of all sources): two rings at once.
    if (k >= 2 && n >= 2) {
      std::vector<int> two = {epoch % n, (epoch + 1) % n};
      std::sort(two.begin(), two.end());
      t.Rebuild(epoch, two, {n, two[1]}, kind(0));
    }
  }
  if (group.id == 0) t.TooManyLosses();
  t.MismatchedSpec();
  t.Encode(2);  // still usable after the rejected spec
  transport->reset();
  MPI_Comm_free(&group_comm);
  return mpitest::Finish("codec_transport_mpi_test");
}

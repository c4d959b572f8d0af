// dlckpt-bench-codec-mpi: end-to-end encode and rebuild over MPI on plain
// in-memory buffers, one process per (virtual) node.
//
//   --mode encode   the codec transport against the original design's method
//                   in the same run: per spare j, every data rank multiplies
//                   its data by its coefficient (RS only) and one
//                   MPI_Reduce(MPI_BXOR, MPI_UINT64_T) per group sums onto
//                   spare j. Last line:
//                   METRIC codec_encode_speedup_vs_mpi_reduce_k<K> <x> ratio target >= 2
//   --mode rebuild  rebuild of K lost data nodes per group (each on one of
//                   the group's spares, which also contributes its parity)
//                   against encode of the same data. Last line:
//                   METRIC codec_rebuild_over_encode_k<K> <x> ratio target <= 1.2
//
// Ranks: the last --spare-nodes ranks are spares, the others data nodes with
// --mib MiB each, presented to the transport as 64 KiB extents (a memfs
// image's block granularity). Results are checked byte for byte. Times are
// the slowest rank's, median over --iters after one warm-up; the two methods
// compared run alternately, so that load from other processes hits both.
#include <isa-l/erasure_code.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_mpi.h"
#include "dlckpt/codec/erasure.h"
#include "dlckpt/codec/groups.h"
#include "dlckpt/codec/reduce_transport.h"

using namespace dlckpt;
using namespace dlckpt::codec;

namespace {

struct Args {
  std::string mode = "encode";
  int spares = 1;
  int spare_nodes = -1;  // default: spares (one group)
  int group_size = 0;    // default: all data nodes
  size_t mib = 64;
  int iters = 5;
  size_t chunk = 512 << 10;
  bool verbose = false;
};

// dlckpt-bench-codec-mpi's options, filling *a.
void DefineOptions(CLI::App& app, Args* a) {
  cli::SetUsage(app, "usage: mpiexec -n N dlckpt-bench-codec-mpi [options]");
  app.description(
      "The last P ranks (default K) are spare nodes, the others data nodes holding\n"
      "M MiB each (default 64), in groups of at most G data nodes (default all).");
  app.add_option("--mode", a->mode, "encode (default) or rebuild")
      ->option_text("encode|rebuild")
      ->check(CLI::IsMember({"encode", "rebuild"}));
  app.add_option("--spares", a->spares, "parity members per group, K (1)")->option_text("K");
  app.add_option("--spare-nodes", a->spare_nodes, "spare ranks, P (default K)")->option_text("P");
  app.add_option("--group-size", a->group_size, "data nodes per group, G (default all)")->option_text("G");
  app.add_option("--mib", a->mib, "MiB per data node, M (64)")->option_text("M")->check(CLI::PositiveNumber);
  app.add_option("--iters", a->iters, "timed runs after one warm-up (5)")->option_text("I")->check(CLI::PositiveNumber);
  app.add_option("--chunk", a->chunk, "bytes per transport chunk (524288)")->option_text("BYTES");
  app.add_flag("--verbose", a->verbose, "per-rank statistics of the last run");
}

// Pre-touched, 64-byte aligned buffer.
struct Buffer {
  explicit Buffer(size_t n = 0) : len(n) {
    if (n) {
      data = static_cast<uint8_t*>(std::aligned_alloc(64, (n + 63) / 64 * 64));
      std::memset(data, 0, n);
    }
  }
  ~Buffer() { std::free(data); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  uint8_t* data = nullptr;
  size_t len = 0;
};

void Quiet(MPI_Request* req) {
  if (!WaitQuietly(req).ok()) MPI_Abort(MPI_COMM_WORLD, 3);
}

double MaxOver(MPI_Comm comm, double v) { return bench::AllReduce(v, MPI_DOUBLE, MPI_MAX, comm, Quiet); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int g_rank = 0;
bool g_verbose = false;

void PrintStats(const char* what, const ReduceStats& st) {
  if (!g_verbose) return;
  std::printf("  rank %d %s: %.1f ms, compute %.1f ms, sent %.1f MiB, received %.1f MiB, chunk %zu\n",
              g_rank, what, st.seconds * 1e3, st.compute_seconds * 1e3, st.bytes_sent / 1048576.0,
              st.bytes_received / 1048576.0, st.chunk_bytes);
  std::fflush(stdout);
}

void Die(const std::string& msg) {
  std::fprintf(stderr, "dlckpt-bench-codec-mpi: rank %d: %s\n", g_rank, msg.c_str());
  MPI_Abort(MPI_COMM_WORLD, 1);
}

}  // namespace

int main(int argc, char** argv) {
  int size = 0;
  Args args;
  if (auto rc = bench::StartMain(&argc, &argv, "dlckpt-bench-codec-mpi", DefineOptions, &args, &g_rank, &size)) return *rc;
  if (args.spare_nodes < 0) args.spare_nodes = args.spares;
  g_verbose = args.verbose;
  const int data_nodes = size - args.spare_nodes;
  if (args.group_size <= 0) args.group_size = std::max(1, data_nodes);

  std::vector<NodeInfo> nodes;
  for (int r = 0; r < size; ++r) {
    NodeInfo info{r, "vnode" + std::to_string(r), {}};
    if (r < data_nodes) info.app_ranks.push_back(r);
    nodes.push_back(info);
  }
  auto layout = FormGroups(nodes, {args.group_size, args.spares});
  if (!layout.ok()) {
    if (g_rank == 0) std::fprintf(stderr, "dlckpt-bench-codec-mpi: %s\n", layout.status().ToString().c_str());
    MPI_Finalize();
    return 1;
  }
  auto role = FindRole(*layout, g_rank);
  if (!role.ok()) Die(role.status().ToString());
  const bool in_group = role->group >= 0;
  MPI_Comm gcomm;
  MPI_Comm_split(MPI_COMM_WORLD, in_group ? role->group : MPI_UNDEFINED, in_group ? role->chunk : 0,
                 &gcomm);
  if (g_rank == 0) {
    std::printf("# %d processes on one machine; %s", size, DescribeLayout(*layout).c_str());
    std::printf("# mode %s, %zu MiB per data node, chunk %zu KiB, %d iterations + 1 warm-up\n",
                args.mode.c_str(), args.mib, args.chunk >> 10, args.iters);
  }

  // Standby spares only take part in the world-wide timing reductions.
  const Group* group = in_group ? &layout->groups[role->group] : nullptr;
  const int n = group ? group->n() : 0, k = group ? group->k() : 0;
  const int chunk = in_group ? role->chunk : -1;
  const bool is_data = in_group && chunk < n;
  const size_t bytes = args.mib << 20;

  std::shared_ptr<const ErasureCode> code;
  std::unique_ptr<ReduceTransport> transport;
  if (in_group) {
    auto c = ErasureCode::Create(group->scheme(), n, k);
    if (!c.ok()) Die(c.status().ToString());
    code = *c;
    ReduceTransport::Options options;
    options.chunk_bytes = args.chunk;
    auto t = ReduceTransport::Create(gcomm, options);
    if (!t.ok()) Die(t.status().ToString());
    transport = std::move(*t);
  }

  // Data: one buffer, presented as 64 KiB extents.
  Buffer data(is_data ? bytes : 0);
  const uint64_t seed = static_cast<uint64_t>(g_rank) << 40;
  if (is_data) bench::Fill(data.data, bytes, seed);
  auto extents_of = [](const uint8_t* p, size_t len) {
    std::vector<Extent> ex;
    for (size_t off = 0; off < len; off += 64 << 10)
      ex.push_back({p + off, std::min<size_t>(64 << 10, len - off)});
    return ex;
  };
  const std::vector<Extent> data_extents = extents_of(data.data, data.len);
  BufferSink sink;
  ReduceSpec encode_spec;
  if (in_group) {
    encode_spec = EncodeSpec(*code, "group " + std::to_string(group->id) + " encode");
  }

  ReduceStats last_encode;
  auto run_encode = [&]() {
    bench::Barrier(MPI_COMM_WORLD, Quiet);
    double t0 = MPI_Wtime();
    if (in_group) {
      auto st = transport->Run(encode_spec, is_data ? std::span<const Extent>(data_extents)
                                                    : std::span<const Extent>(),
                               is_data ? nullptr : &sink);
      if (!st.ok()) Die(st.status().ToString());
      last_encode = *st;
    }
    return MaxOver(MPI_COMM_WORLD, MPI_Wtime() - t0);
  };

  // Warm-up encode; its parity checks the baseline and feeds the rebuild.
  run_encode();
  Buffer parity(in_group && !is_data ? bytes : 0);
  if (parity.len) {
    auto out = sink.output(chunk - n);
    if (out.size() != bytes) Die("parity has " + std::to_string(out.size()) + " bytes");
    std::memcpy(parity.data, out.data(), bytes);
  }
  const double total_gb = static_cast<double>(bytes) * data_nodes / 1e9;
  std::vector<double> encode_times, other_times;

  if (args.mode == "encode") {
    // The original method: per spare j, (RS: scale by c[j][i]) + MPI_Reduce.
    Buffer scaled(is_data && k > 1 ? bytes : 0), zeros(in_group && !is_data ? bytes : 0),
        result(in_group && !is_data ? bytes : 0);
    std::vector<uint8_t> tables;
    if (is_data && k > 1) {
      tables.resize(32 * k);
      std::vector<uint8_t> column(k);
      for (int j = 0; j < k; ++j) column[j] = code->encoder()->coefficient(j, chunk);
      ec_init_tables(1, k, column.data(), tables.data());
    }
    bool checked = false;
    auto run_baseline = [&]() {
      bench::Barrier(MPI_COMM_WORLD, Quiet);
      double t0 = MPI_Wtime();
      for (int j = 0; in_group && j < k; ++j) {
        const void* send;
        if (is_data && k > 1) {
          for (size_t off = 0; off < bytes; off += 1 << 30) {  // ec_encode_data takes int
            uint8_t* in = data.data + off;
            uint8_t* o = scaled.data + off;
            ec_encode_data(static_cast<int>(std::min<size_t>(1 << 30, bytes - off)), 1, 1,
                           tables.data() + 32 * j, &in, &o);
          }
          send = scaled.data;
        } else {
          send = is_data ? data.data : zeros.data;
        }
        const bool root = chunk == n + j;
        int rc = MPI_Reduce(send, root ? result.data : nullptr, static_cast<int>(bytes / 8),
                            MPI_UINT64_T, MPI_BXOR, n + j, gcomm);
        if (rc != MPI_SUCCESS) Die("MPI_Reduce failed");
        if (root && !checked) {
          if (std::memcmp(result.data, parity.data, bytes) != 0)
            Die("MPI_Reduce parity differs from the transport's parity");
          checked = true;
        }
      }
      return MaxOver(MPI_COMM_WORLD, MPI_Wtime() - t0);
    };
    run_baseline();  // warm-up
    for (int it = 0; it < args.iters; ++it) {  // alternate, so that load drift hits both
      encode_times.push_back(run_encode());
      other_times.push_back(run_baseline());
    }
    if (in_group) PrintStats("encode", last_encode);
    const double encode_s = Median(encode_times), base_s = Median(other_times);
    bench::Barrier(MPI_COMM_WORLD, Quiet);
    if (g_rank == 0) {
      std::printf("codec transport encode: %.1f ms (median; %.2f GB/s of data)\n",
                  encode_s * 1e3, total_gb / encode_s);
      std::printf("original method (%s MPI_Reduce(MPI_BXOR, MPI_UINT64_T) per group): %.1f ms "
                  "(median; %.2f GB/s of data)\n",
                  args.spares > 1 ? "RS scaling + one" : "one", base_s * 1e3, total_gb / base_s);
      std::printf("parity identical between the two methods\n");
      std::printf("METRIC codec_encode_speedup_vs_mpi_reduce_k%d %.2f ratio target >= 2\n",
                  args.spares, base_s / encode_s);
    }
  } else {
    // Lose the first min(n, k) data nodes of every group; spare j rebuilds lost j.
    ReduceSpec spec;
    std::vector<int> lost, targets;
    if (in_group) {
      std::vector<int> chunk_ranks(n + k);
      for (int c = 0; c < n + k; ++c) chunk_ranks[c] = c;
      for (int i = 0; i < std::min(n, k); ++i) {
        chunk_ranks[i] = -1;
        lost.push_back(i);
        targets.push_back(n + i);
      }
      auto s = RebuildSpec(*code, chunk_ranks, lost, targets,
                           "group " + std::to_string(group->id) + " rebuild");
      if (!s.ok()) Die(s.status().ToString());
      spec = *s;
    }
    const bool lost_me = in_group && chunk < static_cast<int>(lost.size());
    const std::vector<Extent> parity_extents = extents_of(parity.data, parity.len);
    BufferSink rebuilt;
    ReduceStats last_rebuild;
    auto run_rebuild = [&]() {
      bench::Barrier(MPI_COMM_WORLD, Quiet);
      double t0 = MPI_Wtime();
      if (in_group) {
        std::span<const Extent> input;
        if (is_data && !lost_me) input = data_extents;
        if (!is_data) input = parity_extents;
        auto st = transport->Run(spec, input, &rebuilt);
        if (!st.ok()) Die(st.status().ToString());
        last_rebuild = *st;
      }
      return MaxOver(MPI_COMM_WORLD, MPI_Wtime() - t0);
    };
    run_rebuild();  // warm-up
    for (int it = 0; it < args.iters; ++it) {
      encode_times.push_back(run_encode());
      other_times.push_back(run_rebuild());
    }
    if (in_group) PrintStats("encode", last_encode);
    bench::Barrier(MPI_COMM_WORLD, Quiet);
    if (in_group) PrintStats("rebuild", last_rebuild);
    // The spare that rebuilt lost node i compares with the original bytes.
    if (in_group && !is_data && chunk - n < static_cast<int>(lost.size())) {
      const int w = chunk - n;
      const int lost_rank = group->data[lost[w]].codec_rank;
      Buffer want(bytes);
      bench::Fill(want.data, bytes, static_cast<uint64_t>(lost_rank) << 40);
      auto got = rebuilt.output(w);
      if (got.size() != bytes || std::memcmp(got.data(), want.data, bytes) != 0)
        Die("rebuilt image of rank " + std::to_string(lost_rank) + " differs");
    }
    const double encode_s = Median(encode_times), rebuild_s = Median(other_times);
    bench::Barrier(MPI_COMM_WORLD, Quiet);
    if (g_rank == 0) {
      std::printf("codec transport encode: %.1f ms (median; %.2f GB/s of data)\n",
                  encode_s * 1e3, total_gb / encode_s);
      std::printf("rebuild of %d lost node(s) per group: %.1f ms (median), images identical\n",
                  std::min(layout->groups[0].n(), args.spares), rebuild_s * 1e3);
      std::printf("METRIC codec_rebuild_over_encode_k%d %.2f ratio target <= 1.2\n", args.spares,
                  rebuild_s / encode_s);
    }
  }
  transport.reset();
  if (gcomm != MPI_COMM_NULL) MPI_Comm_free(&gcomm);
  MPI_Finalize();
  return 0;
}

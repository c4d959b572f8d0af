// dlckpt-bench-delta-encode: incremental (delta) encode against a full
// encode of the same epoch, over MPI, one process per (virtual) node, with
// real memfs stores (copy-on-write tells which blocks changed) and the
// codec's transport and delta ends (dlckpt/codec/delta_transport.h).
//
// For each shape n:k (--shapes, default 4:1,8:2; ranks 0..n-1 data nodes
// with one store of --mib MiB each, ranks n..n+k-1 spares) and each fraction
// f (--fractions, default 0.01,0.1,0.5,1): every data node rewrites a stretch
// of f of its checkpoint file in place and commits a new epoch; then, in
// alternating order --iters times, it is encoded
//   full   images read in place, ring reduce-scatter, parity into a slot;
//   delta  Store::Delta, the ranges exchanged (MPI_Allgather), the union U,
//          (old xor new) packed over U, the same transport over the packed
//          bytes, the spare applying the packed deltas into the other slot
//          and copying into it what it lacks (forced, whatever f). As on a
//          spare after a series of delta encodes, that slot holds the parity
//          of the epoch before (an untimed copy sets it up), so only the
//          previous step's union and the current one are copied; the first
//          step of a shape, untimed, sets up that history;
//   auto   what the service does (service_delta.cc): the plan, then delta if
//          the packed fraction is at most --threshold (default: the
//          service's for the spares layout, 0.7), else full.
// Every delta result is checked byte for byte against the full one. Times
// are the slowest rank's, median over --iters. Per shape, METRIC lines:
//   METRIC incremental_encode_<n>to<k>_<p>pct <auto/full> ratio target <= T
// (T = 0.15 at 10 %, 1.05 at 100 %, 1 otherwise) and
//   METRIC incremental_bytes_<n>to<k>_<p>pct <delta/full bytes sent> ratio target <= 1
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include "bench_mpi.h"
#include "dlckpt/codec/delta.h"
#include "dlckpt/codec/delta_transport.h"
#include "dlckpt/codec/erasure.h"
#include "dlckpt/codec/reduce_transport.h"
#include "dlckpt/memfs/memfs.h"

using namespace dlckpt;
using namespace dlckpt::codec;

namespace {

int g_rank = 0;
std::string g_store;  // this rank's store, removed by Die too

void Die(const std::string& msg) {
  std::fprintf(stderr, "dlckpt-bench-delta-encode: rank %d: %s\n", g_rank, msg.c_str());
  if (!g_store.empty()) (void)memfs::Store::Destroy(g_store);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

void Quiet(MPI_Request* req) {
  if (!WaitQuietly(req).ok()) MPI_Abort(MPI_COMM_WORLD, 3);
}
double MaxOver(MPI_Comm comm, double v) { return bench::AllReduce(v, MPI_DOUBLE, MPI_MAX, comm, Quiet); }
uint64_t SumOver(MPI_Comm comm, uint64_t v) { return bench::AllReduce(v, MPI_UINT64_T, MPI_SUM, comm, Quiet); }
double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A pre-touched buffer.
struct Buffer {
  explicit Buffer(size_t n) : len(n), data(static_cast<uint8_t*>(std::aligned_alloc(64, (n + 63) / 64 * 64))) {
    std::memset(data, 1, n);
  }
  ~Buffer() { std::free(data); }
  size_t len;
  uint8_t* data;
};

// A full encode's spare side: the parity lands in a fixed slot.
class SlotSink final : public OutputSink {
 public:
  explicit SlotSink(uint8_t* slot) : slot_(slot) {}
  Result<uint8_t*> Begin(int, uint64_t) override { return slot_; }

 private:
  uint8_t* slot_;
};

struct Shape {
  int n, k;
};

struct Args {
  std::vector<Shape> shapes{{4, 1}, {8, 2}};
  std::vector<double> fractions{0.01, 0.1, 0.5, 1.0};
  size_t mib = 256;
  int iters = 3;
  double threshold = 0;  // 0: the service's default for the spares layout (0.7)
  std::string prefix;  // store names: <prefix>.r<rank>; default /dlckpt.benchdelta<pid of rank 0>
};

// dlckpt-bench-delta-encode's options, filling *a.
void DefineOptions(CLI::App& app, Args* a) {
  cli::SetUsage(app, "usage: mpiexec -n N dlckpt-bench-delta-encode [options]");
  app.description(
      "N >= the largest n + k. Encode time and bytes sent of delta encodes against\n"
      "full encodes of the same epoch, when the given fractions of a checkpoint\n"
      "changed; ends with METRIC lines.");
  app.add_option_function<std::string>(
         "--shapes",
         [a](const std::string& v) {
           auto shapes = bench::ParseShapes(v, 1 << 20);
           if (!shapes) bench::RejectValue("--shapes", v, "a list n:k,...");
           a->shapes.clear();
           for (const auto& [n, k] : *shapes) a->shapes.push_back({n, k});
         },
         "groups of n data nodes and k spares (4:1,8:2)")
      ->option_text("n:k,...");
  app.add_option("--mib", a->mib, "MiB per data node (256)")->option_text("M");
  app.add_option("--fractions", a->fractions, "fractions of a checkpoint rewritten (0.01,0.1,0.5,1)")
      ->option_text("F,...")
      ->delimiter(',')
      ->expected(1, 1 << 20);
  app.add_option("--iters", a->iters, "encodes per case; the median is reported (3)")->option_text("I");
  app.add_option("--threshold", a->threshold,
                 "the largest packed fraction encoded as a delta (0: the service's default for the spares "
                 "layout, 0.7)")
      ->option_text("F");
  app.add_option("--prefix", a->prefix, "store names <prefix>.r<rank> (default /dlckpt.benchdelta<pid of rank 0>)")
      ->option_text("/NAME");
}

// What one delta plan costs and gives: the union of every data node's ranges.
struct Plan {
  std::vector<ByteRange> own, ranges;
  uint64_t length = 0;
  double fraction = 0;
  std::vector<Extent> old_image, new_image;
};

// Collective over `comm` (data ranks 0..n-1 contribute): Store::Delta, the
// exchange of the ranges and the union, as the service computes them.
Plan MakePlan(MPI_Comm comm, memfs::Store* store, uint64_t from, uint64_t to) {
  Plan p;
  std::vector<uint64_t> mine;  // size, then offset/len pairs
  uint64_t size = 0;
  if (store) {
    auto d = store->Delta(from, to);
    auto old = store->GetImage(from);
    auto now = store->GetImage(to);
    if (!d.ok() || !old.ok() || !now.ok()) Die("delta: " + d.status().ToString());
    std::vector<memfs::Store::ImageDelta> one{*d};
    p.own = MemberDelta(one);
    p.old_image = old->extents;
    p.new_image = now->extents;
    size = now->size;
  }
  mine.push_back(size);
  for (const auto& r : p.own) {
    mine.push_back(r.offset);
    mine.push_back(r.len);
  }
  int np = 0;
  MPI_Comm_size(comm, &np);
  int count = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<size_t>(np)), displs(static_cast<size_t>(np));
  MPI_Request req;
  MPI_Iallgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, comm, &req);
  Quiet(&req);
  int total = 0;
  for (int i = 0; i < np; ++i) {
    displs[static_cast<size_t>(i)] = total;
    total += counts[static_cast<size_t>(i)];
  }
  std::vector<uint64_t> all(static_cast<size_t>(total));
  MPI_Iallgatherv(mine.data(), count, MPI_UINT64_T, all.data(), counts.data(), displs.data(), MPI_UINT64_T,
                  comm, &req);
  Quiet(&req);
  std::vector<std::vector<ByteRange>> lists;
  for (int i = 0; i < np; ++i) {
    const uint64_t* q = all.data() + displs[static_cast<size_t>(i)];
    p.length = std::max(p.length, q[0]);
    std::vector<ByteRange> l;
    for (int j = 1; j + 1 < counts[static_cast<size_t>(i)]; j += 2) l.push_back(ByteRange{q[j], q[j + 1]});
    lists.push_back(std::move(l));
  }
  p.ranges = UnionRanges(lists, p.length);
  p.fraction = p.length ? static_cast<double>(RangeBytes(p.ranges)) / static_cast<double>(p.length) : 0;
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  int size = 0;
  Args args;
  if (auto rc = bench::StartMain(&argc, &argv, "dlckpt-bench-delta-encode", DefineOptions, &args, &g_rank, &size)) return *rc;
  int max_n = 0;
  for (const Shape& s : args.shapes) {
    if (s.n + s.k > size) Die("shape " + std::to_string(s.n) + ":" + std::to_string(s.k) + " needs more ranks");
    max_n = std::max(max_n, s.n);
  }
  const uint64_t file_bytes = uint64_t{args.mib} << 20;

  // One store per rank that is a data node of some shape.
  std::unique_ptr<memfs::Store> store;
  int pid0 = static_cast<int>(getpid());
  MPI_Bcast(&pid0, 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string prefix = args.prefix.empty() ? "/dlckpt.benchdelta" + std::to_string(pid0) : args.prefix;
  std::string name = prefix + ".r" + std::to_string(g_rank);
  uint64_t epoch = 0;
  int fd = -1;
  if (g_rank < max_n) {
    memfs::StoreOptions o;
    o.capacity = 2 * file_bytes + (64u << 20);
    o.rank = g_rank;
    auto s = memfs::Store::Create(name, o);
    if (!s.ok()) Die(s.status().ToString());
    store = std::move(*s);
    g_store = name;
    auto f = store->Open("/ckpt", O_RDWR | O_CREAT, 0644);
    if (!f.ok()) Die(f.status().ToString());
    fd = *f;
    std::vector<uint8_t> buf(16u << 20);
    for (uint64_t off = 0; off < file_bytes; off += buf.size()) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), file_bytes - off));
      bench::Fill(buf.data(), n, bench::SplitMix64(g_rank) + off);
      if (!store->Pwrite(fd, buf.data(), n, off).ok()) Die("write");
    }
    auto c = store->Commit(++epoch);
    if (!c.ok() || !store->Acknowledge(epoch).ok()) Die("commit");
  } else {
    ++epoch;
  }
  if (g_rank == 0) {
    std::printf("dlckpt-bench-delta-encode: %d ranks, %zu MiB per data node, %d iterations\n", size, args.mib,
                args.iters);
  }

  std::vector<std::string> metrics;
  for (const Shape& shape : args.shapes) {
    const bool in = g_rank < shape.n + shape.k;
    MPI_Comm comm;
    MPI_Comm_split(MPI_COMM_WORLD, in ? 0 : MPI_UNDEFINED, g_rank, &comm);
    if (!in) {
      bench::Barrier(MPI_COMM_WORLD, Quiet);
      continue;
    }
    const bool data = g_rank < shape.n;
    const bool spare = !data;
    memfs::Store* my_store = data ? store.get() : nullptr;
    auto code = ErasureCode::Create(shape.k == 1 ? Scheme::kXor : Scheme::kReedSolomon, shape.n, shape.k);
    if (!code.ok()) Die(code.status().ToString());
    ReduceSpec spec = EncodeSpec(**code, "bench encode");
    auto transport = ReduceTransport::Create(comm);
    if (!transport.ok()) Die(transport.status().ToString());
    const size_t slot_bytes = file_bytes + (4u << 20);
    // a: the kept parity; b: the slot written; prev: the older parity the
    // written slot holds before each delta run (as a spare's other slot
    // does after a series of delta encodes: only the previous union U and
    // the tail need copying, see DeltaParitySink's `stale`).
    std::unique_ptr<Buffer> a, b, check, prev;
    if (spare) {
      a = std::make_unique<Buffer>(slot_bytes);
      b = std::make_unique<Buffer>(slot_bytes);
      check = std::make_unique<Buffer>(slot_bytes);
      prev = std::make_unique<Buffer>(slot_bytes);
    }
    bool have_history = false;
    std::vector<ByteRange> history;  // the last step's union U
    uint64_t prev_len = 0;
    double copy_ms = 0;
    // $DLCKPT_BENCH_PACK=1: the delta packed into a buffer first (PackDelta),
    // as the service did before it passed new and old bytes in place.
    const bool pack = std::getenv("DLCKPT_BENCH_PACK") != nullptr && std::string(std::getenv("DLCKPT_BENCH_PACK")) == "1";
    std::vector<uint8_t> packed;
    uint64_t parity_len = 0;

    // Full encode of the acknowledged epoch into b; returns the slowest rank's seconds.
    auto full = [&](uint64_t e, uint64_t* sent) {
      bench::Barrier(comm, Quiet);
      double t0 = MPI_Wtime();
      std::vector<Extent> in_ext;
      if (data) {
        auto img = my_store->GetImage(e);
        if (!img.ok()) Die(img.status().ToString());
        in_ext = img->extents;
      }
      SlotSink sink(spare ? b->data : nullptr);
      auto st = (*transport)->Run(spec, in_ext, &sink);
      if (!st.ok()) Die(st.status().ToString());
      parity_len = st->length;
      double t = MaxOver(comm, MPI_Wtime() - t0);
      *sent = SumOver(comm, st->bytes_sent);
      return t;
    };
    // Delta (forced) or auto encode of e over the parity of `from` in a into b.
    auto delta = [&](uint64_t from, uint64_t e, bool automatic, uint64_t* sent, double* fraction,
                     std::vector<ByteRange>* union_out) {
      if (spare && have_history) std::memcpy(b->data, prev->data, prev_len);  // untimed: the slot's state
      bench::Barrier(comm, Quiet);
      double t0 = MPI_Wtime();
      Plan p = MakePlan(comm, my_store, from, e);
      *fraction = p.fraction;
      if (union_out) *union_out = p.ranges;
      const double threshold = args.threshold > 0 ? args.threshold : 0.7;  // codec/src/service_delta.cc
      if (automatic && p.fraction > threshold) {
        std::vector<Extent> in_ext = data ? p.new_image : std::vector<Extent>{};
        SlotSink sink(spare ? b->data : nullptr);
        auto st = (*transport)->Run(spec, in_ext, &sink);
        if (!st.ok()) Die(st.status().ToString());
        double t = MaxOver(comm, MPI_Wtime() - t0);
        *sent = SumOver(comm, st->bytes_sent);
        return t;
      }
      double t_plan = MPI_Wtime();
      auto map = std::make_shared<const PackedMap>(p.ranges);
      std::vector<Extent> in_ext, in_old;
      if (data && pack) {
        packed.resize(RangeBytes(p.ranges));
        PackDelta(p.old_image, p.new_image, p.ranges, p.own, packed.data());
        in_ext.push_back(Extent{packed.data(), packed.size()});
      } else if (data) {
        DeltaInputs(p.old_image, p.new_image, p.ranges, p.own, &in_ext, &in_old);
      }
      double t_pack = MPI_Wtime();
      std::vector<std::span<const uint8_t>> kept(static_cast<size_t>(shape.k));
      if (spare) kept[static_cast<size_t>(g_rank - shape.n)] = {a->data, parity_len};
      std::vector<ByteRange> stale;
      if (have_history) {
        uint64_t lo = std::min(prev_len, parity_len);
        std::vector<std::vector<ByteRange>> lists{history, {ByteRange{lo, p.length > lo ? p.length - lo : 0}}};
        stale = UnionRanges(lists, p.length);
      }
      DeltaParitySink sink(
          map, p.length, kept,
          [&](int, uint64_t, bool* reused) -> Result<uint8_t*> {
            *reused = have_history;
            return b->data;
          },
          have_history ? &stale : nullptr);
      if (spare && !sink.PrepareAhead(g_rank - shape.n).ok()) Die("prepare");
      auto st = (*transport)->Run(spec, in_ext, &sink, in_old);
      if (!st.ok()) Die(st.status().ToString());
      if (spare) copy_ms = sink.copy_seconds() * 1e3;
      if (std::getenv("DLCKPT_BENCH_TRACE")) {
        std::fprintf(stderr, "rank %d delta: plan %.1f ms, pack %.1f ms, run %.1f ms (compute %.1f, copy %.1f)\n",
                     g_rank, (t_plan - t0) * 1e3, (t_pack - t_plan) * 1e3, (MPI_Wtime() - t_pack) * 1e3,
                     st->compute_seconds * 1e3, sink.copy_seconds() * 1e3);
      }
      double t = MaxOver(comm, MPI_Wtime() - t0);
      *sent = SumOver(comm, st->bytes_sent);
      return t;
    };

    uint64_t sent = 0;
    // Each data store's own epochs (a rank may be a spare in one shape and a data node in the next).
    epoch = data ? my_store->epochs().acknowledged : 0;
    full(epoch, &sent);  // the kept parity of the acknowledged epoch
    if (spare) std::swap(a, b);
    const std::string tag = std::to_string(shape.n) + "to" + std::to_string(shape.k);
    // A first, untimed step of the first fraction: the spare then holds the
    // history of a delta encode, as in a series of them.
    std::vector<double> steps{args.fractions.front()};
    steps.insert(steps.end(), args.fractions.begin(), args.fractions.end());
    for (size_t step = 0; step < steps.size(); ++step) {
      const double f = steps[step];
      const bool timed = step > 0;
      // Rewrite a stretch of f of the file in place (the same stretch on
      // every data node, as an SPMD code would) and commit.
      uint64_t from = epoch;
      if (data) {
        epoch = my_store->epochs().next;
        uint64_t n = std::max<uint64_t>(8, static_cast<uint64_t>(static_cast<double>(file_bytes) * f)) / 8 * 8;
        uint64_t start = (bench::SplitMix64(step + 77) % (file_bytes - n + 1)) / 8 * 8;
        std::vector<uint8_t> buf(std::min<uint64_t>(n, 16u << 20));
        for (uint64_t off = 0; off < n; off += buf.size()) {
          size_t m = static_cast<size_t>(std::min<uint64_t>(buf.size(), n - off));
          bench::Fill(buf.data(), m, bench::SplitMix64(epoch * 1000 + g_rank) + off);
          if (!my_store->Pwrite(fd, buf.data(), m, start + off).ok()) Die("rewrite");
        }
        auto c = my_store->Commit(epoch);
        if (!c.ok()) Die(c.status().ToString());
      }
      std::vector<double> tf, td, ta;
      uint64_t sent_full = 0, sent_delta = 0, sent_auto = 0;
      double fraction = 0;
      std::vector<ByteRange> u;
      const uint64_t kept_len = parity_len;
      for (int it = 0; it < (timed ? args.iters : 1); ++it) {
        if (it % 2 == 0) {
          tf.push_back(full(epoch, &sent_full));
          if (it == 0 && spare) std::memcpy(check->data, b->data, parity_len);
          parity_len = kept_len;
          td.push_back(delta(from, epoch, false, &sent_delta, &fraction, &u));
          if (it == 0 && spare && std::memcmp(check->data, b->data, parity_len) != 0) {
            Die("the delta encode's parity differs from the full encode's");
          }
          ta.push_back(delta(from, epoch, true, &sent_auto, &fraction, nullptr));
        } else {
          ta.push_back(delta(from, epoch, true, &sent_auto, &fraction, nullptr));
          td.push_back(delta(from, epoch, false, &sent_delta, &fraction, nullptr));
          tf.push_back(full(epoch, &sent_full));
        }
        parity_len = kept_len;
      }
      // b := the parity of epoch, which becomes the kept one; the old kept
      // parity is what the other slot holds next time, differing in U.
      full(epoch, &sent);
      if (spare) {
        std::swap(prev, a);  // prev := P(from)
        std::swap(a, b);     // a := P(epoch); b: free
        prev_len = kept_len;
      }
      have_history = true;
      history = u;
      if (data && !my_store->Acknowledge(epoch).ok()) Die("acknowledge");
      if (!timed) continue;
      double mf = Median(tf), md = Median(td), ma = Median(ta);
      int pct = static_cast<int>(f * 100 + 0.5);
      const double copy_max = MaxOver(comm, copy_ms);
      if (g_rank == 0) {
        std::printf("%d:%d %3d%% changed (packed %.3f): full %7.1f ms, delta %7.1f ms (%.3f), auto %7.1f ms (%.3f);"
                    " MiB sent full %.1f, delta %.1f (%.3f); spare copy %.1f ms\n",
                    shape.n, shape.k, pct, fraction, mf * 1e3, md * 1e3, md / mf, ma * 1e3, ma / mf,
                    sent_full / 1048576.0, sent_delta / 1048576.0,
                    sent_full ? static_cast<double>(sent_delta) / static_cast<double>(sent_full) : 0,
                    copy_max);
        char line[256];
        double target = pct == 10 ? 0.15 : pct == 100 ? 1.05 : 1.0;
        std::snprintf(line, sizeof line, "METRIC incremental_encode_%s_%dpct %.3f ratio target <= %.2f", tag.c_str(),
                      pct, ma / mf, target);
        metrics.push_back(line);
        std::snprintf(line, sizeof line, "METRIC incremental_bytes_%s_%dpct %.3f ratio target <= 1", tag.c_str(), pct,
                      sent_full ? static_cast<double>(sent_auto) / static_cast<double>(sent_full) : 0);
        metrics.push_back(line);
      }
      std::fflush(stdout);
    }
    MPI_Comm_free(&comm);
    transport->reset();
    bench::Barrier(MPI_COMM_WORLD, Quiet);
  }
  if (g_rank == 0) {
    for (const auto& m : metrics) std::printf("%s\n", m.c_str());
  }
  if (store) {
    (void)store->Close(fd);
    store.reset();
    (void)memfs::Store::Destroy(name);
  }
  MPI_Finalize();
  return 0;
}

// memfs compression: memory per checkpoint byte and checkpoint time, with and
// without LZ4, on zeros and on random bytes (the two ends; sppm-mini's
// checkpoints across a run are measured by compress_run_bench.sh).
//
// A store (64 KiB blocks, 1 MiB chunks, threshold 0.875) holds a checkpoint
// file of --mib MiB rewritten every epoch as an application does: open
// O_TRUNC, write in --record-kib records, close, Commit, encode,
// Acknowledge. "Encode" here is the data node's local share of it: reading
// the epoch's image (Store::GetImage extents, as dlckpt-codec does) in 1 MiB
// slices and XOR-ing them into a parity buffer; the transport between nodes,
// which also scales with the image size, is left out. Memory is the peak of
// the store's used blocks over the cycle, sampled after every record, in the
// steady state (epochs 2 and later). Times are thread CPU times (robust to a
// shared machine: every phase is CPU work in this thread), the best of the
// epochs after the first; the four cases run interleaved, epoch by epoch.
//
//   build/bin/dlckpt-bench-memfs-compress [--mib 64] [--record-kib 1024] [--epochs 6]
//
// METRIC lines (targets justified in bench/README.md):
//   lz4_memory_ratio_zeros     peak blocks, lz4 / none, zeros        <= 0.1
//   lz4_random_memory_overhead peak blocks, lz4 / none, random bytes <= 1.01
//   lz4_random_overhead        checkpoint time, lz4 / none, random   <= 1.1
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <memory>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "dlckpt/base/cli.h"
#include "dlckpt/base/version.h"
#include "dlckpt/memfs/memfs.h"

namespace {

using dlckpt::memfs::Compression;
using dlckpt::memfs::Store;

double Wall() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double Cpu() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

[[noreturn]] void Die(const std::string& what, const dlckpt::Status& s) {
  std::fprintf(stderr, "dlckpt-bench-memfs-compress: %s: %s\n", what.c_str(), s.ToString().c_str());
  std::exit(1);
}

// One store and one kind of data; Epoch() runs one checkpoint cycle.
class Case {
 public:
  Case(const char* kind, Compression c, const std::vector<uint8_t>& data, size_t record, int index)
      : kind_(kind), mode_(dlckpt::memfs::CompressionName(c)), data_(data), record_(record) {
    name_ = "/dlckpt-bench-compress." + std::to_string(getpid()) + "." + std::to_string(index);
    (void)Store::Destroy(name_);
    dlckpt::memfs::StoreOptions o;
    o.capacity = 2 * data.size() + (16 << 20);
    o.block_size = 64 << 10;
    o.compression = c;
    auto created = Store::Create(name_, o);
    if (!created.ok()) Die("create " + name_, created.status());
    store_ = std::move(*created);
    parity_.assign(kSlice / 8, 0);
    buf_.assign(kSlice / 8, 0);
  }
  ~Case() {
    store_.reset();
    (void)Store::Destroy(name_);
  }

  void Epoch(bool measure) {
    Store& s = *store_;
    uint64_t peak = Used();
    double w0 = Wall(), c0 = Cpu();
    auto fd = s.Open("/dlckpt/bench/ckpt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (!fd.ok()) Die("open", fd.status());
    for (size_t off = 0; off < data_.size(); off += record_) {
      size_t n = std::min(record_, data_.size() - off);
      auto w = s.Write(*fd, data_.data() + off, n);
      if (!w.ok() || *w != n) Die("write", w.ok() ? dlckpt::Status::NoSpace("short write") : w.status());
      peak = std::max(peak, Used());
    }
    if (auto st = s.Close(*fd); !st.ok()) Die("close", st);
    double w1 = Wall(), c1 = Cpu();
    auto epoch = s.Commit();
    if (!epoch.ok()) Die("commit", epoch.status());
    peak = std::max(peak, Used());
    double w2 = Wall(), c2 = Cpu();
    auto img = s.GetImage(*epoch);
    if (!img.ok()) Die("image", img.status());
    for (uint64_t off = 0; off < img->size; off += kSlice) {
      dlckpt::memfs::CopyFromImage(*img, off, buf_.data(), kSlice);
      for (size_t i = 0; i < buf_.size(); ++i) parity_[i] ^= buf_[i];
    }
    double w3 = Wall(), c3 = Cpu();
    if (auto st = s.Acknowledge(*epoch); !st.ok()) Die("acknowledge", st);
    double w4 = Wall(), c4 = Cpu();
    if (!measure) return;
    write_ = std::min(write_, c1 - c0);
    commit_ = std::min(commit_, c2 - c1 + c4 - c3);
    encode_ = std::min(encode_, c3 - c2);
    cpu_ = std::min(cpu_, c4 - c0);
    wall_ = std::min(wall_, w4 - w0);
    (void)w1, (void)w2, (void)w3;
    peak_ = std::max(peak_, peak);
    image_ = img->size;
  }

  void Print() const {
    const double bs = static_cast<double>(store_->stats().block_size);
    std::printf("%-7s %-5s peak %7.2f MiB (%.4f per checkpoint byte)  image %7.2f MiB  "
                "cpu: write %6.2f ms, commit+ack %5.2f ms, encode %5.2f ms, total %6.2f ms  (wall %6.2f ms)\n",
                kind_, mode_, static_cast<double>(peak_) * bs / (1 << 20),
                static_cast<double>(peak_) * bs / static_cast<double>(data_.size()),
                static_cast<double>(image_) / (1 << 20), write_ * 1e3, commit_ * 1e3, encode_ * 1e3,
                cpu_ * 1e3, wall_ * 1e3);
  }

  uint64_t peak() const { return peak_; }
  double cpu() const { return cpu_; }

 private:
  static constexpr size_t kSlice = 1 << 20;
  uint64_t Used() const { return store_->stats().blocks_total - store_->stats().blocks_free; }

  const char* kind_;
  const char* mode_;
  const std::vector<uint8_t>& data_;
  size_t record_;
  std::string name_;
  std::unique_ptr<Store> store_;
  std::vector<uint64_t> parity_, buf_;
  double write_ = 1e9, commit_ = 1e9, encode_ = 1e9, cpu_ = 1e9, wall_ = 1e9;
  uint64_t peak_ = 0, image_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  if (dlckpt_version_requested(argc, argv)) return 0;
  size_t mib = 64, record_kib = 1024;
  int epochs = 6;
  CLI::App app(
      "Memory and checkpoint time of a store with and without LZ4 compression,\n"
      "on zeros and on random bytes; ends with METRIC lines.",
      "dlckpt-bench-memfs-compress");
  dlckpt::cli::SetUsage(app, "usage: dlckpt-bench-memfs-compress [--mib N] [--record-kib K] [--epochs E]");
  app.add_option("--mib", mib, "checkpoint MiB (64)")->option_text("N")->check(CLI::PositiveNumber);
  app.add_option("--record-kib", record_kib, "KiB per write (1024)")->option_text("K")->check(CLI::PositiveNumber);
  app.add_option("--epochs", epochs, "epochs, at least 2: a warm-up, then the best of the others (6)")
      ->option_text("E")
      ->check(CLI::PositiveNumber);
  if (auto rc = dlckpt::cli::ParseMain(app, argc, argv)) return *rc;
  epochs = std::max(2, epochs);
  const size_t bytes = mib << 20, record = record_kib << 10;
  std::vector<uint8_t> zeros(bytes, 0), random(bytes);
  std::mt19937_64 rng(42);
  for (size_t i = 0; i < bytes; i += 8) {
    uint64_t v = rng();
    std::memcpy(random.data() + i, &v, std::min<size_t>(8, bytes - i));
  }
  std::printf("checkpoint %zu MiB in %zu KiB records, 64 KiB blocks, 1 MiB chunks, threshold 0.875; "
              "best of %d epochs after a warm-up, interleaved\n",
              mib, record_kib, epochs - 1);
  Case zn("zeros", Compression::kNone, zeros, record, 0);
  Case zl("zeros", Compression::kLz4, zeros, record, 1);
  Case rn("random", Compression::kNone, random, record, 2);
  Case rl("random", Compression::kLz4, random, record, 3);
  for (int e = 0; e < epochs; ++e) {
    for (Case* c : {&zn, &zl, &rn, &rl}) c->Epoch(e > 0);
  }
  for (const Case* c : {&zn, &zl, &rn, &rl}) c->Print();
  std::printf("zeros: checkpoint cpu time lz4 / none %.3f\n", zl.cpu() / zn.cpu());
  std::printf("METRIC lz4_memory_ratio_zeros %.4f x target <= 0.1\n",
              static_cast<double>(zl.peak()) / static_cast<double>(zn.peak()));
  std::printf("METRIC lz4_random_memory_overhead %.4f x target <= 1.01\n",
              static_cast<double>(rl.peak()) / static_cast<double>(rn.peak()));
  std::printf("METRIC lz4_random_overhead %.3f x target <= 1.1\n", rl.cpu() / rn.cpu());
  return 0;
}

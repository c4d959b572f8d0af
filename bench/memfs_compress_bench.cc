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
// steady state (epochs 2 and later). Times are the best of --epochs epochs.
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
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "dlckpt/memfs.h"

namespace {

using dlckpt::memfs::Compression;
using dlckpt::memfs::Store;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Result {
  double write_s = 1e9, commit_s = 1e9, encode_s = 1e9, total_s = 1e9;
  uint64_t peak_blocks = 0;
  uint64_t image_bytes = 0;
  uint64_t file_bytes = 0;
  uint64_t block_size = 0;
};

[[noreturn]] void Die(const std::string& what, const dlckpt::Status& s) {
  std::fprintf(stderr, "dlckpt-bench-memfs-compress: %s: %s\n", what.c_str(), s.ToString().c_str());
  std::exit(1);
}

Result Run(Compression c, const std::vector<uint8_t>& data, size_t record, int epochs) {
  std::string name = "/dlckpt-bench-compress." + std::to_string(getpid());
  (void)Store::Destroy(name);
  dlckpt::memfs::StoreOptions o;
  o.capacity = 3 * data.size() + (16 << 20);
  o.block_size = 64 << 10;
  o.compression = c;
  auto created = Store::Create(name, o);
  if (!created.ok()) Die("create " + name, created.status());
  Store& s = **created;
  auto used = [&] { return s.stats().blocks_total - s.stats().blocks_free; };
  Result r;
  r.file_bytes = data.size();
  r.block_size = s.stats().block_size;
  const size_t slice = 1 << 20;
  std::vector<uint64_t> parity(slice / 8), buf(slice / 8);
  for (int e = 1; e <= epochs; ++e) {
    uint64_t peak = used();
    double t0 = Now();
    auto fd = s.Open("/dlckpt/bench/ckpt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (!fd.ok()) Die("open", fd.status());
    for (size_t off = 0; off < data.size(); off += record) {
      size_t n = std::min(record, data.size() - off);
      auto w = s.Write(*fd, data.data() + off, n);
      if (!w.ok() || *w != n) Die("write", w.ok() ? dlckpt::Status::NoSpace("short write") : w.status());
      peak = std::max(peak, used());
    }
    if (auto st = s.Close(*fd); !st.ok()) Die("close", st);
    double t1 = Now();
    auto epoch = s.Commit();
    if (!epoch.ok()) Die("commit", epoch.status());
    peak = std::max(peak, used());
    double t2 = Now();
    auto img = s.GetImage(*epoch);
    if (!img.ok()) Die("image", img.status());
    for (uint64_t off = 0; off < img->size; off += slice) {
      dlckpt::memfs::CopyFromImage(*img, off, buf.data(), slice);
      for (size_t i = 0; i < buf.size(); ++i) parity[i] ^= buf[i];
    }
    double t3 = Now();
    if (auto st = s.Acknowledge(*epoch); !st.ok()) Die("acknowledge", st);
    double t4 = Now();
    if (e == 1) continue;  // warm-up: no acknowledged epoch yet
    r.write_s = std::min(r.write_s, t1 - t0);
    r.commit_s = std::min(r.commit_s, t2 - t1 + t4 - t3);
    r.encode_s = std::min(r.encode_s, t3 - t2);
    r.total_s = std::min(r.total_s, t4 - t0);
    r.peak_blocks = std::max(r.peak_blocks, peak);
    r.image_bytes = img->size;
  }
  volatile uint64_t sink = parity[0];
  (void)sink;
  created->reset();
  (void)Store::Destroy(name);
  return r;
}

void Print(const char* kind, const char* mode, const Result& r) {
  double mib = static_cast<double>(r.file_bytes) / (1 << 20);
  std::printf("%-7s %-5s peak %8.2f MiB (%.3f per checkpoint byte)  image %8.2f MiB  "
              "write %7.2f ms  commit+ack %6.2f ms  encode %6.2f ms  total %7.2f ms\n",
              kind, mode, static_cast<double>(r.peak_blocks * r.block_size) / (1 << 20),
              static_cast<double>(r.peak_blocks * r.block_size) / static_cast<double>(r.file_bytes),
              static_cast<double>(r.image_bytes) / (1 << 20), r.write_s * 1e3, r.commit_s * 1e3,
              r.encode_s * 1e3, r.total_s * 1e3);
  (void)mib;
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 64, record_kib = 1024;
  int epochs = 6;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::puts("usage: dlckpt-bench-memfs-compress [--mib N] [--record-kib K] [--epochs E]\n"
                "Memory and checkpoint time of a store with and without LZ4 compression,\n"
                "on zeros and on random bytes; ends with METRIC lines.");
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "dlckpt-bench-memfs-compress: %s needs a value\n", a.c_str());
      return 2;
    }
    long v = std::atol(argv[++i]);
    if (v <= 0) {
      std::fprintf(stderr, "dlckpt-bench-memfs-compress: bad value for %s\n", a.c_str());
      return 2;
    }
    if (a == "--mib") {
      mib = static_cast<size_t>(v);
    } else if (a == "--record-kib") {
      record_kib = static_cast<size_t>(v);
    } else if (a == "--epochs") {
      epochs = static_cast<int>(std::max(2L, v));
    } else {
      std::fprintf(stderr, "dlckpt-bench-memfs-compress: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  const size_t bytes = mib << 20, record = record_kib << 10;
  std::vector<uint8_t> zeros(bytes, 0), random(bytes);
  std::mt19937_64 rng(42);
  for (size_t i = 0; i < bytes; i += 8) {
    uint64_t v = rng();
    std::memcpy(random.data() + i, &v, std::min<size_t>(8, bytes - i));
  }
  std::printf("checkpoint %zu MiB in %zu KiB records, 64 KiB blocks, 1 MiB chunks, threshold 0.875\n",
              mib, record_kib);
  Result zn = Run(Compression::kNone, zeros, record, epochs);
  Print("zeros", "none", zn);
  Result zl = Run(Compression::kLz4, zeros, record, epochs);
  Print("zeros", "lz4", zl);
  Result rn = Run(Compression::kNone, random, record, epochs);
  Print("random", "none", rn);
  Result rl = Run(Compression::kLz4, random, record, epochs);
  Print("random", "lz4", rl);
  std::printf("zeros: checkpoint time lz4 / none %.3f\n", zl.total_s / zn.total_s);
  std::printf("METRIC lz4_memory_ratio_zeros %.4f x target <= 0.1\n",
              static_cast<double>(zl.peak_blocks) / static_cast<double>(zn.peak_blocks));
  std::printf("METRIC lz4_random_memory_overhead %.4f x target <= 1.01\n",
              static_cast<double>(rl.peak_blocks) / static_cast<double>(rn.peak_blocks));
  std::printf("METRIC lz4_random_overhead %.3f x target <= 1.1\n", rl.total_s / rn.total_s);
  return 0;
}

// Incremental encode, differential property test: after random epochs of
// random changes (byte ranges, appends, truncations, new, deleted and renamed
// files) the parity updated from deltas (memfs Store::Delta + codec/delta.h
// + the erasure code) is bit-for-bit the parity a full encode of the epoch
// gives. XOR and Reed-Solomon k = 2, 3, with and without LZ4. Also checks
// the delta's own contract: every byte outside its ranges is equal in both
// images. Real stores in POSIX shared memory, removed at the end.
#include "dlckpt/codec/delta.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dlckpt/codec/erasure.h"
#include "dlckpt/control/stripes.h"
#include "dlckpt/memfs/memfs.h"

namespace dlckpt::codec {
namespace {

using memfs::Store;

std::string UniqueName() {
  static std::atomic<int> counter{0};
  return "/dlckpt-test.delta." + std::to_string(getpid()) + "." + std::to_string(counter++);
}

// The bytes of a list of images, concatenated (a member image).
std::vector<uint8_t> Bytes(const std::vector<memfs::Image>& images) {
  std::vector<uint8_t> out;
  for (const auto& img : images) {
    size_t at = out.size();
    out.resize(at + img.size);
    memfs::CopyFromImage(img, 0, out.data() + at, img.size);
  }
  return out;
}

std::vector<Extent> Extents(std::vector<uint8_t>& bytes) {
  return {Extent{bytes.data(), bytes.size()}};
}

struct Config {
  Scheme scheme;
  int n, k;
  memfs::Compression compression;
};

class Fixture {
 public:
  Fixture(const Config& c, uint32_t seed) : cfg_(c), rng_(seed) {}
  ~Fixture() {
    for (auto& m : members_) m.clear();
    for (const auto& name : names_) (void)Store::Destroy(name);
  }

  void Create() {
    memfs::StoreOptions o;
    o.capacity = 4u << 20;
    o.block_size = 4096;
    o.max_files = 64;
    o.prefault = false;
    o.pretouch = false;
    o.compression = cfg_.compression;
    o.chunk_size = 16384;
    members_.resize(static_cast<size_t>(cfg_.n));
    for (int i = 0; i < cfg_.n; ++i) {
      int stores = i == 0 ? 2 : 1;  // member 0: two ranks on one node
      for (int s = 0; s < stores; ++s) {
        std::string name = UniqueName();
        auto st = Store::Create(name, o);
        ASSERT_TRUE(st.ok()) << st.status().ToString();
        names_.push_back(name);
        members_[static_cast<size_t>(i)].push_back(std::move(*st));
      }
    }
  }

  std::vector<uint8_t> Data(size_t n) {
    std::vector<uint8_t> v(n);
    bool compressible = rng_() % 2 == 0;
    uint8_t base = static_cast<uint8_t>(rng_());
    for (size_t i = 0; i < n; ++i) {
      v[i] = compressible ? static_cast<uint8_t>(base + (i / 512) % 7) : static_cast<uint8_t>(rng_());
    }
    return v;
  }

  // Random changes to one store's working files.
  void Mutate(Store& s) {
    auto files = s.List("/");
    ASSERT_TRUE(files.ok());
    int ops = static_cast<int>(rng_() % 4);  // 0: the store does not change
    for (int op = 0; op < ops; ++op) {
      int kind = static_cast<int>(rng_() % 11);
      if (files->empty() || kind == 0) {  // new file
        std::string path = "/f" + std::to_string(rng_() % 1000);
        auto fd = s.Open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ASSERT_TRUE(fd.ok()) << fd.status().ToString();
        auto d = Data(rng_() % 100000);
        ASSERT_TRUE(s.Write(*fd, d.data(), d.size()).ok());
        ASSERT_TRUE(s.Close(*fd).ok());
      } else {
        const auto& f = (*files)[rng_() % files->size()];
        if (kind == 1 && files->size() > 1) {
          ASSERT_TRUE(s.Unlink(f.path).ok());
        } else if (kind == 2) {
          (void)s.Rename(f.path, "/r" + std::to_string(rng_() % 1000));
        } else if (kind == 3) {
          ASSERT_TRUE(s.Truncate(f.path, f.size == 0 ? 0 : rng_() % (f.size + 20000)).ok());
        } else if (kind == 10) {
          // The file written again whole with O_TRUNC, its bytes equal but
          // for one byte half the time (memfs keeps equal blocks shared).
          std::vector<uint8_t> d(f.size);
          auto rfd = s.Open(f.path, O_RDONLY, 0);
          ASSERT_TRUE(rfd.ok()) << rfd.status().ToString();
          ASSERT_TRUE(s.Pread(*rfd, d.data(), d.size(), 0).ok());
          ASSERT_TRUE(s.Close(*rfd).ok());
          if (!d.empty() && rng_() % 2) d[rng_() % d.size()] ^= 0x5a;
          auto fd = s.Open(f.path, O_WRONLY | O_TRUNC, 0);
          ASSERT_TRUE(fd.ok()) << fd.status().ToString();
          ASSERT_TRUE(s.Write(*fd, d.data(), d.size()).ok());
          ASSERT_TRUE(s.Close(*fd).ok());
        } else {
          // A byte range (kind 4-8) or an append (9).
          auto fd = s.Open(f.path, O_WRONLY, 0);
          ASSERT_TRUE(fd.ok()) << fd.status().ToString();
          uint64_t off = kind == 9 || f.size == 0 ? f.size : rng_() % f.size;
          auto d = Data(1 + rng_() % (kind == 4 ? 40000 : 3000));
          auto w = s.Pwrite(*fd, d.data(), d.size(), off);
          ASSERT_TRUE(w.ok()) << w.status().ToString();
          ASSERT_TRUE(s.Close(*fd).ok());
        }
      }
      files = s.List("/");
      ASSERT_TRUE(files.ok());
    }
  }

  // One small rewrite of random bytes inside an existing file, if any.
  void Quiet(Store& s) {
    auto files = s.List("/");
    ASSERT_TRUE(files.ok());
    if (files->empty()) return;
    const auto& f = (*files)[rng_() % files->size()];
    if (f.size == 0) return;
    auto fd = s.Open(f.path, O_WRONLY, 0);
    ASSERT_TRUE(fd.ok());
    uint64_t off = rng_() % f.size;
    std::vector<uint8_t> d(std::min<uint64_t>(1 + rng_() % 3000, f.size - off));
    for (auto& b : d) b = static_cast<uint8_t>(rng_());
    ASSERT_TRUE(s.Pwrite(*fd, d.data(), d.size(), off).ok());
    ASSERT_TRUE(s.Close(*fd).ok());
  }

  // Commits every store as `epoch`.
  void Commit(uint64_t epoch) {
    for (auto& m : members_) {
      for (auto& s : m) {
        auto c = s->Commit(epoch);
        ASSERT_TRUE(c.ok()) << c.status().ToString();
      }
    }
  }
  void Acknowledge(uint64_t epoch) {
    for (auto& m : members_) {
      for (auto& s : m) ASSERT_TRUE(s->Acknowledge(epoch).ok());
    }
  }

  // The member images of `epoch` as bytes.
  std::vector<std::vector<uint8_t>> MemberBytes(uint64_t epoch) {
    std::vector<std::vector<uint8_t>> out;
    for (auto& m : members_) {
      std::vector<memfs::Image> imgs;
      for (auto& s : m) {
        auto img = s->GetImage(epoch);
        EXPECT_TRUE(img.ok()) << img.status().ToString();
        if (img.ok()) imgs.push_back(*img);
      }
      out.push_back(Bytes(imgs));
    }
    return out;
  }

  std::vector<std::vector<uint8_t>> FullEncode(std::vector<std::vector<uint8_t>>& data) {
    auto code = ErasureCode::Create(cfg_.scheme, cfg_.n, cfg_.k);
    EXPECT_TRUE(code.ok());
    size_t len = 0;
    for (const auto& d : data) len = std::max(len, d.size());
    std::vector<std::vector<uint8_t>> parity(static_cast<size_t>(cfg_.k), std::vector<uint8_t>(len));
    std::vector<std::span<const uint8_t>> src(data.begin(), data.end());
    std::vector<std::span<uint8_t>> out(parity.begin(), parity.end());
    Status s = (*code)->Encode(src, out);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return parity;
  }

  // The parity of `to` from the parity of `from` and the deltas; checks the
  // delta contract on the way. Returns the fraction of bytes the delta moved.
  //
  // Also the spare's slot reuse: `other` is the slot the new parity goes
  // into, holding the parity of the epoch before `from` (of `other_len`
  // bytes, then garbage), which differs from old_parity in `history` (the
  // previous union) and past the shorter length; only those ranges are
  // copied (CopyRanges) and the result must be the same. Sets *history to
  // this encode's union.
  double DeltaEncode(uint64_t from, uint64_t to, const std::vector<std::vector<uint8_t>>& old_parity,
                     std::vector<std::vector<uint8_t>>* new_parity, bool* any_layout_change,
                     std::vector<std::vector<uint8_t>>* other, std::vector<uint64_t>* other_len,
                     std::vector<ByteRange>* history, bool have_history) {
    auto old_data = MemberBytes(from);
    auto new_data = MemberBytes(to);
    std::vector<std::vector<ByteRange>> member_ranges;
    uint64_t len = 0;
    for (size_t i = 0; i < members_.size(); ++i) {
      std::vector<Store::ImageDelta> deltas;
      for (auto& s : members_[i]) {
        auto d = s->Delta(from, to);
        EXPECT_TRUE(d.ok()) << d.status().ToString();
        if (!d.ok()) return 1;
        *any_layout_change |= d->layout_changed;
        deltas.push_back(*d);
      }
      auto ranges = MemberDelta(deltas);
      // The contract: equal outside the ranges (zero past each end).
      const auto& a = old_data[i];
      const auto& b = new_data[i];
      uint64_t end = std::max(a.size(), b.size());
      size_t ri = 0;
      for (uint64_t x = 0; x < end; ++x) {
        while (ri < ranges.size() && ranges[ri].offset + ranges[ri].len <= x) ++ri;
        if (ri < ranges.size() && ranges[ri].offset <= x) {
          x = ranges[ri].offset + ranges[ri].len - 1;
          continue;
        }
        uint8_t va = x < a.size() ? a[x] : 0, vb = x < b.size() ? b[x] : 0;
        if (va != vb) {
          ADD_FAILURE() << "member " << i << " byte " << x << " differs outside the delta";
          return 1;
        }
      }
      member_ranges.push_back(std::move(ranges));
      len = std::max<uint64_t>(len, b.size());
    }
    PackedMap map(UnionRanges(member_ranges, len));
    const uint64_t packed = map.packed_bytes();
    std::vector<std::vector<uint8_t>> deltas(members_.size(), std::vector<uint8_t>(packed));
    for (size_t i = 0; i < members_.size(); ++i) {
      auto ea = Extents(old_data[i]);
      auto eb = Extents(new_data[i]);
      PackDelta(ea, eb, map.ranges(), member_ranges[i], deltas[i].data());
    }
    // The parity deltas: the same combination as a full encode, over the packed bytes.
    auto code = ErasureCode::Create(cfg_.scheme, cfg_.n, cfg_.k);
    EXPECT_TRUE(code.ok());
    std::vector<std::vector<uint8_t>> pdelta(static_cast<size_t>(cfg_.k), std::vector<uint8_t>(packed));
    if (packed > 0) {
      std::vector<std::span<const uint8_t>> src(deltas.begin(), deltas.end());
      std::vector<std::span<uint8_t>> out(pdelta.begin(), pdelta.end());
      Status s = (*code)->encoder()->Apply(src, out);
      EXPECT_TRUE(s.ok()) << s.ToString();
    }
    new_parity->assign(static_cast<size_t>(cfg_.k), std::vector<uint8_t>(len));
    for (int j = 0; j < cfg_.k; ++j) {
      auto& out = (*new_parity)[static_cast<size_t>(j)];
      const auto& old = old_parity[static_cast<size_t>(j)];
      CopyUnchanged(old, map, out.data(), len);
      // In uneven pieces, as the transport delivers them.
      for (uint64_t p = 0; p < packed;) {
        uint64_t n = std::min<uint64_t>(packed - p, 1 + rng_() % 50000);
        ApplyPacked(old, map, p, pdelta[static_cast<size_t>(j)].data() + p, n, out.data(), len);
        p += n;
      }
      if (!have_history) continue;
      // The reused slot: garbage past the parity it holds.
      auto& slot = (*other)[static_cast<size_t>(j)];
      uint64_t held = (*other_len)[static_cast<size_t>(j)];
      if (slot.size() < len) slot.resize(len);
      for (uint64_t x = held; x < slot.size(); ++x) slot[x] = static_cast<uint8_t>(rng_());
      uint64_t lo = std::min<uint64_t>(held, old.size());
      std::vector<std::vector<ByteRange>> lists{*history, {ByteRange{lo, len > lo ? len - lo : 0}}};
      auto stale = SubtractRanges(UnionRanges(lists, len), map.ranges());
      CopyRanges(old, stale, slot.data(), len);
      ApplyPacked(old, map, 0, pdelta[static_cast<size_t>(j)].data(), packed, slot.data(), len);
      EXPECT_TRUE(std::equal(out.begin(), out.end(), slot.begin()))
          << "the reused slot of parity " << j << " differs";
    }
    // Next time the slot written is the one holding old_parity.
    if (other) {
      *other = old_parity;
      other_len->clear();
      for (const auto& o : old_parity) other_len->push_back(o.size());
      *history = map.ranges();
    }
    return len == 0 ? 0 : static_cast<double>(packed) / static_cast<double>(len);
  }

  Config cfg_;
  std::mt19937 rng_;
  std::vector<std::string> names_;
  std::vector<std::vector<std::unique_ptr<Store>>> members_;
};

// Returns the number of epochs whose delta moved less than half the bytes.
int RunSeries(const Config& c, uint32_t seed, int epochs) {
  Fixture f(c, seed);
  f.Create();
  if (::testing::Test::HasFatalFailure()) return 0;
  for (auto& m : f.members_) {
    for (auto& s : m) {
      f.Mutate(*s);
      f.Mutate(*s);
    }
  }
  f.Commit(1);
  auto data = f.MemberBytes(1);
  auto parity = f.FullEncode(data);
  f.Acknowledge(1);
  int small = 0;
  bool layout = false;
  std::vector<std::vector<uint8_t>> other;
  std::vector<uint64_t> other_len;
  std::vector<ByteRange> history;
  for (uint64_t e = 2; e <= static_cast<uint64_t>(epochs); ++e) {
    if (f.rng_() % 3 == 0) {
      f.Quiet(*f.members_[f.rng_() % f.members_.size()].back());  // one small rewrite
    } else {
      for (auto& m : f.members_) {
        for (auto& s : m) f.Mutate(*s);
      }
    }
    if (::testing::Test::HasFatalFailure()) return 0;
    f.Commit(e);
    std::vector<std::vector<uint8_t>> updated;
    double fraction = f.DeltaEncode(e - 1, e, parity, &updated, &layout, &other, &other_len, &history, e > 2);
    auto now = f.MemberBytes(e);
    auto full = f.FullEncode(now);
    EXPECT_EQ(updated.size(), full.size());
    if (updated.size() != full.size()) return 0;
    for (size_t j = 0; j < full.size(); ++j) {
      EXPECT_EQ(updated[j].size(), full[j].size()) << "epoch " << e << " parity " << j;
      EXPECT_TRUE(updated[j] == full[j]) << "epoch " << e << " parity " << j << " differs";
      if (::testing::Test::HasFailure()) return 0;
    }
    if (fraction < 0.5) ++small;
    parity = std::move(updated);
    f.Acknowledge(e);
  }
  // The series must have exercised layout changes, and (uncompressed stores)
  // blocks kept shared after an equal O_TRUNC rewrite.
  EXPECT_TRUE(layout);
  if (c.compression == memfs::Compression::kNone) {
    uint64_t kept = 0;
    for (auto& m : f.members_) {
      for (auto& s : m) kept += s->stats().equal_blocks_kept;
    }
    EXPECT_GT(kept, 0u) << "no block was kept after an equal rewrite";
  }
  return small;
}

class DeltaParity : public ::testing::TestWithParam<Config> {};

TEST_P(DeltaParity, IncrementalEqualsFullEncode) {
  int small = 0;
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    small += RunSeries(GetParam(), seed, 25);
    if (HasFailure()) return;
  }
  // ... and small deltas.
  EXPECT_GT(small, 4);
}

INSTANTIATE_TEST_SUITE_P(
    Schemes, DeltaParity,
    ::testing::Values(Config{Scheme::kXor, 3, 1, memfs::Compression::kNone},
                      Config{Scheme::kXor, 3, 1, memfs::Compression::kLz4},
                      Config{Scheme::kReedSolomon, 4, 2, memfs::Compression::kNone},
                      Config{Scheme::kReedSolomon, 4, 2, memfs::Compression::kLz4},
                      Config{Scheme::kReedSolomon, 3, 3, memfs::Compression::kNone},
                      Config{Scheme::kReedSolomon, 3, 3, memfs::Compression::kLz4}),
    [](const ::testing::TestParamInfo<Config>& p) {
      return std::string(p.param.scheme == Scheme::kXor ? "xor" : "rs") + "_k" +
             std::to_string(p.param.k) +
             (p.param.compression == memfs::Compression::kLz4 ? "_lz4" : "_raw");
    });

bool operator==(const ByteRange& a, const ByteRange& b) { return a.offset == b.offset && a.len == b.len; }

TEST(DeltaRanges, UnionSubtractAndMemberConcatenation) {
  std::vector<std::vector<ByteRange>> lists{{{0, 10}, {50, 10}}, {{5, 10}, {60, 5}, {90, 20}}};
  auto u = UnionRanges(lists, 100);  // merged, adjacent joined, clipped
  ASSERT_EQ(u.size(), 3u);
  EXPECT_TRUE((u[0] == ByteRange{0, 15}) && (u[1] == ByteRange{50, 15}) && (u[2] == ByteRange{90, 10}));
  EXPECT_EQ(RangeBytes(u), 40u);
  std::vector<ByteRange> a{{0, 100}}, b{{10, 10}, {50, 60}};
  auto d = SubtractRanges(a, b);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_TRUE((d[0] == ByteRange{0, 10}) && (d[1] == ByteRange{20, 30}));
  // Two stores; the first grew by 5 bytes: the second's image moved.
  Store::ImageDelta s0, s1;
  s0.from_size = 100;
  s0.to_size = 105;
  s0.ranges = {{100, 5}};
  s1.from_size = s1.to_size = 50;
  s1.ranges = {{0, 1}};
  std::vector<Store::ImageDelta> both{s0, s1};
  auto m = MemberDelta(both);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_TRUE((m[0] == ByteRange{100, 55}));
  // Same sizes: the second store's ranges shifted by the first's size.
  s0.to_size = 100;
  s0.ranges = {{10, 4}};
  both = {s0, s1};
  m = MemberDelta(both);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_TRUE((m[0] == ByteRange{10, 4}) && (m[1] == ByteRange{100, 1}));
}

TEST(DeltaRanges, PackedMapAndSpareUpdate) {
  PackedMap map({{4, 4}, {20, 8}});
  EXPECT_EQ(map.packed_bytes(), 12u);
  std::vector<std::pair<uint64_t, uint64_t>> pieces;
  map.ForEach(2, 6, [&](uint64_t x, uint64_t, uint64_t n) { pieces.push_back({x, n}); });
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0], (std::pair<uint64_t, uint64_t>{6, 2}));
  EXPECT_EQ(pieces[1], (std::pair<uint64_t, uint64_t>{20, 4}));
  // New parity 32 bytes long from a kept one of 24: zeros past it, xor in the ranges.
  std::vector<uint8_t> old(24, 0x11), packed(12, 0x0f), out(32, 0xee);
  CopyUnchanged(old, map, out.data(), out.size());
  ApplyPacked(old, map, 0, packed.data(), packed.size(), out.data(), out.size());
  for (size_t x = 0; x < out.size(); ++x) {
    uint8_t o = x < old.size() ? 0x11 : 0;
    bool in = (x >= 4 && x < 8) || (x >= 20 && x < 28);
    EXPECT_EQ(out[x], in ? static_cast<uint8_t>(o ^ 0x0f) : o) << "byte " << x;
  }
}

// DeltaInputs gives the packed delta as two extent lists, never formed:
// their xor is PackDelta's output, byte for byte, for images cut into
// random extents (images of different lengths) and random ranges and own
// ranges.
TEST(DeltaRanges, DeltaInputsXorIsThePackedDelta) {
  std::mt19937 rng(11);
  // Cuts `bytes` into extents of random lengths (a store's image: blocks).
  auto cut = [&](std::vector<uint8_t>& bytes) {
    std::vector<Extent> out;
    for (size_t at = 0; at < bytes.size();) {
      const size_t n = std::min<size_t>(bytes.size() - at, 1 + rng() % 3000);
      out.push_back(Extent{bytes.data() + at, n});
      at += n;
    }
    return out;
  };
  auto ranges = [&](uint64_t limit, int count) {
    std::vector<ByteRange> r;
    uint64_t at = 0;
    for (int i = 0; i < count && at < limit; ++i) {
      at += rng() % 2000;
      const uint64_t len = 1 + rng() % 3000;
      if (at >= limit) break;
      r.push_back(ByteRange{at, std::min(len, limit - at)});
      at += len;
    }
    return r;
  };
  for (int round = 0; round < 200; ++round) {
    std::vector<uint8_t> old_bytes(rng() % 20000), new_bytes(rng() % 20000);
    for (auto& b : old_bytes) b = static_cast<uint8_t>(rng());
    for (auto& b : new_bytes) b = static_cast<uint8_t>(rng());
    const auto old_e = cut(old_bytes), new_e = cut(new_bytes);
    const uint64_t limit = std::max(old_bytes.size(), new_bytes.size()) + 100;
    const auto u = ranges(limit, 1 + static_cast<int>(rng() % 8));
    const auto own = rng() % 3 == 0 ? u : ranges(limit, 1 + static_cast<int>(rng() % 8));
    std::vector<uint8_t> packed(RangeBytes(u));
    PackDelta(old_e, new_e, u, own, packed.data());
    std::vector<Extent> fresh, old;
    DeltaInputs(old_e, new_e, u, own, &fresh, &old);
    auto flat = [](const std::vector<Extent>& ex) {
      std::vector<uint8_t> v;
      for (const Extent& e : ex) {
        if (e.data == nullptr) {
          v.insert(v.end(), e.len, 0);
        } else {
          v.insert(v.end(), e.data, e.data + e.len);
        }
      }
      return v;
    };
    std::vector<uint8_t> a = flat(fresh), b = flat(old);
    ASSERT_EQ(a.size(), packed.size()) << "round " << round;
    ASSERT_EQ(b.size(), packed.size()) << "round " << round;
    for (size_t i = 0; i < packed.size(); ++i) {
      ASSERT_EQ(static_cast<uint8_t>(a[i] ^ b[i]), packed[i]) << "round " << round << " byte " << i;
    }
    // Extents that touch are merged: no two holes in a row.
    for (size_t i = 1; i < fresh.size(); ++i) {
      EXPECT_FALSE(fresh[i - 1].data == nullptr && fresh[i].data == nullptr) << "round " << round;
    }
  }
}

TEST(DeltaRanges, StripeUnionAndInSegment) {
  // Segments of 8192 bytes, 4 KiB alignment: chunk 0 is segment 0 of its
  // member, chunk 1 segment 3 of its; a range crossing the segment's end
  // counts up to it; pieces widen to whole 4 KiB.
  std::vector<std::vector<ByteRange>> lists{{{100, 10}, {8190, 4}}, {{1000, 10}, {3 * 8192 + 5000, 1}}};
  std::vector<uint32_t> segs{0, 3};
  auto u = StripeUnion(lists, segs, 8192, 4096);
  ASSERT_EQ(u.size(), 1u);
  EXPECT_TRUE((u[0] == ByteRange{0, 8192}));
  std::vector<std::vector<ByteRange>> small{{{100, 10}}, {{2 * 8192 + 200, 1}}};
  segs = {0, 1};
  u = StripeUnion(small, segs, 8192, 4096);  // the second range is in segment 2
  ASSERT_EQ(u.size(), 1u);
  EXPECT_TRUE((u[0] == ByteRange{0, 4096}));
  auto in = InSegment(u, 2, 8192);
  ASSERT_EQ(in.size(), 1u);
  EXPECT_TRUE((in[0] == ByteRange{16384, 4096}));
}

// The spread layout (control/stripes.h): parity updated from packed deltas
// over each stripe's StripeUnion equals a full spread encode, for
// random member images and random changes (the segment length kept, as
// PlanSpreadDelta requires).
std::vector<std::vector<uint8_t>> SpreadEncode(const std::vector<std::vector<uint8_t>>& data, uint32_t k,
                                               uint64_t seg) {
  const auto n = static_cast<uint32_t>(data.size());
  auto code = ErasureCode::Create(k == 1 ? Scheme::kXor : Scheme::kReedSolomon, static_cast<int>(n - k),
                                  static_cast<int>(k));
  EXPECT_TRUE(code.ok());
  std::vector<std::vector<uint8_t>> parity(n, std::vector<uint8_t>(k * seg));
  for (uint32_t s = 0; s < n; ++s) {
    std::vector<std::vector<uint8_t>> chunks;
    for (uint32_t m : control::SpreadDataMembers(n, k, s)) {
      std::vector<uint8_t> c(seg, 0);
      const uint64_t at = uint64_t{control::SpreadSegmentOf(n, k, m, s)} * seg;
      if (at < data[m].size()) std::copy_n(data[m].begin() + static_cast<long>(at), std::min(seg, data[m].size() - at), c.begin());
      chunks.push_back(std::move(c));
    }
    std::vector<std::vector<uint8_t>> out(k, std::vector<uint8_t>(seg));
    std::vector<std::span<const uint8_t>> src(chunks.begin(), chunks.end());
    std::vector<std::span<uint8_t>> dst(out.begin(), out.end());
    EXPECT_TRUE((*code)->Encode(src, dst).ok());
    for (uint32_t j = 0; j < k; ++j) {
      std::copy(out[j].begin(), out[j].end(), parity[control::SpreadParityHolder(n, s, j)].begin() + static_cast<long>(j * seg));
    }
  }
  return parity;
}

TEST(SpreadDelta, EqualsFullSpreadEncode) {
  std::mt19937 rng(7);
  int deltas = 0;
  for (auto [n, k] : {std::pair<uint32_t, uint32_t>{4, 1}, {3, 1}, {5, 2}, {6, 3}}) {
    SCOPED_TRACE("n " + std::to_string(n) + " k " + std::to_string(k));
    auto code = ErasureCode::Create(k == 1 ? Scheme::kXor : Scheme::kReedSolomon, static_cast<int>(n - k),
                                    static_cast<int>(k));
    ASSERT_TRUE(code.ok());
    std::vector<std::vector<uint8_t>> data(n);
    for (auto& d : data) {
      d.resize(40000 + rng() % 60000);
      for (auto& b : d) b = static_cast<uint8_t>(rng());
    }
    auto longest = [&] {
      uint64_t l = 0;
      for (const auto& d : data) l = std::max<uint64_t>(l, d.size());
      return l;
    };
    const uint64_t seg = control::SpreadSegmentBytes(longest(), n, k);
    auto parity = SpreadEncode(data, k, seg);
    for (int epoch = 0; epoch < 20; ++epoch) {
      // Random rewrites; sizes may change within the segment length.
      auto next = data;
      for (auto& d : next) {
        for (int w = static_cast<int>(rng() % 4); w > 0; --w) {
          uint64_t at = rng() % d.size(), len = std::min<uint64_t>(1 + rng() % 3000, d.size() - at);
          for (uint64_t x = at; x < at + len; ++x) d[x] = static_cast<uint8_t>(rng());
        }
        if (rng() % 5 == 0) d.resize(std::min<uint64_t>((n - k) * seg, d.size() + rng() % 5000), 0x5a);
        if (rng() % 7 == 0) d.resize(d.size() - rng() % 2000);
      }
      ASSERT_EQ(control::SpreadSegmentBytes(longest(), n, k), seg);
      // Each member's changed ranges: the bytes that differ (zero past an end).
      std::vector<std::vector<ByteRange>> ranges(n);
      for (uint32_t m = 0; m < n; ++m) {
        const uint64_t end = std::max(data[m].size(), next[m].size());
        for (uint64_t x = 0; x < end; ++x) {
          uint8_t a = x < data[m].size() ? data[m][x] : 0, b = x < next[m].size() ? next[m][x] : 0;
          if (a == b) continue;
          if (!ranges[m].empty() && ranges[m].back().offset + ranges[m].back().len == x) {
            ++ranges[m].back().len;
          } else {
            ranges[m].push_back(ByteRange{x, 1});
          }
        }
      }
      std::vector<std::vector<uint8_t>> updated(n, std::vector<uint8_t>(k * seg, 0xee));
      uint64_t moved = 0;
      for (uint32_t s = 0; s < n; ++s) {
        std::vector<std::vector<ByteRange>> chunks;
        std::vector<uint32_t> segs;
        for (uint32_t m : control::SpreadDataMembers(n, k, s)) {
          chunks.push_back(ranges[m]);
          segs.push_back(control::SpreadSegmentOf(n, k, m, s));
        }
        auto u = StripeUnion(chunks, segs, seg, 4096);
        const uint64_t ub = RangeBytes(u);
        moved += ub;
        PackedMap map(u);
        // Each data chunk's packed delta over the stripe's ranges.
        std::vector<std::vector<uint8_t>> packed;
        for (size_t i = 0; i < segs.size(); ++i) {
          const uint32_t m = control::SpreadDataMembers(n, k, s)[i];
          auto old_e = Extents(data[m]);
          auto new_e = Extents(next[m]);
          packed.emplace_back(ub);
          PackDelta(old_e, new_e, InSegment(u, segs[i], seg), ranges[m], packed.back().data());
        }
        std::vector<std::span<const uint8_t>> src(packed.begin(), packed.end());
        std::vector<std::vector<uint8_t>> pd(k, std::vector<uint8_t>(ub));
        std::vector<std::span<uint8_t>> dst(pd.begin(), pd.end());
        if (ub > 0) {
          ASSERT_TRUE((*code)->encoder()->Apply(src, dst).ok());
        }
        for (uint32_t j = 0; j < k; ++j) {
          const uint32_t h = control::SpreadParityHolder(n, s, j);
          ASSERT_EQ(control::SpreadStripeOfParity(n, h, j), s);
          std::span<const uint8_t> kept(parity[h].data() + j * seg, seg);
          uint8_t* out = updated[h].data() + j * seg;
          CopyUnchanged(kept, map, out, seg);
          ApplyPacked(kept, map, 0, pd[j].data(), ub, out, seg);
        }
      }
      data = std::move(next);
      auto full = SpreadEncode(data, k, seg);
      for (uint32_t m = 0; m < n; ++m) ASSERT_TRUE(updated[m] == full[m]) << "epoch " << epoch << " member " << m;
      parity = std::move(updated);
      if (moved < n * seg / 2) ++deltas;
    }
  }
  EXPECT_GT(deltas, 10) << "too few epochs changed less than a whole segment";
}

// A small rewrite in a large file: the delta is the rewritten blocks plus the
// metadata granules, and the layout is stable.
TEST(StoreDelta, SmallRewriteGivesBlockGranularDelta) {
  std::string name = UniqueName();
  memfs::StoreOptions o;
  o.capacity = 8u << 20;
  o.block_size = 4096;
  o.prefault = false;
  o.pretouch = false;
  auto st = Store::Create(name, o);
  ASSERT_TRUE(st.ok());
  Store& s = **st;
  std::vector<uint8_t> d(1 << 20, 7);
  auto fd = s.Open("/ckpt", O_WRONLY | O_CREAT, 0644);
  ASSERT_TRUE(fd.ok());
  ASSERT_TRUE(s.Write(*fd, d.data(), d.size()).ok());
  ASSERT_TRUE(s.Commit(1).ok());
  ASSERT_TRUE(s.Acknowledge(1).ok());
  ASSERT_TRUE(s.Pwrite(*fd, d.data(), 10, 100000).ok());  // inside block 24
  ASSERT_TRUE(s.Close(*fd).ok());
  ASSERT_TRUE(s.Commit(2).ok());
  auto delta = s.Delta(1, 2);
  ASSERT_TRUE(delta.ok()) << delta.status().ToString();
  EXPECT_FALSE(delta->layout_changed);
  EXPECT_EQ(delta->from_size, delta->to_size);
  // One data block plus at most the metadata.
  EXPECT_GE(delta->changed_bytes, 4096u);
  EXPECT_LE(delta->changed_bytes, 4096u + 1024u);
  auto bad = s.Delta(1, 5);
  EXPECT_EQ(bad.status().code(), ENOENT);
  st->reset();
  ASSERT_TRUE(Store::Destroy(name).ok());
}

}  // namespace
}  // namespace dlckpt::codec

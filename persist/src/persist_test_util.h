// persist_test_util.h — the fixture of persist's tests: real memfs stores
// with known files committed as an epoch, drained under a fresh 0700
// temporary directory that TearDown removes with the stores.
#ifndef DLCKPT_PERSIST_TEST_UTIL_H_
#define DLCKPT_PERSIST_TEST_UTIL_H_

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dlckpt/persist/persist.h"

namespace dlckpt::persist {

namespace fs = std::filesystem;

inline std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

class PersistFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = tmp_template_;
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr) << tmpl;
    dir_ = tmpl;
    job_dir_ = JobDir(dir_, "jobP");
  }
  void TearDown() override {
    owners_.clear();
    for (const auto& n : names_) (void)memfs::Store::Destroy(n);
    fs::remove_all(dir_);
  }

  memfs::Store& NewStore(int rank, memfs::Compression c = memfs::Compression::kNone) {
    std::string name = "/dlckpt-test.persist." + std::to_string(getpid()) + "." + std::to_string(names_.size());
    names_.push_back(name);
    memfs::StoreOptions o;
    o.capacity = 8 << 20;
    // Pages on demand: these tests make hundreds of stores, and what they
    // prove does not depend on memory being faulted in at creation.
    o.prefault = false;
    o.pretouch = false;
    o.block_size = 4096;
    o.max_files = 64;
    o.job = "jobP";
    o.node = "n0";
    o.rank = rank;
    o.compression = c;
    auto s = memfs::Store::Create(name, o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    owners_.push_back(std::move(*s));
    return *owners_.back();
  }

  static void Write(memfs::Store& s, const std::string& path, const std::vector<uint8_t>& data) {
    auto fd = s.Open(path, O_WRONLY | O_CREAT | O_TRUNC, 0640);
    ASSERT_TRUE(fd.ok()) << fd.status().ToString();
    ASSERT_EQ(*s.Write(*fd, data.data(), data.size()), data.size());
    ASSERT_TRUE(s.Close(*fd).ok());
  }
  static std::vector<uint8_t> Read(memfs::Store& s, const std::string& path) {
    auto fd = s.Open(path, O_RDONLY);
    EXPECT_TRUE(fd.ok()) << fd.status().ToString();
    if (!fd.ok()) return {};
    std::vector<uint8_t> out(s.Fstat(*fd)->size);
    EXPECT_EQ(*s.Read(*fd, out.data(), out.size()), out.size());
    EXPECT_TRUE(s.Close(*fd).ok());
    return out;
  }

  // Rank r's store with two files (and a directory) committed as `epoch`.
  memfs::Store& Filled(int rank, uint64_t epoch, memfs::Compression c = memfs::Compression::kNone) {
    memfs::Store& s = NewStore(rank, c);
    EXPECT_TRUE(s.Mkdir("/ckpt", 0755).ok());
    Write(s, "/ckpt/state.bin", Pattern(300000 + static_cast<size_t>(rank), static_cast<uint32_t>(epoch * 10 + rank)));
    Write(s, "/ckpt/meta file.txt", std::vector<uint8_t>(100, static_cast<uint8_t>('a' + rank)));
    EXPECT_TRUE(s.Commit(epoch).ok());
    EXPECT_TRUE(s.Acknowledge(epoch).ok());
    return s;
  }

  Result<DrainResult> Drain(memfs::Store& owner, uint64_t epoch, int rank, int ranks,
                            const DrainOptions& o = {}) {
    auto view = memfs::Store::Attach(owner.name(), memfs::AttachMode::kReadOnly);
    if (!view.ok()) return view.status();
    DLCKPT_RETURN_IF_ERROR((*view)->View(epoch));
    return DrainRank(**view, job_dir_, "jobP", epoch, rank, ranks, o);
  }

  // Removes the store NewStore made last.
  void DropLastStore() {
    owners_.pop_back();
    (void)memfs::Store::Destroy(names_.back());
    names_.pop_back();
  }

  std::string tmp_template_ = "/tmp/dlckpt-persist-test.XXXXXX";  // mkdtemp's: dir_
  std::string dir_, job_dir_;
  std::vector<std::string> names_;
  std::vector<std::unique_ptr<memfs::Store>> owners_;
};

}  // namespace dlckpt::persist

#endif  // DLCKPT_PERSIST_TEST_UTIL_H_

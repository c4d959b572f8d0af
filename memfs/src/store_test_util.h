// Helpers of memfs's unit tests (not installed, not a library): unique shm
// names, pseudo-random data, and whole-file write and read through a Store.
// GoogleTest assertions report failures in the calling test.
#ifndef DLCKPT_MEMFS_STORE_TEST_UTIL_H_
#define DLCKPT_MEMFS_STORE_TEST_UTIL_H_

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dlckpt/memfs/memfs.h"

namespace dlckpt::memfs::testing {

// "/dlckpt-test.<tag><pid>.<n>", new at every call.
inline std::string UniqueName(const std::string& tag = "") {
  static std::atomic<int> counter{0};
  return "/dlckpt-test." + tag + std::to_string(getpid()) + "." + std::to_string(counter++);
}

inline std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

inline void WriteFile(Store& s, const std::string& path, const std::vector<uint8_t>& data) {
  auto fd = s.Open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  auto n = s.Write(*fd, data.data(), data.size());
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  ASSERT_EQ(*n, data.size());
  ASSERT_TRUE(s.Close(*fd).ok());
}

inline std::vector<uint8_t> ReadFile(Store& s, const std::string& path) {
  auto fd = s.Open(path, O_RDONLY);
  EXPECT_TRUE(fd.ok()) << fd.status().ToString();
  if (!fd.ok()) return {};
  auto fi = s.Fstat(*fd);
  std::vector<uint8_t> out(fi->size);
  auto n = s.Read(*fd, out.data(), out.size());
  EXPECT_TRUE(n.ok());
  EXPECT_EQ(*n, out.size());
  EXPECT_TRUE(s.Close(*fd).ok());
  return out;
}

}  // namespace dlckpt::memfs::testing

#endif  // DLCKPT_MEMFS_STORE_TEST_UTIL_H_

#include "fd_table.h"

#include <gtest/gtest.h>

#include <thread>

namespace dlckpt::intercept {
namespace {

TEST(FdTable, SetGetTake) {
  FdTable<int> t;
  EXPECT_TRUE(t.Empty());
  EXPECT_FALSE(t.Contains(3));
  EXPECT_EQ(t.Get(3), nullptr);
  auto v = std::make_shared<int>(7);
  ASSERT_TRUE(t.Set(3, v));
  EXPECT_TRUE(t.Contains(3));
  EXPECT_FALSE(t.Empty());
  EXPECT_EQ(*t.Get(3), 7);
  EXPECT_FALSE(t.Contains(4));
  auto taken = t.Take(3);
  EXPECT_EQ(taken, v);
  EXPECT_FALSE(t.Contains(3));
  EXPECT_TRUE(t.Empty());
  EXPECT_EQ(t.Take(3), nullptr);
}

TEST(FdTable, DupSharesOneObject) {
  FdTable<int> t;
  auto v = std::make_shared<int>(1);
  ASSERT_TRUE(t.Set(5, v));
  ASSERT_TRUE(t.Set(9, t.Get(5)));
  EXPECT_EQ(t.Get(5).get(), t.Get(9).get());
  EXPECT_EQ(v.use_count(), 3);
  t.Take(5);
  EXPECT_EQ(v.use_count(), 2);
  EXPECT_EQ(*t.Get(9), 1);
}

TEST(FdTable, SetReturnsReplaced) {
  FdTable<int> t;
  ASSERT_TRUE(t.Set(2, std::make_shared<int>(1)));
  std::shared_ptr<int> old;
  ASSERT_TRUE(t.Set(2, std::make_shared<int>(2), &old));
  ASSERT_NE(old, nullptr);
  EXPECT_EQ(*old, 1);
  EXPECT_EQ(*t.Get(2), 2);
  t.Take(2);
  EXPECT_TRUE(t.Empty());
}

TEST(FdTable, Bounds) {
  FdTable<int> t;
  EXPECT_FALSE(t.Set(-1, std::make_shared<int>(1)));
  EXPECT_FALSE(t.Set(FdTable<int>::kMaxFd, std::make_shared<int>(1)));
  EXPECT_FALSE(t.Set(4, nullptr));
  EXPECT_FALSE(t.Contains(-5));
  EXPECT_FALSE(t.Contains(FdTable<int>::kMaxFd + 10));
  ASSERT_TRUE(t.Set(FdTable<int>::kMaxFd - 1, std::make_shared<int>(3)));
  EXPECT_TRUE(t.Contains(FdTable<int>::kMaxFd - 1));
}

TEST(FdTable, TakeRangeAcrossChunks) {
  FdTable<int> t;
  for (int fd : {3, 1023, 1024, 5000, 70000}) ASSERT_TRUE(t.Set(fd, std::make_shared<int>(fd)));
  auto gone = t.TakeRange(1000, 6000);
  EXPECT_EQ(gone.size(), 3u);
  EXPECT_TRUE(t.Contains(3));
  EXPECT_TRUE(t.Contains(70000));
  EXPECT_FALSE(t.Contains(1024));
  gone = t.TakeRange(0, INT32_MAX);
  EXPECT_EQ(gone.size(), 2u);
  EXPECT_TRUE(t.Empty());
}

TEST(FdTable, ConcurrentSetTake) {
  FdTable<int> t;
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&t, k] {
      for (int i = 0; i < 2000; ++i) {
        int fd = k * 3000 + i;
        ASSERT_TRUE(t.Set(fd, std::make_shared<int>(fd)));
        ASSERT_TRUE(t.Contains(fd));
        ASSERT_EQ(*t.Get(fd), fd);
        ASSERT_NE(t.Take(fd), nullptr);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_TRUE(t.Empty());
}

}  // namespace
}  // namespace dlckpt::intercept

#include "dlckpt/base/progress.h"

#include <cstdio>
#include <string>

#include <gtest/gtest.h>

namespace dlckpt {
namespace {

std::string Contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  char b[256];
  for (size_t n; (n = std::fread(b, 1, sizeof b, f)) > 0;) s.append(b, n);
  return s;
}

TEST(ProgressTest, SilentForShortWork) {
  std::FILE* f = std::tmpfile();
  double t = 0;
  {
    Progress p("work", 100 << 20, f, {2.0, 2.0, 0, [&] { return t; }});
    t = 1.5;
    p.Update(90 << 20);
    t = 1.9;
    p.Update(100 << 20);
  }
  EXPECT_EQ(Contents(f), "");
  std::fclose(f);
}

TEST(ProgressTest, OneLinePerStepWithRateAndTimeLeft) {
  std::FILE* f = std::tmpfile();
  double t = 0;
  {
    Progress p("dlckpt: draining epoch 6", 100 << 20, f, {2.0, 2.0, 0, [&] { return t; }});
    t = 2.0;
    p.Update(20 << 20);  // 10 MiB/s, 8 s left
    t = 3.0;
    p.Update(30 << 20);  // within `every`: nothing
    t = 4.0;
    p.Update(40 << 20);
    t = 10.0;
    p.Update(100 << 20);
  }
  EXPECT_EQ(Contents(f),
            "dlckpt: draining epoch 6: 20.0 MiB of 100.0 MiB, 10.0 MiB/s, 8.0 s left\n"
            "dlckpt: draining epoch 6: 40.0 MiB of 100.0 MiB, 10.0 MiB/s, 6.0 s left\n"
            "dlckpt: draining epoch 6: 100.0 MiB of 100.0 MiB, 10.0 MiB/s\n"
            "dlckpt: draining epoch 6: 100.0 MiB of 100.0 MiB, 10.0 MiB/s, done in 10 s\n");
  std::fclose(f);
}

TEST(ProgressTest, TerminalRewritesOneLine) {
  std::FILE* f = std::tmpfile();
  double t = 0;
  {
    Progress p("x", 0, f, {0.0, 2.0, 1, [&] { return t; }});
    t = 1.0;
    p.Update(1 << 20);
    t = 1.1;
    p.Update(2 << 20);  // within 0.25 s
    t = 2.0;
    p.Update(4 << 20);
  }
  EXPECT_EQ(Contents(f),
            "\rx: 1.0 MiB, 1.0 MiB/s\033[K\rx: 4.0 MiB, 2.0 MiB/s\033[K\rx: 4.0 MiB, 2.0 MiB/s, done in 2 s\033[K\n");
  std::fclose(f);
}

}  // namespace
}  // namespace dlckpt

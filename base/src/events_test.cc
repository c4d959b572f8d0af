#include "dlckpt/base/events.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>

namespace dlckpt::events {
namespace {

// One event of every kind, with every field its kind uses set to a value
// that survives printing (seconds with at most 3 decimals).
std::vector<Event> OneOfEach() {
  return {
      Init(7),
      WriteBegin(3, 12),
      CkptBegin(4),
      CkptCommit(4, 0),
      CkptRefused(4, 2, "ENOSPC: memfs store /dev/shm/x: no space left on device [errno 28]"),
      CkptWait(5, 0.125),
      CkptEnd(4, 5),
      DrainBegin(6, 1),
      DrainSkip(6, 3),
      DrainEnd(6, 1, 0, 1 << 20, 0.5, true),
      Prune(6, 1, 2, 0.125),
      Ready(2),
      Protection("unprotected: no spare node left; checkpoints are committed without parity"),
      Warmup("vn4", 1.25, 0.5),
      EncodeBegin(8),
      EncodeDelta(8, 1, 2, 4096, 1 << 26),
      EncodeProgress(8, 100, 400, 2.5),
      EncodeEnd(8, 0),
      RecoverBegin(9),
      RebuildBegin(9),
      RebuildProgress(9, "vn5", 5, 10, 3.25),
      RecoverEnd(9, 61),
  };
}

TEST(Events, EveryKindRoundTrips) {
  std::set<Kind> seen;
  for (Event e : OneOfEach()) {
    e.ns = 123456789;
    const std::string line = "123456789 " + Format(e);
    auto back = Parse(line);
    ASSERT_TRUE(back.has_value()) << line;
    EXPECT_EQ(*back, e) << line;
    EXPECT_EQ(Format(*back), Format(e));
    seen.insert(e.kind);
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kKinds));
}

TEST(Events, LinesKeepTheirFormat) {
  // Shell tests and benchmarks grep these lines: the format is stable.
  EXPECT_EQ(Format(CkptEnd(3, 0)), "app ckpt-end 3 0");
  EXPECT_EQ(Format(WriteBegin(2, 5)), "app write-begin 2 rank 5");
  EXPECT_EQ(Format(DrainEnd(6, 1, 0, 10, 0.5, true)), "app drain-end 6 rank 1 0 10 0.500000 published");
  EXPECT_EQ(Format(DrainEnd(6, 1, 28, 0, 0, false)), "app drain-end 6 rank 1 28 0 0.000000");
  EXPECT_EQ(Format(Prune(6, 3, 2, 0.25)), "app prune 6 rank 3 2 0.250000");
  EXPECT_EQ(Format(EncodeDelta(8, 1, 2, 4096, 8192)), "codec encode-delta 8 1/2 4096/8192");
  EXPECT_EQ(Format(Warmup("vn4", 1.25, 0.5)), "codec warmup vn4 1.250 0.500");
  EXPECT_EQ(Format(RebuildProgress(9, "vn5", 5, 10, 3.25)), "codec rebuild-progress 9 vn5 5 10 3.250");
  EXPECT_EQ(Format(Protection("ok")), "codec protection ok");
  EXPECT_EQ(CkptEnd(1, 0).source(), Source::kApp);
  EXPECT_EQ(EncodeEnd(1, 0).source(), Source::kCodec);
}

TEST(Events, TextKeepsItsSpacesAndLosesNewlines) {
  Event e = CkptRefused(1, 0, "a  b\nc");
  e.ns = 1;
  auto back = Parse("1 " + Format(e));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->text, "a  b c");
}

TEST(Events, MalformedLinesDoNotParse) {
  for (const char* line : {"", "12", "12 app", "x app ckpt-end 1 0", "12 app ckpt-end", "12 app ckpt-end x 0",
                           "12 app ckpt-end 1 0 extra", "12 codec ckpt-end 1 0", "12 app no-such-event 1",
                           "12 app write-begin 1 node 2", "12 codec encode-delta 1 1-2 3/4",
                           "12 app drain-end 1 rank 0 0 1 0.5 unpublished", "12 codec ready -"}) {
    EXPECT_FALSE(Parse(line).has_value()) << line;
  }
}

TEST(Events, FollowerReadsWholeLinesAndSkipsForeignOnes) {
  char path[] = "/tmp/dlckpt-events-test-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  setenv("DLCKPT_EVENTS", path, 1);
  Follower f(path);
  EXPECT_TRUE(f.Poll().empty());
  Emit(CkptBegin(1));
  {
    std::ofstream out(path, std::ios::app);
    out << "1 app something-else 3\n5 app ckpt-commit 1 0";  // no newline yet
  }
  auto got = f.Poll();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].kind, Kind::kCkptBegin);
  EXPECT_GT(got[0].ns, 0);
  {
    std::ofstream out(path, std::ios::app);
    out << "\n";
  }
  got = f.Poll();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], [] {
    Event e = CkptCommit(1, 0);
    e.ns = 5;
    return e;
  }());
  unsetenv("DLCKPT_EVENTS");
  Emit(CkptEnd(1, 0));  // no log: nothing happens
  EXPECT_TRUE(f.Poll().empty());
  std::remove(path);
}

TEST(Events, HoldSeconds) {
  const char* name = "DLCKPT_TEST_HOLD";
  unsetenv(name);
  EXPECT_EQ(HoldSeconds(name, 3), 0);
  setenv(name, "3:1.5", 1);
  EXPECT_EQ(HoldSeconds(name, 3), 1.5);
  EXPECT_EQ(HoldSeconds(name, 4), 0);
  setenv(name, "0:2", 1);  // every epoch
  EXPECT_EQ(HoldSeconds(name, 1), 2);
  EXPECT_EQ(HoldSeconds(name, 9), 2);
  for (const char* bad : {"", "3", "3:", ":2", "x:2", "3:-1", "3:0", "3:3600", "3;2"}) {
    setenv(name, bad, 1);
    EXPECT_EQ(HoldSeconds(name, 3), 0) << "'" << bad << "'";
  }
  unsetenv(name);
}

}  // namespace
}  // namespace dlckpt::events

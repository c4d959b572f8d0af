// A store outlives its owner: a child writes and commits epochs in a loop and
// is SIGKILLed at random points (in the middle of writing, of committing, of
// acknowledging); the parent attaches and must find exactly the content of the
// last acknowledged epoch, CRCs verified, and can take over as owner. Runs on
// an uncompressed and an LZ4 store; half of the files compress.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dlckpt/memfs/memfs.h"

namespace dlckpt::memfs {
namespace {

constexpr int kFiles = 4;

// The content of file `f` in epoch `e` (sizes vary so blocks get reused):
// random bytes for odd f, runs of equal bytes (compressible) for even f.
std::vector<uint8_t> Content(uint64_t e, int f) {
  size_t size = 1000 + (e * 7919 + static_cast<uint64_t>(f) * 104729) % 200000;
  std::vector<uint8_t> v(size);
  std::mt19937_64 rng(e * 131 + static_cast<uint64_t>(f));
  if (f % 2) {
    for (auto& b : v) b = static_cast<uint8_t>(rng());
  } else {
    for (size_t i = 0; i < size;) {
      size_t run = std::min<size_t>(1 + rng() % 100, size - i);
      std::memset(v.data() + i, static_cast<int>(rng() & 0xff), run);
      i += run;
    }
  }
  return v;
}

std::string PathOf(int f) { return "/dlckpt/ckpt." + std::to_string(f); }

[[noreturn]] void ChildLoop(const std::string& name, int ready_fd) {
  auto s = Store::Attach(name, AttachMode::kOwner);
  if (!s.ok()) _exit(10);
  Store& st = **s;
  bool told = false;
  for (uint64_t e = 1;; ++e) {
    for (int f = 0; f < kFiles; ++f) {
      auto fd = st.Open(PathOf(f), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (!fd.ok()) _exit(11);
      auto data = Content(e, f);
      // Several writes per file, as stdio would do.
      for (size_t off = 0; off < data.size(); off += 8192) {
        size_t n = std::min<size_t>(8192, data.size() - off);
        if (!st.Write(*fd, data.data() + off, n).ok()) _exit(12);
      }
      if (!st.Close(*fd).ok()) _exit(13);
    }
    // A stray file in odd epochs, removed in even ones.
    if (e % 2) {
      auto fd = st.Open("/dlckpt/stray", O_WRONLY | O_CREAT, 0644);
      if (!fd.ok() || !st.Write(*fd, "x", 1).ok() || !st.Close(*fd).ok()) _exit(14);
    } else {
      (void)st.Unlink("/dlckpt/stray");
    }
    auto c = st.Commit();
    if (!c.ok() || *c != e) _exit(15);
    if (!st.Acknowledge(e).ok()) _exit(16);
    if (!told) {
      char b = 1;
      if (write(ready_fd, &b, 1) != 1) _exit(17);
      told = true;
    }
  }
}

class StoreCrashTest : public ::testing::TestWithParam<Compression> {};

TEST_P(StoreCrashTest, KilledOwnerLeavesLastAcknowledgedEpoch) {
  std::string name = "/dlckpt-crashtest." + std::to_string(getpid());
  StoreOptions o;
  o.capacity = 8 << 20;
  o.block_size = 4096;
  o.compression = GetParam();
  o.chunk_size = 8 * 4096;
  o.job = "crash";
  o.node = "n0";
  std::mt19937 rng(12345);
  for (int round = 0; round < 12; ++round) {
    {
      auto s = Store::Create(name, o);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
    }  // clean detach: the child becomes the owner
    int pipefd[2];
    ASSERT_EQ(pipe(pipefd), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(pipefd[0]);
      ChildLoop(name, pipefd[1]);
    }
    close(pipefd[1]);
    char b;
    ASSERT_EQ(read(pipefd[0], &b, 1), 1) << "child failed before epoch 1";
    close(pipefd[0]);
    usleep(1000 + rng() % 40000);  // somewhere inside epoch 2, 3, ...
    kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);

    auto ro = Store::Attach(name, AttachMode::kReadOnly);
    ASSERT_TRUE(ro.ok()) << ro.status().ToString();
    uint64_t e = (*ro)->epochs().acknowledged;
    ASSERT_GE(e, 1u);
    ASSERT_TRUE((*ro)->Verify(e).ok());
    ASSERT_TRUE((*ro)->View(e).ok());
    ro->reset();

    auto s = Store::Attach(name, AttachMode::kOwner);  // the dead owner's lock is gone
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    Store& st = **s;
    EXPECT_EQ(st.epochs().acknowledged, e);
    auto files = st.List("");
    ASSERT_TRUE(files.ok());
    ASSERT_EQ(files->size(), kFiles + (e % 2 ? 1u : 0u)) << "epoch " << e;
    for (int f = 0; f < kFiles; ++f) {
      auto want = Content(e, f);
      auto fd = st.Open(PathOf(f), O_RDONLY);
      ASSERT_TRUE(fd.ok());
      std::vector<uint8_t> got(want.size() + 1);
      auto n = st.Read(*fd, got.data(), got.size());
      ASSERT_TRUE(n.ok());
      ASSERT_EQ(*n, want.size()) << "epoch " << e << " file " << f;
      got.resize(*n);
      ASSERT_EQ(got, want) << "epoch " << e << " file " << f;
      ASSERT_TRUE(st.Close(*fd).ok());
    }
    // A kill between Commit and Acknowledge leaves a pending epoch, intact
    // (its CRCs were computed at commit); the new owner drops it, as a
    // recovery does when its parity never completed, and goes on.
    if (uint64_t p = st.epochs().pending; p != 0) {
      EXPECT_EQ(p, e + 1);
      EXPECT_TRUE(st.Verify(p).ok());
      ASSERT_TRUE(st.AbortPending().ok());
    }
    // The new owner can go on: every block is accounted for.
    auto c = st.Commit();
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ASSERT_TRUE(st.Acknowledge(*c).ok());
    ASSERT_TRUE(st.Verify(*c).ok());
    s->reset();
    ASSERT_TRUE(Store::Destroy(name).ok());
  }
}

INSTANTIATE_TEST_SUITE_P(Compression, StoreCrashTest,
                         ::testing::Values(Compression::kNone, Compression::kLz4),
                         [](const auto& info) { return std::string(CompressionName(info.param)); });

}  // namespace
}  // namespace dlckpt::memfs

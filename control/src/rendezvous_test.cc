// ReadRendezvous reads regular files only, and small ones: a FIFO or a
// device planted as the rendezvous file fails at once with a clear error
// instead of hanging dlckpt_init.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "dlckpt/base/env.h"
#include "dlckpt/control/protocol.h"

namespace dlckpt::control::protocol {
namespace {

// A regression to a blocking open or an unbounded read is killed by SIGALRM
// instead of hanging the suite.
class Deadline {
 public:
  explicit Deadline(unsigned seconds) { alarm(seconds); }
  ~Deadline() { alarm(0); }
};

class RendezvousTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/rdvsec." + std::to_string(getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(RendezvousTest, AFifoFailsPromptly) {
  std::string fifo = dir_ + "/rendezvous";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  Deadline deadline(10);
  auto start = std::chrono::steady_clock::now();
  auto r = ReadRendezvous(fifo, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), EINVAL);
  EXPECT_EQ(r.status().message(),
            "rendezvous file: " + fifo + " is a FIFO, not a regular file; refusing to read it");
}

TEST_F(RendezvousTest, ASymlinkToADeviceIsRefused) {
  std::string link = dir_ + "/rendezvous";
  ASSERT_EQ(symlink("/dev/zero", link.c_str()), 0);
  Deadline deadline(10);
  auto r = ReadRendezvous(link, 200);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), EACCES);  // /dev/zero is mode 0666
  EXPECT_NE(r.status().message().find(link + " is readable by others (mode 0666)"), std::string::npos)
      << r.status().ToString();
}

TEST_F(RendezvousTest, ALargeFileIsRefused) {
  std::string path = dir_ + "/rendezvous";
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(path, std::string(100000, ' '), 0600).ok());
  auto r = ReadRendezvous(path, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), EFBIG);
  EXPECT_NE(r.status().message().find(path + " is 100000 bytes, more than the 65536 bytes expected"),
            std::string::npos)
      << r.status().ToString();
}

TEST_F(RendezvousTest, ASymlinkToARegularFileIsRead) {
  std::string path = dir_ + "/real", link = dir_ + "/rendezvous";
  auto tok = NewToken();
  ASSERT_TRUE(tok.ok());
  ASSERT_TRUE(WriteRendezvous(path, {"node1", 4242, *tok, "job1"}).ok());
  ASSERT_EQ(symlink(path.c_str(), link.c_str()), 0);
  auto r = ReadRendezvous(link, 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->port, 4242);
  EXPECT_EQ(r->token, *tok);
}

}  // namespace
}  // namespace dlckpt::control::protocol

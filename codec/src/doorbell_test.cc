// Rank 0's side of the doorbells' set-up (internal::Acceptor in doorbell.h),
// on loopback without MPI: which connections become doorbells and which are
// refused, and that a silent connection holds no one up.
#include "doorbell.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace dlckpt::codec::internal {
namespace {

namespace protocol = control::protocol;

class AcceptorTest : public ::testing::Test {
 protected:
  static constexpr int kSize = 4;

  void SetUp() override {
    auto l = protocol::Listener::Listen(0, "127.0.0.1");
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    listener_ = std::move(*l);
    auto t = protocol::NewToken();
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    ASSERT_EQ(t->size(), sizeof(Hello::token));
    token_ = *t;
    acceptor_ = std::make_unique<Acceptor>(*listener_, token_, kSize);
    peers_.resize(kSize);
  }

  std::unique_ptr<protocol::Connection> Connect() {
    auto c = protocol::Connection::Connect("127.0.0.1", listener_->port(), 5000);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  }

  // Connects and sends `bytes` bytes of a hello for `rank` with `token`.
  std::unique_ptr<protocol::Connection> Present(const std::string& token, uint32_t rank,
                                                size_t bytes = sizeof(Hello)) {
    auto c = Connect();
    if (!c) return nullptr;
    Hello h{};
    std::memcpy(h.token, token.data(), std::min(token.size(), sizeof h.token));
    h.rank = rank;
    EXPECT_EQ(send(c->fd(), &h, bytes, MSG_NOSIGNAL), static_cast<ssize_t>(bytes));
    return c;
  }

  // Steps until `done` holds, for 5 s at most.
  template <typename Pred>
  void StepUntil(Pred done) {
    for (int i = 0; i < 500 && !done(); ++i) acceptor_->Step(10, &peers_, log_);
  }

  // recv of one byte on `fd`, waiting 5 s at most: 1, 0 at the end, -1 if nothing came.
  static ssize_t RecvByte(int fd, char* byte) {
    struct pollfd p {fd, POLLIN, 0};
    if (poll(&p, 1, 5000) != 1) return -1;
    return recv(fd, byte, 1, MSG_DONTWAIT);
  }

  int Connected() const {
    int n = 0;
    for (const auto& p : peers_) n += p ? 1 : 0;
    return n;
  }

  std::unique_ptr<protocol::Listener> listener_;
  std::string token_;
  std::unique_ptr<Acceptor> acceptor_;
  std::vector<std::unique_ptr<protocol::Connection>> peers_;
  std::vector<std::string> logged_;
  Doorbells::Log log_ = [this](const std::string& m) { logged_.push_back(m); };
};

TEST_F(AcceptorTest, AHelloWithTheTokenMakesThatRanksDoorbell) {
  auto c1 = Present(token_, 1);
  auto c3 = Present(token_, 3);
  StepUntil([&] { return Connected() == 2; });
  EXPECT_TRUE(peers_[1]);
  EXPECT_TRUE(peers_[3]);
  EXPECT_FALSE(peers_[0]);
  EXPECT_FALSE(peers_[2]);
  EXPECT_TRUE(logged_.empty());
}

TEST_F(AcceptorTest, RefusesEveryOtherHello) {
  std::string wrong = token_;
  wrong[10] ^= 1;
  std::vector<std::unique_ptr<protocol::Connection>> strangers;
  strangers.push_back(Present(wrong, 1));      // a wrong token
  strangers.push_back(Present(token_, 0));     // rank 0 is the acceptor
  strangers.push_back(Present(token_, kSize));  // no such rank
  strangers.push_back(Present(token_, 2, sizeof(Hello) - 1));  // half a hello, then closed
  strangers.back().reset();
  StepUntil([&] { return logged_.size() == 4; });
  EXPECT_EQ(logged_.size(), 4u);
  for (const auto& m : logged_) EXPECT_NE(m.find("doorbells: refused a connection from 127.0.0.1"), std::string::npos) << m;
  EXPECT_EQ(Connected(), 0);
  // A refused connection is closed: its peer reads the end.
  char byte;
  EXPECT_EQ(RecvByte(strangers[0]->fd(), &byte), 0);
  // The rank the half hello named is still free.
  auto c2 = Present(token_, 2);
  StepUntil([&] { return Connected() == 1; });
  EXPECT_TRUE(peers_[2]);
}

TEST_F(AcceptorTest, ARankIsTakenOnce) {
  auto first = Present(token_, 1);
  StepUntil([&] { return Connected() == 1; });
  auto second = Present(token_, 1);
  StepUntil([&] { return logged_.size() == 1; });
  EXPECT_EQ(logged_.size(), 1u);
  ASSERT_TRUE(peers_[1]);
  // The first connection keeps the doorbell: a byte sent on it reaches `first`.
  ASSERT_EQ(send(peers_[1]->fd(), "x", 1, MSG_NOSIGNAL), 1);
  char byte = 0;
  EXPECT_EQ(RecvByte(first->fd(), &byte), 1);
  EXPECT_EQ(byte, 'x');
}

TEST_F(AcceptorTest, ASilentConnectionHoldsNoOneUp) {
  auto silent = Connect();
  for (int i = 0; i < 5; ++i) acceptor_->Step(10, &peers_, log_);  // accepted, its hello pending
  auto c1 = Present(token_, 1);
  StepUntil([&] { return Connected() == 1; });
  EXPECT_TRUE(peers_[1]);
  EXPECT_TRUE(logged_.empty());
}

}  // namespace
}  // namespace dlckpt::codec::internal

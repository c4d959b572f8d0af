#include "dlckpt/base/status.h"

#include <gtest/gtest.h>

#include "dlckpt/base/env.h"

namespace dlckpt {
namespace {

TEST(StatusTest, OkHasNoCodeAndPrintsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), 0);
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, FromErrnoCarriesContextAndCode) {
  Status s = Status::FromErrno(ENOENT, "open /dlckpt/x");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ENOENT);
  EXPECT_NE(s.ToString().find("open /dlckpt/x"), std::string::npos);
  EXPECT_NE(s.ToString().find("ENOENT"), std::string::npos);
}

TEST(StatusTest, CopyAndPrefix) {
  Status a = Status::NoSpace("store full");
  Status b = a;
  EXPECT_EQ(b.code(), ENOSPC);
  Status c = b.Prefixed("rank 3");
  EXPECT_EQ(c.message(), "rank 3: store full");
  EXPECT_EQ(c.code(), ENOSPC);
}

TEST(StatusTest, SetErrnoConvertsOnce) {
  errno = 0;
  EXPECT_EQ(SetErrno(Status::Error(EBADF, "fd 7")), -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_NE(std::string(LastErrorMessage()).find("fd 7"), std::string::npos);
}

Result<int> Half(int x) {
  if (x % 2) return Status::InvalidArgument("odd");
  return x / 2;
}

Status UseHalf(int x, int* out) {
  DLCKPT_ASSIGN_OR_RETURN(*out, Half(x));
  return Status::OK();
}

TEST(ResultTest, ValueOrError) {
  int v = 0;
  EXPECT_TRUE(UseHalf(8, &v).ok());
  EXPECT_EQ(v, 4);
  EXPECT_EQ(UseHalf(3, &v).code(), EINVAL);
}

TEST(EnvTest, ShmCreateOpenListUnlink) {
  Env* env = Env::Default();
  std::string name = "/dlckpt-envtest." + std::to_string(getpid());
  auto created = env->CreateShm(name, 1 << 20, true);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  (*created)->data()[12345] = 42;
  EXPECT_EQ(env->CreateShm(name, 4096, false).status().code(), EEXIST);
  auto opened = env->OpenShm(name, false);
  ASSERT_TRUE(opened.ok());
  EXPECT_EQ((*opened)->data()[12345], 42);
  EXPECT_EQ((*opened)->size(), size_t{1} << 20);
  auto list = env->ListShm("/dlckpt-envtest." + std::to_string(getpid()));
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0], name);
  EXPECT_TRUE(env->UnlinkShm(name).ok());
  EXPECT_EQ(env->UnlinkShm(name).code(), ENOENT);
  EXPECT_EQ(env->OpenShm(name, false).status().code(), ENOENT);
  EXPECT_EQ(env->OpenShm("bad/name", false).status().code(), EINVAL);
}

}  // namespace
}  // namespace dlckpt

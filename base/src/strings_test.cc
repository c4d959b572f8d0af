// Tests of Split and AppendJsonString.
#include "dlckpt/base/strings.h"

#include <gtest/gtest.h>

namespace dlckpt {
namespace {

using Fields = std::vector<std::string_view>;

TEST(Split, KeepsEveryFieldInOrder) {
  EXPECT_EQ(Split("a,b,c", ','), (Fields{"a", "b", "c"}));
  EXPECT_EQ(Split("/x:/y", ':'), (Fields{"/x", "/y"}));
  EXPECT_EQ(Split("abc", ','), (Fields{"abc"}));
}

TEST(Split, KeepsEmptyFields) {
  EXPECT_EQ(Split("", ','), (Fields{""}));
  EXPECT_EQ(Split(",", ','), (Fields{"", ""}));
  EXPECT_EQ(Split("a,,b,", ','), (Fields{"a", "", "b", ""}));
}

TEST(Split, ViewsPointIntoTheInput) {
  std::string s = "one:two";
  Fields f = Split(s, ':');
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[1].data(), s.data() + 4);
}

TEST(AppendJsonString, QuotesAndEscapes) {
  std::string out = "x=";
  AppendJsonString(&out, "plain");
  EXPECT_EQ(out, "x=\"plain\"");
  out.clear();
  AppendJsonString(&out, "a\"b\\c\nd\te");
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\nd\\te\"");
  out.clear();
  AppendJsonString(&out, std::string_view("\x01\x1f\x7f", 3));
  EXPECT_EQ(out, "\"\\u0001\\u001f\x7f\"");
  out.clear();
  AppendJsonString(&out, "h\xc3\xa9");  // UTF-8 stays as it is
  EXPECT_EQ(out, "\"h\xc3\xa9\"");
}

}  // namespace
}  // namespace dlckpt

// Tests of Split, AppendJsonString, ParseKeyValueLines and IgnoredNote.
#include "dlckpt/base/strings.h"

#include <cerrno>

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

TEST(ParseKeyValueLines, ReadsKeysAndValuesSkippingCommentsAndSections) {
  auto kv = ParseKeyValueLines("f.cfg",
                               "# comment\n\n[veloc]\n scratch = /dev/shm \r\n; also a comment\nmode=async\nempty =\n");
  ASSERT_TRUE(kv.ok()) << kv.status().ToString();
  ASSERT_EQ(kv->size(), 3u);
  EXPECT_EQ((*kv)[0].line, 4u);
  EXPECT_EQ((*kv)[0].key, "scratch");
  EXPECT_EQ((*kv)[0].value, "/dev/shm");
  EXPECT_EQ((*kv)[1].line, 6u);
  EXPECT_EQ((*kv)[1].key, "mode");
  EXPECT_EQ((*kv)[1].value, "async");
  EXPECT_EQ((*kv)[2].key, "empty");
  EXPECT_EQ((*kv)[2].value, "");
}

TEST(ParseKeyValueLines, ALineWithoutKeyAndValueNamesFileAndLine) {
  auto kv = ParseKeyValueLines("f.cfg", "a = 1\njust words\n");
  ASSERT_FALSE(kv.ok());
  EXPECT_EQ(kv.status().code(), EINVAL);
  EXPECT_NE(kv.status().message().find("f.cfg:2: not a \"key = value\" line: just words"), std::string::npos)
      << kv.status().message();
  kv = ParseKeyValueLines("g.cfg", " = 3\n");
  ASSERT_FALSE(kv.ok());
  EXPECT_NE(kv.status().message().find("g.cfg:1:"), std::string::npos) << kv.status().message();
}

TEST(IgnoredNote, NamesTheSettingWhyAndWhereToRead) {
  EXPECT_EQ(IgnoredNote("SCR_RUNS", "relaunches are dlckpt-run's", "scr/README.md"),
            "SCR_RUNS is ignored by dlckpt: relaunches are dlckpt-run's (scr/README.md)");
}

}  // namespace
}  // namespace dlckpt

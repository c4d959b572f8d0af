#include "dlckpt/base/cli.h"

#include <gtest/gtest.h>

namespace dlckpt::cli {
namespace {

struct Tool {
  CLI::App app{"a test tool", "dlckpt-test"};
  int nodes = 2;
  int spares = 1;
  bool keep = false;
  std::string scheme;
  Tool() {
    app.add_option("-n,--nodes", nodes, "data nodes");
    app.add_option("--spares", spares, "spare nodes");
    app.add_option("--scheme", scheme, "xor or rs");
    app.add_flag("--keep", keep, "keep the stores");
  }
};

TEST(CliTest, ParsesInOrder) {
  Tool t;
  ASSERT_TRUE(ParseArgs(t.app, {"--nodes", "4", "--keep", "--scheme=rs"}).ok());
  EXPECT_EQ(t.nodes, 4);
  EXPECT_TRUE(t.keep);
  EXPECT_EQ(t.scheme, "rs");
}

TEST(CliTest, UnknownOptionGetsTheClosestOne) {
  Tool t;
  Status st = ParseArgs(t.app, {"--node", "4"});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), EINVAL);
  EXPECT_NE(st.message().find("unknown option --node"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("did you mean --nodes?"), std::string::npos) << st.message();
  Tool u;
  st = ParseArgs(u.app, {"--sheme=xor"});
  EXPECT_NE(st.message().find("did you mean --scheme?"), std::string::npos) << st.message();
}

TEST(CliTest, UnknownOptionOfASubcommandGetsItsClosestOne) {
  CLI::App app{"a tool with commands", "dlckpt-test"};
  int nodes = 0;
  std::string mount;
  app.add_option("--nodes", nodes);
  CLI::App* run = app.add_subcommand("run");
  run->add_option("--mount", mount);
  Status st = ParseArgs(app, {"run", "--mout", "/m"});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("unknown option --mout; did you mean --mount?"), std::string::npos) << st.message();
  CLI::App with_parent{"", "dlckpt-test"};
  with_parent.add_option("--nodes", nodes);
  with_parent.add_subcommand("run")->fallthrough();
  st = ParseArgs(with_parent, {"run", "--node", "3"});
  EXPECT_NE(st.message().find("did you mean --nodes?"), std::string::npos) << st.message();
}

TEST(CliTest, NothingCloseSuggestsNothing) {
  Tool t;
  EXPECT_EQ(Suggest(t.app, "--bandwidth"), "");
  EXPECT_EQ(Suggest(t.app, "--kep"), "--keep");
  EXPECT_EQ(Suggest(t.app, "--spare"), "--spares");
  const Status st = ParseArgs(t.app, {"--bandwidth", "3"});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message().find("did you mean"), std::string::npos) << st.message();
}

TEST(CliTest, BadValueIsAnError) {
  Tool t;
  const Status st = ParseArgs(t.app, {"--nodes", "four"});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("nodes"), std::string::npos) << st.message();
}

TEST(CliTest, HelpIsNotAnError) {
  Tool t;
  bool help = false;
  EXPECT_TRUE(ParseArgs(t.app, {"--help"}, &help).ok());
  EXPECT_TRUE(help);
  EXPECT_NE(t.app.help().find("--nodes"), std::string::npos);
}

TEST(CliTest, SetUsageLeadsTheHelpAndFillsDescriptions) {
  Tool t;
  t.app.description("What it does.");
  t.app.add_option("--long", t.scheme,
                   "a description long enough to be filled over more than one line of the help text, "
                   "at seventy-nine columns\nand a line of its own");
  SetUsage(t.app, "Usage: dlckpt-test --nodes N [options]", 20);
  const std::string help = t.app.help();
  EXPECT_EQ(help.rfind("Usage: dlckpt-test --nodes N [options]\n\nWhat it does.\n", 0), 0u) << help;
  EXPECT_NE(help.find("\n                    and a line of its own\n"), std::string::npos) << help;
  size_t start = 0;
  while (start < help.size()) {
    const size_t end = help.find('\n', start);
    EXPECT_LE((end == std::string::npos ? help.size() : end) - start, 79u) << help;
    if (end == std::string::npos) break;
    start = end + 1;
  }
}

TEST(CliTest, PrefixCommandLeavesTheProgram) {
  Tool t;
  t.app.prefix_command();
  ASSERT_TRUE(ParseArgs(t.app, {"--nodes", "4", "--", "prog", "--node", "-x"}).ok());
  EXPECT_EQ(t.nodes, 4);
  EXPECT_EQ(t.app.remaining(), (std::vector<std::string>{"--", "prog", "--node", "-x"}));
  Tool u;
  u.app.prefix_command();
  ASSERT_TRUE(ParseArgs(u.app, {"--keep", "prog", "--nodes", "9"}).ok());
  EXPECT_EQ(u.nodes, 2);
  EXPECT_EQ(u.app.remaining(), (std::vector<std::string>{"prog", "--nodes", "9"}));
  // An unknown option before the program is still an error.
  Tool v;
  v.app.prefix_command();
  const Status st = ParseArgs(v.app, {"--node", "4", "--", "prog"});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "unknown option --node; did you mean --nodes?");
  EXPECT_EQ(UnknownOption(v.app, "--bandwidth").message(), "unknown option --bandwidth");
}

}  // namespace
}  // namespace dlckpt::cli

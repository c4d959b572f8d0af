#include "dlckpt/base/cli.h"

#include <algorithm>
#include <cstdio>
#include <iostream>

namespace dlckpt::cli {
namespace {

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The names a user can type for the options of `app`, with their dashes.
std::vector<std::string> Names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : app.get_options()) {
    for (const std::string& l : opt->get_lnames()) names.push_back("--" + l);
    for (const std::string& s : opt->get_snames()) names.push_back("-" + s);
  }
  return names;
}

// "unknown option W", with the closest option of the innermost subcommand
// given, else of its parents.
std::string UnknownOption(const CLI::App& app, const std::string& word) {
  const CLI::App* innermost = &app;
  while (!innermost->get_subcommands().empty()) innermost = innermost->get_subcommands().front();
  std::string what = "unknown option " + word;
  for (const CLI::App* a = innermost; a != nullptr; a = a->get_parent()) {
    if (const std::string s = Suggest(*a, word); !s.empty()) return what + "; did you mean " + s + "?";
  }
  return what;
}

// The first unknown option in what CLI11 left over, "" if none.
std::string FirstUnknown(const std::vector<std::string>& rest) {
  for (const std::string& r : rest) {
    if (r.size() > 1 && r[0] == '-' && r != "--") return r;
  }
  return "";
}

}  // namespace

std::string Suggest(const CLI::App& app, std::string_view word) {
  if (const size_t eq = word.find('='); eq != std::string_view::npos) word = word.substr(0, eq);
  if (word.size() < 2) return "";
  std::string best;
  size_t best_distance = word.size() / 3 + 1;
  for (const std::string& name : Names(app)) {
    if (name.size() > word.size() && name.compare(0, word.size(), word) == 0 && word.size() >= 3) {
      // A prefix: the most likely mistake ("--node" for "--nodes"); the shortest wins.
      if (best.empty() || best_distance > 0 || name.size() < best.size()) {
        best = name;
        best_distance = 0;
      }
      continue;
    }
    const size_t d = EditDistance(word, name);
    if (d < best_distance) {
      best = name;
      best_distance = d;
    }
  }
  return best;
}

Status ParseArgs(CLI::App& app, const std::vector<std::string>& args, bool* help) {
  if (help != nullptr) *help = false;
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last first
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    if (help != nullptr) *help = true;
    return Status::OK();
  } catch (const CLI::CallForAllHelp&) {
    if (help != nullptr) *help = true;
    return Status::OK();
  } catch (const CLI::ExtrasError& e) {
    const std::string unknown = FirstUnknown(app.remaining(true));
    return Status::Error(EINVAL, unknown.empty() ? std::string(e.what()) : UnknownOption(app, unknown));
  } catch (const CLI::ParseError& e) {
    return Status::Error(EINVAL, e.what());
  }
  // With allow_extras, unknown options land in remaining() without an error.
  if (app.get_allow_extras()) {
    if (const std::string unknown = FirstUnknown(app.remaining(true)); !unknown.empty()) {
      return Status::Error(EINVAL, UnknownOption(app, unknown));
    }
  }
  return Status::OK();
}

std::optional<int> ParseMain(CLI::App& app, int argc, char** argv, int usage_exit) {
  std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + std::max(argc, 1));
  bool help = false;
  const Status st = ParseArgs(app, args, &help);
  if (help) {
    std::cout << app.help();
    return 0;
  }
  if (!st.ok()) {
    std::fprintf(stderr, "%s: %s\n(%s --help lists the options)\n", app.get_name().c_str(),
                 st.message().c_str(), app.get_name().c_str());
    return usage_exit;
  }
  return std::nullopt;
}

}  // namespace dlckpt::cli

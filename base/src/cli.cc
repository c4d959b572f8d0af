#include "dlckpt/base/cli.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <utility>

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

// Whether `word` is an option's name ("-x", "--name", "--name=value"), not "--".
bool IsOption(const std::string& word) { return word.size() > 1 && word[0] == '-' && word != "--"; }

// The first unknown option in what CLI11 left over, "" if none.
std::string FirstUnknown(const std::vector<std::string>& rest) {
  for (const std::string& r : rest) {
    if (IsOption(r)) return r;
  }
  return "";
}

// Each line of `text` filled to at most `width` columns (a longer word stands alone).
std::string Fill(const std::string& text, size_t width) {
  std::string out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    size_t column = 0;
    for (size_t w = start; w < end;) {
      const size_t space = std::min(text.find(' ', w), end);
      const size_t len = space - w;
      if (len > 0) {
        if (column > 0 && column + 1 + len > width) {
          out += '\n';
          column = 0;
        } else if (column > 0) {
          out += ' ';
          ++column;
        }
        out.append(text, w, len);
        column += len;
      }
      w = space + 1;
    }
    if (end < text.size()) out += '\n';
    start = end + 1;
  }
  return out;
}

class UsageFormatter : public CLI::Formatter {
 public:
  explicit UsageFormatter(std::string usage) : usage_(std::move(usage)) {}
  std::string make_help(const CLI::App* app, std::string, CLI::AppFormatMode) const override {
    std::string out = usage_ + "\n";
    if (!app->get_description().empty()) out += "\n" + app->get_description() + "\n";
    for (const std::string& group : app->get_groups()) {
      const std::vector<const CLI::Option*> opts = app->get_options(
          [&group](const CLI::Option* opt) { return opt->get_group() == group && opt->nonpositional(); });
      if (!group.empty() && !opts.empty()) out += make_group(group, false, opts);
    }
    if (const std::string footer = make_footer(app); !footer.empty()) out += "\n" + footer;
    return out;
  }
  std::string make_option_desc(const CLI::Option* opt) const override {
    return Fill(opt->get_description(), kLineWidth > get_column_width() ? kLineWidth - get_column_width() : 20);
  }

 private:
  static constexpr size_t kLineWidth = 79;
  std::string usage_;
};

}  // namespace

void SetUsage(CLI::App& app, std::string usage, size_t column) {
  auto formatter = std::make_shared<UsageFormatter>(std::move(usage));
  formatter->column_width(column);
  app.formatter(formatter);
}

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

Status UnknownOption(const CLI::App& app, std::string_view word) {
  // The closest option of the innermost subcommand given, else of its parents.
  const CLI::App* innermost = &app;
  while (!innermost->get_subcommands().empty()) innermost = innermost->get_subcommands().front();
  std::string what = "unknown option " + std::string(word);
  for (const CLI::App* a = innermost; a != nullptr; a = a->get_parent()) {
    if (const std::string s = Suggest(*a, word); !s.empty()) return Status::Error(EINVAL, what + "; did you mean " + s + "?");
  }
  return Status::Error(EINVAL, what);
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
    return unknown.empty() ? Status::Error(EINVAL, e.what()) : UnknownOption(app, unknown);
  } catch (const CLI::ParseError& e) {
    return Status::Error(EINVAL, e.what());
  }
  // With prefix_command, the leftovers are the caller's from the first word
  // that is not an unknown option on; with allow_extras, unknown options land
  // in remaining() without an error.
  const std::vector<std::string> rest = app.remaining(true);
  if (app.get_prefix_command()) {
    if (!rest.empty() && IsOption(rest.front())) return UnknownOption(app, rest.front());
  } else if (app.get_allow_extras()) {
    if (const std::string unknown = FirstUnknown(rest); !unknown.empty()) return UnknownOption(app, unknown);
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

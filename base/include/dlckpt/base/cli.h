// dlckpt/base/cli.h — what every dlckpt tool does the same way around CLI11
// (dlckpt::cli): parsing an argument list, reporting an unknown option with
// the closest known one ("--node": did you mean --nodes?), and the exit codes
// of --help and of a usage error.
// Thread safety: functions on one CLI::App must not run concurrently.
#ifndef DLCKPT_BASE_CLI_H_
#define DLCKPT_BASE_CLI_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "dlckpt/base/status.h"

namespace dlckpt::cli {

// The option of `app` (its long and short names, as "--name" / "-n") closest
// to `word` ("--node", "-x", "nodes=4": what follows '=' is ignored): one that
// `word` is a prefix of, else one within an edit distance of about a third of
// its length. "" when none is close enough.
std::string Suggest(const CLI::App& app, std::string_view word);

// EINVAL "unknown option WORD", with "; did you mean --x?" when Suggest has
// one for the innermost subcommand given, else for one of its parents.
Status UnknownOption(const CLI::App& app, std::string_view word);

// Parses `args` (without the program name, in order). Returns OK, or EINVAL
// with a message for the user: CLI11's, or UnknownOption's for an unknown
// option. --help (when the app has it) returns OK and sets *help. With
// app.prefix_command(), what follows the options ("--" and the words after it,
// or the first word that is not an option's value and the words after it) is
// left in app.remaining() for the caller, and an option CLI11 does not know
// before it is an error.
Status ParseArgs(CLI::App& app, const std::vector<std::string>& args, bool* help = nullptr);

// For a tool's main: parses argv. Returns std::nullopt when the tool should
// go on; else the exit status after printing: 0 after --help (help on
// stdout), `usage_exit` after a usage error ("<program>: <message>" and a
// pointer to --help on stderr).
std::optional<int> ParseMain(CLI::App& app, int argc, char** argv, int usage_exit = 2);

// Makes app.help() begin with `usage` (the whole line, e.g. "Usage: dlckpt-plan
// --nodes N ... [options]") and a blank line, then the app's description, the
// options by group (descriptions filled to 79 columns; a '\n' in one starts a
// new line), and the footer. `column` is the width of the option column.
void SetUsage(CLI::App& app, std::string usage, size_t column = 30);

}  // namespace dlckpt::cli

#endif  // DLCKPT_BASE_CLI_H_

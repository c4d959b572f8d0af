// dlckpt/base/strings.h — small text helpers shared by the components:
// splitting a separated list, quoting a string for JSON output, reading
// "key = value" lines, and the line that says a setting is ignored.
// Thread safety: pure functions.
#ifndef DLCKPT_BASE_STRINGS_H_
#define DLCKPT_BASE_STRINGS_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "dlckpt/base/status.h"

namespace dlckpt {

// The fields of `s` between the separators `sep`, in order, empty ones
// included: n separators give n + 1 fields ("" gives one empty field). The
// views point into `s`, which must outlive them.
std::vector<std::string_view> Split(std::string_view s, char sep);

// Appends `s` to `*out` as a JSON string: in double quotes, with '"', '\\',
// newline and tab escaped as \" \\ \n \t and other control characters as
// \u00XX; every other byte (UTF-8 included) is copied as it is.
void AppendJsonString(std::string* out, std::string_view s);

// One "key = value" line of an INI-style file (VeloC's configuration file).
struct KeyValueLine {
  size_t line = 0;  // 1 for the first line
  std::string key;
  std::string value;  // may be empty
};
// The "key = value" lines of `text`, in order. Skipped: blank lines, lines
// whose first non-blank character is '#' or ';' (comments) and "[section]"
// lines. Key and value are trimmed of blanks (space, tab, CR). A line without
// '=', or with nothing before it, is InvalidArgument naming
// "<where>:<line>" (`where`: the file's path, for messages).
Result<std::vector<KeyValueLine>> ParseKeyValueLines(std::string_view where, std::string_view text);

// A setting that dlckpt accepts and ignores, with why (an SCR parameter, a
// VeloC configuration key).
struct IgnoredSetting {
  const char* name;
  const char* why;
};
// The line that reports it: "<name> is ignored by dlckpt: <why> (<doc>)",
// `doc` naming where the user reads more (e.g. "scr/README.md").
std::string IgnoredNote(std::string_view name, std::string_view why, std::string_view doc);

}  // namespace dlckpt

#endif  // DLCKPT_BASE_STRINGS_H_

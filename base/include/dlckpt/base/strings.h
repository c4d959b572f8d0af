// dlckpt/base/strings.h — small text helpers shared by the components:
// splitting a separated list, and quoting a string for JSON output.
// Thread safety: pure functions.
#ifndef DLCKPT_BASE_STRINGS_H_
#define DLCKPT_BASE_STRINGS_H_

#include <string>
#include <string_view>
#include <vector>

namespace dlckpt {

// The fields of `s` between the separators `sep`, in order, empty ones
// included: n separators give n + 1 fields ("" gives one empty field). The
// views point into `s`, which must outlive them.
std::vector<std::string_view> Split(std::string_view s, char sep);

// Appends `s` to `*out` as a JSON string: in double quotes, with '"', '\\',
// newline and tab escaped as \" \\ \n \t and other control characters as
// \u00XX; every other byte (UTF-8 included) is copied as it is.
void AppendJsonString(std::string* out, std::string_view s);

}  // namespace dlckpt

#endif  // DLCKPT_BASE_STRINGS_H_

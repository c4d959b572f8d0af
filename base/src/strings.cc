#include "dlckpt/base/strings.h"

#include <cstdio>

namespace dlckpt {

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    size_t end = s.find(sep, start);
    if (end == std::string_view::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
}

void AppendJsonString(std::string* out, std::string_view s) {
  *out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\t': *out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          *out += buf;
        } else {
          *out += static_cast<char>(c);
        }
    }
  }
  *out += '"';
}


Result<std::vector<KeyValueLine>> ParseKeyValueLines(std::string_view where, std::string_view text) {
  auto trim = [](std::string_view t) {
    const size_t b = t.find_first_not_of(" \t\r");
    if (b == std::string_view::npos) return std::string_view();
    return t.substr(b, t.find_last_not_of(" \t\r") - b + 1);
  };
  std::vector<KeyValueLine> out;
  size_t line_no = 0;
  for (std::string_view raw : Split(text, '\n')) {
    ++line_no;
    const std::string_view line = trim(raw);
    if (line.empty() || line[0] == '#' || line[0] == ';' || line[0] == '[') continue;
    const size_t eq = line.find('=');
    const std::string_view key = eq == std::string_view::npos ? std::string_view() : trim(line.substr(0, eq));
    if (key.empty()) {
      return Status::InvalidArgument(std::string(where) + ":" + std::to_string(line_no) +
                                     ": not a \"key = value\" line: " + std::string(line));
    }
    out.push_back({line_no, std::string(key), std::string(trim(line.substr(eq + 1)))});
  }
  return out;
}

std::string IgnoredNote(std::string_view name, std::string_view why, std::string_view doc) {
  return std::string(name) + " is ignored by dlckpt: " + std::string(why) + " (" + std::string(doc) + ")";
}

}  // namespace dlckpt

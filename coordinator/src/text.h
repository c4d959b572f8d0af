// text.h — small formatting helpers of dlckpt-run's messages.
#ifndef DLCKPT_COORDINATOR_TEXT_H_
#define DLCKPT_COORDINATOR_TEXT_H_

#include <cstdio>
#include <string>
#include <vector>

namespace dlckpt::run {

// "a<sep>b<sep>c".
inline std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

// The non-empty items of `s` between `sep`s.
inline std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(sep, start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// `v` with `digits` decimals.
inline std::string Fixed(double v, int digits = 2) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace dlckpt::run

#endif  // DLCKPT_COORDINATOR_TEXT_H_

#include "dlckpt/base/units.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>

namespace dlckpt {

Result<uint64_t> ParseSize(std::string_view text) {
  auto bad = [&] {
    return Status::InvalidArgument("invalid size '" + std::string(text) +
                                   "' (want a number with optional K, M, G or T suffix)");
  };
  size_t i = 0;
  uint64_t v = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    uint64_t d = static_cast<uint64_t>(text[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return bad();
    v = v * 10 + d;
    ++i;
  }
  if (i == 0) return bad();
  std::string_view suffix = text.substr(i);
  int shift = 0;
  if (!suffix.empty()) {
    switch (std::toupper(static_cast<unsigned char>(suffix[0]))) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      case 'T': shift = 40; break;
      case 'B': shift = 0; break;
      default: return bad();
    }
    std::string_view rest = suffix.substr(1);
    if (suffix[0] == 'B' || suffix[0] == 'b') {
      if (!rest.empty()) return bad();
    } else if (!(rest.empty() || rest == "B" || rest == "iB" || rest == "b")) {
      return bad();
    }
  }
  if (shift > 0 && v > (UINT64_MAX >> shift)) return bad();
  return v << shift;
}

std::string FormatSize(uint64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[u]);
  }
  return buf;
}

bool EnvSwitchOn(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return true;
  std::string t(v);
  for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return !(t == "0" || t == "off" || t == "no" || t == "false");
}

}  // namespace dlckpt

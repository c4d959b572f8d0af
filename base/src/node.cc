// Node identity: see dlckpt/base/node.h.
#include "dlckpt/base/node.h"

#include <sys/utsname.h>

#include <cstdlib>

namespace dlckpt {

std::string HostName() {
  struct utsname u {};
  if (uname(&u) != 0 || u.nodename[0] == '\0') return "localhost";
  return u.nodename;
}

std::string NodeNameFrom(std::string_view raw) {
  std::string out;
  for (char c : raw) {
    if (out.size() == kMaxNodeName) break;
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    out += ok ? c : '_';
  }
  return out.empty() ? "localhost" : out;
}

std::string NodeFromEnv(const char* dlckpt_node) {
  return NodeNameFrom(dlckpt_node != nullptr && *dlckpt_node != '\0' ? std::string_view(dlckpt_node)
                                                                    : HostName());
}

std::string ThisNode() { return NodeFromEnv(std::getenv("DLCKPT_NODE")); }

}  // namespace dlckpt

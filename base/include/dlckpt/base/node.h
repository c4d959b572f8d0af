// dlckpt/base/node.h — a node's identity: the one rule by which every
// component (libintercept, the codec, dlckpt-fuse, dlckpt-run, the tools)
// names the node it runs on. Two components that disagree about a node's
// name would not find each other's stores during a recovery, so nothing else
// computes it.
//
// Rule (docs/design.md, "Node identity"): $DLCKPT_NODE if set and non-empty,
// else the host name; either is passed through NodeNameFrom, which keeps
// [A-Za-z0-9._-], replaces every other byte with '_' and keeps at most
// kMaxNodeName bytes; an empty result is "localhost". The result is always a
// valid node for StoreName (dlckpt/base/names.h).
// Thread safety: all functions are reentrant.
#ifndef DLCKPT_BASE_NODE_H_
#define DLCKPT_BASE_NODE_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace dlckpt {

inline constexpr size_t kMaxNodeName = 63;

// The host name as the kernel reports it (uname's nodename), unmodified;
// "localhost" when it cannot be read. For messages and for launchers that
// need the raw name, never for store names.
std::string HostName();

// `raw` under the node-name rule above.
std::string NodeNameFrom(std::string_view raw);

// The rule given the value of $DLCKPT_NODE (null or empty: unset), for
// callers that read their environment through an injected function.
std::string NodeFromEnv(const char* dlckpt_node);
// This process's node: NodeFromEnv(getenv("DLCKPT_NODE")).
std::string ThisNode();

}  // namespace dlckpt

#endif  // DLCKPT_BASE_NODE_H_

// dlckpt/memfs/store_tool.h — the command line of dlckpt-store and its
// first-level commands, the ones on memfs stores: list, ls, cat, stat,
// verify, rm, create, put, commit.
//
// The dlckpt-store executable is built where the commands of other levels
// are visible too (persist/: drained, verify-drained, drain): it passes them
// to Main as a table, with the whole tool's usage text. Exit statuses: 0 on
// success, 1 on an error (Fail), 2 on a usage error (Usage).
#ifndef DLCKPT_MEMFS_STORE_TOOL_H_
#define DLCKPT_MEMFS_STORE_TOOL_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dlckpt/base/status.h"
#include "dlckpt/memfs/memfs.h"

namespace dlckpt::memfs::tool {

// A parsed dlckpt-store command line: every option of the tool, whichever
// command uses it.
struct Args {
  std::string cmd;               // the command
  std::vector<std::string> pos;  // its positional arguments
  uint64_t epoch = 0;            // --epoch (0: not given)
  StoreOptions create;           // create's options; .job and .node are --job and --node
  bool ack = true;               // false with --no-ack
  uint64_t ranks = 0;            // --ranks (0: not given)
  uint64_t bandwidth = 0;        // --bandwidth in bytes per second (0: unlimited)
};

// A command of the tool: its name and what runs it, returning the exit status.
struct Command {
  std::string_view name;
  int (*run)(const Args&);
};

// "dlckpt-store: <s>" on standard error; returns 1.
int Fail(const Status& s);

// "dlckpt-store: <why>" and a pointer to --help on standard error; returns 2.
int Usage(const std::string& why);

// Runs dlckpt-store: parses argv; -h or --help prints `usage` on standard
// output and returns 0; an unknown option, a bad option value or no command
// is a usage error. Then runs the first-level command named, else the one of
// `extra` with that name; any other command is a usage error. Returns the
// exit status.
int Main(int argc, char** argv, std::string_view usage, std::span<const Command> extra);

}  // namespace dlckpt::memfs::tool

#endif  // DLCKPT_MEMFS_STORE_TOOL_H_

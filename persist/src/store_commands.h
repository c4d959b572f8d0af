// dlckpt-store's second-level commands, on epochs drained to a persistence
// directory: drained, verify-drained, drain. Each takes the tool's parsed
// command line and returns its exit status (dlckpt/memfs/store_tool.h);
// store_main.cc gives them to the tool's Main.
#ifndef DLCKPT_PERSIST_STORE_COMMANDS_H_
#define DLCKPT_PERSIST_STORE_COMMANDS_H_

#include "dlckpt/memfs/store_tool.h"

namespace dlckpt::persist::tool {

// drained DIR: the epochs drained under DIR, DIR/<job> or one epoch
// directory, newest first, with their state (all of them, or --epoch E).
int CmdDrained(const memfs::tool::Args& a);

// verify-drained DIR: reads every file of the epoch a restart would use
// (or --epoch E) and checks it against the manifest.
int CmdVerifyDrained(const memfs::tool::Args& a);

// drain DIR --job J --ranks N: this node's stores of job J to DIR/J/epoch.E.
int CmdDrain(const memfs::tool::Args& a);

}  // namespace dlckpt::persist::tool

#endif  // DLCKPT_PERSIST_STORE_COMMANDS_H_

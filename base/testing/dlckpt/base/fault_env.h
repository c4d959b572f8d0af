// dlckpt/base/fault_env.h — an Env for tests that fails one chosen step of
// the file interface, after LevelDB's FaultInjectionTestEnv.
//
// Every call of Env's file interface (OpenDir, OpenDirAt, OpenAt, Write,
// Read, Sync, Close, RenameAt, UnlinkAt, Stat, StatAt, ListDir) is a step.
// Armed with a fault and a number n, the n-th step the fault applies to (0
// based) fails:
//   kNoSpace     a Write: ENOSPC, nothing written
//   kShortWrite  a Write: half the bytes written, then ENOSPC at the next
//   kIO          any step: EIO, nothing done
//   kSyncFails   a Sync: EIO (the data may or may not be durable)
//   kRenameFails a RenameAt: EIO, nothing renamed
//   kCrash       any step: not done, and every later step fails with EIO (the
//                process is gone); DropUnsynced() then undoes what a power
//                loss would: bytes written to a file after its last Sync, and
//                entries created or renamed into a directory after its last
//                Sync (removed, with what is below them).
// Everything else is forwarded to Env::Default(). Not thread-safe: one test
// thread drives it.
#ifndef DLCKPT_BASE_FAULT_ENV_H_
#define DLCKPT_BASE_FAULT_ENV_H_

#include <map>
#include <set>
#include <string>

#include "dlckpt/base/env.h"

namespace dlckpt::testing {

class FaultEnv final : public Env {
 public:
  enum class Fault { kNone, kNoSpace, kShortWrite, kIO, kSyncFails, kRenameFails, kCrash };
  static const char* Name(Fault f);

  // Fails the `n`-th step `f` applies to; kNone disarms. Resets the counts.
  void Arm(Fault f, int n);
  // Whether the armed fault fired, and how many steps it applied to so far
  // (after a run without firing: the number of places it could have fired).
  bool fired() const { return fired_; }
  int applicable() const { return applicable_; }
  // After kCrash: truncates and removes what was not durable (see above).
  void DropUnsynced();

  Result<File> OpenDir(const std::string& path) override;
  Result<File> OpenDirAt(const File& dir, const std::string& name, bool create, mode_t mode) override;
  Result<File> OpenAt(const File& dir, const std::string& name, int flags, mode_t mode) override;
  Result<size_t> Write(const File& f, const void* data, size_t len) override;
  Result<size_t> Read(const File& f, void* buf, size_t len) override;
  Status Sync(const File& f) override;
  Status Close(File& f) override;
  Status RenameAt(const File& dir, const std::string& from, const std::string& to) override;
  Status UnlinkAt(const File& dir, const std::string& name, bool directory) override;
  Result<struct stat> Stat(const File& f) override;
  Result<struct stat> StatAt(const File& dir, const std::string& name) override;
  Result<std::vector<std::string>> ListDir(const File& dir) override;

 private:
  enum class Kind { kWrite, kSync, kRename, kOther };
  // Counts a step of `kind`; the error to fail it with, or OK to go on.
  Status Step(Kind kind, const std::string& what);
  void Created(const File& dir, const std::string& name);

  Env* base_ = Env::Default();
  Fault fault_ = Fault::kNone;
  int target_ = -1;
  int applicable_ = 0;
  bool fired_ = false;
  bool crashed_ = false;
  bool short_pending_ = false;
  // Durable size of each file written since it was opened (path -> bytes).
  std::map<std::string, off_t> synced_;
  std::set<std::string> dirty_;
  // Entries created in each directory since its last Sync (dir path -> names).
  std::map<std::string, std::set<std::string>> fresh_;
};

}  // namespace dlckpt::testing

#endif  // DLCKPT_BASE_FAULT_ENV_H_

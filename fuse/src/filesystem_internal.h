// filesystem_internal.h — what the files of the Filesystem class share
// (internal to the fuse module; see filesystem.h for the class contract).
//
// The class is split by concern: filesystem.cc (construction, the operations
// table, the shared Locked helpers, init), filesystem_entries.cc (lookup,
// attributes, the namespace and directory operations), filesystem_io.cc
// (open, read, write, flush, release, fsync on store descriptors) and
// filesystem_control.cc (the control directory .dlckpt and its files). Every
// file keeps the lock order written in filesystem.h, and every operation in
// them ends in exactly one fuse_reply_* (fuse_reply_none for forget).
#ifndef DLCKPT_FUSE_FILESYSTEM_INTERNAL_H_
#define DLCKPT_FUSE_FILESYSTEM_INTERNAL_H_

#include <fuse_lowlevel.h>

#include <cstdint>
#include <ctime>
#include <string>

#include "filesystem.h"

namespace dlckpt::fusefs {

// Entry and attribute validity. Only this mount changes the store (it holds
// the owner lock), so the kernel's caches stay right for long.
inline constexpr double kTimeout = 60.0;

// The control directory and its files live outside the store's node ids
// (store node ids are memfs inode numbers + 1, far below 2^63).
inline constexpr fuse_ino_t kControlBase = fuse_ino_t{1} << 63;
inline constexpr fuse_ino_t kControlDirId = kControlBase | 1;
inline constexpr fuse_ino_t kCheckpointId = kControlBase | 2;
inline constexpr fuse_ino_t kStatusId = kControlBase | 3;
inline constexpr fuse_ino_t kEpochId = kControlBase | 4;

inline timespec ToTimespec(int64_t ns) {
  timespec t{};
  t.tv_sec = static_cast<time_t>(ns / 1000000000);
  t.tv_nsec = static_cast<long>(ns % 1000000000);
  return t;
}

inline timespec Now() {
  timespec t{};
  clock_gettime(CLOCK_REALTIME, &t);
  return t;
}

// The handle (fuse_file_info::fh) of an open control file: created by
// ControlOpen, freed by Release.
struct Filesystem::ControlHandle {
  fuse_ino_t ino;
  std::string text;  // what reads return: the status, or the last trigger's result
};

}  // namespace dlckpt::fusefs

#endif  // DLCKPT_FUSE_FILESYSTEM_INTERNAL_H_

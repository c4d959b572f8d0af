// dlckpt-ctl: control a dlckpt-fuse mount from the shell.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "dlckpt/fuse_mount.h"

namespace {

constexpr const char* kUsage = R"(usage: dlckpt-ctl COMMAND MOUNTPOINT

Controls a dlckpt-fuse mount.

commands:
  checkpoint MOUNTPOINT   push files still open to the store (syncfs), commit the
                          store's working files as a new epoch, have it
                          acknowledged, and print the epoch number. Refused
                          once if syncfs reports a write error since the last
                          sync (e.g. ENOSPC during writeback)
  status MOUNTPOINT       print the store's epochs, space and last checkpoint

Exit status: 0 on success, 1 if the command failed (the message names the
mount and the cause, e.g. EBUSY while another checkpoint runs), 2 on bad usage.
)";

using dlckpt::fusefs::kCheckpointFile;
using dlckpt::fusefs::kControlDir;
using dlckpt::fusefs::kStatusFile;

int Usage(const char* why) {
  std::fprintf(stderr, "dlckpt-ctl: %s\n(try dlckpt-ctl --help)\n", why);
  return 2;
}

// Opens MOUNT/.dlckpt/NAME, explaining a mount point that is not ours.
int OpenControl(const std::string& mount, const char* name, int flags) {
  std::string path = mount + "/" + kControlDir + "/" + name;
  int fd;
  do {
    fd = open(path.c_str(), flags | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      std::fprintf(stderr, "dlckpt-ctl: %s is not a dlckpt-fuse mount (no %s)\n", mount.c_str(),
                   path.c_str());
    } else {
      std::fprintf(stderr, "dlckpt-ctl: %s: %s\n", path.c_str(), std::strerror(err));
    }
  }
  return fd;
}

// Reads the whole control file from offset 0.
std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  for (off_t off = 0;;) {
    ssize_t n = pread(fd, buf, sizeof buf, off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    off += n;
  }
  return out;
}

int Checkpoint(const std::string& mount) {
  int fd = OpenControl(mount, kCheckpointFile, O_RDWR);
  if (fd < 0) return 1;
  // Files written but still open (or mapped) may hold dirty pages in the
  // kernel: push them to the store so they are part of the epoch.
  // syncfs also reports a write error not yet reported by a syncfs (e.g. a
  // full store during writeback): some data written through the mount was
  // lost, so no checkpoint is taken.
  if (syncfs(fd) != 0) {
    std::fprintf(stderr,
                 "dlckpt-ctl: checkpoint of %s not taken: syncfs reports a write error: %s "
                 "(data written through the mount since the last sync may be lost; check the "
                 "files, then checkpoint again)\n",
                 mount.c_str(), std::strerror(errno));
    close(fd);
    return 1;
  }
  static const char kCmd[] = "checkpoint\n";
  ssize_t n;
  do {
    n = write(fd, kCmd, sizeof kCmd - 1);
  } while (n < 0 && errno == EINTR);
  int err = errno;
  std::string result = ReadAll(fd);
  close(fd);
  while (!result.empty() && result.back() == '\n') result.pop_back();
  if (n != static_cast<ssize_t>(sizeof kCmd - 1)) {
    std::string why = result.rfind("error: ", 0) == 0 ? result.substr(7) : std::strerror(err);
    std::fprintf(stderr, "dlckpt-ctl: checkpoint of %s failed: %s\n", mount.c_str(), why.c_str());
    return 1;
  }
  if (result.rfind("epoch ", 0) != 0) {
    std::fprintf(stderr, "dlckpt-ctl: checkpoint of %s: unexpected answer '%s'\n", mount.c_str(),
                 result.c_str());
    return 1;
  }
  std::printf("%s\n", result.substr(6).c_str());
  return 0;
}

int PrintStatus(const std::string& mount) {
  int fd = OpenControl(mount, kStatusFile, O_RDONLY);
  if (fd < 0) return 1;
  std::string text = ReadAll(fd);
  close(fd);
  std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && (std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (argc != 3) return Usage("expected COMMAND MOUNTPOINT");
  std::string cmd = argv[1], mount = argv[2];
  if (cmd == "checkpoint") return Checkpoint(mount);
  if (cmd == "status") return PrintStatus(mount);
  return Usage(("unknown command '" + cmd + "'").c_str());
}

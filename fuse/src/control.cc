// The control interface of a mount seen from outside the daemon, and the
// coordinator socket: see dlckpt/fuse/control.h.
#include "dlckpt/fuse/control.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <charconv>
#include <cstring>
#include <map>
#include <sstream>

#include "dlckpt/fuse/mount.h"
#include "dlckpt/memfs/memfs.h"

namespace dlckpt::fusefs {
namespace {

Result<uint64_t> ParseU64(std::string_view text) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
    return Status::Error(EBADMSG, "'" + std::string(text) + "' is not a number");
  }
  return v;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

// Reads the whole control file behind `fd` from offset 0.
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

Status SendAll(int fd, const std::string& data) {
  for (size_t done = 0; done < data.size();) {
    ssize_t n = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, "send");
    done += static_cast<size_t>(n);
  }
  return Status::OK();
}

// Reads one line (without its '\n'), waiting up to timeout_ms (-1: forever).
Result<std::string> ReadLine(int fd, int timeout_ms) {
  std::string line;
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    int wait = -1;
    if (timeout_ms >= 0) {
      struct timespec now;
      clock_gettime(CLOCK_MONOTONIC, &now);
      long elapsed = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
      if (elapsed >= timeout_ms) return Status::Timeout("no complete line within " + std::to_string(timeout_ms) + " ms");
      wait = static_cast<int>(timeout_ms - elapsed);
    }
    struct pollfd p{fd, POLLIN, 0};
    int rc = poll(&p, 1, wait);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return Status::FromErrno(errno, "poll");
    if (rc == 0) continue;
    char buf[512];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, "recv");
    if (n == 0) return Status::Error(ECONNRESET, "the peer closed the connection without an answer");
    line.append(buf, static_cast<size_t>(n));
    size_t nl = line.find('\n');
    if (nl != std::string::npos) return line.substr(0, nl);
    if (line.size() > 64 * 1024) return Status::Error(EMSGSIZE, "line longer than 64 KiB");
  }
}

}  // namespace

// ---- status ----------------------------------------------------------------------

Result<MountState> ParseMountStatus(const std::string& mount, const std::string& text) {
  std::map<std::string, std::string> kv;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t colon = line.find(": ");
    if (colon == std::string::npos) continue;
    kv[line.substr(0, colon)] = line.substr(colon + 2);
  }
  auto bad = [&](const std::string& key) {
    return Status::Error(EBADMSG, "mount " + mount + ": its status has no valid '" + key +
                                      "' line (not a dlckpt-fuse mount of this version?)");
  };
  auto number = [&](const std::string& key, uint64_t* out) -> Status {
    auto it = kv.find(key);
    if (it == kv.end()) return bad(key);
    auto v = ParseU64(it->second);
    if (!v.ok()) return bad(key);
    *out = *v;
    return Status::OK();
  };
  MountState st;
  st.mount = mount;
  for (const char* key : {"store", "job", "node"}) {
    if (!kv.count(key)) return bad(key);
  }
  st.store = kv["store"];
  st.job = kv["job"];
  st.node = kv["node"];
  uint64_t v = 0;
  DLCKPT_RETURN_IF_ERROR(number("rank", &v));
  if (v > INT32_MAX) return bad("rank");
  st.rank = static_cast<int>(v);
  DLCKPT_RETURN_IF_ERROR(number("pid", &v));
  st.pid = static_cast<int>(v);
  DLCKPT_RETURN_IF_ERROR(number("acknowledged_epoch", &st.acked));
  DLCKPT_RETURN_IF_ERROR(number("pending_epoch", &st.pending));
  st.next = std::max(st.acked, st.pending) + 1;
  if (kv.count("next_epoch")) DLCKPT_RETURN_IF_ERROR(number("next_epoch", &st.next));
  st.coordinated = kv["checkpoint_mode"] == "coordinated";
  return st;
}

// ---- MountControl ------------------------------------------------------------------

Result<int> MountControl::Open(const char* name, int flags) {
  std::string path = mount_ + "/" + kControlDir + "/" + name;
  int fd;
  do {
    fd = open(path.c_str(), flags | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd >= 0) return fd;
  int err = errno;
  if (err == ENOENT || err == ENOTDIR) {
    return Status::Error(err, "mount " + mount_ + " is not a dlckpt-fuse mount (no " + path + ")");
  }
  if (err == ENOTCONN) {
    return Status::Error(err, "mount " + mount_ + ": its dlckpt-fuse daemon died (run fusermount3 -u " +
                                  mount_ + ")");
  }
  return Status::FromErrno(err, path);
}

Status MountControl::Sync() {
  DLCKPT_ASSIGN_OR_RETURN(int fd, Open(kStatusFile, O_RDONLY));
  int rc = syncfs(fd);
  int err = errno;
  close(fd);
  if (rc != 0) {
    return Status::Error(err, "mount " + mount_ + ": syncfs reports a write error: " + std::strerror(err) +
                                  " (data written through the mount since the last sync may be lost; "
                                  "check the files, then checkpoint again)");
  }
  return Status::OK();
}

Result<MountState> MountControl::State() {
  DLCKPT_ASSIGN_OR_RETURN(int fd, Open(kStatusFile, O_RDONLY));
  std::string text = ReadAll(fd);
  close(fd);
  return ParseMountStatus(mount_, text);
}

Result<uint64_t> MountControl::Write(const char* file, const std::string& command) {
  DLCKPT_ASSIGN_OR_RETURN(int fd, Open(file, O_RDWR));
  std::string line = command + "\n";
  ssize_t n;
  do {
    n = write(fd, line.data(), line.size());
  } while (n < 0 && errno == EINTR);
  int err = errno;
  std::string answer = Trim(ReadAll(fd));
  close(fd);
  if (n != static_cast<ssize_t>(line.size())) {
    std::string why = answer.rfind("error: ", 0) == 0 ? answer.substr(7) : std::strerror(err);
    return Status::Error(n < 0 && err > 0 ? err : EIO, "mount " + mount_ + ": " + command + ": " + why);
  }
  if (answer.rfind("epoch ", 0) == 0) {
    auto e = ParseU64(answer.substr(6));
    if (e.ok()) return *e;
  }
  return Status::Error(EPROTO, "mount " + mount_ + ": " + command + ": unexpected answer '" + answer + "'");
}

Result<uint64_t> MountControl::Trigger() {
  DLCKPT_RETURN_IF_ERROR(Sync());
  return Write(kCheckpointFile, "checkpoint");
}

Result<uint64_t> MountControl::Command(const std::string& verb, uint64_t epoch) {
  return Write(kEpochFile, verb + " " + std::to_string(epoch));
}

// ---- coordinator socket --------------------------------------------------------------

namespace {

Result<sockaddr_un> SocketAddress(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path) {
    return Status::Error(ENAMETOOLONG, "socket path '" + path + "' is empty or longer than " +
                                           std::to_string(sizeof addr.sun_path - 1) + " bytes");
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

}  // namespace

Result<uint64_t> AskCoordinator(const std::string& socket_path, const std::string& store) {
  auto ctx = [&](const Status& s) { return s.Prefixed("coordinator " + socket_path); };
  auto addr = SocketAddress(socket_path);
  if (!addr.ok()) return ctx(addr.status());
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno(errno, "socket");
  int rc;
  do {
    rc = connect(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr);
  } while (rc < 0 && errno == EINTR);
  if (rc < 0) {
    int err = errno;
    close(fd);
    return Status::Error(err, "coordinator " + socket_path + ": " + std::strerror(err) +
                                  " (is the dlckpt-ctl run of this job still running?)");
  }
  Status sent = SendAll(fd, "checkpoint " + store + "\n");
  Result<std::string> line = sent.ok() ? ReadLine(fd, -1) : Result<std::string>(sent);
  close(fd);
  if (!line.ok()) return ctx(line.status());
  if (line->rfind("epoch ", 0) == 0) {
    auto e = ParseU64(line->substr(6));
    if (e.ok()) return *e;
  }
  if (line->rfind("error ", 0) == 0) {
    std::string rest = line->substr(6);
    size_t sp = rest.find(' ');
    auto code = ParseU64(rest.substr(0, sp));
    std::string msg = sp == std::string::npos ? "" : rest.substr(sp + 1);
    return Status::Error(code.ok() && *code > 0 && *code < 4096 ? static_cast<int>(*code) : EIO, msg);
  }
  return Status::Error(EPROTO, "coordinator " + socket_path + ": unexpected answer '" + *line + "'");
}

Result<std::unique_ptr<CoordinatorSocket>> CoordinatorSocket::Listen(const std::string& path) {
  DLCKPT_ASSIGN_OR_RETURN(sockaddr_un addr, SocketAddress(path));
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno(errno, "socket");
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    int err = errno;
    close(fd);
    return Status::FromErrno(err, "bind " + path);
  }
  if (chmod(path.c_str(), 0600) != 0 || listen(fd, 8) != 0) {
    int err = errno;
    close(fd);
    unlink(path.c_str());
    return Status::FromErrno(err, "listen on " + path);
  }
  return std::unique_ptr<CoordinatorSocket>(new CoordinatorSocket(fd, path));
}

CoordinatorSocket::~CoordinatorSocket() {
  close(fd_);
  unlink(path_.c_str());
}

Result<int> CoordinatorSocket::Accept(int timeout_ms, std::string* store) {
  int conn;
  do {
    conn = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
  } while (conn < 0 && errno == EINTR);
  if (conn < 0) return Status::FromErrno(errno, "accept on " + path_);
  auto line = ReadLine(conn, timeout_ms);
  if (!line.ok()) {
    close(conn);
    return line.status().Prefixed("request on " + path_);
  }
  if (line->rfind("checkpoint ", 0) != 0) {
    Answer(conn, Status::Error(EPROTO, "unknown request '" + *line + "'"));
    return Status::Error(EPROTO, "request on " + path_ + ": unknown request '" + *line + "'");
  }
  *store = line->substr(11);
  return conn;
}

void CoordinatorSocket::Answer(int conn, const Result<uint64_t>& result) {
  std::string line;
  if (result.ok()) {
    line = "epoch " + std::to_string(*result) + "\n";
  } else {
    std::string msg = result.status().message();
    for (char& c : msg) {
      if (c == '\n') c = ' ';
    }
    line = "error " + std::to_string(result.status().code() > 0 ? result.status().code() : EIO) + " " + msg + "\n";
  }
  (void)SendAll(conn, line);
  close(conn);
}

// ---- the trigger of a coordinated mount ------------------------------------------------

Result<uint64_t> CoordinatedCheckpointer::Checkpoint(memfs::Store& store) {
  if (coordinator_.empty()) {
    return Status::Error(EPERM, "store " + store.name() +
                                    ": this mount's checkpoints are coordinated (--checkpoint "
                                    "coordinated): they are taken for the whole job by "
                                    "`mpiexec ... dlckpt-ctl checkpoint-all`, or on request under "
                                    "`dlckpt-ctl run`");
  }
  return AskCoordinator(coordinator_, store.name());
}

}  // namespace dlckpt::fusefs

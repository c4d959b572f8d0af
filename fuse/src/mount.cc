// RunMount: (fork), session, store, mount, loop, unmount — in that order,
// with the cleanup in reverse order.
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "dlckpt/base/version.h"
#include "dlckpt/fuse/mount.h"
#include "filesystem.h"

namespace dlckpt::fusefs {
namespace {

// Attaches to `name` as its owner, or creates it if it does not exist.
Result<std::unique_ptr<memfs::Store>> OpenStore(const MountOptions& o, bool* created) {
  *created = false;
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto attached = memfs::Store::Attach(o.store, memfs::AttachMode::kOwner);
    if (attached.ok()) {
      if (o.create_geometry_given) {
        std::fprintf(stderr,
                     "dlckpt-fuse: store %s exists; --capacity/--block-size/--max-files/--compress ignored\n",
                     o.store.c_str());
      }
      return attached;
    }
    if (attached.status().code() == EBUSY) {
      return Status::Busy("store " + o.store +
                          " is owned by another live process (a rank, or another dlckpt-fuse)");
    }
    if (attached.status().code() != ENOENT) return attached.status();
    auto made = memfs::Store::Create(o.store, o.create);
    if (made.ok()) {
      *created = true;
      return made;
    }
    if (made.status().code() != EEXIST) return made.status();
    // Created by someone else meanwhile: attach to it.
  }
  return Status::Busy("store " + o.store + " appears and disappears; not serving it");
}

struct ArgsDeleter {
  void operator()(fuse_args* a) const { fuse_opt_free_args(a); }
};
struct SessionDeleter {
  void operator()(fuse_session* se) const { fuse_session_destroy(se); }
};

}  // namespace

std::string VersionString() {
  return std::string("dlckpt-fuse ") + DLCKPT_VERSION + " (libfuse " + fuse_pkgversion() + ")";
}

void PrintMountHelp() {
  std::fputs(MountUsage().c_str(), stdout);
  std::printf("\nlibfuse mount options:\n");
  std::fflush(stdout);
  fuse_lowlevel_help();
}

namespace {

// Tells the waiting parent (if any) that the mount is up, then detaches from
// the terminal as a daemon does.
void Detach(int ready_fd) {
  if (ready_fd < 0) return;
  char ok = '0';
  ssize_t n;
  do {
    n = write(ready_fd, &ok, 1);
  } while (n < 0 && errno == EINTR);
  close(ready_fd);
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    dup2(null, STDIN_FILENO);
    dup2(null, STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
    if (null > STDERR_FILENO) close(null);
  }
  if (chdir("/") != 0) {
    // Staying in the current directory is harmless.
  }
}

// Store, session, mount, loop, unmount; `ready_fd` >= 0 is told when the
// mount is up (see Detach).
Status Serve(const MountOptions& o, std::unique_ptr<Checkpointer> checkpointer, int ready_fd) {
  // libfuse's part of the command line. Our defaults come first so that the
  // user's -o options override them.
  std::string fuse_opts = "default_permissions,fsname=dlckpt:" + o.store.substr(1) +
                          ",subtype=dlckpt";
  for (const auto& x : o.fuse_options) fuse_opts += "," + x;
  std::vector<std::string> words = {"dlckpt-fuse", "-o", fuse_opts, "-f"};
  if (o.debug) words.emplace_back("-d");
  if (o.single_thread) words.emplace_back("-s");
  words.push_back(o.mountpoint);
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  fuse_args args_storage = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  std::unique_ptr<fuse_args, ArgsDeleter> args(&args_storage);
  fuse_cmdline_opts cmdline{};
  if (fuse_parse_cmdline(args.get(), &cmdline) != 0) {
    return Status::InvalidArgument("bad mount options '-o " + fuse_opts + "' (see above)");
  }
  std::unique_ptr<char, decltype(&std::free)> mountpoint(cmdline.mountpoint, &std::free);

  FsConfig config;
  config.cache = o.cache;
  config.debug = o.debug;
  config.checkpoint = o.checkpoint;
  Filesystem fs(checkpointer.get(), config);
  std::unique_ptr<fuse_session, SessionDeleter> se(
      fuse_session_new(args.get(), &Filesystem::Ops(), sizeof(fuse_lowlevel_ops), &fs));
  if (!se) {
    return Status::InvalidArgument("bad mount options '-o " + fuse_opts + "' (see above)");
  }

  // The store is created (and pre-faulted) in the serving process itself:
  // page mappings do not survive a fork.
  bool created = false;
  DLCKPT_ASSIGN_OR_RETURN(std::unique_ptr<memfs::Store> store, OpenStore(o, &created));
  fs.SetStore(store.get());
  for (const auto& warning : fs.MaterializeDirectories()) {
    std::fprintf(stderr, "dlckpt-fuse: store %s: warning: %s\n", o.store.c_str(), warning.c_str());
  }
  auto abandon = [&](Status why) {
    store.reset();
    if (created) (void)memfs::Store::Destroy(o.store);
    return why;
  };
  if (fuse_set_signal_handlers(se.get()) != 0) {
    return abandon(Status::IOError("cannot install signal handlers"));
  }
  if (fuse_session_mount(se.get(), mountpoint.get()) != 0) {
    fuse_remove_signal_handlers(se.get());
    return abandon(Status::IOError("cannot mount store " + o.store + " on " + o.mountpoint +
                                   " (see above)"));
  }
  if (o.debug || !o.store_named) {
    std::fprintf(stderr, "dlckpt-fuse: serving store %s on %s\n", o.store.c_str(),
                 mountpoint.get());
  }
  Detach(ready_fd);
  int ret;
  if (cmdline.singlethread) {
    ret = fuse_session_loop(se.get());
  } else {
    fuse_loop_config* loop = fuse_loop_cfg_create();
    fuse_loop_cfg_set_clone_fd(loop, static_cast<unsigned int>(cmdline.clone_fd));
    // UINT_MAX means "not given" (libfuse 3.14 would log it as invalid).
    if (cmdline.max_idle_threads != UINT_MAX) {
      fuse_loop_cfg_set_idle_threads(loop, cmdline.max_idle_threads);
    }
    fuse_loop_cfg_set_max_threads(loop, cmdline.max_threads);
    ret = fuse_session_loop_mt(se.get(), loop);
    fuse_loop_cfg_destroy(loop);
  }
  fuse_session_unmount(se.get());
  fuse_remove_signal_handlers(se.get());
  se.reset();
  store.reset();  // saves the working files for the next owner
  // A positive value is the signal that ended the loop: a clean shutdown.
  if (ret < 0) return Status::FromErrno(-ret, "FUSE session on " + o.mountpoint);
  return Status::OK();
}

// The daemon's report to its parent: '0', or '1' + errno (4 bytes) + message.
void ReportFailure(int fd, const Status& s) {
  std::string msg = "1";
  int32_t code = s.code();
  msg.append(reinterpret_cast<const char*>(&code), sizeof code);
  msg += s.message();
  for (size_t done = 0; done < msg.size();) {
    ssize_t n = write(fd, msg.data() + done, msg.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
}

}  // namespace

Status RunMount(const MountOptions& o, std::unique_ptr<Checkpointer> checkpointer) {
  DLCKPT_RETURN_IF_ERROR(CheckMountPoint(o.mountpoint));
  if (o.foreground) return Serve(o, std::move(checkpointer), -1);

  // Daemon: the child serves; this process waits until the mount is up (or
  // failed) so that its exit status and messages tell the caller.
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe");
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close(pipefd[0]);
    close(pipefd[1]);
    return Status::FromErrno(err, "fork");
  }
  if (pid == 0) {
    close(pipefd[0]);
    setsid();
    Status s = Serve(o, std::move(checkpointer), pipefd[1]);
    if (!s.ok()) ReportFailure(pipefd[1], s);  // a no-op once detached (pipe closed)
    _exit(s.ok() ? 0 : 1);
  }
  close(pipefd[1]);
  std::string answer;
  char buf[4096];
  for (;;) {
    ssize_t n = read(pipefd[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    answer.append(buf, static_cast<size_t>(n));
    if (answer[0] == '0') break;
  }
  close(pipefd[0]);
  if (!answer.empty() && answer[0] == '0') return Status::OK();
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (answer.size() >= 1 + sizeof(int32_t)) {
    int32_t code;
    std::memcpy(&code, answer.data() + 1, sizeof code);
    return Status::Error(code > 0 ? code : EIO, answer.substr(1 + sizeof code));
  }
  return Status::IOError("the dlckpt-fuse daemon for " + o.mountpoint +
                         " exited before the mount was up (status " + std::to_string(status) + ")");
}

}  // namespace dlckpt::fusefs

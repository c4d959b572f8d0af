// dlckpt-fuse's command line, mount point checks and the local checkpointer.
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "dlckpt/base/cli.h"
#include "dlckpt/base/names.h"
#include "dlckpt/base/node.h"
#include "dlckpt/base/strings.h"
#include "dlckpt/fuse/mount.h"
#include "dlckpt/base/units.h"

namespace dlckpt::fusefs {

namespace {
// The job of a store named from neither --store nor --job nor $DLCKPT_JOB:
// libintercept's default ($DLCKPT_JOB unset), so both serve the same store.
constexpr const char* kDefaultJob = "local";
}  // namespace

Result<uint64_t> LocalCheckpointer::Checkpoint(memfs::Store& store) {
  DLCKPT_ASSIGN_OR_RETURN(uint64_t epoch, store.Commit());
  Status s = store.Acknowledge(epoch);
  if (!s.ok()) {
    (void)store.AbortPending();
    return s;
  }
  return epoch;
}

std::unique_ptr<Checkpointer> MakeCheckpointer(const MountOptions& options) {
  if (options.checkpoint == CheckpointMode::kCoordinated) {
    return std::make_unique<CoordinatedCheckpointer>(options.coordinator);
  }
  return std::make_unique<LocalCheckpointer>();
}

std::string MountUsage() {
  return R"(usage: dlckpt-fuse MOUNTPOINT [OPTIONS]

Serves a memfs store (this node's in-memory checkpoint files) as a FUSE file
system, so unmodified programs can write checkpoints to memory. The store is
created if it does not exist, else attached as its owner (a restarted mount,
or a store rebuilt by recovery). Unmount with `fusermount3 -u MOUNTPOINT` or
SIGTERM/SIGINT; the store keeps its files for the next owner.

Checkpoint: `dlckpt-ctl checkpoint MOUNTPOINT`, or write "1" to
MOUNTPOINT/.dlckpt/checkpoint (close or fsync your files first). The epoch
state is in MOUNTPOINT/.dlckpt/status.

checkpoints:
  --checkpoint MODE, -o checkpoint=MODE
                          local (default): a trigger commits and acknowledges
                            this store alone, without parity
                          coordinated: the store is one of a job's; epochs
                            are committed, encoded by the codec and
                            acknowledged for all the job's mounts at once by
                            `mpiexec ... dlckpt-ctl checkpoint-all` (or under
                            `dlckpt-ctl run`) through MOUNTPOINT/.dlckpt/epoch;
                            a trigger asks --coordinator, or fails with EPERM
  --coordinator SOCKET, -o coordinator=SOCKET
                          where a trigger asks for a job-wide checkpoint (the
                          socket of `dlckpt-ctl run`); implies coordinated

store selection (the store is /dlckpt.JOB.NODE.rRANK unless --store is given):
  --store NAME, -o store=NAME   serve the store NAME (e.g. /dlckpt.j1.n0.r0)
  --job JOB, -o job=JOB         job id (default: $DLCKPT_JOB, else local, as
                                the preload library)
  --node NODE, -o node=NODE     node name (default: $DLCKPT_NODE, else the host name)
  --rank R, -o rank=R           rank (default: $DLCKPT_RANK, else 0)

a new store (ignored when the store exists):
  --capacity N, -o capacity=N       file data bytes, all epochs (default 256M)
  --block-size N, -o block_size=N   block size (default 64K)
  --max-files N, -o max_files=N     files and directories (default: one per
                                    32 KiB of capacity, at least 1024)
  --compress none|lz4, -o compress=MODE
                                    LZ4 compression of the checkpoint data
                                    (default: $DLCKPT_COMPRESS, else none;
                                    see memfs.h)

mount:
  -f                      stay in the foreground
  -d                      debug: log every request (implies -f)
  -s                      single-threaded
  -o cache=MODE           how file data moves (the writeback cache and 1 MiB
                          writes are negotiated in every mode):
                          auto (default): write-only opens that create or
                            truncate (cp, dd, tar x, shell >, fopen "w")
                            bypass the page cache: one copy per write(), and
                            a full store fails write() with ENOSPC; other
                            opens use the page cache with writeback (mmap
                            works; a full store shows as ENOSPC from fsync()
                            and close())
                          writeback: every open uses the page cache
                          direct: no open uses it (no shared writable mmap)
  -o max_threads=N, -o max_idle_threads=N, -o clone_fd, -o allow_other,
  and the other libfuse mount options below
  -h, --help              this help
  -V, --version           version
)";
}

namespace {

bool ValidStoreName(std::string_view name) {
  if (name.size() < 2 || name[0] != '/' || name.size() > NAME_MAX) return false;
  return std::all_of(name.begin() + 1, name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

Result<uint64_t> ParseCount(std::string_view what, std::string_view text, uint64_t max) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty() || v > max) {
    return Status::InvalidArgument("bad " + std::string(what) + " '" + std::string(text) +
                                   "' (want an integer in [0, " + std::to_string(max) + "])");
  }
  return v;
}

struct Parser {
  MountOptions o;
  std::optional<std::string> job, node, rank;
  bool checkpoint_given = false;
  bool compress_given = false;

  // One option given as --name VALUE, --name=VALUE or -o name=VALUE.
  Status Apply(std::string_view name, std::string_view value) {
    std::string v(value);
    if (name == "store") {
      std::string s = (!v.empty() && v[0] == '/') ? v : "/" + v;
      if (!ValidStoreName(s)) {
        return Status::InvalidArgument("bad store name '" + v +
                                       "' (want [/]NAME with NAME of [A-Za-z0-9._-])");
      }
      o.store = s;
    } else if (name == "job") {
      job = v;
    } else if (name == "node") {
      node = v;
    } else if (name == "rank") {
      rank = v;
    } else if (name == "capacity") {
      auto size = ParseSize(v);
      if (!size.ok() || *size == 0) {
        return Status::InvalidArgument("bad capacity '" + v + "' (want e.g. 256M, 2G)");
      }
      o.create.capacity = *size;
      o.create_geometry_given = true;
    } else if (name == "block-size" || name == "block_size") {
      auto size = ParseSize(v);
      if (!size.ok() || *size > (16u << 20)) {
        return Status::InvalidArgument("bad block size '" + v + "' (want 4K to 16M)");
      }
      o.create.block_size = static_cast<uint32_t>(*size);
      o.create_geometry_given = true;
    } else if (name == "compress") {
      auto c = memfs::ParseCompression(v);
      if (!c.ok()) return Status::InvalidArgument("bad compression '" + v + "' (want none or lz4)");
      o.create.compression = *c;
      compress_given = true;
      o.create_geometry_given = true;
    } else if (name == "checkpoint") {
      checkpoint_given = true;
      if (v == "local") {
        o.checkpoint = CheckpointMode::kLocal;
      } else if (v == "coordinated") {
        o.checkpoint = CheckpointMode::kCoordinated;
      } else {
        return Status::InvalidArgument("bad checkpoint mode '" + v + "' (want local or coordinated)");
      }
    } else if (name == "coordinator") {
      if (v.empty() || v[0] != '/') {
        return Status::InvalidArgument("bad coordinator socket '" + v + "' (want an absolute path)");
      }
      o.coordinator = v;
    } else if (name == "max-files" || name == "max_files") {
      DLCKPT_ASSIGN_OR_RETURN(uint64_t n, ParseCount("max files", v, 1u << 20));
      o.create.max_files = static_cast<uint32_t>(n);
      o.create_geometry_given = true;
    } else {
      return Status::InvalidArgument("unknown option --" + std::string(name));
    }
    return Status::OK();
  }

  // A comma-separated -o list: ours are applied, the rest kept for libfuse.
  Status ApplyList(std::string_view list) {
    if (list.empty()) return Status::InvalidArgument("empty -o option list");
    for (std::string_view item : Split(list, ',')) {
      if (item.empty()) continue;
      size_t eq = item.find('=');
      std::string_view key = item.substr(0, eq);
      if (key == "store" || key == "job" || key == "node" || key == "rank" || key == "capacity" ||
          key == "block_size" || key == "max_files" || key == "checkpoint" || key == "compress" ||
          key == "coordinator") {
        if (eq == std::string_view::npos) {
          return Status::InvalidArgument("option -o " + std::string(key) + " needs =VALUE");
        }
        DLCKPT_RETURN_IF_ERROR(Apply(key, item.substr(eq + 1)));
      } else if (key == "cache") {
        std::string_view mode = eq == std::string_view::npos ? "" : item.substr(eq + 1);
        if (mode == "auto") {
          o.cache = CacheMode::kAuto;
        } else if (mode == "writeback") {
          o.cache = CacheMode::kWriteback;
        } else if (mode == "direct") {
          o.cache = CacheMode::kDirect;
        } else {
          return Status::InvalidArgument("bad -o cache='" + std::string(mode) +
                                         "' (want auto, writeback or direct)");
        }
      } else {
        o.fuse_options.emplace_back(item);
      }
    }
    return Status::OK();
  }
};

}  // namespace

Result<MountOptions> ParseMountArgs(int argc, const char* const* argv,
                                    const std::function<const char*(const char*)>& getenv_fn) {
  auto env = [&](const char* key) -> const char* {
    const char* v = getenv_fn ? getenv_fn(key) : std::getenv(key);
    return (v != nullptr && *v != '\0') ? v : nullptr;
  };
  Parser p;
  std::vector<std::string> positional;
  // CLI11 tokenizes; each value is applied as it is met (trigger_on_parse),
  // so a later --name or -o name= wins over an earlier one, and the first
  // bad value is the error. The help text is MountUsage() (PrintMountHelp).
  CLI::App app{"", "dlckpt-fuse"};
  app.set_help_flag();
  app.add_flag("-h,--help", p.o.help);
  app.add_flag("-V,--version", p.o.version);
  app.add_flag("-f", p.o.foreground);
  app.add_flag("-d", p.o.debug);
  app.add_flag("-s", p.o.single_thread);
  auto apply = [&p](Status s) {
    if (!s.ok()) throw CLI::ValidationError(s.message());
  };
  app.add_option_function<std::string>("-o", [&](const std::string& v) { apply(p.ApplyList(v)); })
      ->trigger_on_parse();
  struct Named {
    const char* names;
    const char* key;
  };
  for (const Named& n : {Named{"--store", "store"}, Named{"--job", "job"}, Named{"--node", "node"},
                         Named{"--rank", "rank"}, Named{"--capacity", "capacity"},
                         Named{"--block-size,--block_size", "block-size"}, Named{"--compress", "compress"},
                         Named{"--checkpoint", "checkpoint"}, Named{"--coordinator", "coordinator"},
                         Named{"--max-files,--max_files", "max-files"}}) {
    const std::string key = n.key;
    app.add_option_function<std::string>(n.names, [&, key](const std::string& v) { apply(p.Apply(key, v)); })
        ->trigger_on_parse();
  }
  app.add_option("MOUNTPOINT", positional);
  std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + std::max(argc, 1));
  DLCKPT_RETURN_IF_ERROR(cli::ParseArgs(app, args));
  if (p.o.debug) p.o.foreground = true;
  MountOptions& o = p.o;
  if (o.help || o.version) return std::move(o);
  if (!o.coordinator.empty()) {
    if (p.checkpoint_given && o.checkpoint == CheckpointMode::kLocal) {
      return Status::InvalidArgument("--coordinator needs --checkpoint coordinated, not local");
    }
    o.checkpoint = CheckpointMode::kCoordinated;
  }
  if (positional.size() != 1) {
    return Status::InvalidArgument(positional.empty()
                                       ? "no MOUNTPOINT given"
                                       : "more than one MOUNTPOINT given ('" + positional[0] +
                                             "', '" + positional[1] + "')");
  }
  o.mountpoint = positional[0];

  // Identity: explicit, else environment, else defaults.
  std::string job = p.job ? *p.job : (env("DLCKPT_JOB") ? env("DLCKPT_JOB") : "");
  std::string node = p.node ? *p.node : NodeFromEnv(env("DLCKPT_NODE"));
  std::string rank_text = p.rank ? *p.rank : (env("DLCKPT_RANK") ? env("DLCKPT_RANK") : "0");
  auto rank = ParseCount(p.rank ? "rank" : "rank ($DLCKPT_RANK)", rank_text, INT32_MAX);
  if (!rank.ok()) return rank.status();
  if (!p.compress_given && env("DLCKPT_COMPRESS")) {
    auto c = memfs::ParseCompression(env("DLCKPT_COMPRESS"));
    if (!c.ok()) {
      return Status::InvalidArgument(std::string("bad $DLCKPT_COMPRESS '") + env("DLCKPT_COMPRESS") +
                                     "' (want none or lz4)");
    }
    o.create.compression = *c;
  }
  o.store_named = !o.store.empty();
  // No store and no job: the preload library's default job, so that the
  // simplest form `dlckpt-fuse MOUNTPOINT` serves this node's default store.
  if (job.empty() && !o.store_named) job = kDefaultJob;
  o.create.job = job;
  o.create.node = node;
  o.create.rank = static_cast<int>(*rank);
  if (o.store.empty()) {
    auto name = StoreName(job, node, o.create.rank);
    if (!name.ok()) return name.status();
    o.store = *name;
  }
  return std::move(o);
}

namespace {

// Undoes the octal escapes (\040 for a space) of /proc/self/mountinfo.
std::string UnescapeMountField(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

std::optional<std::string> MountedType(const std::string& real_path) {
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::string line;
  while (std::getline(mountinfo, line)) {
    // id parent major:minor root MOUNTPOINT options ... - fstype source ...
    std::istringstream fields(line);
    std::string f[5];
    for (auto& x : f) fields >> x;
    if (UnescapeMountField(f[4]) != real_path) continue;
    size_t dash = line.find(" - ");
    if (dash == std::string::npos) return std::string();
    return line.substr(dash + 3, line.find(' ', dash + 3) - dash - 3);
  }
  return std::nullopt;
}

Status CheckMountPoint(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    int err = errno;
    std::string context = "mount point " + path;
    if (err == ENOTCONN) context += " (a FUSE mount whose daemon died? try fusermount3 -u)";
    return Status::FromErrno(err, context);
  }
  if (!S_ISDIR(st.st_mode)) return Status::Error(ENOTDIR, "mount point " + path + ": not a directory");
  char real[PATH_MAX];
  if (realpath(path.c_str(), real) == nullptr) {
    return Status::FromErrno(errno, "mount point " + path);
  }
  std::optional<std::string> type = MountedType(real);
  if (!type) return Status::OK();
  struct statfs sfs {};
  if (statfs(real, &sfs) != 0 && errno == ENOTCONN) {  // stat() may answer from a cache
    return Status::Error(ENOTCONN, "mount point " + path + ": a " + *type +
                                       " mount whose daemon died (Transport endpoint is not "
                                       "connected); run fusermount3 -u " + path);
  }
  return Status::Busy("mount point " + path + ": already a mount point (" + *type + "); unmount it first");
  return Status::OK();
}

}  // namespace dlckpt::fusefs

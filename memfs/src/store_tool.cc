// dlckpt-store's command line and its first-level commands: look into (and,
// for tests and scripts, fill) memfs stores (dlckpt/memfs/store_tool.h).
#include "dlckpt/memfs/store_tool.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "dlckpt/base/env.h"
#include "dlckpt/base/names.h"
#include "dlckpt/base/units.h"

namespace dlckpt::memfs::tool {

int Fail(const Status& s) {
  std::fprintf(stderr, "dlckpt-store: %s\n", s.ToString().c_str());
  return 1;
}

int Usage(const std::string& why) {
  std::fprintf(stderr, "dlckpt-store: %s\n(try dlckpt-store --help)\n", why.c_str());
  return 2;
}

namespace {

// Damage beside what was shown (another version of the store): reported,
// and the command exits 1 even though it printed what it could.
int Warn(const Status& s) {
  std::fprintf(stderr, "dlckpt-store: warning: %s\n", s.ToString().c_str());
  return 1;
}

std::string Normalize(std::string name) { return name.empty() || name[0] == '/' ? name : "/" + name; }

std::string ModeString(uint32_t mode) {
  std::string s = S_ISDIR(mode) ? "d" : "-";
  const char* rwx = "rwxrwxrwx";
  for (int i = 0; i < 9; ++i) s += (mode & (0400 >> i)) ? rwx[i] : '-';
  return s;
}

Result<std::unique_ptr<Store>> OpenView(const std::string& name, uint64_t epoch) {
  DLCKPT_ASSIGN_OR_RETURN(auto store, Store::Attach(Normalize(name), AttachMode::kReadOnly));
  if (epoch != 0) DLCKPT_RETURN_IF_ERROR(store->View(epoch));
  return store;
}

int CmdList(const Args& a) {
  std::string prefix = a.pos.empty() ? std::string(kNameRoot) : Normalize(a.pos[0]);
  auto names = Env::Default()->ListShm(prefix);
  if (!names.ok()) return Fail(names.status());
  for (const auto& n : *names) {
    auto s = Store::Attach(n, AttachMode::kReadOnly);
    if (!s.ok()) {
      std::printf("%-40s (not a store: %s)\n", n.c_str(), s.status().message().c_str());
      continue;
    }
    StoreStats st = (*s)->stats();
    EpochState ep = (*s)->epochs();
    std::printf("%-40s job=%s node=%s rank=%d capacity=%s acked=%" PRIu64 " pending=%" PRIu64 "\n",
                n.c_str(), st.job.c_str(), st.node.c_str(), st.rank, FormatSize(st.capacity).c_str(),
                ep.acknowledged, ep.pending);
  }
  return 0;
}

int CmdLs(const Args& a) {
  if (a.pos.empty()) return Usage("ls needs STORE");
  auto store = OpenView(a.pos[0], a.epoch);
  if (!store.ok()) return Fail(store.status());
  auto files = (*store)->List(a.pos.size() > 1 ? a.pos[1] : "");
  if (!files.ok()) return Fail(files.status());
  for (const auto& f : *files) {
    std::printf("%s %12" PRIu64 " %08x %s\n", ModeString(f.mode).c_str(), f.size, f.crc32c,
                f.path.c_str());
  }
  Status slots = (*store)->CheckSlots();
  return slots.ok() ? 0 : Warn(slots);
}

int CmdCat(const Args& a) {
  if (a.pos.size() < 2) return Usage("cat needs STORE PATH");
  auto store = OpenView(a.pos[0], a.epoch);
  if (!store.ok()) return Fail(store.status());
  auto fd = (*store)->Open(a.pos[1], O_RDONLY);
  if (!fd.ok()) return Fail(fd.status());
  // Committed bytes are checked against their CRC before any is printed.
  auto verified = (*store)->VerifyFile(a.pos[1]);
  if (!verified.ok()) {
    return Fail(Status::Error(verified.status().code(),
                              verified.status().message() + "; not printing it"));
  }
  std::vector<char> buf(1 << 20);
  for (;;) {
    auto n = (*store)->Read(*fd, buf.data(), buf.size());
    if (!n.ok()) return Fail(n.status());
    if (*n == 0) break;
    size_t off = 0;
    while (off < *n) {
      ssize_t w = write(STDOUT_FILENO, buf.data() + off, *n - off);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return Fail(Status::FromErrno(errno, "write to standard output"));
      off += static_cast<size_t>(w);
    }
  }
  Status slots = (*store)->CheckSlots();
  return slots.ok() ? 0 : Warn(slots);
}

int CmdStat(const Args& a) {
  if (a.pos.empty()) return Usage("stat needs STORE");
  auto store = OpenView(a.pos[0], a.epoch);
  if (!store.ok()) return Fail(store.status());
  if (a.pos.size() > 1) {
    auto fi = (*store)->Stat(a.pos[1]);
    if (!fi.ok()) return Fail(fi.status());
    std::printf("path: %s\nsize: %" PRIu64 "\nmode: %s (%o)\nino: %" PRIu64
                "\nmtime_ns: %lld\ncrc32c: %08x\n",
                fi->path.c_str(), fi->size, ModeString(fi->mode).c_str(), fi->mode & 07777, fi->ino,
                static_cast<long long>(fi->mtime_ns), fi->crc32c);
    return 0;
  }
  StoreStats st = (*store)->stats();
  EpochState ep = (*store)->epochs();
  auto files = (*store)->List("");
  std::printf("store: %s\njob: %s\nnode: %s\nrank: %d\ncapacity: %" PRIu64 " (%s)\n"
              "block_size: %" PRIu64 "\nblocks: %" PRIu64 "\nblocks_used: %" PRIu64
              "\nmax_files: %u\nshm_bytes: %" PRIu64 "\ncompression: %s\n",
              (*store)->name().c_str(), st.job.c_str(), st.node.c_str(), st.rank, st.capacity,
              FormatSize(st.capacity).c_str(), st.block_size, st.blocks_total, st.blocks_used,
              st.max_files, st.shm_bytes, CompressionName(st.compression));
  if (st.compression != Compression::kNone) {
    std::printf("chunk_size: %u\ncompress_threshold: %.3f\n", st.chunk_size, st.compress_threshold);
  }
  std::printf("acknowledged_epoch: %" PRIu64 "\npending_epoch: %" PRIu64 "\nfiles: %zu\n",
              ep.acknowledged, ep.pending, files.ok() ? files->size() : size_t{0});
  // The viewed epoch (--epoch, else the newest): what its files hold and fill.
  uint64_t epoch = a.epoch != 0 ? a.epoch : (ep.pending != 0 ? ep.pending : ep.acknowledged);
  if (epoch != 0 && a.epoch == 0 && (*store)->View(epoch).ok()) files = (*store)->List("");
  if (files.ok() && epoch != 0) {
    uint64_t bytes = 0, blocks = 0;
    for (const auto& f : *files) {
      bytes += f.size;
      blocks += f.blocks;
    }
    auto img = (*store)->GetImage(epoch);
    std::printf("epoch: %" PRIu64 "\nepoch_file_bytes: %" PRIu64 "\nepoch_blocks: %" PRIu64
                "\nepoch_image_bytes: %" PRIu64 "\n",
                epoch, bytes, blocks, img.ok() ? img->size : uint64_t{0});
  }
  Status slots = (*store)->CheckSlots();
  return slots.ok() ? 0 : Warn(slots);
}

int CmdVerify(const Args& a) {
  if (a.pos.empty()) return Usage("verify needs STORE");
  auto store = Store::Attach(Normalize(a.pos[0]), AttachMode::kReadOnly);
  if (!store.ok()) return Fail(store.status());
  EpochState ep = (*store)->epochs();
  int checked = 0;
  for (uint64_t e : {ep.acknowledged, ep.pending}) {
    if (e == 0) continue;
    Status s = (*store)->Verify(e);
    if (!s.ok()) return Fail(s);
    std::printf("epoch %" PRIu64 ": ok\n", e);
    ++checked;
  }
  if (checked == 0) std::printf("no committed epoch\n");
  return 0;
}

// rm --job J [--node N]: every store and parity object of job J (on node N)
// in this node's /dev/shm. Objects that are not the job's stores or parity
// are left alone. Exit 1 if one could not be removed.
int CmdRmJob(const Args& a) {
  if (!ValidJobName(a.create.job)) {
    return Fail(Status::InvalidArgument("rm --job: invalid job id '" + a.create.job + "'"));
  }
  std::string prefix = a.create.node.empty() ? JobPrefix(a.create.job)
                                             : NodePrefix(a.create.job, a.create.node);
  auto names = Env::Default()->ListShm(prefix);
  if (!names.ok()) return Fail(names.status());
  int status = 0;
  for (const auto& n : *names) {
    auto id = ParseStoreName(n);
    size_t at = n.rfind(".parity");
    bool parity = at != std::string::npos && at >= JobPrefix(a.create.job).size() &&
                  n.size() == at + 8 && (n.back() == '0' || n.back() == '1');
    if (!(id.ok() && id->job == a.create.job) && !parity) continue;
    Status s = Store::Destroy(n);
    if (s.ok() || s.code() == ENOENT) {
      std::printf("removed %s\n", n.c_str());
    } else {
      status = Fail(s);
    }
  }
  return status;
}

int CmdRm(const Args& a) {
  if (a.pos.empty() && !a.create.job.empty()) return CmdRmJob(a);
  if (a.pos.empty()) return Usage("rm needs STORE (or --job JOB)");
  std::string name = Normalize(a.pos[0]);
  if (a.pos.size() == 1) {
    // Refuse to remove something that is not a store.
    auto store = Store::Attach(name, AttachMode::kReadOnly);
    if (!store.ok() && store.status().code() != EBADMSG) return Fail(store.status());
    Status s = Store::Destroy(name);
    return s.ok() ? 0 : Fail(s);
  }
  auto store = Store::Attach(name, AttachMode::kOwner);
  if (!store.ok()) return Fail(store.status());
  Status s = (*store)->Unlink(a.pos[1]);
  return s.ok() ? 0 : Fail(s);
}

int CmdCreate(const Args& a) {
  if (a.pos.empty()) return Usage("create needs STORE");
  auto store = Store::Create(Normalize(a.pos[0]), a.create);
  if (!store.ok()) return Fail(store.status());
  return 0;
}

int CmdPut(const Args& a) {
  if (a.pos.size() < 2) return Usage("put needs STORE PATH [FILE]");
  int in = STDIN_FILENO;
  if (a.pos.size() > 2 && a.pos[2] != "-") {
    in = open(a.pos[2].c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) return Fail(Status::FromErrno(errno, "open " + a.pos[2]));
  }
  auto store = Store::Attach(Normalize(a.pos[0]), AttachMode::kOwner);
  if (!store.ok()) return Fail(store.status());
  auto fd = (*store)->Open(a.pos[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (!fd.ok()) return Fail(fd.status());
  std::vector<char> buf(1 << 20);
  for (;;) {
    ssize_t n = read(in, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Fail(Status::FromErrno(errno, "read input"));
    if (n == 0) break;
    auto w = (*store)->Write(*fd, buf.data(), static_cast<size_t>(n));
    if (!w.ok()) return Fail(w.status());
    if (*w != static_cast<size_t>(n)) return Fail(Status::NoSpace("store full writing " + a.pos[1]));
  }
  if (in != STDIN_FILENO) close(in);
  Status s = (*store)->Close(*fd);
  return s.ok() ? 0 : Fail(s);
}

int CmdCommit(const Args& a) {
  if (a.pos.empty()) return Usage("commit needs STORE");
  auto store = Store::Attach(Normalize(a.pos[0]), AttachMode::kOwner);
  if (!store.ok()) return Fail(store.status());
  auto e = (*store)->Commit();
  if (!e.ok()) return Fail(e.status());
  if (a.ack) {
    Status s = (*store)->Acknowledge(*e);
    if (!s.ok()) return Fail(s);
  }
  std::printf("%" PRIu64 "\n", *e);
  return 0;
}

}  // namespace

int Main(int argc, char** argv, std::string_view usage, std::span<const Command> extra) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char* opt) -> Result<std::string> {
      if (i + 1 >= argc) return Status::InvalidArgument(std::string(opt) + " needs a value");
      return std::string(argv[++i]);
    };
    auto size_opt = [&](const char* opt, uint64_t* out) -> Status {
      DLCKPT_ASSIGN_OR_RETURN(std::string v, value(opt));
      DLCKPT_ASSIGN_OR_RETURN(*out, ParseSize(v));
      return Status::OK();
    };
    Status st;
    uint64_t v = 0;
    if (arg == "-h" || arg == "--help") {
      std::fwrite(usage.data(), 1, usage.size(), stdout);
      return 0;
    } else if (arg == "--epoch") {
      st = size_opt("--epoch", &a.epoch);
    } else if (arg == "--capacity") {
      st = size_opt("--capacity", &a.create.capacity);
    } else if (arg == "--block-size") {
      st = size_opt("--block-size", &v);
      a.create.block_size = static_cast<uint32_t>(v);
      if (st.ok() && v > UINT32_MAX) st = Status::InvalidArgument("--block-size too large");
    } else if (arg == "--max-files") {
      st = size_opt("--max-files", &v);
      a.create.max_files = static_cast<uint32_t>(v);
      if (st.ok() && v > UINT32_MAX) st = Status::InvalidArgument("--max-files too large");
    } else if (arg == "--job") {
      auto r = value("--job");
      st = r.status();
      if (r.ok()) a.create.job = *r;
    } else if (arg == "--node") {
      auto r = value("--node");
      st = r.status();
      if (r.ok()) a.create.node = *r;
    } else if (arg == "--rank") {
      st = size_opt("--rank", &v);
      a.create.rank = static_cast<int>(v);
    } else if (arg == "--compress") {
      auto r = value("--compress");
      st = r.status();
      if (r.ok()) {
        auto c = ParseCompression(*r);
        st = c.status();
        if (c.ok()) a.create.compression = *c;
      }
    } else if (arg == "--threshold") {
      auto r = value("--threshold");
      st = r.status();
      if (r.ok()) {
        char* end = nullptr;
        a.create.compress_threshold = std::strtod(r->c_str(), &end);
        if (r->empty() || *end != '\0') st = Status::InvalidArgument("--threshold: '" + *r + "' is not a number");
      }
    } else if (arg == "--chunk-size") {
      st = size_opt("--chunk-size", &v);
      a.create.chunk_size = static_cast<uint32_t>(v);
      if (st.ok() && v > UINT32_MAX) st = Status::InvalidArgument("--chunk-size too large");
    } else if (arg == "--ranks") {
      st = size_opt("--ranks", &a.ranks);
      if (st.ok() && (a.ranks == 0 || a.ranks > (1u << 24))) st = Status::InvalidArgument("--ranks out of range");
    } else if (arg == "--bandwidth") {
      st = size_opt("--bandwidth", &a.bandwidth);
    } else if (arg == "--no-ack") {
      a.ack = false;
    } else if (arg.size() > 1 && arg[0] == '-' && arg != "-") {
      return Usage("unknown option " + arg);
    } else if (a.cmd.empty()) {
      a.cmd = arg;
    } else {
      a.pos.push_back(arg);
    }
    if (!st.ok()) return Usage(st.message());
  }
  if (a.cmd.empty()) return Usage("missing command");
  if (a.cmd == "list") return CmdList(a);
  if (a.cmd == "ls") return CmdLs(a);
  if (a.cmd == "cat") return CmdCat(a);
  if (a.cmd == "stat") return CmdStat(a);
  if (a.cmd == "verify") return CmdVerify(a);
  if (a.cmd == "rm") return CmdRm(a);
  if (a.cmd == "create") return CmdCreate(a);
  if (a.cmd == "put") return CmdPut(a);
  if (a.cmd == "commit") return CmdCommit(a);
  for (const Command& c : extra) {
    if (a.cmd == c.name) return c.run(a);
  }
  return Usage("unknown command " + a.cmd);
}


}  // namespace dlckpt::memfs::tool

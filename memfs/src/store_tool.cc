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

#include "dlckpt/base/cli.h"
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
  const Command first_level[] = {{"list", CmdList}, {"ls", CmdLs},         {"cat", CmdCat},
                                 {"stat", CmdStat}, {"verify", CmdVerify}, {"rm", CmdRm},
                                 {"create", CmdCreate}, {"put", CmdPut},   {"commit", CmdCommit}};
  Args a;
  // The options are the tool's, before or after the command (fallthrough);
  // each command takes its positional arguments. The help is `usage`.
  CLI::App app{"", "dlckpt-store"};
  app.formatter_fn([usage](const CLI::App*, const std::string&, CLI::AppFormatMode) { return std::string(usage); });
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.require_subcommand(0, 1);  // a later word is an argument, even if it names a command
  auto fail_on = [](const Status& s) {
    if (!s.ok()) throw CLI::ValidationError(s.message());
  };
  // A size (K/M/G suffixes) no larger than `max`.
  auto size = [&](const char* name, uint64_t max, auto store) {
    app.add_option_function<std::string>(name, [name, max, store, fail_on](const std::string& v) {
      Result<uint64_t> n = ParseSize(v);
      fail_on(n.status());
      if (*n > max) fail_on(Status::InvalidArgument(std::string(name) + " too large"));
      store(*n);
    });
  };
  size("--epoch", UINT64_MAX, [&a](uint64_t n) { a.epoch = n; });
  size("--capacity", UINT64_MAX, [&a](uint64_t n) { a.create.capacity = n; });
  size("--block-size", UINT32_MAX, [&a](uint64_t n) { a.create.block_size = static_cast<uint32_t>(n); });
  size("--max-files", UINT32_MAX, [&a](uint64_t n) { a.create.max_files = static_cast<uint32_t>(n); });
  size("--rank", UINT64_MAX, [&a](uint64_t n) { a.create.rank = static_cast<int>(n); });
  size("--chunk-size", UINT32_MAX, [&a](uint64_t n) { a.create.chunk_size = static_cast<uint32_t>(n); });
  size("--ranks", UINT64_MAX, [&a, fail_on](uint64_t n) {
    if (n == 0 || n > (1u << 24)) fail_on(Status::InvalidArgument("--ranks out of range"));
    a.ranks = n;
  });
  size("--bandwidth", UINT64_MAX, [&a](uint64_t n) { a.bandwidth = n; });
  app.add_option("--job", a.create.job);
  app.add_option("--node", a.create.node);
  app.add_option_function<std::string>("--compress", [&a, fail_on](const std::string& v) {
    Result<Compression> c = ParseCompression(v);
    fail_on(c.status());
    a.create.compression = *c;
  });
  app.add_option_function<std::string>("--threshold", [&a, fail_on](const std::string& v) {
    char* end = nullptr;
    a.create.compress_threshold = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0') fail_on(Status::InvalidArgument("--threshold: '" + v + "' is not a number"));
  });
  app.add_flag_callback("--no-ack", [&a] { a.ack = false; });
  std::vector<std::string> unknown_command;
  app.add_option("COMMAND", unknown_command);
  std::vector<std::pair<CLI::App*, const Command*>> commands;
  for (std::span<const Command> table : {std::span<const Command>(first_level), extra}) {
    for (const Command& c : table) {
      CLI::App* sub = app.add_subcommand(std::string(c.name));
      sub->fallthrough();
      sub->add_option("ARGS", a.pos);
      commands.emplace_back(sub, &c);
    }
  }
  std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + std::max(argc, 1));
  bool help = false;
  const Status parsed = cli::ParseArgs(app, args, &help);
  if (help) {
    std::fwrite(usage.data(), 1, usage.size(), stdout);
    return 0;
  }
  if (!parsed.ok()) return Usage(parsed.message());
  if (!unknown_command.empty()) return Usage("unknown command " + unknown_command[0]);
  for (const auto& [sub, command] : commands) {
    if (sub->parsed()) {
      a.cmd = command->name;
      return command->run(a);
    }
  }
  return Usage("missing command");
}

}  // namespace dlckpt::memfs::tool

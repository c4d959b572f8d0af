// The SCR API (scr.h) over dlckpt.
//
// Mapping (scr/README.md has the user's view):
//  - SCR_Route_file in an output phase returns a path in this rank's staging
//    directory (SCR_CACHE_BASE, default /dev/shm: memory, like memfs). The
//    application writes there with any I/O library; no interception is
//    involved.
//  - SCR_Complete_output agrees `valid` over MPI_COMM_WORLD; for a checkpoint
//    it then copies the staged files into the rank's memfs store under
//    /dlckpt/scr/files/<normalised path>, with a dataset record
//    (/dlckpt/scr/dataset), and runs one dlckpt checkpoint round
//    (dlckpt_checkpoint: commit, parity on the spares, acknowledge). Output
//    datasets are also copied to their real path (the parallel file system).
//    The staged copies are removed.
//  - After a relaunch (dlckpt_restarted_epoch() > 0) the store holds the
//    newest protected epoch; its dataset record is the restart candidate.
//    SCR_Route_file on restart copies the file out of memfs into the staging
//    directory and returns that path.
// Every entry point catches everything: no exception crosses the C boundary,
// nothing aborts.
#include <fcntl.h>
#include <mpi.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "dlckpt/base/mpi.h"
#include "dlckpt/base/version.h"
#include "dlckpt/dlckpt.h"
#include "dlckpt/intercept/intercept.h"
#include "dlckpt/memfs/memfs.h"
#include "scr.h"
#include "scr_core.h"

namespace dlckpt::scr {
namespace {

namespace fs = std::filesystem;

constexpr const char* kRoot = "/dlckpt/scr";
constexpr const char* kRecord = "/dlckpt/scr/dataset";
constexpr const char* kFiles = "/dlckpt/scr/files";
constexpr size_t kCopyChunk = size_t{1} << 20;

enum class Phase { kUninit, kIdle, kOutput, kRestart, kFinalized };

struct State {
  Config config;
  Phase phase = Phase::kUninit;
  bool enabled = true;
  int debug = 0;
  int rank = 0;
  MPI_Comm comm = MPI_COMM_NULL;                  // MPI_COMM_WORLD's duplicate
  std::unique_ptr<mpi::Collective> collective;  // over comm, from SCR_Init to SCR_Finalize
  memfs::Store* store = nullptr;
  std::string prefix;  // SCR_PREFIX, absolute
  std::string stage;   // this rank's staging directory
  std::unique_ptr<NeedCheckpoint> need;
  uint64_t last_id = 0;
  Dataset current;                        // the dataset of the output phase
  std::map<std::string, std::string> routed;  // its files: normalised -> staged
  std::optional<Dataset> latest;          // the newest checkpoint in memfs
  bool offer_restart = false;             // SCR_Have_restart says yes
  std::string version;
};

State& S() {
  static State* const s = new State();
  return *s;
}

double Now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Reports a failure on stderr (SCR prints its errors too) and returns
// SCR_FAILURE.
int Fail(const Status& s) {
  std::fprintf(stderr, "SCR: rank %d: %s\n", S().rank, s.ToString().c_str());
  return SCR_FAILURE;
}

void Debug(const std::string& m) {
  if (S().debug > 0) std::fprintf(stderr, "SCR: rank %d: %s\n", S().rank, m.c_str());
}

// The agreements below wait without spinning and every rank makes the same
// MPI calls whatever the values (dlckpt/base/mpi.h); an MPI error counts as
// a disagreement.

// Collective: true on every rank iff `mine` is true on every rank.
bool Agree(bool mine) {
  Result<uint64_t> lo = S().collective->Min(mine ? 1 : 0);
  return lo.ok() && *lo == 1;
}

// Collective: true iff every rank passed the same value.
bool Same(uint64_t v) {
  Result<uint64_t> lo = S().collective->Min(v);
  Result<uint64_t> hi = S().collective->Max(v);
  return lo.ok() && hi.ok() && *lo == *hi;
}

// Collective: rank 0's `value` on every rank.
Result<uint64_t> FromRank0(uint64_t value) { return S().collective->Max(S().rank == 0 ? value : 0); }

uint64_t Hash(std::string_view s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

Status CopyOut(const std::string& text, char* out, const char* what) {
  if (out == nullptr) return Status::OK();
  if (text.size() >= SCR_MAX_FILENAME) return Status::Error(ENAMETOOLONG, std::string(what) + " is too long");
  std::memcpy(out, text.c_str(), text.size() + 1);
  return Status::OK();
}

Status MakeParents(const std::string& path) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return Status::Error(ec.value(), "mkdir " + fs::path(path).parent_path().string() + ": " + ec.message());
  return Status::OK();
}

Status RemoveTree(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) return Status::Error(ec.value(), "remove " + path + ": " + ec.message());
  return Status::OK();
}

// Disk file -> disk file (output datasets to their real path).
Status CopyFile(const std::string& from, const std::string& to) {
  DLCKPT_RETURN_IF_ERROR(MakeParents(to));
  std::error_code ec;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec) return Status::Error(ec.value(), "copy " + from + " to " + to + ": " + ec.message());
  return Status::OK();
}

// All of [data, data + len) into memfs descriptor `fd`: a short write (the
// store is full) is an error, never a silently shorter file.
Status WriteAll(int fd, const char* data, size_t len) {
  for (size_t done = 0; done < len;) {
    DLCKPT_ASSIGN_OR_RETURN(size_t w, S().store->Write(fd, data + done, len - done));
    if (w == 0) return Status::NoSpace("memfs: write stored nothing");
    done += w;
  }
  return Status::OK();
}

// Staged disk file -> memfs working file.
Status ToMemfs(const std::string& from, const std::string& to) {
  memfs::Store* st = S().store;
  int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return Status::FromErrno(errno, "open " + from);
  auto fd = st->Open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (!fd.ok()) {
    ::close(in);
    return fd.status();
  }
  std::vector<char> buf(kCopyChunk);
  Status s;
  for (;;) {
    ssize_t n = ::read(in, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      s = Status::FromErrno(errno, "read " + from);
      break;
    }
    if (n == 0) break;
    s = WriteAll(*fd, buf.data(), static_cast<size_t>(n));
    if (!s.ok()) break;
  }
  ::close(in);
  Status c = st->Close(*fd);
  return s.ok() ? std::move(c) : std::move(s);
}

// memfs working file -> disk file (restart copies), mode 0600.
Status FromMemfs(const std::string& from, const std::string& to) {
  memfs::Store* st = S().store;
  DLCKPT_RETURN_IF_ERROR(MakeParents(to));
  auto fd = st->Open(from, O_RDONLY);
  if (!fd.ok()) return fd.status();
  int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (out < 0) {
    Status s = Status::FromErrno(errno, "open " + to);
    (void)st->Close(*fd);
    return s;
  }
  std::vector<char> buf(kCopyChunk);
  Status s;
  for (;;) {
    auto n = st->Read(*fd, buf.data(), buf.size());
    if (!n.ok()) {
      s = n.status();
      break;
    }
    if (*n == 0) break;
    size_t done = 0;
    while (done < *n) {
      ssize_t w = ::write(out, buf.data() + done, *n - done);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        s = Status::FromErrno(errno, "write " + to);
        break;
      }
      done += static_cast<size_t>(w);
    }
    if (!s.ok()) break;
  }
  if (::close(out) != 0 && s.ok()) s = Status::FromErrno(errno, "close " + to);
  Status c = st->Close(*fd);
  return s.ok() ? std::move(c) : std::move(s);
}

Result<std::string> ReadMemfs(const std::string& path) {
  memfs::Store* st = S().store;
  DLCKPT_ASSIGN_OR_RETURN(int fd, st->Open(path, O_RDONLY));
  std::string text;
  char buf[4096];
  Status s;
  for (;;) {
    auto n = st->Read(fd, buf, sizeof buf);
    if (!n.ok()) {
      s = n.status();
      break;
    }
    if (*n == 0) break;
    text.append(buf, *n);
  }
  Status c = st->Close(fd);
  if (!s.ok()) return s;
  if (!c.ok()) return c;
  return text;
}

Status WriteMemfs(const std::string& path, const std::string& text) {
  memfs::Store* st = S().store;
  DLCKPT_ASSIGN_OR_RETURN(int fd, st->Open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600));
  Status w = WriteAll(fd, text.data(), text.size());
  Status c = st->Close(fd);
  return w.ok() ? std::move(c) : std::move(w);
}

// Unlinks every working file under /dlckpt/scr (the committed epochs keep
// theirs until a newer one is acknowledged).
Status ClearMemfs() {
  memfs::Store* st = S().store;
  DLCKPT_ASSIGN_OR_RETURN(std::vector<memfs::FileInfo> files, st->List(std::string(kRoot) + "/"));
  for (const memfs::FileInfo& f : files) {
    if (S_ISDIR(f.mode)) continue;
    Status s = st->Unlink(f.path);
    if (!s.ok() && s.code() != ENOENT) return s;
  }
  return Status::OK();
}

// The staging directory exists only while it holds routed files: made (0700)
// by SCR_Route_file, removed when the phase that routed them ends, and by an
// exit() without SCR_Finalize (ExitCleanup), so that a failed run, a failed
// restart or a rank killed between phases leaves no empty directory behind.
Status EnsureStage() {
  if (::mkdir(S().stage.c_str(), 0700) != 0 && errno != EEXIST) return Status::FromErrno(errno, "mkdir " + S().stage);
  return Status::OK();
}

// Removes `sub` (out or restart) of the staging directory, then the staging
// directory itself if nothing else is in it.
Status DropStage(const char* sub) {
  if (S().stage.empty()) return Status::OK();  // SCR_ENABLE=0: none
  DLCKPT_RETURN_IF_ERROR(RemoveTree(S().stage + "/" + sub));
  if (::rmdir(S().stage.c_str()) != 0 && errno != ENOENT && errno != ENOTEMPTY && errno != EEXIST) {
    return Status::FromErrno(errno, "rmdir " + S().stage);
  }
  return Status::OK();
}

// atexit: an application that exits (a Fortran runtime error, exit() after a
// failed restart) without SCR_Finalize leaves no staging directory. Only in
// the process that called SCR_Init (not in a forked child that exits).
pid_t g_init_pid = 0;
void ExitCleanup() {
  State& st = S();
  if (getpid() != g_init_pid || st.stage.empty() || st.phase == Phase::kFinalized || st.phase == Phase::kUninit) {
    return;
  }
  (void)RemoveTree(st.stage);
}

std::string StagedOut(const std::string& normalized) { return S().stage + "/out" + normalized; }
std::string StagedRestart(const std::string& normalized) { return S().stage + "/restart" + normalized; }

Status InitImpl() {
  State& st = S();
  if (st.phase != Phase::kUninit) return Status::Error(EALREADY, "SCR_Init: called twice");
  int flag = 0;
  MPI_Initialized(&flag);
  if (!flag) return Status::InvalidArgument("SCR_Init: call MPI_Init first");
  if (auto file = st.config.Get("SCR_CONF_FILE")) DLCKPT_RETURN_IF_ERROR(st.config.LoadFile(*file));
  DLCKPT_ASSIGN_OR_RETURN(long enable, st.config.Int("SCR_ENABLE", 1));
  DLCKPT_ASSIGN_OR_RETURN(long debug, st.config.Int("SCR_DEBUG", 0));
  st.debug = static_cast<int>(debug);
  CheckpointPolicy p;
  DLCKPT_ASSIGN_OR_RETURN(p.interval, st.config.Int("SCR_CHECKPOINT_INTERVAL", 0));
  DLCKPT_ASSIGN_OR_RETURN(p.seconds, st.config.Double("SCR_CHECKPOINT_SECONDS", 0));
  DLCKPT_ASSIGN_OR_RETURN(p.overhead, st.config.Double("SCR_CHECKPOINT_OVERHEAD", 0));
  if (MPI_Comm_dup(MPI_COMM_WORLD, &st.comm) != MPI_SUCCESS) return Status::IOError("SCR_Init: MPI_Comm_dup failed");
  MPI_Comm_rank(st.comm, &st.rank);
  st.collective = std::make_unique<mpi::Collective>(st.comm, "rank " + std::to_string(st.rank));
  st.need = std::make_unique<NeedCheckpoint>(p, Now());
  st.enabled = enable != 0;
  if (!st.enabled) {
    st.phase = Phase::kIdle;
    return Status::OK();
  }
  if (dlckpt_init(MPI_COMM_WORLD) != 0) {
    return Status::Error(errno ? errno : EIO, std::string("SCR_Init: dlckpt_init: ") + dlckpt_last_error());
  }
  st.phase = Phase::kIdle;  // from here on SCR_Finalize undoes dlckpt_init

  // Local steps, then one agreement, so that no rank is left waiting.
  Status mine = [&]() -> Status {
    DLCKPT_ASSIGN_OR_RETURN(st.store, intercept::ProcessStore());
    std::string cwd = fs::current_path().string();
    std::string prefix = st.config.Get("SCR_PREFIX").value_or(cwd);
    DLCKPT_ASSIGN_OR_RETURN(st.prefix, NormalizePath(prefix + "/.", cwd));
    const char* job = std::getenv("DLCKPT_JOB");
    std::string base = st.config.Get("SCR_CACHE_BASE").value_or("/dev/shm");
    st.stage = base + "/dlckpt-scr." + (job && *job ? job : "local") + ".r" + std::to_string(st.rank);
    // A stale one (a rank killed earlier) goes; a new one is made on the first
    // SCR_Route_file. Made and removed here to find out now whether it can be.
    DLCKPT_RETURN_IF_ERROR(RemoveTree(st.stage));
    if (::mkdir(st.stage.c_str(), 0700) != 0) return Status::FromErrno(errno, "mkdir " + st.stage);
    if (::rmdir(st.stage.c_str()) != 0) return Status::FromErrno(errno, "rmdir " + st.stage);
    return Status::OK();
  }();
  if (!Agree(mine.ok())) {
    if (!mine.ok()) Fail(mine.Prefixed("SCR_Init"));
    (void)dlckpt_finalize();
    st.phase = Phase::kUninit;
    if (!st.stage.empty()) (void)RemoveTree(st.stage);
    return Status::IOError("SCR_Init: failed on some rank");
  }
  if (g_init_pid == 0) std::atexit(ExitCleanup);
  g_init_pid = getpid();
  // Tell dlckpt-run that SCR_Should_exit watches its halt (DLCKPT_HALT_FILE).
  if (const char* halt = std::getenv("DLCKPT_HALT_FILE"); halt != nullptr && *halt != '\0' && st.rank == 0) {
    const std::string watched = std::string(halt) + ".watched";
    int fd = ::open(watched.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
      ::close(fd);
    } else {
      Debug("cannot create " + watched + ": " + std::strerror(errno) + " (dlckpt-run's halt gives no grace)");
    }
  }

  // The checkpoint a relaunched job restarts from.
  std::optional<Dataset> found;
  if (dlckpt_restarted_epoch() > 0) {
    auto text = ReadMemfs(kRecord);
    if (text.ok()) {
      auto d = ParseDataset(*text);
      if (d.ok() && (d->flags & SCR_FLAG_CHECKPOINT)) found = std::move(*d);
      if (!d.ok()) Fail(d.status().Prefixed("SCR_Init"));
    }
  }
  bool all = Agree(found.has_value());
  if (all && Same(found->id) && Same(Hash(found->name))) {
    st.latest = std::move(found);
    st.last_id = st.latest->id;
    st.offer_restart = true;
    Debug("restart candidate: dataset " + std::to_string(st.last_id) + " '" + Shown(st.latest->name) + "'");
  } else if (found) {
    Fail(Status::Corruption("SCR_Init: the ranks hold different datasets; not restarting"));
  }
  if (st.rank == 0) {
    for (const std::string& line : ParameterNotes(st.config)) std::fprintf(stderr, "SCR: %s\n", line.c_str());
  }
  return Status::OK();
}

Status RouteImpl(const char* name, char* file) {
  State& st = S();
  if (st.phase == Phase::kUninit || st.phase == Phase::kFinalized) {
    return Status::InvalidArgument("SCR_Route_file: call SCR_Init first");
  }
  if (name == nullptr || file == nullptr) return Status::InvalidArgument("SCR_Route_file: NULL argument");
  if (!st.enabled) return CopyOut(name, file, "SCR_Route_file: name");
  DLCKPT_ASSIGN_OR_RETURN(std::string norm, NormalizePath(name, st.prefix));
  if (st.phase == Phase::kOutput) {
    std::string staged = StagedOut(norm);
    DLCKPT_RETURN_IF_ERROR(CopyOut(staged, file, "SCR_Route_file: routed path"));
    DLCKPT_RETURN_IF_ERROR(EnsureStage());
    DLCKPT_RETURN_IF_ERROR(MakeParents(staged));
    if (st.routed.emplace(norm, staged).second) st.current.files.push_back(norm);
    return Status::OK();
  }
  // A restart phase, or the older pattern: outside any phase, the file of the
  // most recent checkpoint.
  if (!st.latest) {
    return Status::NotFound(std::string("SCR_Route_file: ") + Shown(name) +
                            ": no output phase and no checkpoint to read it from");
  }
  // By its path, else by its base name whatever the directory (as SCR 3.1
  // does on restart: "<checkpoint name>/rank_N.ckpt").
  bool ambiguous = false;
  std::string f = FindFile(*st.latest, norm, &ambiguous);
  if (f.empty()) {
    return Status::NotFound(std::string("SCR_Route_file: ") + Shown(name) +
                            (ambiguous ? ": several files of checkpoint '" + Shown(st.latest->name) +
                                             "' have this base name; give the path it was written with"
                                       : ": no file of checkpoint '" + Shown(st.latest->name) +
                                             "' has this path or base name"));
  }
  std::string staged = StagedRestart(f);
  DLCKPT_RETURN_IF_ERROR(CopyOut(staged, file, "SCR_Route_file: routed path"));
  DLCKPT_RETURN_IF_ERROR(EnsureStage());
  struct stat sb{};
  if (::stat(staged.c_str(), &sb) != 0) DLCKPT_RETURN_IF_ERROR(FromMemfs(kFiles + f, staged));
  return Status::OK();
}

Status NeedImpl(int* flag) {
  State& st = S();
  if (st.phase == Phase::kUninit || st.phase == Phase::kFinalized) {
    return Status::InvalidArgument("SCR_Need_checkpoint: call SCR_Init first");
  }
  if (flag == nullptr) return Status::InvalidArgument("SCR_Need_checkpoint: NULL flag");
  // Every rank counts the call; rank 0's clock decides for all.
  int need = st.need->Ask(Now()) ? 1 : 0;
  if (!st.enabled) need = 0;
  DLCKPT_ASSIGN_OR_RETURN(uint64_t decided, FromRank0(static_cast<uint64_t>(need)));
  *flag = decided != 0 ? 1 : 0;
  return Status::OK();
}

Status StartOutputImpl(const char* name, int flags) {
  State& st = S();
  if (st.phase != Phase::kIdle) {
    return Status::InvalidArgument(st.phase == Phase::kOutput    ? "SCR_Start_output: an output phase is open"
                                   : st.phase == Phase::kRestart ? "SCR_Start_output: a restart phase is open"
                                                                 : "SCR_Start_output: call SCR_Init first");
  }
  if ((flags & ~(SCR_FLAG_CHECKPOINT | SCR_FLAG_OUTPUT)) != 0) {
    return Status::InvalidArgument("SCR_Start_output: unknown flags " + std::to_string(flags));
  }
  std::string n = name ? name : DefaultDatasetName(st.last_id + 1);
  bool ok = !n.empty() && n.size() < SCR_MAX_FILENAME && n.find('\n') == std::string::npos;
  if (!Agree(ok)) return Status::InvalidArgument("SCR_Start_output: empty, too long or multi-line dataset name");
  if (!Same(Hash(n)) || !Same(static_cast<uint64_t>(flags))) {
    return Status::InvalidArgument("SCR_Start_output: the ranks passed different names or flags");
  }
  st.offer_restart = false;
  Status clean = DropStage("restart");
  if (clean.ok()) clean = DropStage("out");
  if (!Agree(clean.ok())) return clean.ok() ? Status::IOError("SCR_Start_output: failed on some rank") : clean;
  st.current = Dataset{st.last_id + 1, n, flags, {}};
  st.routed.clear();
  if (flags & SCR_FLAG_CHECKPOINT) st.need->Started(Now());
  st.phase = Phase::kOutput;
  return Status::OK();
}

Status CompleteOutputImpl(int valid) {
  State& st = S();
  if (st.phase != Phase::kOutput) {
    return Status::InvalidArgument("SCR_Complete_output: no output phase (call SCR_Start_output first)");
  }
  st.phase = Phase::kIdle;
  const Dataset d = st.current;
  const bool ckpt = (d.flags & SCR_FLAG_CHECKPOINT) != 0;
  if (!st.enabled) return valid ? Status::OK() : Status::Error(EINVAL, "SCR_Complete_output: invalid dataset");
  // A routed file that was never created makes the rank's dataset invalid.
  Status mine = valid ? Status::OK() : Status::InvalidArgument("valid = 0");
  for (const auto& [norm, staged] : st.routed) {
    struct stat sb{};
    if (mine.ok() && ::stat(staged.c_str(), &sb) != 0) mine = Status::NotFound(Shown(norm) + " was routed but not written");
  }
  if (!mine.ok()) Debug("dataset '" + Shown(d.name) + "' invalid here: " + mine.message());
  Status result;
  if (!Agree(mine.ok())) {
    result = Status::Error(ECANCELED, "SCR_Complete_output: dataset '" + Shown(d.name) +
                                          "' is invalid on some rank: discarded on every rank");
  }
  if (result.ok() && (d.flags & SCR_FLAG_OUTPUT)) {
    Status out;
    for (const auto& [norm, staged] : st.routed) {
      if (out.ok()) out = CopyFile(staged, norm);
    }
    if (!Agree(out.ok())) result = out.ok() ? Status::IOError("SCR_Complete_output: output copy failed on some rank") : out;
  }
  if (result.ok() && ckpt) {
    Status copy = ClearMemfs();
    for (const auto& [norm, staged] : st.routed) {
      if (copy.ok()) copy = ToMemfs(staged, kFiles + norm);
    }
    if (copy.ok()) copy = WriteMemfs(kRecord, SerializeDataset(d));
    if (!Agree(copy.ok())) {
      result = copy.ok() ? Status::IOError("SCR_Complete_output: copy into memfs failed on some rank") : copy;
      (void)intercept::RollbackStore();  // back to the protected checkpoint
    } else if (dlckpt_checkpoint() != 0) {
      result = Status::Error(errno ? errno : EIO, std::string("SCR_Complete_output: ") + dlckpt_last_error());
      // The round failed everywhere (its outcome is agreed): the working
      // files go back to the protected checkpoint, which `latest` describes.
      // Not with asynchronous encoding, where a newer epoch may still be
      // being encoded.
      const char* mode = std::getenv("DLCKPT_ENCODE");
      if (mode == nullptr || *mode == '\0' || std::strcmp(mode, "sync") == 0) (void)intercept::RollbackStore();
    } else {
      st.latest = d;
      st.last_id = d.id;
      Debug("checkpoint '" + Shown(d.name) + "' protected");
    }
  }
  if (ckpt) st.need->Completed(Now());
  Status clean = DropStage("out");
  st.routed.clear();
  if (!result.ok()) return result;
  return clean;
}

Status HaveRestartImpl(int* flag, char* name) {
  State& st = S();
  if (st.phase != Phase::kIdle) return Status::InvalidArgument("SCR_Have_restart: only between phases, after SCR_Init");
  if (flag == nullptr) return Status::InvalidArgument("SCR_Have_restart: NULL flag");
  *flag = st.offer_restart && st.latest ? 1 : 0;
  if (*flag && name) return CopyOut(st.latest->name, name, "SCR_Have_restart: name");
  if (name) name[0] = '\0';
  return Status::OK();
}

Status StartRestartImpl(char* name) {
  State& st = S();
  if (st.phase != Phase::kIdle) return Status::InvalidArgument("SCR_Start_restart: only between phases, after SCR_Init");
  if (!st.offer_restart || !st.latest) return Status::NotFound("SCR_Start_restart: no checkpoint to restart from");
  DLCKPT_RETURN_IF_ERROR(CopyOut(st.latest->name, name, "SCR_Start_restart: name"));
  st.phase = Phase::kRestart;
  return Status::OK();
}

Status CompleteRestartImpl(int valid) {
  State& st = S();
  if (st.phase != Phase::kRestart) return Status::InvalidArgument("SCR_Complete_restart: no restart phase");
  st.phase = Phase::kIdle;
  st.offer_restart = false;
  Status clean = DropStage("restart");
  if (!Agree(valid != 0 && clean.ok())) {
    st.latest.reset();  // no older checkpoint to fall back to
    return Status::Error(ECANCELED, "SCR_Complete_restart: the restart failed on some rank; "
                                    "no other checkpoint to restart from");
  }
  st.last_id = st.latest->id;
  return Status::OK();
}

Status CurrentImpl(const char* name) {
  State& st = S();
  if (st.phase != Phase::kIdle) return Status::InvalidArgument("SCR_Current: only between phases, after SCR_Init");
  bool ok = name != nullptr && st.latest && st.latest->name == name;
  if (!Agree(ok)) return Status::NotFound(std::string("SCR_Current: no checkpoint named '") + Shown(name ? name : "") + "'");
  st.last_id = st.latest->id;
  st.offer_restart = false;
  return Status::OK();
}

Status DeleteImpl(const char* name) {
  State& st = S();
  if (st.phase != Phase::kIdle) return Status::InvalidArgument("SCR_Delete: only between phases, after SCR_Init");
  if (name == nullptr) return Status::InvalidArgument("SCR_Delete: NULL name");
  if (!st.enabled || !st.latest || st.latest->name != name) return Status::OK();  // nothing held
  Status s = ClearMemfs();
  if (s.ok()) s = DropStage("restart");
  st.latest.reset();
  st.offer_restart = false;
  if (!Agree(s.ok())) return s.ok() ? Status::IOError("SCR_Delete: failed on some rank") : s;
  return Status::OK();
}

Status FinalizeImpl() {
  State& st = S();
  if (st.phase == Phase::kUninit || st.phase == Phase::kFinalized) {
    return Status::InvalidArgument("SCR_Finalize: call SCR_Init first");
  }
  if (st.phase != Phase::kIdle) Fail(Status::InvalidArgument("SCR_Finalize: a phase is still open; discarded"));
  st.phase = Phase::kFinalized;
  Status s;
  if (st.enabled) {
    if (dlckpt_finalize() != 0) s = Status::Error(errno ? errno : EIO, std::string("SCR_Finalize: ") + dlckpt_last_error());
    Status r = RemoveTree(st.stage);
    if (s.ok()) s = r;
  }
  st.collective.reset();
  MPI_Comm_free(&st.comm);
  return s;
}

// Collective (like SCR_Need_checkpoint): rank 0 decides for all, so every
// rank leaves at the same point. 1 once dlckpt-run has been asked to halt
// (--halt-seconds, SIGUSR1, SIGTERM with --persist): it then creates the file
// $DLCKPT_HALT_FILE, and waits up to its --term-grace for the application to
// end before stopping it. 0 outside dlckpt-run and with SCR_ENABLE=0.
Status ShouldExitImpl(int* flag) {
  State& st = S();
  if (st.phase == Phase::kUninit || st.phase == Phase::kFinalized) {
    return Status::InvalidArgument("SCR_Should_exit: call SCR_Init first");
  }
  if (flag == nullptr) return Status::InvalidArgument("SCR_Should_exit: NULL flag");
  uint64_t mine = 0;
  if (st.enabled && st.rank == 0) {
    const char* halt = std::getenv("DLCKPT_HALT_FILE");
    if (halt != nullptr && *halt != '\0' && ::access(halt, F_OK) == 0) mine = 1;
  }
  DLCKPT_ASSIGN_OR_RETURN(uint64_t decided, FromRank0(mine));
  *flag = decided != 0 ? 1 : 0;
  if (*flag) Debug("dlckpt-run was asked to halt: SCR_Should_exit says 1");
  return Status::OK();
}

template <class Fn>
int Guard(Fn&& fn) noexcept {
  try {
    Status s = fn();
    return s.ok() ? SCR_SUCCESS : Fail(s);
  } catch (const std::bad_alloc&) {
    return Fail(Status::Error(ENOMEM, "out of memory"));
  } catch (...) {
    return Fail(Status::IOError("unexpected exception"));
  }
}

const char* ConfigImpl(const char* text) {
  State& st = S();
  if (text == nullptr) return nullptr;
  auto op = ParseConfig(text);
  if (!op.ok()) {
    Fail(op.status());
    return nullptr;
  }
  if (op->kind == ConfigOp::kGet) {
    std::optional<std::string> v = st.config.Get(op->key);
    if (!op->sub_key.empty()) return nullptr;  // descriptor items are not kept
    return v ? strdup(v->c_str()) : nullptr;
  }
  if (st.phase != Phase::kUninit) {
    Fail(Status::InvalidArgument("SCR_Config: parameters are set before SCR_Init"));
    return nullptr;
  }
  if (op->kind == ConfigOp::kUnset) {
    st.config.Unset(op->key);
    return nullptr;
  }
  st.config.Set(op->key, op->value);
  return st.config.AppValue(op->key)->c_str();
}

}  // namespace
}  // namespace dlckpt::scr

using dlckpt::scr::Guard;

extern "C" {

int SCR_Init(void) { return Guard([] { return dlckpt::scr::InitImpl(); }); }
int SCR_Finalize(void) { return Guard([] { return dlckpt::scr::FinalizeImpl(); }); }

const char* SCR_Config(const char* config) {
  try {
    return dlckpt::scr::ConfigImpl(config);
  } catch (...) {
    return nullptr;
  }
}

const char* SCR_Configf(const char* format, ...) {
  if (format == nullptr) return nullptr;
  char buf[4096];
  va_list ap;
  va_start(ap, format);
  int n = std::vsnprintf(buf, sizeof buf, format, ap);
  va_end(ap);
  if (n < 0 || static_cast<size_t>(n) >= sizeof buf) return nullptr;
  return SCR_Config(buf);
}

int SCR_Route_file(const char* name, char* file) {
  return Guard([&] { return dlckpt::scr::RouteImpl(name, file); });
}
int SCR_Have_restart(int* flag, char* name) {
  return Guard([&] { return dlckpt::scr::HaveRestartImpl(flag, name); });
}
int SCR_Start_restart(char* name) { return Guard([&] { return dlckpt::scr::StartRestartImpl(name); }); }
int SCR_Complete_restart(int valid) { return Guard([&] { return dlckpt::scr::CompleteRestartImpl(valid); }); }
int SCR_Need_checkpoint(int* flag) { return Guard([&] { return dlckpt::scr::NeedImpl(flag); }); }
int SCR_Start_checkpoint(void) {
  return Guard([] { return dlckpt::scr::StartOutputImpl(nullptr, SCR_FLAG_CHECKPOINT); });
}
int SCR_Complete_checkpoint(int valid) {
  return Guard([&] { return dlckpt::scr::CompleteOutputImpl(valid); });
}
int SCR_Start_output(const char* name, int flags) {
  return Guard([&] { return dlckpt::scr::StartOutputImpl(name, flags); });
}
int SCR_Complete_output(int valid) { return Guard([&] { return dlckpt::scr::CompleteOutputImpl(valid); }); }
int SCR_Current(const char* name) { return Guard([&] { return dlckpt::scr::CurrentImpl(name); }); }
int SCR_Drop(const char* name) {
  return name != nullptr ? SCR_SUCCESS : SCR_FAILURE;  // no index is kept
}
int SCR_Delete(const char* name) { return Guard([&] { return dlckpt::scr::DeleteImpl(name); }); }

char* SCR_Get_version(void) {
  static char version[] = "v3.0.0 (dlckpt " DLCKPT_VERSION ")";
  return version;
}

int SCR_Should_exit(int* flag) { return Guard([&] { return dlckpt::scr::ShouldExitImpl(flag); }); }

}  // extern "C"

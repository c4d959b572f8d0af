// persist.cc — drain, list, verify, restore and prune of drained epochs (see
// dlckpt/persist/persist.h for the layout and the publication protocol).
#include "dlckpt/persist/persist.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <thread>

#include "dlckpt/base/crc32c.h"
#include "dlckpt/base/env.h"

namespace dlckpt::persist {
namespace {

namespace fs = std::filesystem;

constexpr const char* kMagic = "dlckpt-manifest 1";
constexpr const char* kManifest = "MANIFEST";
// Bounds of what is read from a persistent directory: a manifest line is at
// most kMaxLine bytes (memfs paths are at most 255), a store holds at most
// kMaxFilesPerRank files, so a rank's part is at most kMaxPartBytes and the
// MANIFEST at most its header plus the parts it was made of.
constexpr size_t kMaxLine = 384;
constexpr size_t kMaxFilesPerRank = size_t{1} << 20;
constexpr size_t kMaxHeader = 4096;
constexpr size_t kMaxPartBytes = kMaxHeader + kMaxFilesPerRank * kMaxLine;

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string PartName(int rank) { return "rank." + std::to_string(rank) + ".list"; }

bool IsPartName(const std::string& n) {
  return n.rfind("rank.", 0) == 0 && n.size() > 10 && n.compare(n.size() - 5, 5, ".list") == 0 &&
         n.find_first_not_of("0123456789", 5) == n.size() - 5;
}

Env* Or(Env* env) { return env != nullptr ? env : Env::Default(); }

// Splits "A/B/C" (or "/A/B/C") into its components; EINVAL for an empty,
// "." or ".." component: a drained path never leaves its rank directory.
Result<std::vector<std::string>> Components(const std::string& path, const std::string& what) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < path.size()) {
    size_t next = path.find('/', pos);
    if (next == std::string::npos) next = path.size();
    std::string c = path.substr(pos, next - pos);
    if (!c.empty()) {
      if (c == "." || c == "..") return Status::InvalidArgument(what + ": path " + path + " has a '" + c + "' component");
      out.push_back(std::move(c));
    }
    pos = next + 1;
  }
  if (out.empty()) return Status::InvalidArgument(what + ": empty path");
  return out;
}

// Opens directory `name` of `dir` (creating it 0700 with `create`) and
// checks it is a directory of this uid that no one else can write.
Result<File> OpenOwnedDir(Env* env, const File& dir, const std::string& name, bool create) {
  auto opened = env->OpenDirAt(dir, name, create, 0700);
  if (!opened.ok()) {
    // A link or a file in its place is refused like another user's directory.
    const int code = opened.status().code();
    return code == ELOOP || code == ENOTDIR ? Status::Error(EPERM, opened.status().message()) : opened.status();
  }
  File d = std::move(*opened);
  DLCKPT_ASSIGN_OR_RETURN(struct stat st, env->Stat(d));
  DLCKPT_RETURN_IF_ERROR(Env::CheckOwned(st, d.path(), FileKind::kDirectory));
  // Where it writes, an own directory others can read (made by hand, or by
  // mkdir -p) is made private too.
  if (create && (st.st_mode & 077) != 0) DLCKPT_RETURN_IF_ERROR(env->Chmod(d, 0700));
  return d;
}

// The job directory `job_dir` = PARENT/LEAF: PARENT as the user named it,
// LEAF never through a link, owned by this uid and not writable by others.
Result<File> OpenJob(Env* env, const std::string& job_dir, bool create) {
  std::string d = job_dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  const size_t slash = d.rfind('/');
  const std::string parent = slash == std::string::npos ? "." : slash == 0 ? "/" : d.substr(0, slash);
  const std::string leaf = slash == std::string::npos ? d : d.substr(slash + 1);
  if (leaf.empty() || leaf == "." || leaf == "..") {
    // "/", "." or "..": the user's own directory, checked as it is.
    DLCKPT_ASSIGN_OR_RETURN(File f, env->OpenDir(d));
    DLCKPT_ASSIGN_OR_RETURN(struct stat st, env->Stat(f));
    DLCKPT_RETURN_IF_ERROR(Env::CheckOwned(st, d, FileKind::kDirectory));
    return f;
  }
  auto p = env->OpenDir(parent);
  if (!p.ok() && p.status().code() == ENOENT && create) {
    // A --persist DIR that does not exist yet: made as mkdir -p would, 0700.
    for (size_t pos = 1; pos != std::string::npos;) {
      pos = parent.find('/', pos + 1);
      const std::string cur = parent.substr(0, pos);
      if (::mkdir(cur.c_str(), 0700) != 0 && errno != EEXIST) return Status::FromErrno(errno, "mkdir " + cur);
    }
    p = env->OpenDir(parent);
  }
  if (!p.ok()) return p.status();
  return OpenOwnedDir(env, *p, leaf, create);
}

// Splits an epoch directory path into the job directory and "epoch.E".
Result<File> OpenEpoch(Env* env, const std::string& epoch_dir) {
  std::string d = epoch_dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  const size_t slash = d.rfind('/');
  const std::string job_dir = slash == std::string::npos ? "." : slash == 0 ? "/" : d.substr(0, slash);
  DLCKPT_ASSIGN_OR_RETURN(File job, OpenJob(env, job_dir, false));
  return OpenOwnedDir(env, job, slash == std::string::npos ? d : d.substr(slash + 1), false);
}

// Reads small file `name` of `dir`: a regular file of this uid that no one
// else can write, at most `max_bytes`.
Result<std::string> ReadOwned(Env* env, const File& dir, const std::string& name, size_t max_bytes) {
  return env->ReadFileAt(dir, name, max_bytes, /*owned=*/true);
}

// Reads and parses the MANIFEST of an opened epoch directory. Its size is
// bounded by the rank parts it was made of.
Result<Manifest> ReadManifestAt(Env* env, const File& edir) {
  DLCKPT_ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(edir));
  size_t bound = kMaxHeader;
  bool parts = false;
  for (const auto& n : names) {
    if (!IsPartName(n)) continue;
    auto st = env->StatAt(edir, n);
    if (st.ok() && S_ISREG(st->st_mode)) {
      bound += std::min<size_t>(static_cast<size_t>(st->st_size), kMaxPartBytes);
      parts = true;
    }
  }
  if (!parts) return Status::Corruption("manifest " + edir.Child(kManifest) + ": no rank part (rank.*.list) beside it");
  DLCKPT_ASSIGN_OR_RETURN(std::string text, ReadOwned(env, edir, kManifest, bound));
  return ParseManifest(text, edir.Child(kManifest));
}

// The directories of a drain, opened once, by their path below the epoch
// directory ("" is the epoch directory itself); all are synced at the end.
class DirTree {
 public:
  DirTree(Env* env, File root) : env_(env) { dirs_.emplace("", std::move(root)); }
  // The directory holding `components` minus the last, creating what is missing.
  Result<const File*> ParentOf(const std::vector<std::string>& components, size_t upto, bool create) {
    std::string key;
    const File* cur = &dirs_.at("");
    for (size_t i = 0; i < upto; ++i) {
      key += "/" + components[i];
      auto it = dirs_.find(key);
      if (it == dirs_.end()) {
        DLCKPT_ASSIGN_OR_RETURN(File d, OpenOwnedDir(env_, *cur, components[i], create));
        it = dirs_.emplace(key, std::move(d)).first;
      }
      cur = &it->second;
    }
    return cur;
  }
  const File& root() const { return dirs_.at(""); }
  Status SyncAll() {
    for (auto& [key, d] : dirs_) DLCKPT_RETURN_IF_ERROR(env_->Sync(d));
    return Status::OK();
  }

 private:
  Env* env_;
  std::map<std::string, File> dirs_;
};

// Paces a copy to `bandwidth` bytes per second from `start`.
void Pace(double bandwidth, double start, uint64_t done) {
  if (bandwidth <= 0) return;
  double ahead = static_cast<double>(done) / bandwidth - (Seconds() - start);
  if (ahead > 0) std::this_thread::sleep_for(std::chrono::duration<double>(ahead));
}

Status CheckCancel(const DrainOptions& o, const std::string& what) {
  if (o.cancel != nullptr && o.cancel->load()) return Status::Error(ECANCELED, "drain cancelled: " + what);
  return Status::OK();
}

}  // namespace

std::string JobDir(const std::string& dir, const std::string& job) { return dir + "/" + job; }

std::string EpochDir(const std::string& job_dir, uint64_t epoch) {
  return job_dir + "/epoch." + std::to_string(epoch);
}

std::string DataPath(const std::string& epoch_dir, int rank, const std::string& path) {
  return epoch_dir + "/r" + std::to_string(rank) + (path.empty() || path[0] != '/' ? "/" : "") + path;
}

std::string FormatManifest(const Manifest& m) {
  std::ostringstream os;
  os << kMagic << "\njob " << m.job << "\nepoch " << m.epoch << "\nranks " << m.ranks << "\n";
  char line[96];
  for (const auto& f : m.files) {
    std::snprintf(line, sizeof line, "file %d %" PRIu64 " %08x %o ", f.rank, f.size, f.crc32c, f.mode);
    os << line << f.path << "\n";
  }
  std::string body = os.str();
  std::snprintf(line, sizeof line, "end %zu %08x\n", m.files.size(), Crc32c(body.data(), body.size()));
  return body + line;
}

Result<Manifest> ParseManifest(const std::string& text, const std::string& what) {
  auto bad = [&](const std::string& why) { return Status::Corruption("manifest " + what + ": " + why); };
  size_t end_at = text.rfind("\nend ");
  if (text.rfind(kMagic, 0) != 0) return bad("does not start with \"" + std::string(kMagic) + "\"");
  if (end_at == std::string::npos) return bad("no end line (torn or truncated)");
  size_t count = 0;
  unsigned crc = 0;
  char nl = 0;
  if (std::sscanf(text.c_str() + end_at + 1, "end %zu %8x%c", &count, &crc, &nl) != 3 || nl != '\n') {
    return bad("malformed end line");
  }
  if (Crc32c(text.data(), end_at + 1) != crc) return bad("CRC32C of the manifest does not match its end line");
  Manifest m;
  std::istringstream is(text.substr(0, end_at + 1));
  std::string line;
  std::getline(is, line);  // magic
  while (std::getline(is, line)) {
    if (line.rfind("job ", 0) == 0) {
      m.job = line.substr(4);
    } else if (line.rfind("epoch ", 0) == 0) {
      m.epoch = std::strtoull(line.c_str() + 6, nullptr, 10);
    } else if (line.rfind("ranks ", 0) == 0) {
      m.ranks = std::atoi(line.c_str() + 6);
    } else if (line.rfind("file ", 0) == 0) {
      ManifestFile f;
      int off = 0;
      unsigned fcrc = 0, mode = 0;
      if (std::sscanf(line.c_str(), "file %d %" SCNu64 " %8x %o %n", &f.rank, &f.size, &fcrc, &mode, &off) != 4 ||
          off <= 0 || static_cast<size_t>(off) >= line.size()) {
        return bad("malformed line \"" + line + "\"");
      }
      f.crc32c = fcrc;
      f.mode = mode;
      f.path = line.substr(static_cast<size_t>(off));
      m.files.push_back(std::move(f));
    } else {
      return bad("unknown line \"" + line + "\"");
    }
  }
  if (m.files.size() != count) return bad("end line counts " + std::to_string(count) + " files, found " +
                                          std::to_string(m.files.size()));
  if (m.epoch == 0 || m.ranks <= 0) return bad("no epoch or rank count");
  return m;
}

Result<Manifest> ReadManifest(const std::string& epoch_dir, Env* env) {
  env = Or(env);
  DLCKPT_ASSIGN_OR_RETURN(File edir, OpenEpoch(env, epoch_dir));
  return ReadManifestAt(env, edir);
}

Status PrepareJobDir(const std::string& job_dir, Env* env) {
  env = Or(env);
  return OpenJob(env, job_dir, true).status();
}

Result<DrainResult> DrainRank(memfs::Store& view, const std::string& job_dir, const std::string& job,
                              uint64_t epoch, int rank, int ranks, const DrainOptions& o) {
  Env* env = Or(o.env);
  DrainResult r;
  const double start = Seconds();
  const std::string where = "store " + view.name() + " (rank " + std::to_string(rank) + ", epoch " +
                            std::to_string(epoch) + ")";
  DLCKPT_ASSIGN_OR_RETURN(std::vector<memfs::FileInfo> files, view.List("/"));
  DLCKPT_ASSIGN_OR_RETURN(File jobf, OpenJob(env, job_dir, true));
  DLCKPT_ASSIGN_OR_RETURN(File edirf, OpenOwnedDir(env, jobf, "epoch." + std::to_string(epoch), true));
  DirTree tree(env, std::move(edirf));
  const std::string rname = "r" + std::to_string(rank);
  DLCKPT_RETURN_IF_ERROR(tree.ParentOf({rname, ""}, 1, true).status());
  Manifest part;
  part.job = job;
  part.epoch = epoch;
  part.ranks = ranks;
  const size_t chunk = std::max<size_t>(o.buffer, 4096);
  std::vector<uint8_t> buf;  // only when the view refuses in-place reads (an owner's store)
  bool in_place = true;
  uint64_t total = 0;
  for (const auto& fi : files) total += S_ISDIR(fi.mode) ? 0 : fi.size;
  for (const auto& fi : files) {
    DLCKPT_RETURN_IF_ERROR(CheckCancel(o, where));
    if (fi.path.find('\n') != std::string::npos) {
      return Status::InvalidArgument(where + ": path with a newline cannot be drained: " + fi.path);
    }
    DLCKPT_ASSIGN_OR_RETURN(std::vector<std::string> comps, Components(fi.path, where));
    comps.insert(comps.begin(), rname);
    ManifestFile mf{rank, fi.path, fi.size, fi.crc32c, fi.mode};
    if (S_ISDIR(fi.mode)) {
      DLCKPT_RETURN_IF_ERROR(tree.ParentOf(comps, comps.size(), true).status());
      part.files.push_back(std::move(mf));
      continue;
    }
    DLCKPT_ASSIGN_OR_RETURN(const File* parent, tree.ParentOf(comps, comps.size() - 1, true));
    DLCKPT_ASSIGN_OR_RETURN(int sfd, view.Open(fi.path, O_RDONLY));
    auto out = env->OpenAt(*parent, comps.back(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    Status s = out.status();
    if (s.ok()) {
      // A file left by an earlier attempt of this drain is this uid's (the
      // directory is); anything else is refused.
      auto st = env->Stat(*out);
      s = st.ok() ? Env::CheckOwned(*st, out->path(), FileKind::kRegular) : st.status();
    }
    uint32_t crc = 0;
    uint64_t off = 0;
    while (s.ok() && off < fi.size) {
      s = CheckCancel(o, where);
      if (!s.ok()) break;
      const size_t want = static_cast<size_t>(std::min<uint64_t>(chunk, fi.size - off));
      // From the store's mapping where the view allows it (no copy), else
      // through the buffer.
      Extent piece{nullptr, 0};
      if (in_place) {
        auto e = view.ReadInPlace(sfd, off, want);
        if (e.ok()) {
          piece = *e;
        } else if (e.status().code() == EPERM) {
          in_place = false;
        } else {
          s = e.status();
          break;
        }
      }
      if (!in_place) {
        buf.resize(chunk);
        auto n = view.Pread(sfd, buf.data(), want, off);
        if (!n.ok()) {
          s = n.status();
          break;
        }
        piece = Extent{buf.data(), *n};
      }
      if (piece.len == 0) {
        s = Status::Corruption(where + ": " + fi.path + " ends at " + std::to_string(off) + " of " +
                               std::to_string(fi.size) + " bytes");
        break;
      }
      // Checksummed and written in sub-pieces that stay in the cache between
      // the two: write() then copies from L2, not from memory again (a
      // 256 MiB scratch drain: crc + write 0.15-0.16 s in 256 KiB pieces,
      // 0.18-0.20 s in 4 MiB ones).
      constexpr size_t kCachePiece = size_t{256} << 10;
      for (size_t done = 0; s.ok() && done < piece.len; done += kCachePiece) {
        const size_t n = std::min(kCachePiece, piece.len - done);
        crc = Crc32c(piece.data + done, n, crc);
        s = env->WriteAll(*out, piece.data + done, n);
      }
      off += piece.len;
      r.bytes += piece.len;
      Pace(o.bandwidth, start, r.bytes);
      if (o.progress) o.progress(r.bytes, total);
    }
    (void)view.Close(sfd);
    if (s.ok() && crc != fi.crc32c) {
      char msg[64];
      std::snprintf(msg, sizeof msg, ": CRC32C %08x, committed %08x", crc, fi.crc32c);
      s = Status::Corruption(where + ": " + fi.path + msg);
    }
    if (s.ok()) s = env->Sync(*out);
    if (s.ok()) s = env->Close(*out);
    DLCKPT_RETURN_IF_ERROR(s);
    part.files.push_back(std::move(mf));
    ++r.files;
  }
  DLCKPT_RETURN_IF_ERROR(tree.SyncAll());
  DLCKPT_RETURN_IF_ERROR(env->Sync(jobf));
  if (o.hold_before_publish > 0) {
    std::this_thread::sleep_for(std::chrono::duration<double>(o.hold_before_publish));
  }
  const File& edir = tree.root();
  DLCKPT_RETURN_IF_ERROR(env->PublishAt(edir, PartName(rank), FormatManifest(part), 0600));

  // The rank that finds every part present publishes the whole manifest.
  // Any error but ENOENT is the drain's: a part or MANIFEST left unpublished
  // by an I/O error must not look like another rank's job.
  // Only a regular file counts: anything else in its place is replaced.
  auto present = [&](const std::string& name) -> Result<bool> {
    auto st = env->StatAt(edir, name);
    if (st.ok()) return S_ISREG(st->st_mode);
    if (st.status().code() == ENOENT) return false;
    return st.status();
  };
  bool all = true;
  for (int i = 0; i < ranks && all; ++i) {
    DLCKPT_ASSIGN_OR_RETURN(all, present(PartName(i)));
  }
  bool published = false;
  if (all) {
    DLCKPT_ASSIGN_OR_RETURN(published, present(kManifest));
  }
  if (all && !published) {
    Manifest whole;
    whole.job = job;
    whole.epoch = epoch;
    whole.ranks = ranks;
    for (int i = 0; i < ranks; ++i) {
      DLCKPT_ASSIGN_OR_RETURN(std::string text, ReadOwned(env, edir, PartName(i), kMaxPartBytes));
      const std::string p = edir.Child(PartName(i));
      DLCKPT_ASSIGN_OR_RETURN(Manifest pm, ParseManifest(text, p));
      if (pm.epoch != epoch || pm.ranks != ranks) {
        return Status::Corruption("manifest part " + p + " is of epoch " + std::to_string(pm.epoch) + " with " +
                                  std::to_string(pm.ranks) + " ranks");
      }
      for (auto& f2 : pm.files) {
        if (f2.rank != i) return Status::Corruption("manifest part " + p + " lists a file of rank " +
                                                     std::to_string(f2.rank));
        whole.files.push_back(std::move(f2));
      }
    }
    DLCKPT_RETURN_IF_ERROR(env->PublishAt(edir, kManifest, FormatManifest(whole), 0600));
    r.published = true;
  }
  r.seconds = Seconds() - start;
  return r;
}

const char* EpochStateName(EpochState s) {
  switch (s) {
    case EpochState::kComplete: return "complete";
    case EpochState::kIncomplete: return "incomplete";
    case EpochState::kCorrupt: return "corrupt";
    case EpochState::kRefused: return "refused";
  }
  return "?";
}

namespace {

bool IsEpochName(const std::string& name) {
  return name.rfind("epoch.", 0) == 0 && name.size() > 6 && name.size() < 27 &&
         name.find_first_not_of("0123456789", 6) == std::string::npos;
}

DrainedEpoch Inspect(Env* env, const File& job, const std::string& name) {
  DrainedEpoch de;
  de.epoch = std::strtoull(name.c_str() + 6, nullptr, 10);
  de.dir = job.Child(name);
  auto edir = OpenOwnedDir(env, job, name, false);
  if (!edir.ok()) {
    de.state = EpochState::kRefused;
    de.problem = edir.status().message();
    return de;
  }
  auto mst = env->StatAt(*edir, kManifest);
  if (!mst.ok() && mst.status().code() == ENOENT) {
    int parts = 0;
    auto names = env->ListDir(*edir);
    if (names.ok()) {
      for (const auto& n : *names) parts += IsPartName(n) ? 1 : 0;
    }
    de.problem = "no MANIFEST (" + std::to_string(parts) + " rank part(s) written): drain unfinished";
    return de;
  }
  auto m = ReadManifestAt(env, *edir);
  if (!m.ok()) {
    de.state = m.status().code() == EPERM || m.status().code() == ELOOP ? EpochState::kRefused : EpochState::kCorrupt;
    de.problem = m.status().message();
  } else if (m->epoch != de.epoch) {
    de.state = EpochState::kCorrupt;
    de.problem = "MANIFEST names epoch " + std::to_string(m->epoch);
  } else {
    de.state = EpochState::kComplete;
    de.ranks = m->ranks;
    if (mst.ok()) de.time = static_cast<int64_t>(mst->st_mtim.tv_sec);
    for (const auto& f : m->files) {
      if (S_ISDIR(f.mode)) continue;
      ++de.files;
      de.bytes += f.size;
    }
  }
  return de;
}

}  // namespace

Result<std::vector<DrainedEpoch>> ListEpochs(const std::string& job_dir, Env* env) {
  env = Or(env);
  DLCKPT_ASSIGN_OR_RETURN(File job, OpenJob(env, job_dir, false));
  DLCKPT_ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(job));
  std::vector<DrainedEpoch> out;
  for (const auto& name : names) {
    if (IsEpochName(name)) out.push_back(Inspect(env, job, name));
  }
  std::sort(out.begin(), out.end(), [](const DrainedEpoch& a, const DrainedEpoch& b) { return a.epoch > b.epoch; });
  return out;
}

namespace {

// Reads a drained file of an opened epoch directory: a regular file of this
// uid that no one else can write, of the manifest's size (checked before
// reading), whose bytes match the manifest's CRC32C; `sink` gets its bytes.
Status ReadChecked(Env* env, DirTree& tree, const ManifestFile& f,
                   const std::function<Status(const uint8_t*, size_t)>& sink) {
  const std::string what = "drained file of rank " + std::to_string(f.rank) + " " + f.path;
  DLCKPT_ASSIGN_OR_RETURN(std::vector<std::string> comps, Components(f.path, what));
  comps.insert(comps.begin(), "r" + std::to_string(f.rank));
  DLCKPT_ASSIGN_OR_RETURN(const File* parent, tree.ParentOf(comps, comps.size() - 1, false));
  DLCKPT_ASSIGN_OR_RETURN(File in, env->OpenAt(*parent, comps.back(), O_RDONLY, 0));
  const std::string& path = in.path();
  DLCKPT_ASSIGN_OR_RETURN(struct stat st, env->Stat(in));
  DLCKPT_RETURN_IF_ERROR(Env::CheckOwned(st, path, FileKind::kRegular));
  if (static_cast<uint64_t>(st.st_size) != f.size) {
    return Status::Corruption("drained file " + path + " has " + std::to_string(st.st_size) +
                              " bytes, the manifest says " + std::to_string(f.size));
  }
  std::vector<uint8_t> buf(static_cast<size_t>(std::min<uint64_t>(f.size + 1, 4u << 20)));
  uint32_t crc = 0;
  for (uint64_t done = 0; done < f.size;) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), f.size - done));
    DLCKPT_ASSIGN_OR_RETURN(size_t n, env->Read(in, buf.data(), want));
    if (n == 0) return Status::Corruption("drained file " + path + " ends early");
    crc = Crc32c(buf.data(), n, crc);
    if (sink) DLCKPT_RETURN_IF_ERROR(sink(buf.data(), n));
    done += n;
  }
  DLCKPT_ASSIGN_OR_RETURN(size_t more, env->Read(in, buf.data(), 1));
  if (more != 0) return Status::Corruption("drained file " + path + " grew past the manifest's size");
  if (crc != f.crc32c) {
    char msg[80];
    std::snprintf(msg, sizeof msg, " (rank %d): CRC32C %08x, the manifest says %08x", f.rank, crc, f.crc32c);
    return Status::Corruption("drained file " + path + msg);
  }
  return Status::OK();
}

}  // namespace

Status VerifyEpoch(const std::string& epoch_dir, const std::function<void(uint64_t, uint64_t)>& progress, Env* env) {
  env = Or(env);
  DLCKPT_ASSIGN_OR_RETURN(File edir, OpenEpoch(env, epoch_dir));
  DLCKPT_ASSIGN_OR_RETURN(Manifest m, ReadManifestAt(env, edir));
  DirTree tree(env, std::move(edir));
  uint64_t total = 0, done = 0;
  for (const auto& f : m.files) total += S_ISDIR(f.mode) ? 0 : f.size;
  for (const auto& f : m.files) {
    if (S_ISDIR(f.mode)) continue;
    DLCKPT_RETURN_IF_ERROR(ReadChecked(env, tree, f, nullptr));
    done += f.size;
    if (progress) progress(done, total);
  }
  return Status::OK();
}

Result<std::string> ReadDrainedFile(const std::string& epoch_dir, int rank, const std::string& path,
                                    size_t max_bytes, Env* env) {
  env = Or(env);
  DLCKPT_ASSIGN_OR_RETURN(File edir, OpenEpoch(env, epoch_dir));
  DLCKPT_ASSIGN_OR_RETURN(Manifest m, ReadManifestAt(env, edir));
  const ManifestFile* found = nullptr;
  for (const auto& f : m.files) {
    if (f.rank == rank && f.path == path && !S_ISDIR(f.mode)) found = &f;
  }
  if (found == nullptr) {
    return Status::NotFound("drained epoch " + epoch_dir + " holds no file " + path + " of rank " +
                            std::to_string(rank));
  }
  if (found->size > max_bytes) {
    return Status::Error(EFBIG, "drained file " + DataPath(epoch_dir, rank, path) + " has " +
                                    std::to_string(found->size) + " bytes, more than the " +
                                    std::to_string(max_bytes) + " expected");
  }
  DirTree tree(env, std::move(edir));
  std::string out;
  out.reserve(static_cast<size_t>(found->size));
  DLCKPT_RETURN_IF_ERROR(ReadChecked(env, tree, *found, [&](const uint8_t* p, size_t n) {
    out.append(reinterpret_cast<const char*>(p), n);
    return Status::OK();
  }));
  return out;
}

Result<std::string> FindJobDir(const std::string& dir, const std::string& job) {
  auto has_epochs = [](const std::string& d) {
    auto l = ListEpochs(d);
    return l.ok() && !l->empty();
  };
  if (has_epochs(dir)) return dir;
  if (!job.empty()) {
    auto l = ListEpochs(JobDir(dir, job));
    if (l.ok() && !l->empty()) return JobDir(dir, job);
    // A job directory this process must not use: say why.
    if (!l.ok() && l.status().code() != ENOENT) return l.status();
  }
  std::vector<std::string> jobs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_directory(ec) && !e.is_symlink(ec) && has_epochs(e.path().string())) jobs.push_back(e.path().string());
  }
  if (ec) return Status::FromErrno(ec.value(), "open directory " + dir);
  if (jobs.size() == 1) return jobs[0];
  if (jobs.empty()) return Status::NotFound(dir + " holds no drained epoch (no epoch.* directory in it or in a job directory below it)");
  std::sort(jobs.begin(), jobs.end());
  std::string names;
  for (const auto& j : jobs) names += (names.empty() ? "" : ", ") + j;
  return Status::InvalidArgument(dir + " holds the drained epochs of several jobs (" + names + "); name one");
}

Status RestoreRank(const std::string& epoch_dir, const Manifest& m, int rank, memfs::Store& owner, Env* env) {
  env = Or(env);
  DLCKPT_ASSIGN_OR_RETURN(File edir, OpenEpoch(env, epoch_dir));
  DirTree tree(env, std::move(edir));
  for (const auto& f : m.files) {
    if (f.rank != rank) continue;
    if (S_ISDIR(f.mode)) {
      Status s = owner.Mkdir(f.path, f.mode & 07777);
      if (!s.ok() && s.code() != EEXIST) return s;
      continue;
    }
    DLCKPT_ASSIGN_OR_RETURN(int fd, owner.Open(f.path, O_WRONLY | O_CREAT | O_TRUNC, f.mode & 07777));
    Status s = ReadChecked(env, tree, f, [&](const uint8_t* p, size_t n) -> Status {
      DLCKPT_ASSIGN_OR_RETURN(size_t w, owner.Write(fd, p, n));
      if (w != n) return Status::NoSpace("store " + owner.name() + ": short write of " + f.path);
      return Status::OK();
    });
    Status c = owner.Close(fd);
    DLCKPT_RETURN_IF_ERROR(s);
    DLCKPT_RETURN_IF_ERROR(c);
  }
  DLCKPT_RETURN_IF_ERROR(owner.Commit(m.epoch).status());
  DLCKPT_RETURN_IF_ERROR(owner.Acknowledge(m.epoch));
  for (const auto& f : m.files) {
    if (f.rank != rank || S_ISDIR(f.mode)) continue;
    DLCKPT_ASSIGN_OR_RETURN(memfs::FileInfo fi, owner.Stat(f.path));
    if (fi.crc32c != f.crc32c || fi.size != f.size) {
      return Status::Corruption("store " + owner.name() + ": restored " + f.path + " differs from " +
                                DataPath(epoch_dir, rank, f.path));
    }
  }
  return Status::OK();
}

namespace {

// Removes everything below `dir` without following a link: a link is
// removed itself, only real directories are entered. ENOENT is fine (another
// rank prunes at the same time).
Status RemoveBelow(Env* env, const File& dir, int depth) {
  if (depth > 64) return Status::Error(ELOOP, "remove " + dir.path() + ": nested too deep");
  DLCKPT_ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(dir));
  for (const auto& n : names) {
    auto st = env->StatAt(dir, n);
    if (!st.ok()) {
      if (st.status().code() == ENOENT) continue;
      return st.status();
    }
    if (S_ISDIR(st->st_mode)) {
      auto sub = env->OpenDirAt(dir, n, false, 0);
      if (!sub.ok()) {
        if (sub.status().code() == ENOENT) continue;
        return sub.status();
      }
      DLCKPT_RETURN_IF_ERROR(RemoveBelow(env, *sub, depth + 1));
    }
    Status u = env->UnlinkAt(dir, n, S_ISDIR(st->st_mode));
    if (!u.ok() && u.code() != ENOENT) return u;
  }
  return Status::OK();
}

}  // namespace

Result<std::vector<uint64_t>> Prune(const std::string& job_dir, int keep, Env* env) {
  env = Or(env);
  DLCKPT_ASSIGN_OR_RETURN(File job, OpenJob(env, job_dir, false));
  DLCKPT_ASSIGN_OR_RETURN(std::vector<DrainedEpoch> all, ListEpochs(job_dir, env));
  std::vector<uint64_t> removed;
  int complete = 0;
  uint64_t newest_complete = 0;
  for (const auto& e : all) {
    if (e.state == EpochState::kComplete && newest_complete == 0) newest_complete = e.epoch;
  }
  for (const auto& e : all) {
    // A refused entry (a link, another user's) is not this job's to remove.
    if (e.state == EpochState::kRefused) continue;
    bool drop = false;
    if (e.state == EpochState::kComplete) {
      drop = ++complete > keep;
    } else {
      drop = newest_complete != 0 && e.epoch < newest_complete;
    }
    if (!drop) continue;
    const std::string name = "epoch." + std::to_string(e.epoch);
    auto edir = OpenOwnedDir(env, job, name, false);
    if (!edir.ok()) {
      if (edir.status().code() == ENOENT) continue;
      return edir.status();
    }
    // MANIFEST first, so that an interrupted removal leaves an incomplete epoch.
    Status u = env->UnlinkAt(*edir, kManifest, false);
    if (!u.ok() && u.code() != ENOENT) return u;
    DLCKPT_RETURN_IF_ERROR(RemoveBelow(env, *edir, 0));
    u = env->UnlinkAt(job, name, true);
    if (!u.ok() && u.code() != ENOENT) return u;
    removed.push_back(e.epoch);
  }
  return removed;
}

}  // namespace dlckpt::persist

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
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "dlckpt/base/crc32c.h"

namespace dlckpt::persist {
namespace {

namespace fs = std::filesystem;

constexpr const char* kMagic = "dlckpt-manifest 1";
constexpr const char* kManifest = "MANIFEST";

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string PartName(int rank) { return "rank." + std::to_string(rank) + ".list"; }

// A file descriptor closed on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void Reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  // Closes now, reporting the error close(2) gives (NFS and Gluster report
  // write errors there).
  Status Close(const std::string& path) {
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return Status::FromErrno(errno, "close " + path);
    return Status::OK();
  }

 private:
  int fd_;
};

Status MakeDirs(const std::string& dir, std::set<std::string>* made = nullptr) {
  std::string cur;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    cur = dir.substr(0, pos);
    if (cur.empty()) continue;
    if (::mkdir(cur.c_str(), 0755) == 0) {
      if (made) made->insert(cur);
    } else if (errno != EEXIST) {
      return Status::FromErrno(errno, "mkdir " + cur);
    }
  }
  return Status::OK();
}

Status FsyncPath(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return Status::FromErrno(errno, "open " + path);
  if (::fsync(fd.get()) != 0 && errno != EINVAL) return Status::FromErrno(errno, "fsync " + path);
  return Status::OK();
}

Status WriteAll(int fd, const void* data, size_t len, const std::string& path) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (len > 0) {
    ssize_t n = ::write(fd, p, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "write " + path);
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
  return Status::OK();
}

// Writes `text` to `path` atomically and durably: a temporary name in the same
// directory, fsync, rename, fsync of the directory.
// Several nodes may publish the same MANIFEST at once (each found every
// part present), and process ids repeat across hosts: the temporary name
// carries the host, the pid and a random word, and is created exclusively.
Status Publish(const std::string& path, const std::string& text) {
  static std::atomic<unsigned> counter{0};
  char host[256] = "host";
  (void)gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = '\0';
  std::random_device rd;
  std::string tmp;
  Fd fd(-1);
  for (int attempt = 0; attempt < 8 && fd.get() < 0; ++attempt) {
    char word[17];
    std::snprintf(word, sizeof word, "%08x%08x", rd(), rd());
    tmp = path + ".tmp." + host + "." + std::to_string(getpid()) + "." + std::to_string(counter++) + "." + word;
    fd.Reset(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (fd.get() < 0 && errno != EEXIST) break;
  }
  if (fd.get() < 0) return Status::FromErrno(errno, "create " + tmp);
  Status written = WriteAll(fd.get(), text.data(), text.size(), tmp);
  if (written.ok() && ::fsync(fd.get()) != 0) written = Status::FromErrno(errno, "fsync " + tmp);
  if (written.ok()) written = fd.Close(tmp);
  if (!written.ok()) {
    ::unlink(tmp.c_str());
    return written;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = Status::FromErrno(errno, "rename " + tmp + " to " + path);
    ::unlink(tmp.c_str());
    return s;
  }
  return FsyncPath(fs::path(path).parent_path().string());
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

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

Result<Manifest> ReadManifest(const std::string& epoch_dir) {
  const std::string path = epoch_dir + "/" + kManifest;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return Status::FromErrno(errno, "open " + path);
  std::string text;
  char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  bool err = std::ferror(f) != 0;
  std::fclose(f);
  if (err) return Status::IOError("read " + path);
  return ParseManifest(text, path);
}

Result<DrainResult> DrainRank(memfs::Store& view, const std::string& job_dir, const std::string& job,
                              uint64_t epoch, int rank, int ranks, const DrainOptions& o) {
  DrainResult r;
  const double start = Seconds();
  const std::string edir = EpochDir(job_dir, epoch);
  const std::string where = "store " + view.name() + " (rank " + std::to_string(rank) + ", epoch " +
                            std::to_string(epoch) + ")";
  DLCKPT_ASSIGN_OR_RETURN(std::vector<memfs::FileInfo> files, view.List("/"));
  std::set<std::string> dirs;
  const std::string rdir = edir + "/r" + std::to_string(rank);
  DLCKPT_RETURN_IF_ERROR(MakeDirs(rdir, &dirs));
  dirs.insert(rdir);
  dirs.insert(edir);
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
    const std::string dst = DataPath(edir, rank, fi.path);
    const std::string parent = fs::path(dst).parent_path().string();
    DLCKPT_RETURN_IF_ERROR(MakeDirs(parent, &dirs));
    ManifestFile mf{rank, fi.path, fi.size, fi.crc32c, fi.mode};
    if (S_ISDIR(fi.mode)) {
      DLCKPT_RETURN_IF_ERROR(MakeDirs(dst, &dirs));
      dirs.insert(dst);
      part.files.push_back(std::move(mf));
      continue;
    }
    dirs.insert(parent);
    DLCKPT_ASSIGN_OR_RETURN(int sfd, view.Open(fi.path, O_RDONLY));
    Fd out(::open(dst.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (out.get() < 0) {
      (void)view.Close(sfd);
      return Status::FromErrno(errno, "create " + dst);
    }
    uint32_t crc = 0;
    uint64_t off = 0;
    Status s;
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
      crc = Crc32c(piece.data, piece.len, crc);
      s = WriteAll(out.get(), piece.data, piece.len, dst);
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
    if (s.ok() && ::fsync(out.get()) != 0) s = Status::FromErrno(errno, "fsync " + dst);
    if (s.ok()) s = out.Close(dst);
    DLCKPT_RETURN_IF_ERROR(s);
    part.files.push_back(std::move(mf));
    ++r.files;
  }
  for (const auto& d : dirs) DLCKPT_RETURN_IF_ERROR(FsyncPath(d));
  if (o.hold_before_publish > 0) {
    std::this_thread::sleep_for(std::chrono::duration<double>(o.hold_before_publish));
  }
  DLCKPT_RETURN_IF_ERROR(Publish(edir + "/" + PartName(rank), FormatManifest(part)));

  // The rank that finds every part present publishes the whole manifest.
  bool all = true;
  for (int i = 0; i < ranks && all; ++i) all = Exists(edir + "/" + PartName(i));
  if (all && !Exists(edir + "/" + kManifest)) {
    Manifest whole;
    whole.job = job;
    whole.epoch = epoch;
    whole.ranks = ranks;
    for (int i = 0; i < ranks; ++i) {
      const std::string p = edir + "/" + PartName(i);
      std::FILE* f = std::fopen(p.c_str(), "rb");
      if (f == nullptr) return Status::FromErrno(errno, "open " + p);
      std::string text;
      char b[65536];
      for (size_t n; (n = std::fread(b, 1, sizeof b, f)) > 0;) text.append(b, n);
      std::fclose(f);
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
    DLCKPT_RETURN_IF_ERROR(Publish(edir + "/" + kManifest, FormatManifest(whole)));
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
  }
  return "?";
}

Result<std::vector<DrainedEpoch>> ListEpochs(const std::string& job_dir) {
  DIR* d = ::opendir(job_dir.c_str());
  if (d == nullptr) return Status::FromErrno(errno, "open directory " + job_dir);
  std::vector<DrainedEpoch> out;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind("epoch.", 0) != 0 || name.size() == 6 ||
        name.find_first_not_of("0123456789", 6) != std::string::npos) {
      continue;
    }
    DrainedEpoch de;
    de.epoch = std::strtoull(name.c_str() + 6, nullptr, 10);
    de.dir = job_dir + "/" + name;
    if (!Exists(de.dir + "/" + kManifest)) {
      int parts = 0;
      if (DIR* ed = ::opendir(de.dir.c_str())) {
        while (dirent* pe = ::readdir(ed)) {
          std::string pn = pe->d_name;
          if (pn.rfind("rank.", 0) == 0 && pn.size() > 5 && pn.compare(pn.size() - 5, 5, ".list") == 0) ++parts;
        }
        ::closedir(ed);
      }
      de.problem = "no MANIFEST (" + std::to_string(parts) + " rank part(s) written): drain unfinished";
    } else {
      auto m = ReadManifest(de.dir);
      if (!m.ok()) {
        de.state = EpochState::kCorrupt;
        de.problem = m.status().message();
      } else if (m->epoch != de.epoch) {
        de.state = EpochState::kCorrupt;
        de.problem = "MANIFEST names epoch " + std::to_string(m->epoch);
      } else {
        de.state = EpochState::kComplete;
        de.ranks = m->ranks;
        for (const auto& f : m->files) {
          if (S_ISDIR(f.mode)) continue;
          ++de.files;
          de.bytes += f.size;
        }
      }
    }
    out.push_back(std::move(de));
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(), [](const DrainedEpoch& a, const DrainedEpoch& b) { return a.epoch > b.epoch; });
  return out;
}

namespace {

// Reads a drained file, checking size and CRC32C; calls `sink` with its bytes.
Status ReadChecked(const std::string& epoch_dir, const ManifestFile& f,
                   const std::function<Status(const uint8_t*, size_t)>& sink) {
  const std::string path = DataPath(epoch_dir, f.rank, f.path);
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return Status::FromErrno(errno, "drained file " + path);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Status::FromErrno(errno, "stat " + path);
  if (static_cast<uint64_t>(st.st_size) != f.size) {
    return Status::Corruption("drained file " + path + " has " + std::to_string(st.st_size) +
                              " bytes, the manifest says " + std::to_string(f.size));
  }
  std::vector<uint8_t> buf(4u << 20);
  uint32_t crc = 0;
  for (uint64_t done = 0; done < f.size;) {
    ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, "read " + path);
    if (n == 0) return Status::Corruption("drained file " + path + " ends early");
    crc = Crc32c(buf.data(), static_cast<size_t>(n), crc);
    if (sink) DLCKPT_RETURN_IF_ERROR(sink(buf.data(), static_cast<size_t>(n)));
    done += static_cast<uint64_t>(n);
  }
  if (crc != f.crc32c) {
    char msg[80];
    std::snprintf(msg, sizeof msg, " (rank %d): CRC32C %08x, the manifest says %08x", f.rank, crc, f.crc32c);
    return Status::Corruption("drained file " + path + msg);
  }
  return Status::OK();
}

}  // namespace

Status VerifyEpoch(const std::string& epoch_dir, const std::function<void(uint64_t, uint64_t)>& progress) {
  DLCKPT_ASSIGN_OR_RETURN(Manifest m, ReadManifest(epoch_dir));
  uint64_t total = 0, done = 0;
  for (const auto& f : m.files) total += S_ISDIR(f.mode) ? 0 : f.size;
  for (const auto& f : m.files) {
    if (S_ISDIR(f.mode)) continue;
    DLCKPT_RETURN_IF_ERROR(ReadChecked(epoch_dir, f, nullptr));
    done += f.size;
    if (progress) progress(done, total);
  }
  return Status::OK();
}

Result<std::string> FindJobDir(const std::string& dir, const std::string& job) {
  auto has_epochs = [](const std::string& d) {
    auto l = ListEpochs(d);
    return l.ok() && !l->empty();
  };
  if (has_epochs(dir)) return dir;
  if (!job.empty() && has_epochs(JobDir(dir, job))) return JobDir(dir, job);
  std::vector<std::string> jobs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_directory(ec) && has_epochs(e.path().string())) jobs.push_back(e.path().string());
  }
  if (ec) return Status::FromErrno(ec.value(), "open directory " + dir);
  if (jobs.size() == 1) return jobs[0];
  if (jobs.empty()) return Status::NotFound(dir + " holds no drained epoch (no epoch.* directory in it or in a job directory below it)");
  std::sort(jobs.begin(), jobs.end());
  std::string names;
  for (const auto& j : jobs) names += (names.empty() ? "" : ", ") + j;
  return Status::InvalidArgument(dir + " holds the drained epochs of several jobs (" + names + "); name one");
}

Status RestoreRank(const std::string& epoch_dir, const Manifest& m, int rank, memfs::Store& owner) {
  for (const auto& f : m.files) {
    if (f.rank != rank) continue;
    if (S_ISDIR(f.mode)) {
      Status s = owner.Mkdir(f.path, f.mode & 07777);
      if (!s.ok() && s.code() != EEXIST) return s;
      continue;
    }
    DLCKPT_ASSIGN_OR_RETURN(int fd, owner.Open(f.path, O_WRONLY | O_CREAT | O_TRUNC, f.mode & 07777));
    Status s = ReadChecked(epoch_dir, f, [&](const uint8_t* p, size_t n) -> Status {
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

Result<std::vector<uint64_t>> Prune(const std::string& job_dir, int keep) {
  DLCKPT_ASSIGN_OR_RETURN(std::vector<DrainedEpoch> all, ListEpochs(job_dir));
  std::vector<uint64_t> removed;
  int complete = 0;
  uint64_t newest_complete = 0;
  for (const auto& e : all) {
    if (e.state == EpochState::kComplete && newest_complete == 0) newest_complete = e.epoch;
  }
  for (const auto& e : all) {
    bool drop = false;
    if (e.state == EpochState::kComplete) {
      drop = ++complete > keep;
    } else {
      drop = newest_complete != 0 && e.epoch < newest_complete;
    }
    if (!drop) continue;
    // MANIFEST first, so that an interrupted removal leaves an incomplete epoch.
    ::unlink((e.dir + "/" + kManifest).c_str());
    std::error_code ec;
    fs::remove_all(e.dir, ec);
    // ENOENT: another rank that published at the same moment prunes too.
    if (ec && ec.value() != ENOENT) return Status::FromErrno(ec.value(), "remove " + e.dir);
    removed.push_back(e.epoch);
  }
  return removed;
}

}  // namespace dlckpt::persist

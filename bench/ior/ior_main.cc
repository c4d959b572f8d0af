// dlckpt-ior: an MPI I/O benchmark with IOR's command line (POSIX subset)
// and IOR's output; see ior.h and `dlckpt-ior --help`.
//
// Linked with the static wrappers of libintercept (dlckpt_intercept) and the
// application API: paths under /dlckpt go to this rank's memfs store, every
// other path to the OS. Under /dlckpt:
//  - -F is required with more than one task (every rank writes its own store;
//    a store is per rank, there is no shared file);
//  - -C reads another virtual node's data: the reading rank attaches the
//    owner's store read-only (memfs::Store::Attach, kReadOnly), which shows
//    the newest committed epoch. The write phase is therefore committed (and,
//    under dlckpt-run, encoded) with dlckpt_checkpoint() after it, untimed,
//    unless --dlckpt.checkpoint already did so inside the timed write phase;
//  - run without dlckpt-run, dlckpt_checkpoint() commits locally, and the
//    stores (/dev/shm/dlckpt.local.<host>.r<rank>) are removed at the end
//    unless -k keeps the files.
//
// The IOR options of issue 21 (see ior.h, UsageText): -z shuffles the
// transfer order (one seed for all ranks, so a reader reads what the owner
// wrote in the same order); -D stops a phase's transfers at its deadline and
// the reads and checks of that repetition cover only what each owner wrote
// (-O stoneWallingWearOut=1: every rank goes on to the largest count); -m,
// -u and -F build the file name <dir>/<rank>/<name>.<rep>.<rank 8 digits>;
// -Y fsyncs each write, -E opens without O_CREAT, -x refuses short transfers,
// -q stops at the first data error, -l picks the data pattern, -Z reads a
// random other node's data, -c is noted and ignored (POSIX).
//
// Waiting never spins: barriers and reductions are non-blocking calls tested
// with short sleeps, so that ranks done early do not take CPU time from ranks
// still writing on an oversubscribed machine.
#include <fcntl.h>
#include <mpi.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dlckpt/dlckpt.h"
#include "dlckpt/intercept/intercept.h"
#include "dlckpt/memfs/memfs.h"
#include "ior.h"

#include "bench_mpi.h"
#include "dlckpt/base/node.h"
#include "dlckpt/base/version.h"

using namespace dlckpt;
using namespace dlckpt::ior;

namespace {

using dlckpt::bench::AllReduce;
using dlckpt::bench::Barrier;
using dlckpt::bench::WaitRequest;
using dlckpt::bench::Mix;

int g_rank = 0, g_size = 1;

// True when every rank's status is OK; otherwise each failing rank prints its
// error and everyone returns false.
bool Agree(const Status& s) {
  int bad = AllReduce<int>(s.ok() ? 0 : 1, MPI_INT, MPI_MAX);
  if (!s.ok()) std::fprintf(stderr, "dlckpt-ior: rank %d: %s\n", g_rank, s.ToString().c_str());
  return bad == 0;
}

std::string Normalize(const std::string& path) {
  std::string abs = path;
  if (abs.empty() || abs[0] != '/') {
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd) != nullptr) abs = std::string(cwd) + "/" + path;
  }
  std::vector<std::string> parts;
  size_t i = 0;
  while (i <= abs.size()) {
    size_t j = abs.find('/', i);
    if (j == std::string::npos) j = abs.size();
    std::string part = abs.substr(i, j - i);
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    i = j + 1;
  }
  std::string out;
  for (const auto& p : parts) out += "/" + p;
  return out.empty() ? "/" : out;
}

// Where the files live and how a file is reached.
struct Target {
  bool memfs = false;
  bool service = false;  // run under dlckpt-run (encode by the codec)
  std::vector<std::string> store_names;  // per rank (memfs)
};

// One open file: an OS (or intercepted) descriptor, or a descriptor of a
// store attached read-only (another rank's, for -C under /dlckpt).
struct File {
  int fd = -1;
  std::unique_ptr<memfs::Store> foreign;
  std::string path;
  bool single = false;  // -x: a short transfer is an error, not retried

  Status Short(const char* what, size_t done, size_t want, uint64_t off) const {
    return Status::Error(EIO, std::string(what) + " " + path + " at " + std::to_string(off) + ": " +
                                  std::to_string(done) + " of " + std::to_string(want) +
                                  " bytes (-x: single transfer attempt)");
  }

  Status Pwrite(const void* buf, size_t len, uint64_t off) {
    const char* p = static_cast<const char*>(buf);
    while (len > 0) {
      ssize_t n = pwrite(fd, p, len, static_cast<off_t>(off));
      if (n < 0 && errno == EINTR && !single) continue;
      if (n <= 0) return Status::FromErrno(n < 0 ? errno : EIO, "write " + path + " at " + std::to_string(off));
      if (single && static_cast<size_t>(n) < len) return Short("write", static_cast<size_t>(n), len, off);
      p += n;
      off += static_cast<uint64_t>(n);
      len -= static_cast<size_t>(n);
    }
    return Status::OK();
  }
  Status Pread(void* buf, size_t len, uint64_t off) {
    char* p = static_cast<char*>(buf);
    while (len > 0) {
      if (foreign) {
        DLCKPT_ASSIGN_OR_RETURN(size_t n, foreign->Pread(fd, p, len, off));
        if (n == 0) return Status::Error(EIO, "read " + path + " at " + std::to_string(off) + ": end of file");
        if (single && n < len) return Short("read", n, len, off);
        p += n;
        off += n;
        len -= n;
        continue;
      }
      ssize_t n = pread(fd, p, len, static_cast<off_t>(off));
      if (n < 0 && errno == EINTR && !single) continue;
      if (n < 0) return Status::FromErrno(errno, "read " + path + " at " + std::to_string(off));
      if (n == 0) return Status::Error(EIO, "read " + path + " at " + std::to_string(off) + ": end of file");
      if (single && static_cast<size_t>(n) < len) return Short("read", static_cast<size_t>(n), len, off);
      p += n;
      off += static_cast<uint64_t>(n);
      len -= static_cast<size_t>(n);
    }
    return Status::OK();
  }
  Status Close() {
    Status s;
    if (foreign) {
      s = foreign->Close(fd);
      foreign.reset();
    } else if (fd >= 0 && close(fd) != 0) {
      s = Status::FromErrno(errno, "close " + path);
    }
    fd = -1;
    return s;
  }
};

// What one rank did in one phase besides its timers.
struct PhaseCount {
  uint64_t pairs = 0;          // transfers done
  bool hit_deadline = false;   // -D stopped it
  double deadline_at = 0;      // seconds from the phase's start to the stop
};

class Bench {
 public:
  Bench(Options o, Target t, int read_owner, uint32_t signature)
      : o_(std::move(o)), t_(std::move(t)), read_owner_(read_owner), signature_(signature) {
    buf_.resize(o_.transfer_size / 8);
    check_.resize(o_.transfer_size / 8);
    written_.assign(static_cast<size_t>(g_size), Transfers());
  }

  // <dir>/<owner>/ with -u; <name>.<rep> with -m; .<owner, 8 digits> with -F.
  std::string FileName(int owner, int rep) const {
    std::string name = o_.test_file;
    if (o_.multi_file) name += "." + std::to_string(rep);
    if (o_.unique_dir) name = UniqueDir(owner) + "/" + BaseName(name);
    if (!o_.file_per_proc) return name;
    char suffix[32];
    std::snprintf(suffix, sizeof suffix, ".%08d", owner);
    return name + suffix;
  }
  std::string UniqueDir(int owner) const {
    std::string name = o_.test_file;
    size_t slash = name.rfind('/');
    std::string dir = slash == std::string::npos ? "." : slash == 0 ? "" : name.substr(0, slash);
    return dir + "/" + std::to_string(owner);
  }
  static std::string BaseName(const std::string& path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
  }
  int ReadOwner() const { return read_owner_; }
  uint64_t Transfers() const { return o_.segments * (o_.block_size / o_.transfer_size); }
  // Offset of transfer k of `owner`'s data in its file.
  uint64_t Offset(int owner, uint64_t k) const {
    uint64_t per_block = o_.block_size / o_.transfer_size;
    uint64_t seg = k / per_block, j = k % per_block;
    uint64_t base = o_.file_per_proc ? seg * o_.block_size
                                     : (seg * static_cast<uint64_t>(g_size) + static_cast<uint64_t>(owner)) * o_.block_size;
    return base + j * o_.transfer_size;
  }
  // The transfer order of repetition rep (the same on every rank).
  void Order(int rep) {
    uint64_t seed = static_cast<uint64_t>(static_cast<int64_t>(o_.random_seed)) * 1000003u + static_cast<uint64_t>(rep);
    order_ = TransferOrder(Transfers(), o_.random_offset, seed);
  }
  // The transfers of `owner`'s file that hold data of this repetition: all,
  // or with -D those its write phase reached (SetWritten).
  uint64_t Written(int owner) const { return written_[static_cast<size_t>(owner)]; }
  void SetWritten(std::vector<uint64_t> counts) { written_ = std::move(counts); }
  void ResetWritten() { written_.assign(static_cast<size_t>(g_size), Transfers()); }
  bool PerTransferPattern() const {
    return o_.packet == DataPacket::kOffset || o_.packet == DataPacket::kIncompressible;
  }
  void Fill(std::vector<uint64_t>* words, int owner, int rep, uint64_t off) const {
    FillTransfer(o_.packet, owner, rep, off, signature_, std::span<uint64_t>(*words));
  }

  // Issues transfers order_[0 .. limit) through `io` until the -D deadline
  // (measured from `start`); with wear-out, then on to the largest count any
  // rank reached. Collective with -D and wear-out: every rank calls it.
  template <class Io>
  Status Transfer(double start, uint64_t limit, PhaseCount* c, Io io) {
    Status s;
    uint64_t k = 0;
    for (; s.ok() && k < limit; ++k) {
      if (o_.deadline > 0 && MPI_Wtime() - start >= o_.deadline) {
        c->hit_deadline = true;
        c->deadline_at = MPI_Wtime() - start;
        break;
      }
      s = io(order_[k]);
    }
    if (o_.deadline > 0 && o_.wear_out) {
      uint64_t most = AllReduce<uint64_t>(k, MPI_UINT64_T, MPI_MAX);
      for (; s.ok() && k < std::min(most, limit); ++k) s = io(order_[k]);
    }
    c->pairs = k;
    return s;
  }

  // The write phase of repetition `rep`; fills `t`, `latency` and `c`.
  Status Write(int rep, Timers* t, double* latency, PhaseCount* c) {
    Fill(&buf_, g_rank, rep, 0);
    File f;
    f.path = FileName(g_rank, rep);
    f.single = o_.single_xfer;
    Status s;
    if (o_.unique_dir && mkdir(UniqueDir(g_rank).c_str(), 0755) != 0 && errno != EEXIST) {
      s = Status::FromErrno(errno, "-u: mkdir " + UniqueDir(g_rank));
    }
    Barrier();
    (*t)[0] = MPI_Wtime();
    if (s.ok()) {
      int flags = (o_.use_existing ? 0 : O_CREAT) | O_WRONLY | O_CLOEXEC;
      f.fd = open(f.path.c_str(), flags, 0644);
      if (f.fd < 0) {
        s = Status::FromErrno(errno, "open " + f.path + " for writing" +
                                         (o_.use_existing ? " (-E: use the existing file)" : ""));
      }
    }
    (*t)[1] = MPI_Wtime();
    if (o_.intra_barriers) Barrier();
    (*t)[2] = MPI_Wtime();
    Status x = Transfer((*t)[0], s.ok() ? Transfers() : 0, c, [&](uint64_t k) {
      uint64_t off = Offset(g_rank, k);
      if (PerTransferPattern()) {
        Fill(&buf_, g_rank, rep, off);
      } else if (o_.packet == DataPacket::kGeneric) {
        buf_[0] = off;
      }
      Status w = f.Pwrite(buf_.data(), o_.transfer_size, off);
      if (w.ok() && o_.fsync_per_write && fsync(f.fd) != 0) w = Status::FromErrno(errno, "-Y: fsync " + f.path);
      return w;
    });
    if (s.ok()) s = x;
    (*t)[3] = MPI_Wtime();
    if (o_.intra_barriers) Barrier();
    (*t)[4] = MPI_Wtime();
    if (s.ok() && o_.fsync && fsync(f.fd) != 0) s = Status::FromErrno(errno, "fsync " + f.path);
    Status cl = f.Close();
    if (s.ok()) s = cl;
    if (o_.dlckpt_checkpoint) {
      // Collective: every rank calls it, even after a local error, so that
      // nobody waits forever; the error is reported by Agree.
      if (dlckpt_checkpoint() != 0 && s.ok()) {
        s = Status::Error(errno ? errno : EIO, std::string("dlckpt_checkpoint: ") + dlckpt_last_error());
      }
    }
    (*t)[5] = MPI_Wtime();
    *latency = ((*t)[3] - (*t)[2]) / static_cast<double>(std::max<uint64_t>(c->pairs, 1));
    return s;
  }

  Status OpenForRead(File* f, int owner, int rep) {
    f->path = FileName(owner, rep);
    f->single = o_.single_xfer;
    if (t_.memfs && owner != g_rank) {
      const std::string& name = t_.store_names[static_cast<size_t>(owner)];
      DLCKPT_ASSIGN_OR_RETURN(f->foreign, memfs::Store::Attach(name, memfs::AttachMode::kReadOnly));
      auto fd = f->foreign->Open(Normalize(f->path), O_RDONLY);
      if (!fd.ok()) {
        f->foreign.reset();
        return fd.status().Prefixed("open " + f->path + " in store " + name + " (rank " + std::to_string(owner) + ")");
      }
      f->fd = *fd;
      return Status::OK();
    }
    f->fd = open(f->path.c_str(), O_RDONLY | O_CLOEXEC);
    if (f->fd < 0) return Status::FromErrno(errno, "open " + f->path + " for reading");
    return Status::OK();
  }

  Status Read(int rep, Timers* t, double* latency, PhaseCount* c) {
    int owner = ReadOwner();
    File f;
    Barrier();
    (*t)[0] = MPI_Wtime();
    Status s = OpenForRead(&f, owner, rep);
    (*t)[1] = MPI_Wtime();
    if (o_.intra_barriers) Barrier();
    (*t)[2] = MPI_Wtime();
    Status x = Transfer((*t)[0], s.ok() ? Written(owner) : 0, c, [&](uint64_t k) {
      return f.Pread(check_.data(), o_.transfer_size, Offset(owner, k));
    });
    if (s.ok()) s = x;
    (*t)[3] = MPI_Wtime();
    if (o_.intra_barriers) Barrier();
    (*t)[4] = MPI_Wtime();
    Status cl = f.Close();
    if (s.ok()) s = cl;
    (*t)[5] = MPI_Wtime();
    *latency = ((*t)[3] - (*t)[2]) / static_cast<double>(std::max<uint64_t>(c->pairs, 1));
    return s;
  }

  // Reads the file the read phase reads and compares every word with what its
  // owner wrote (the transfers its write phase reached); returns the number of
  // wrong 8-byte words in *errors.
  Status Verify(int rep, uint64_t* errors) {
    int owner = ReadOwner();
    std::vector<uint64_t> expect(buf_.size());
    File f;
    DLCKPT_RETURN_IF_ERROR(OpenForRead(&f, owner, rep));
    Status s;
    for (uint64_t i = 0; s.ok() && i < Written(owner); ++i) {
      uint64_t off = Offset(owner, order_[i]);
      s = f.Pread(check_.data(), o_.transfer_size, off);
      Fill(&expect, owner, rep, off);
      for (size_t w = 0; s.ok() && w < expect.size(); ++w) *errors += check_[w] != expect[w];
    }
    Status c = f.Close();
    return s.ok() ? c : s;
  }

  Status Remove(int rep) {
    if (!o_.file_per_proc && g_rank != 0) return Status::OK();
    std::string path = FileName(g_rank, rep);
    if (unlink(path.c_str()) != 0) return Status::FromErrno(errno, "remove " + path);
    if (o_.unique_dir && rmdir(UniqueDir(g_rank).c_str()) != 0 && errno != ENOTEMPTY && errno != EEXIST) {
      return Status::FromErrno(errno, "-u: rmdir " + UniqueDir(g_rank));
    }
    return Status::OK();
  }

 private:
  Options o_;
  Target t_;
  int read_owner_;
  uint32_t signature_;
  std::vector<uint64_t> buf_, check_;
  std::vector<uint64_t> order_;
  std::vector<uint64_t> written_;
};

Timers ReduceTimers(const Timers& t) {
  Timers out{};
  MPI_Request req[2];
  double starts[3] = {t[0], t[2], t[4]}, ends[3] = {t[1], t[3], t[5]};
  double min_starts[3], max_ends[3];
  MPI_Iallreduce(starts, min_starts, 3, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD, &req[0]);
  MPI_Iallreduce(ends, max_ends, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &req[1]);
  WaitRequest(&req[0]);
  WaitRequest(&req[1]);
  for (int i = 0; i < 3; ++i) {
    out[static_cast<size_t>(2 * i)] = min_starts[i];
    out[static_cast<size_t>(2 * i + 1)] = max_ends[i];
  }
  return out;
}

std::vector<std::string> AllGatherStrings(const std::string& mine) {
  constexpr int kLen = 512;
  std::vector<char> in(kLen, 0), all(static_cast<size_t>(kLen) * static_cast<size_t>(g_size), 0);
  std::memcpy(in.data(), mine.data(), std::min<size_t>(mine.size(), kLen - 1));
  MPI_Request req;
  MPI_Iallgather(in.data(), kLen, MPI_CHAR, all.data(), kLen, MPI_CHAR, MPI_COMM_WORLD, &req);
  WaitRequest(&req);
  std::vector<std::string> out;
  for (int r = 0; r < g_size; ++r) out.emplace_back(all.data() + static_cast<size_t>(r) * kLen);
  return out;
}

std::string FsTypeName(long type) {
  switch (static_cast<unsigned long>(type)) {
    case 0xEF53: return "ext4";
    case 0x01021994: return "tmpfs";
    case 0x65735546: return "fuse";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x794c7630: return "overlayfs";
    case 0x6969: return "nfs";
    default: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "type 0x%lx", static_cast<unsigned long>(type));
      return buf;
    }
  }
}

std::string DirOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

int main(int argc, char** argv) {
  if (dlckpt_version_requested(argc, argv)) return 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  std::vector<std::string> args(argv + 1, argv + argc);
  auto parsed = ParseOptions(args);
  if (!parsed.ok() || parsed->help) {
    if (g_rank == 0) {
      if (parsed.ok()) {
        std::fputs(UsageText().c_str(), stdout);
      } else {
        std::fprintf(stderr, "dlckpt-ior: %s\n", parsed.status().message().c_str());
      }
    }
    MPI_Finalize();
    return parsed.ok() ? 0 : 2;
  }
  Options o = *parsed;
  std::string began = TimeString(time(nullptr));

  Target target;
  target.memfs = intercept::RoutesToMemfs(o.test_file);
  const char* rdv = std::getenv("DLCKPT_RENDEZVOUS");
  target.service = rdv != nullptr && *rdv != '\0';
  auto usage_error = [&](const std::string& msg) {
    if (g_rank == 0) std::fprintf(stderr, "dlckpt-ior: %s\n", msg.c_str());
    MPI_Finalize();
    return 2;
  };
  if (target.memfs && !o.file_per_proc && g_size > 1) {
    return usage_error("-o " + o.test_file + " is under /dlckpt, where every rank has its own store: "
                       "a single shared file is impossible; use -F (file per process)");
  }
  if (o.dlckpt_checkpoint && !target.memfs) {
    return usage_error("--dlckpt.checkpoint: -o " + o.test_file + " is not under /dlckpt");
  }
  if (target.memfs && dlckpt_init(MPI_COMM_WORLD) != 0) {
    std::fprintf(stderr, "dlckpt-ior: rank %d: dlckpt_init: %s\n", g_rank, dlckpt_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  // Nodes: ranks with the same $DLCKPT_NODE (else host name) share a node.
  std::vector<std::string> nodes = AllGatherStrings(dlckpt::ThisNode());
  std::map<std::string, int> per_node;
  for (const auto& n : nodes) ++per_node[n];
  int tasks_per_node = 0;
  for (const auto& [n, c] : per_node) tasks_per_node = std::max(tasks_per_node, c);
  int shift = (o.task_offset * tasks_per_node) % g_size;
  int read_owner = g_rank;
  if (o.reorder) read_owner = (g_rank + shift) % g_size;
  if (o.reorder_random) {
    read_owner = RandomReadOwner(g_rank, g_size, tasks_per_node, o.task_offset,
                                 static_cast<uint64_t>(static_cast<int64_t>(o.random_seed)));
  }
  // Whether any rank reads another rank's data (-C or -Z).
  bool reordered = AllReduce<int>(read_owner != g_rank ? 1 : 0, MPI_INT, MPI_MAX) != 0;
  if ((o.reorder || o.reorder_random) && !reordered && g_rank == 0) {
    std::fprintf(stderr,
                 "dlckpt-ior: warning: %s: with %d task(s) per node and -Q %d every task reads its own "
                 "data (nodes are told apart by $DLCKPT_NODE, else the host name; dlckpt-run sets it)\n",
                 o.reorder ? "-C" : "-Z", tasks_per_node, o.task_offset);
  }
  if (o.collective && g_rank == 0) {
    std::fprintf(stderr, "dlckpt-ior: note: -c (collective I/O) is ignored: the POSIX API has no collective "
                         "I/O (IOR applies it to MPIIO, HDF5 and NCMPI)\n");
  }
  // -l timestamp: rank 0's start time, the same on every rank.
  uint32_t signature = AllReduce<unsigned>(g_rank == 0 ? static_cast<unsigned>(time(nullptr)) : 0u,
                                           MPI_UNSIGNED, MPI_MAX);

  RunInfo info;
  info.began = began;
  info.tasks = g_size;
  info.nodes = static_cast<int>(per_node.size());
  info.tasks_per_node = tasks_per_node;
  for (int i = 0; i < argc; ++i) info.command_line += (i ? " " : "") + std::string(argv[i]);
  struct utsname un;
  info.machine = uname(&un) == 0 ? std::string(un.sysname) + " " + un.nodename : "Unknown";

  memfs::Store* own_store = nullptr;
  if (target.memfs) {
    auto store = intercept::ProcessStore();
    if (!Agree(store.ok() ? Status::OK() : store.status())) {
      MPI_Finalize();
      return 1;
    }
    own_store = *store;
    target.store_names = AllGatherStrings(own_store->name());
    info.target = "memfs store " + own_store->name() + " of rank 0 (libintercept)" +
                  (target.service ? ", checkpoints encoded by the codec service (dlckpt-run)"
                                  : ", checkpoints committed locally (no dlckpt-run)");
    memfs::StoreStats st = own_store->stats();
    uint64_t files = 0;
    if (auto l = own_store->List("/"); l.ok()) files = l->size();
    info.fs = {true, st.capacity, st.blocks_free * st.block_size, st.max_files, st.max_files - files};
    info.fs_line = FsLine(st.capacity, st.blocks_free * st.block_size, st.max_files, st.max_files - files);
  } else {
    std::string dir = DirOf(o.test_file);
    struct statvfs sv;
    struct statfs sf;
    if (statvfs(dir.c_str(), &sv) == 0) {
      info.fs = {true, static_cast<uint64_t>(sv.f_blocks) * sv.f_frsize, static_cast<uint64_t>(sv.f_bfree) * sv.f_frsize,
                 sv.f_files, sv.f_ffree};
      info.fs_line = FsLine(static_cast<uint64_t>(sv.f_blocks) * sv.f_frsize,
                            static_cast<uint64_t>(sv.f_bfree) * sv.f_frsize, sv.f_files, sv.f_ffree);
    }
    info.target = "OS file system" + (statfs(dir.c_str(), &sf) == 0 ? " (" + FsTypeName(sf.f_type) + ")" : "");
  }

  Bench bench(o, target, read_owner, signature);
  info.path = bench.FileName(0, 0);
  info.start_time = TimeString(time(nullptr));
  uint64_t agg = o.block_size * o.segments * static_cast<uint64_t>(g_size);
  bool ok = true;
  uint64_t write_errors = 0, read_errors = 0;
  auto delay = [&] {
    if (o.inter_test_delay > 0) sleep(static_cast<unsigned>(o.inter_test_delay));
  };
  // Checks the data of repetition rep after the phase `what`: false if a rank
  // could not read it; the ranks' mismatches are added to *errors_total.
  auto verify = [&](int rep, const char* what, uint64_t* errors_total) {
    uint64_t errors = 0;
    if (!Agree(bench.Verify(rep, &errors))) return false;
    errors = AllReduce<uint64_t>(errors, MPI_UINT64_T, MPI_SUM);
    *errors_total += errors;
    if (g_rank == 0 && errors) std::fprintf(stderr, "WARNING: incorrect data on %s (%llu errors found).\n", what, static_cast<unsigned long long>(errors));
    return true;
  };
  // Runs the write or read phase of repetition rep (its counts in *c) and
  // records it as IOR reports it, with -D's counts reduced over the ranks;
  // false if a rank failed.
  auto run_phase = [&](Access a, int rep, PhaseCount* c) {
    delay();
    if (o.verbose && g_rank == 0) {
      std::fprintf(stderr, "Commencing %s performance test: %s\n", a == Access::kWrite ? "write" : "read",
                   TimeString(time(nullptr)).c_str());
    }
    Timers t{};
    double lat = 0;
    Status s = a == Access::kWrite ? bench.Write(rep, &t, &lat, c) : bench.Read(rep, &t, &lat, c);
    if (!Agree(s)) return false;
    double min_lat = AllReduce<double>(lat, MPI_DOUBLE, MPI_MIN);
    uint64_t sum = AllReduce<uint64_t>(c->pairs, MPI_UINT64_T, MPI_SUM);
    PhaseResult p = Reduce(a, rep, ReduceTimers(t), min_lat, o.deadline > 0 ? sum * o.transfer_size : agg,
                           o.transfer_size);
    if (o.deadline > 0) {
      p.stonewalled = AllReduce<int>(c->hit_deadline ? 1 : 0, MPI_INT, MPI_MAX) != 0;
      p.pairs_min = AllReduce<uint64_t>(c->pairs, MPI_UINT64_T, MPI_MIN);
      p.pairs_max = AllReduce<uint64_t>(c->pairs, MPI_UINT64_T, MPI_MAX);
      p.pairs_sum = sum;
      p.stonewall_time = AllReduce<double>(c->hit_deadline ? c->deadline_at : 0, MPI_DOUBLE, MPI_MAX);
    }
    info.phases.push_back(p);
    return true;
  };
  bool quit = false;
  for (int rep = 0; ok && !quit && rep < o.repetitions; ++rep) {
    bool committed = false;
    bench.Order(rep);
    bench.ResetWritten();
    if (o.write) {
      PhaseCount c;
      if (!(ok = run_phase(Access::kWrite, rep, &c))) break;
      if (o.deadline > 0) {
        // Reads and checks cover what each owner wrote before its deadline.
        std::vector<uint64_t> counts(static_cast<size_t>(g_size));
        MPI_Request req;
        MPI_Iallgather(&c.pairs, 1, MPI_UINT64_T, counts.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD, &req);
        WaitRequest(&req);
        bench.SetWritten(std::move(counts));
      }
      committed = o.dlckpt_checkpoint;
    }
    // Another rank's store shows only committed data.
    bool foreign_reads = target.memfs && reordered;
    if (foreign_reads && !committed && o.write && (o.read || o.check_write || o.check_read)) {
      int rc = dlckpt_checkpoint();
      if (!(ok = Agree(rc == 0 ? Status::OK()
                               : Status::Error(errno ? errno : EIO,
                                               std::string("dlckpt_checkpoint after the write phase: ") +
                                                   dlckpt_last_error())))) {
        break;
      }
    }
    // -q: the first data check that finds wrong data ends the run.
    auto quit_now = [&](uint64_t before, uint64_t after, const char* what) {
      if (!o.quit_on_error || after == before) return false;
      if (g_rank == 0) {
        std::fprintf(stderr, "dlckpt-ior: -q: quitting after the %s check of repetition %d found wrong data\n", what,
                     rep);
      }
      return true;
    };
    uint64_t before = write_errors;
    if (o.check_write && !(ok = verify(rep, "write", &write_errors))) break;
    if ((quit = quit_now(before, write_errors, "write"))) break;
    if (o.read) {
      PhaseCount c;
      if (!(ok = run_phase(Access::kRead, rep, &c))) break;
    }
    before = read_errors;
    if (o.check_read && !(ok = verify(rep, "read", &read_errors))) break;
    if ((quit = quit_now(before, read_errors, "read"))) break;
    if (!o.keep_file && o.write) {
      Barrier();
      double t0 = MPI_Wtime();
      Status s = bench.Remove(rep);
      Barrier();
      double t1 = MPI_Wtime();
      if (!(ok = Agree(s))) break;
      info.removes.push_back({rep, t1 - t0});
    }
  }
  info.finished = TimeString(time(nullptr));

  int rc = ok ? 0 : 1;
  if (ok && g_rank == 0) {
    std::string report = FormatReport(o, info);
    if (o.summary_file.empty()) {
      std::fputs(report.c_str(), stdout);
      std::fflush(stdout);
    } else {
      FILE* f = std::fopen(o.summary_file.c_str(), "w");
      if (f == nullptr || std::fputs(report.c_str(), f) < 0 || std::fclose(f) != 0) {
        std::fprintf(stderr, "dlckpt-ior: write %s: %s\n", o.summary_file.c_str(), std::strerror(errno));
        rc = 1;
      }
    }
  }
  if (write_errors + read_errors > 0) rc = 1;
  if (target.memfs) {
    // dlckpt-ior removes (or, with -k, keeps) its stores itself, below.
    setenv("DLCKPT_KEEP", "1", 1);
    if (dlckpt_finalize() != 0) {
      std::fprintf(stderr, "dlckpt-ior: rank %d: dlckpt_finalize: %s\n", g_rank, dlckpt_last_error());
      rc = 1;
    }
    if (!target.service && !o.keep_file && own_store != nullptr) {
      // Standalone run: the store was this run's scratch space.
      std::string name = own_store->name();
      (void)intercept::DetachStore();
      Status s = memfs::Store::Destroy(name);
      if (!s.ok()) std::fprintf(stderr, "dlckpt-ior: rank %d: remove store %s: %s\n", g_rank, name.c_str(), s.ToString().c_str());
    } else if (!target.service && g_rank == 0) {
      std::fprintf(stderr, "dlckpt-ior: -k: the stores stay (%s ...); remove them with dlckpt-store rm\n",
                   own_store ? own_store->name().c_str() : "?");
    }
  }
  rc = AllReduce<int>(rc, MPI_INT, MPI_MAX);
  MPI_Finalize();
  return rc;
}

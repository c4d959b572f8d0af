// The VeloC API (veloc.h) over dlckpt: phases, versions and the routed file
// here; regions through the memory interface (dlckpt_protect, api_memory.h);
// one dlckpt checkpoint round per VeloC checkpoint. See README.md.
//
// The store holds, beside the regions (/.dlckpt-mem/<id>), the checkpoint's
// record kRecord ("<name>\n<version>\n<has file 0|1>\n") and its routed file
// kFile. The routed file is staged on disk (the scratch directory, default
// /dev/shm) while the application writes or reads it: a shared library
// cannot route the application's own I/O into memfs.
#include <mpi.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "veloc.h"
#include "dlckpt/base/env.h"
#include "dlckpt/base/strings.h"
#include "dlckpt/dlckpt.h"
#include "dlckpt/intercept/intercept.h"
#include "dlckpt/memfs/memfs.h"
#include "api_memory.h"

namespace dlckpt::veloc {
namespace {

namespace fs = std::filesystem;

constexpr const char* kRecord = "/dlckpt/veloc/checkpoint";
constexpr const char* kFile = "/dlckpt/veloc/file";

enum class Phase { kNone, kCheckpoint, kRestart };

struct Record {
  std::string name;
  long long version = -1;
  bool has_file = false;
};

struct State {
  bool initialized = false;
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  memfs::Store* store = nullptr;
  std::string stage;  // this rank's staging directory
  Phase phase = Phase::kNone;
  std::string name;          // of the current phase
  int version = 0;           // of the current phase
  bool routed = false;       // Route_file was called in the current phase
  long long last_version = -1;  // checkpointed or restarted by this run
};

State& S() {
  static State* const s = new State();
  return *s;
}

// Reports a failure as VeloC does (a message, then VELOC_FAILURE).
int Fail(const std::string& what) {
  std::fprintf(stderr, "VELOC: rank %d: %s\n", S().rank, what.c_str());
  return VELOC_FAILURE;
}

int FailDlckpt(const std::string& what) { return Fail(what + ": " + dlckpt_last_error()); }

// Every rank's `ok`, agreed: true only if it is true everywhere.
bool AllOk(bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  if (MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, S().comm) != MPI_SUCCESS) return false;
  return all == 1;
}

// Whether dlckpt-run read `path` too (dlckpt-run --veloc-config, which it
// passes to the ranks as DLCKPT_VELOC_CONFIG): it then decided the encode mode
// (DLCKPT_ENCODE, where its command line wins over the file) and reported the
// keys it ignores.
bool ReadByRun(const char* path) {
  const char* run = std::getenv("DLCKPT_VELOC_CONFIG");
  if (run == nullptr || *run == '\0') return false;
  std::error_code ec;
  return fs::equivalent(run, path, ec);
}

// VeloC's configuration file: "key = value" lines, '#' and ';' comments,
// "[section]" lines skipped (ParseKeyValueLines). Honoured here: scratch,
// and mode unless dlckpt-run read the file; dlckpt-run --veloc-config maps
// the second level's keys; the rest is reported (rank 0) and ignored.
bool ReadConfig(const char* path, std::string* scratch, std::string* mode) {
  if (path == nullptr || *path == '\0') return true;
  auto text = Env::Default()->ReadFile(path, size_t{1} << 20);
  if (!text.ok()) {
    Fail("VELOC_Init: cannot read the configuration file: " + text.status().message());
    return false;
  }
  auto lines = ParseKeyValueLines(path, *text);
  if (!lines.ok()) {
    Fail("VELOC_Init: " + lines.status().message());
    return false;
  }
  const bool by_run = ReadByRun(path);
  for (const KeyValueLine& kv : *lines) {
    if (kv.key == "scratch") {
      *scratch = kv.value;
    } else if (kv.key == "mode") {
      if (!by_run) *mode = kv.value;
    } else if (S().rank == 0 && !by_run) {
      std::fprintf(stderr, "VELOC: %s is not used by VELOC_Init: dlckpt-run --veloc-config %s maps or reports it "
                   "(veloc/README.md)\n", kv.key.c_str(), path);
    }
  }
  return true;
}

void RemoveStage(const std::string& stage) {
  std::error_code ec;
  if (!stage.empty()) fs::remove_all(stage, ec);
}

// The staged checkpoint file of the current phase.
std::string StagedPath() {
  const State& st = S();
  return st.stage + "/" + st.name + "-" + std::to_string(st.version) +
         (st.phase == Phase::kRestart ? ".restart.dat" : ".dat");
}

bool ReadRecord(Record* r) {
  auto text = api::memory::ReadStoreFile(S().store, kRecord);
  if (!text.ok()) return false;
  std::istringstream in(*text);
  int has = 0;
  if (!std::getline(in, r->name) || !(in >> r->version >> has)) return false;
  r->has_file = has != 0;
  return true;
}

bool NeedInit(const char* fn) {
  if (S().initialized) return true;
  Fail(std::string(fn) + ": call VELOC_Init first");
  return false;
}

// Stores this rank's part of the checkpoint of the current phase (the routed
// file and the record); the regions follow in dlckpt_checkpoint.
Status StoreCheckpoint() {
  State& st = S();
  bool has_file = false;
  if (st.routed) {
    std::ifstream in(StagedPath(), std::ios::binary);
    if (in) {  // routed but never written: no file
      std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (in.bad()) return Status::IOError("reading " + StagedPath());
      DLCKPT_RETURN_IF_ERROR(api::memory::WriteStoreFile(st.store, kFile, bytes.data(), bytes.size()));
      has_file = true;
    }
  }
  if (!has_file) {
    Status s = st.store->Unlink(kFile);
    if (!s.ok() && s.code() != ENOENT) return s;
  }
  const std::string record = st.name + "\n" + std::to_string(st.version) + "\n" + (has_file ? "1" : "0") + "\n";
  return api::memory::WriteStoreFile(st.store, kRecord, record.data(), record.size());
}

int EndPhase(bool ok, const char* fn) {
  State& st = S();
  std::error_code ec;
  fs::remove(StagedPath(), ec);
  st.phase = Phase::kNone;
  st.routed = false;
  if (!ok) return Fail(std::string(fn) + ": a rank reported failure (success = 0 or an error): none taken");
  return VELOC_SUCCESS;
}

bool ValidName(const char* fn, const char* name) {
  if (name != nullptr && *name != '\0' && std::strchr(name, '/') == nullptr && std::strlen(name) < 256) return true;
  Fail(std::string(fn) + ": the name must be 1 to 255 bytes without '/'");
  return false;
}

// The region ids a selective call chooses: VeloC's ALL (every protected
// id), SOME (the listed ones) or REST (the protected ones not listed); the
// modes of VELOC_Checkpoint_selective and VELOC_Recover_selective are the
// same numbers. false (after Fail) for a bad list or mode.
static_assert(VELOC_CKPT_ALL == VELOC_RECOVER_ALL && VELOC_CKPT_SOME == VELOC_RECOVER_SOME &&
              VELOC_CKPT_REST == VELOC_RECOVER_REST);
bool Choose(const char* fn, int mode, const int* ids, int id_count, std::vector<int>* chosen) {
  if (mode != VELOC_RECOVER_ALL && (id_count < 0 || (id_count > 0 && ids == nullptr))) {
    Fail(std::string(fn) + ": bad id list");
    return false;
  }
  const std::set<int> listed(ids, ids + (mode == VELOC_RECOVER_ALL ? 0 : id_count));
  chosen->clear();
  if (mode == VELOC_RECOVER_SOME) {
    chosen->assign(listed.begin(), listed.end());
  } else if (mode == VELOC_RECOVER_ALL || mode == VELOC_RECOVER_REST) {
    for (int id : api::memory::ProtectedIds()) {
      if (listed.count(id) == 0) chosen->push_back(id);
    }
  } else {
    Fail(std::string(fn) + ": unknown mode " + std::to_string(mode));
    return false;
  }
  return true;
}

// Opens a checkpoint or restart phase of `name`, `version` (checked by the
// caller); a checkpoint phase starts with no region selection.
int OpenPhase(Phase phase, const char* name, int version) {
  State& st = S();
  if (phase == Phase::kCheckpoint) (void)api::memory::SelectNext(nullptr);
  st.phase = phase;
  st.name = name;
  st.version = version;
  st.routed = false;
  return VELOC_SUCCESS;
}

// The prologue of the selective calls: initialised, inside `phase` (named
// `opener` in the error), and the ids `mode` chooses (Choose).
bool SelectiveIds(const char* fn, Phase phase, const char* opener, int mode, const int* ids, int id_count,
                  std::vector<int>* chosen) {
  if (!NeedInit(fn)) return false;
  if (S().phase != phase) {
    Fail(std::string(fn) + ": outside a " + (phase == Phase::kCheckpoint ? "checkpoint" : "restart") +
         " phase (" + opener + ")");
    return false;
  }
  return Choose(fn, mode, ids, id_count, chosen);
}

}  // namespace
}  // namespace dlckpt::veloc

using dlckpt::veloc::S;
namespace dv = dlckpt::veloc;

extern "C" {

int VELOC_Init(MPI_Comm comm, const char* cfg_file) {
  dv::State& st = S();
  if (st.initialized) return dv::Fail("VELOC_Init: already initialised");
  MPI_Comm_rank(comm, &st.rank);
  if (MPI_Comm_dup(comm, &st.comm) != MPI_SUCCESS) return dv::Fail("VELOC_Init: MPI_Comm_dup failed");
  // Until initialised: every failure frees the duplicate (and detaches dlckpt).
  bool dlckpt_up = false;
  auto failed = [&](int rc) {
    if (dlckpt_up) (void)dlckpt_finalize();
    MPI_Comm_free(&st.comm);
    return rc;
  };
  std::string scratch = "/dev/shm", mode;
  const bool read = dv::ReadConfig(cfg_file, &scratch, &mode);
  if (!dv::AllOk(read)) return failed(VELOC_FAILURE);
  if (!mode.empty() && mode != "sync" && mode != "async") {
    return failed(dv::Fail("VELOC_Init: mode = " + mode + ": expected sync or async"));
  }
  if (dlckpt_init(comm) != 0) return failed(dv::FailDlckpt("VELOC_Init: dlckpt_init"));
  dlckpt_up = true;
  if (!mode.empty() && dlckpt_set_encode_mode(mode == "async" ? DLCKPT_ENCODE_ASYNC : DLCKPT_ENCODE_SYNC) != 0) {
    return failed(dv::FailDlckpt("VELOC_Init"));
  }
  auto store = dlckpt::intercept::ProcessStore();
  if (!dv::AllOk(store.ok())) {
    return failed(store.ok() ? VELOC_FAILURE : dv::Fail("VELOC_Init: " + store.status().ToString()));
  }
  st.store = *store;
  const char* job = std::getenv("DLCKPT_JOB");
  st.stage = scratch + "/dlckpt-veloc." + (job && *job ? job : "local") + ".r" + std::to_string(st.rank);
  dv::RemoveStage(st.stage);  // a killed run's
  st.initialized = true;
  return VELOC_SUCCESS;
}

int VELOC_Init_single(unsigned int, const char*) {
  return dv::Fail("VELOC_Init_single: not supported by dlckpt (checkpoints are collective): use VELOC_Init");
}

int VELOC_Finalize(int) {
  dv::State& st = S();
  if (!dv::NeedInit("VELOC_Finalize")) return VELOC_FAILURE;
  const int rc = dlckpt_finalize();
  dv::RemoveStage(st.stage);
  MPI_Comm_free(&st.comm);
  st.initialized = false;
  return rc == 0 ? VELOC_SUCCESS : dv::FailDlckpt("VELOC_Finalize");
}

int VELOC_Mem_protect(int id, void* ptr, size_t count, size_t base_size) {
  if (base_size != 0 && count > SIZE_MAX / base_size) return dv::Fail("VELOC_Mem_protect: count * base_size overflows");
  if (dlckpt_protect(id, ptr, count * base_size) != 0) return dv::FailDlckpt("VELOC_Mem_protect");
  return VELOC_SUCCESS;
}

int VELOC_Mem_unprotect(int id) {
  if (dlckpt_unprotect(id) != 0) return dv::FailDlckpt("VELOC_Mem_unprotect");
  return VELOC_SUCCESS;
}

int VELOC_Route_file(const char*, char* routed) {
  dv::State& st = S();
  if (!dv::NeedInit("VELOC_Route_file")) return VELOC_FAILURE;
  if (st.phase == dv::Phase::kNone) return dv::Fail("VELOC_Route_file: outside a checkpoint or restart phase");
  const std::string path = dv::StagedPath();
  if (path.size() >= VELOC_MAX_NAME) return dv::Fail("VELOC_Route_file: the path is longer than VELOC_MAX_NAME: " + path);
  if (::mkdir(st.stage.c_str(), 0700) != 0 && errno != EEXIST) {
    return dv::Fail("VELOC_Route_file: mkdir " + st.stage + ": " + std::strerror(errno));
  }
  if (st.phase == dv::Phase::kRestart && !st.routed) {
    dv::Record r;
    if (!dv::ReadRecord(&r) || !r.has_file) {
      return dv::Fail("VELOC_Route_file: checkpoint " + st.name + " version " + std::to_string(st.version) +
                      " holds no file");
    }
    auto bytes = dlckpt::api::memory::ReadStoreFile(st.store, dv::kFile);
    if (!bytes.ok()) return dv::Fail("VELOC_Route_file: " + bytes.status().ToString());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
    out.close();
    if (!out) return dv::Fail("VELOC_Route_file: writing " + path + ": " + std::strerror(errno));
  }
  st.routed = true;
  std::memcpy(routed, path.c_str(), path.size() + 1);
  return VELOC_SUCCESS;
}

int VELOC_Checkpoint_begin(const char* name, int version) {
  dv::State& st = S();
  if (!dv::NeedInit("VELOC_Checkpoint_begin") || !dv::ValidName("VELOC_Checkpoint_begin", name)) {
    return VELOC_FAILURE;
  }
  if (st.phase != dv::Phase::kNone) return dv::Fail("VELOC_Checkpoint_begin: a phase is already open");
  if (version < 0 || version <= st.last_version) {
    return dv::Fail("VELOC_Checkpoint_begin: version " + std::to_string(version) + " must exceed " +
                    std::to_string(st.last_version) + ", the last one checkpointed or restarted");
  }
  return dv::OpenPhase(dv::Phase::kCheckpoint, name, version);
}

int VELOC_Checkpoint_selective(int mode, int* ids, int id_count) {
  std::vector<int> chosen;
  if (!dv::SelectiveIds("VELOC_Checkpoint_selective", dv::Phase::kCheckpoint, "VELOC_Checkpoint_begin", mode, ids,
                        id_count, &chosen)) {
    return VELOC_FAILURE;
  }
  // The regions are stored at VELOC_Checkpoint_end; a checkpoint of some
  // regions holds only those (ALL: no selection, every protected region).
  dlckpt::Status s = dlckpt::api::memory::SelectNext(mode == VELOC_CKPT_ALL ? nullptr : &chosen);
  return s.ok() ? VELOC_SUCCESS : dv::Fail("VELOC_Checkpoint_selective: " + s.ToString());
}

int VELOC_Checkpoint_mem(void) { return VELOC_Checkpoint_selective(VELOC_CKPT_ALL, nullptr, 0); }

int VELOC_Checkpoint_end(int success) {
  dv::State& st = S();
  if (!dv::NeedInit("VELOC_Checkpoint_end")) return VELOC_FAILURE;
  if (st.phase != dv::Phase::kCheckpoint) return dv::Fail("VELOC_Checkpoint_end: outside a checkpoint phase");
  bool ok = dv::AllOk(success != 0);
  if (ok) {
    dlckpt::Status stored = dv::StoreCheckpoint();
    if (!stored.ok()) dv::Fail("VELOC_Checkpoint_end: " + stored.ToString());
    ok = dv::AllOk(stored.ok());
  }
  if (ok && dlckpt_checkpoint() != 0) {
    dv::FailDlckpt("VELOC_Checkpoint_end: dlckpt_checkpoint");
    ok = false;  // dlckpt_checkpoint fails on every rank alike
  }
  if (ok) st.last_version = st.version;
  (void)dlckpt::api::memory::SelectNext(nullptr);  // consumed by the checkpoint, or dropped with it
  return dv::EndPhase(ok, "VELOC_Checkpoint_end");
}

int VELOC_Checkpoint_wait(void) {
  if (!dv::NeedInit("VELOC_Checkpoint_wait")) return VELOC_FAILURE;
  if (dlckpt_checkpoint_wait() != 0) return dv::FailDlckpt("VELOC_Checkpoint_wait");
  return VELOC_SUCCESS;
}

int VELOC_Checkpoint(const char* name, int version) {
  if (VELOC_Checkpoint_wait() != VELOC_SUCCESS) return VELOC_FAILURE;
  if (VELOC_Checkpoint_begin(name, version) != VELOC_SUCCESS) return VELOC_FAILURE;
  const int mem = VELOC_Checkpoint_mem();
  return VELOC_Checkpoint_end(mem == VELOC_SUCCESS ? 1 : 0);
}

int VELOC_Restart_test(const char* name, int needed_version) {
  if (!dv::NeedInit("VELOC_Restart_test") || !dv::ValidName("VELOC_Restart_test", name)) return VELOC_FAILURE;
  dv::Record r;
  long long mine = -1;
  if (dv::ReadRecord(&r) && r.name == name && (needed_version <= 0 || r.version < needed_version)) mine = r.version;
  long long all = -1;
  if (MPI_Allreduce(&mine, &all, 1, MPI_LONG_LONG, MPI_MIN, S().comm) != MPI_SUCCESS) return VELOC_FAILURE;
  return all < 0 ? VELOC_FAILURE : static_cast<int>(all);
}

int VELOC_Restart_begin(const char* name, int version) {
  dv::State& st = S();
  if (!dv::NeedInit("VELOC_Restart_begin") || !dv::ValidName("VELOC_Restart_begin", name)) return VELOC_FAILURE;
  if (st.phase != dv::Phase::kNone) return dv::Fail("VELOC_Restart_begin: a phase is already open");
  dv::Record r;
  const bool held = dv::ReadRecord(&r) && r.name == name && r.version == version;
  if (!dv::AllOk(held)) {
    return held ? VELOC_FAILURE
                : dv::Fail(std::string("VELOC_Restart_begin: no checkpoint ") + name + " version " +
                           std::to_string(version) + " to restart from (VELOC_Restart_test says which)");
  }
  return dv::OpenPhase(dv::Phase::kRestart, name, version);
}

int VELOC_Recover_selective(int mode, int* ids, int id_count) {
  std::vector<int> chosen;
  if (!dv::SelectiveIds("VELOC_Recover_selective", dv::Phase::kRestart, "VELOC_Restart_begin", mode, ids, id_count,
                        &chosen)) {
    return VELOC_FAILURE;
  }
  dlckpt::Status s = dlckpt::api::memory::Recover(chosen, "VELOC_Recover_selective");
  return s.ok() ? VELOC_SUCCESS : dv::Fail(s.ToString());
}

int VELOC_Recover_size(int id) {
  long long size = dlckpt_region_size(id);
  return size < 0 || size > INT_MAX ? -1 : static_cast<int>(size);
}

int VELOC_Recover_mem(void) { return VELOC_Recover_selective(VELOC_RECOVER_ALL, nullptr, 0); }

int VELOC_Restart_end(int success) {
  dv::State& st = S();
  if (!dv::NeedInit("VELOC_Restart_end")) return VELOC_FAILURE;
  if (st.phase != dv::Phase::kRestart) return dv::Fail("VELOC_Restart_end: outside a restart phase");
  const bool ok = dv::AllOk(success != 0);
  if (ok) st.last_version = st.version;
  return dv::EndPhase(ok, "VELOC_Restart_end");
}

int VELOC_Restart(const char* name, int version) {
  if (VELOC_Restart_begin(name, version) != VELOC_SUCCESS) return VELOC_FAILURE;
  const int mem = VELOC_Recover_mem();
  return VELOC_Restart_end(mem == VELOC_SUCCESS ? 1 : 0);
}

}  // extern "C"

// dlckpt-store's second-level commands (store_commands.h).
#include "store_commands.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "dlckpt/base/env.h"
#include "dlckpt/base/names.h"
#include "dlckpt/base/node.h"
#include "dlckpt/base/progress.h"
#include "dlckpt/control/acknowledged.h"
#include "dlckpt/memfs/memfs.h"
#include "dlckpt/persist/persist.h"

namespace dlckpt::persist::tool {
namespace {

using memfs::AttachMode;
using memfs::Store;
using memfs::tool::Args;
using memfs::tool::Fail;
using memfs::tool::Usage;

// DIR, DIR/<job> or one epoch directory: the job directory and the epoch named.
Result<std::string> DrainedJobDir(const std::string& dir, uint64_t* epoch) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  size_t slash = d.rfind('/');
  std::string base = slash == std::string::npos ? d : d.substr(slash + 1);
  if (base.rfind("epoch.", 0) == 0 && base.size() > 6) {
    if (*epoch == 0) *epoch = std::strtoull(base.c_str() + 6, nullptr, 10);
    return slash == std::string::npos ? std::string(".") : d.substr(0, slash);
  }
  return persist::FindJobDir(d, "");
}

}  // namespace

// The drained job directory DIR names (DIR itself, DIR/<job>, or an epoch
// directory, which also sets the epoch wanted) and its epochs. On failure:
// false, with the exit status in *rc (the usage or the error printed).
struct Drained {
  std::string job_dir;
  uint64_t want = 0;  // 0: every epoch
  std::vector<persist::DrainedEpoch> epochs;
};
bool OpenDrained(const Args& a, const char* command, Drained* d, int* rc) {
  if (a.pos.empty()) {
    *rc = Usage(std::string(command) + " needs DIR");
    return false;
  }
  d->want = a.epoch;
  auto job_dir = DrainedJobDir(a.pos[0], &d->want);
  if (!job_dir.ok()) {
    *rc = Fail(job_dir.status());
    return false;
  }
  auto all = persist::ListEpochs(*job_dir);
  if (!all.ok()) {
    *rc = Fail(all.status());
    return false;
  }
  d->job_dir = std::move(*job_dir);
  d->epochs = std::move(*all);
  return true;
}

// The checkpoint name the SCR layer gave an epoch: the "name" line of rank
// 0's dataset record, the file /dlckpt/scr/dataset of its store (written by
// scr/src/scr_core.cc, SerializeDataset: a line "dlckpt-scr-dataset 1", then
// "id N", "flags F", "name NAME", "file PATH"..., "end"). "" for an epoch of
// an application that does not use the SCR layer; an error for a record that
// is there but cannot be read or parsed.
Result<std::string> ScrCheckpointName(const std::string& epoch_dir) {
  constexpr size_t kMaxRecord = size_t{1} << 20;
  auto text = persist::ReadDrainedFile(epoch_dir, 0, "/dlckpt/scr/dataset", kMaxRecord);
  if (!text.ok() && text.status().code() == ENOENT) return std::string();
  if (!text.ok()) return text.status();
  const std::string& t = *text;
  if (t.rfind("dlckpt-scr-dataset 1\n", 0) != 0) {
    return Status::Corruption("SCR dataset record of " + epoch_dir + ": bad header");
  }
  for (size_t at = 0; at < t.size();) {
    size_t nl = t.find('\n', at);
    if (nl == std::string::npos) break;
    if (t.compare(at, 5, "name ") == 0) return t.substr(at + 5, nl - at - 5);
    at = nl + 1;
  }
  return Status::Corruption("SCR dataset record of " + epoch_dir + ": no name");
}

// What scr_index --list shows a user choosing a checkpoint: per epoch its
// state, when it was drained (local time), its size and the application's
// checkpoint name where the SCR layer gave one ("-" otherwise).
int CmdDrained(const Args& a) {
  Drained d;
  if (int rc = 0; !OpenDrained(a, "drained", &d, &rc)) return rc;
  std::printf("%s\n%-8s %-10s %-19s %6s %8s %14s  %-20s  %s\n", d.job_dir.c_str(), "epoch", "state", "time", "ranks",
              "files", "bytes", "checkpoint", "note");
  for (const auto& e : d.epochs) {
    if (d.want != 0 && e.epoch != d.want) continue;
    std::string when = "-", name = "-", note = e.problem;
    if (e.state == persist::EpochState::kComplete) {
      if (e.time > 0) {
        const time_t t = static_cast<time_t>(e.time);
        struct tm tm{};
        char buf[32];
        if (localtime_r(&t, &tm) != nullptr && std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm) > 0) when = buf;
      }
      auto scr = ScrCheckpointName(e.dir);
      if (!scr.ok()) {
        note = scr.status().ToString();
      } else if (!scr->empty()) {
        name = *scr;
      }
    }
    std::printf("%-8" PRIu64 " %-10s %-19s %6d %8" PRIu64 " %14" PRIu64 "  %-20s  %s\n", e.epoch,
                persist::EpochStateName(e.state), when.c_str(), e.ranks, e.files, e.bytes, name.c_str(), note.c_str());
  }
  return 0;
}

// Without --epoch: the epoch a restart would use (the newest complete one
// that verifies), saying which newer epochs were skipped and why; exit 1 if
// the newest epoch is not that one, unless it is only incomplete (a drain in
// progress). With --epoch: that epoch, exit 1 unless it verifies.
int CmdVerifyDrained(const Args& a) {
  Drained d;
  if (int rc = 0; !OpenDrained(a, "verify-drained", &d, &rc)) return rc;
  std::string skipped;  // newer epochs that are damaged, refused or fail verification
  for (const auto& e : d.epochs) {
    if (d.want != 0 && e.epoch != d.want) continue;
    const std::string name = "drained epoch " + std::to_string(e.epoch) + " in " + d.job_dir;
    Status s;
    if (e.state != persist::EpochState::kComplete) {
      s = Status::Corruption(name + " is " + persist::EpochStateName(e.state) + ": " + e.problem);
    } else {
      const bool tty = isatty(STDERR_FILENO) != 0;
      s = persist::VerifyEpoch(e.dir, [&](uint64_t done, uint64_t total) {
        if (tty) std::fprintf(stderr, "\rverifying epoch %" PRIu64 ": %" PRIu64 " of %" PRIu64 " bytes", e.epoch,
                              done, total);
      });
      if (tty) std::fputc('\n', stderr);
    }
    if (!s.ok()) {
      if (d.want != 0) return Fail(s);
      std::fprintf(stderr, "dlckpt-store: skipped %s\n", s.ToString().c_str());
      if (e.state != persist::EpochState::kIncomplete) {
        skipped += (skipped.empty() ? "" : ", ") + std::to_string(e.epoch) + " " +
                   (e.state == persist::EpochState::kComplete ? "fails verification" : persist::EpochStateName(e.state));
      }
      continue;
    }
    std::printf("drained epoch %" PRIu64 " in %s: %d rank(s), %" PRIu64 " file(s), %" PRIu64
                " bytes: every CRC32C matches\n",
                e.epoch, e.dir.c_str(), e.ranks, e.files, e.bytes);
    if (!skipped.empty()) {
      std::fprintf(stderr,
                   "dlckpt-store: the newest drained epoch is not usable (skipped: %s); a restart would use epoch "
                   "%" PRIu64 "\n",
                   skipped.c_str(), e.epoch);
      return 1;
    }
    return 0;
  }
  return Fail(Status::NotFound(d.want != 0 ? "no drained epoch " + std::to_string(d.want) + " in " + d.job_dir
                                         : "no complete drained epoch that verifies in " + d.job_dir +
                                               (skipped.empty() ? "" : " (skipped: " + skipped + ")")));
}

// drain DIR --job J --ranks N: this node's stores of job J, each at the
// epoch all of them hold acknowledged (or --epoch), to DIR/J/epoch.E. An
// epoch already complete there is left as it is. Exit 1 on the first error.
int CmdDrain(const Args& a) {
  if (a.pos.empty()) return Usage("drain needs DIR");
  if (a.create.job.empty()) return Usage("drain needs --job JOB");
  if (!ValidJobName(a.create.job)) return Fail(Status::InvalidArgument("drain: invalid job id '" + a.create.job + "'"));
  if (a.ranks == 0) return Usage("drain needs --ranks N (the job's number of ranks)");
  const std::string node = a.create.node.empty() ? ThisNode() : a.create.node;
  auto names = Env::Default()->ListShm(StorePrefix(a.create.job, node));
  if (!names.ok()) return Fail(names.status());
  std::vector<std::pair<int, std::unique_ptr<Store>>> views;
  std::vector<uint64_t> acked;
  std::vector<std::string> stores;
  for (const auto& n : *names) {
    auto id = ParseStoreName(n);
    if (!id.ok() || id->job != a.create.job || id->node != node) continue;
    if (id->rank < 0 || static_cast<uint64_t>(id->rank) >= a.ranks) {
      return Fail(Status::InvalidArgument("store " + n + " is rank " + std::to_string(id->rank) + " of a job of " +
                                          std::to_string(a.ranks) + " rank(s)"));
    }
    auto v = Store::Attach(n, AttachMode::kReadOnly);
    if (!v.ok()) return Fail(v.status());
    acked.push_back((*v)->epochs().acknowledged);
    stores.push_back(n);
    views.emplace_back(id->rank, std::move(*v));
  }
  const std::string where = "job " + a.create.job + " on node " + node;
  if (views.empty()) return Fail(Status::NotFound("no store of " + where));
  uint64_t epoch = a.epoch;
  const uint64_t lo = *std::min_element(acked.begin(), acked.end());
  if (epoch == 0 && lo == 0) return Fail(Status::NotFound("the stores of " + where + " hold no acknowledged epoch"));
  if (epoch == 0) {
    Status one = control::CheckOneAcknowledgedEpoch(acked, stores, "use --epoch");
    if (!one.ok()) return Fail(one.Prefixed(where));
    epoch = lo;
  }
  std::error_code ec;
  const std::string dir = std::filesystem::absolute(a.pos[0], ec).string();
  const std::string job_dir = persist::JobDir(ec ? a.pos[0] : dir, a.create.job);
  auto existing = persist::ListEpochs(job_dir);
  if (existing.ok()) {
    for (const auto& e : *existing) {
      if (e.epoch == epoch && e.state == persist::EpochState::kComplete) {
        std::printf("epoch %" PRIu64 " of job %s is already drained to %s\n", epoch, a.create.job.c_str(),
                    e.dir.c_str());
        return 0;
      }
    }
  }
  persist::DrainOptions o;
  o.bandwidth = static_cast<double>(a.bandwidth);
  Progress progress("dlckpt-store: node " + node + ": draining epoch " + std::to_string(epoch), 0);
  uint64_t before = 0, files = 0;
  double seconds = 0;
  bool published = false;
  for (auto& [rank, view] : views) {
    Status s = view->View(epoch);
    if (!s.ok()) return Fail(s.Prefixed("drain of rank " + std::to_string(rank)));
    o.progress = [&, base = before](uint64_t done, uint64_t) { progress.Update(base + done); };
    auto r = persist::DrainRank(*view, job_dir, a.create.job, epoch, rank, static_cast<int>(a.ranks), o);
    if (!r.ok()) return Fail(r.status());
    before += r->bytes;
    files += r->files;
    seconds += r->seconds;
    published = published || r->published;
  }
  progress.Done(before);
  std::printf("node %s: epoch %" PRIu64 " of %zu rank(s) drained, %" PRIu64 " file(s), %" PRIu64
              " bytes in %.2f s%s\n",
              node.c_str(), epoch, views.size(), files, before, seconds, published ? "; MANIFEST published" : "");
  return 0;
}

}  // namespace dlckpt::persist::tool

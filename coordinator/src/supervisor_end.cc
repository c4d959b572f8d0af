// The end of a run of the supervisor: the summary (checkpoints, drains,
// kills, recoveries and the time of each recovery phase) and the cleanup of
// stores and the run directory. Every end of a run that launched anything
// goes through Finish, so the summary names the status the process exits
// with. Thread safety: the supervisor's thread only.
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <sstream>

#include "dlckpt/base/env.h"
#include "dlckpt/base/names.h"
#include "procs.h"
#include "supervisor.h"
#include "text.h"

namespace dlckpt::run {

namespace fs = std::filesystem;

// Asks the codec service to shut down and waits up to 30 s for its job to
// exit; a signal to dlckpt-run cuts both short (the job is then killed).
void Supervisor::StopCodec() {
  if (heartbeat_) heartbeat_->Expect(generation_, {}, Env::Default()->NowNanos());
  if (codec_ && !Terminating()) {
    Status r = codec_->Shutdown(30000);
    if (!r.ok()) Log("codec shutdown: " + r.ToString());
  }
  double deadline = Now() + 30;
  while (codec_pid_ > 0 && !Terminating()) {
    if (Reap(codec_pid_, nullptr)) {
      codec_pid_ = -1;
    } else if (Now() > deadline) {
      Log("codec did not exit; killing it");
      break;
    } else {
      struct timespec pause{0, 10 * 1000 * 1000};
      nanosleep(&pause, nullptr);  // a signal ends it early: the loop checks Terminating()
    }
  }
}

void Supervisor::Cleanup(int exit_code) {
  if (exit_code != 0 && !o_.verbose && !Terminating()) {
    // The codec's own words, before its log goes with the run directory.
    auto log = Env::Default()->ReadFile(codec_log_);
    if (log.ok() && !log->empty()) {
      std::vector<std::string> lines;
      std::istringstream is(*log);
      for (std::string l; std::getline(is, l);) {
        if (l.find("dlckpt-codec") != std::string::npos) lines.push_back(l);
      }
      size_t from = lines.size() > 12 ? lines.size() - 12 : 0;
      if (from < lines.size()) Log("last codec messages (" + codec_log_ + "):");
      for (size_t i = from; i < lines.size(); ++i) std::fprintf(stderr, "  %s\n", lines[i].c_str());
    }
  }
  if (const std::string dir = OmpiShmDir(); !dir.empty()) {
    std::error_code ec;
    fs::remove_all(dir, ec);  // Open MPI's segments, of no use after the job
  }
  if (o_.keep) {
    Log("keeping stores and " + run_dir_ + " (--keep)");
    return;
  }
  if (o_.hosts.empty()) {
    auto names = Env::Default()->ListShm(JobPrefix(o_.job));
    if (names.ok()) {
      for (const auto& n : *names) (void)Env::Default()->UnlinkShm(n);
    }
  }
  // The lock file goes with the directory; the lock itself holds until exit.
  std::error_code ec;
  fs::remove_all(run_dir_, ec);
}

void Supervisor::PrintSummary(int exit_code, const std::string& note) {
  std::ostringstream os;
  os << "dlckpt-run: summary of job " << o_.job << ": exit " << exit_code << (note.empty() ? "" : " (" + note + ")")
     << "; " << stats_.checkpoints
     << " checkpoint(s)" << (stats_.last_epoch ? " (last epoch " + std::to_string(stats_.last_epoch) + ")" : "");
  // Asynchronous encode (chosen here, or by the application through the API,
  // which shows in its waits for earlier encodes): an epoch is committed
  // first, protected later. A synchronous checkpoint is protected when it
  // returns: one committed and never protected had its encode cut short (a
  // failure, a signal) or failed.
  if (o_.encode == "async" || stats_.backpressure_s > 0) {
    os << "; async encode: " << stats_.committed << " committed, " << stats_.checkpoints << " protected"
       << (stats_.last_epoch ? " (newest protected epoch " + std::to_string(stats_.last_epoch) + ")" : "") << ", waited "
       << Fixed(stats_.backpressure_s, 3) << " s for earlier encodes";
  } else if (stats_.committed > stats_.checkpoints) {
    const int cut = stats_.committed - stats_.checkpoints;
    os << "; checkpoints: " << stats_.committed << " committed, " << stats_.checkpoints << " protected; " << cut
       << (cut == 1 ? " encode was" : " encodes were") << " cut short or failed";
  }
  if (!stats_.refused.empty()) {
    std::vector<std::string> r;
    for (uint64_t e : stats_.refused) r.push_back(std::to_string(e));
    os << "; " << stats_.refused.size() << " checkpoint(s) refused at commit (epoch(s) " << Join(r, ", ") << "), "
       << (stats_.last_epoch ? "epoch " + std::to_string(stats_.last_epoch) + " is the newest protected" : "none protected");
  }
  if (!o_.persist.empty()) {
    std::vector<std::string> d;
    for (uint64_t e : stats_.drained) d.push_back(std::to_string(e));
    os << "; drained to " << o_.persist << ": " << (d.empty() ? "none" : "epoch(s) " + Join(d, ", "));
    if (stats_.drains_skipped > 0) os << ", " << stats_.drains_skipped << " skipped (previous drain still running)";
    if (stats_.drains_failed > 0) os << ", " << stats_.drains_failed << " rank drain(s) failed";
  }
  os
     << "; " << stats_.recoveries.size() << " recovery(ies); " << Fixed(Now() - run_start_, 1) << " s\n";
  if (!stats_.refused_why.empty()) os << "dlckpt-run:   checkpoint refused: " << stats_.refused_why << "\n";
  for (const auto& k : faults_.log) os << "dlckpt-run:   node killed: " << k << "\n";
  for (size_t i = 0; i < o_.kills.size() && i < faults_.kill_done.size(); ++i) {
    if (faults_.kill_done[i]) continue;
    const KillSpec& k = o_.kills[i];
    os << "dlckpt-run:   not done: " << (k.ranks ? "--crash-rank " : k.poweroff ? "--poweroff-node " : "--kill-node ")
       << Join(k.nodes, ",") << " --at " << k.text << " (the run ended before that happened)\n";
  }
  for (size_t i = 0; i < stats_.recoveries.size(); ++i) {
    const auto& r = stats_.recoveries[i];
    double total = r.detection + r.teardown + r.survey + r.rebuild + r.relaunch;
    os << "dlckpt-run:   recovery " << i + 1 << ": " << r.what << "\n"
       << "dlckpt-run:     detection " << Fixed(r.detection) << " s, teardown " << Fixed(r.teardown)
       << " s, survey " << Fixed(r.survey) << " s, rebuild " << Fixed(r.rebuild) << " s, relaunch " << Fixed(r.relaunch)
       << " s: application running again " << Fixed(total) << " s after the failure\n";
  }
  if (!stats_.recoveries.empty()) {
    const auto& r = stats_.recoveries.back();
    double total = r.detection + r.teardown + r.survey + r.rebuild + r.relaunch;
    os << "METRIC recovery_seconds " << Fixed(total, 3) << " s target <= 10 (detection "
       << Fixed(r.detection, 3) << ", teardown " << Fixed(r.teardown, 3) << ", survey " << Fixed(r.survey, 3)
       << ", rebuild " << Fixed(r.rebuild, 3) << ", relaunch " << Fixed(r.relaunch, 3) << ")\n";
  }
  std::fputs(os.str().c_str(), stderr);
}

int Supervisor::Finish(int exit_code, const std::string& note) {
  ClaimEnd(exit_code);
  PrintSummary(exit_code, note);
  Cleanup(exit_code);
  return exit_code;
}

}  // namespace dlckpt::run

// The command line of dlckpt-plan (see dlckpt/plan/plan.h and UsageText()).
#include <charconv>
#include <cmath>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "dlckpt/base/strings.h"
#include "dlckpt/plan/plan.h"

namespace dlckpt::plan {
namespace {

Status Bad(std::string_view flag, std::string_view value, std::string_view expected) {
  return Status::InvalidArgument(std::string(flag) + ": '" + std::string(value) + "' is not " +
                                 std::string(expected));
}

Result<double> Number(std::string_view flag, std::string_view v, bool allow_zero,
                      bool allow_negative = false) {
  double d = 0;
  const char* end = v.data() + v.size();
  auto [ptr, ec] = std::from_chars(v.data(), end, d);
  const char* expected = allow_negative ? "a number"
                         : allow_zero   ? "a non-negative number"
                                        : "a positive number";
  if (v.empty() || ec != std::errc() || ptr != end || !std::isfinite(d)) return Bad(flag, v, expected);
  if (!allow_negative && (d < 0 || (!allow_zero && d == 0))) return Bad(flag, v, expected);
  return d;
}

Result<int64_t> Integer(std::string_view flag, std::string_view v, int64_t min) {
  int64_t i = 0;
  const char* end = v.data() + v.size();
  auto [ptr, ec] = std::from_chars(v.data(), end, i);
  const std::string expected = min == 0 ? "a non-negative integer" : "an integer >= " + std::to_string(min);
  if (v.empty() || ec != std::errc() || ptr != end || i < min) return Bad(flag, v, expected);
  return i;
}

Result<std::vector<double>> NumberList(std::string_view flag, std::string_view v) {
  std::vector<double> out;
  for (std::string_view item : Split(v, ',')) {
    DLCKPT_ASSIGN_OR_RETURN(double d, Number(flag, item, /*allow_zero=*/true));
    out.push_back(d);
  }
  return out;
}

// The chapter 7 model's rates and times: one number each (need --ckpt-mb).
struct ModelRate {
  std::string_view flag;
  double Chapter7Params::*field;
  bool allow_zero;
};
constexpr ModelRate kModelRates[] = {
    {"--memcpy-mbps", &Chapter7Params::memcpy_mbps, false},
    {"--rs-mbps", &Chapter7Params::rs_mbps, false},
    {"--group-sd-seconds", &Chapter7Params::group_sd_seconds, true},
    {"--comm-seconds", &Chapter7Params::comm_seconds, true},
    {"--detect-seconds", &Chapter7Params::detect_seconds, true},
    {"--recover-seconds", &Chapter7Params::recover_seconds, true},
    {"--launch-seconds", &Chapter7Params::launch_seconds, true},
    {"--bootstrap-seconds", &Chapter7Params::bootstrap_seconds, true},
};

const ModelRate* FindModelRate(std::string_view flag) {
  for (const ModelRate& r : kModelRates) {
    if (r.flag == flag) return &r;
  }
  return nullptr;
}

}  // namespace

std::string UsageText() {
  return R"(Usage: dlckpt-plan --nodes N --spares M --mttf-hours H --phases P TIMES [options]

Chooses how many spares each checkpoint group should have and how often to
checkpoint (Lu 2005, ch. 7-9). For each feasible number of spares per group R
it prints the probability of finishing P phases without a catastrophe (a group
losing more nodes than it has spares), the expected overhead, the most phases
finished with probability >= target, from the analytical model (constant
failure rate) and from a Monte Carlo simulation (failure rate falling as nodes
are lost), plus Young's and Daly's intervals and a recommendation.

Required:
  --nodes N               compute nodes (1..10000000)
  --spares M              spare nodes (1..min(N, 4096))
  --mttf-hours H          MTTF of one node, hours; every node (spares too) fails
  --phases P              phases (checkpoint intervals) the job must finish
TIMES, exactly one of:
  --ckpt-seconds C --restart-seconds R
                          one value for every R, or a comma list for R = 1, 2, ...
                          (e.g. --ckpt-seconds 13.2,28.2,39.6,58.8); with a
                          list, only the R it covers are evaluated
  --bench FILE            CSV from the bench: a header line naming the columns
                          spares_per_group,ckpt_seconds,restart_seconds (any
                          order, other columns ignored), then one row per
                          measurement; rows of the same R are averaged; blank
                          and '#' lines are skipped
  --ckpt-mb D             derive the times from the chapter 7 model for D MB of
                          checkpoint per process; its parameters (defaults:
                          the thesis' baseline, TeraGrid + MPICH-GM 1.2.5):
      --memcpy-mbps X       memory copy rate (1500)
      --rs-mbps X           Reed-Solomon encoding rate (207)
      --reduction tree|rabenseifner
                            tree: (a d + b) ceil(lg n), default a,b = 0.00961,-0.09926
                            rabenseifner: a (n-1) d/n + b, default 0.0254,0.1734
      --reduce-coeffs A,B   override a and b (seconds per MB, seconds)
      --group-sd-seconds X  std. deviation of group completion times (1)
      --comm-seconds X      codec <-> application messages (1.5)
      --detect-seconds X    failure detection (2.5)
      --recover-seconds X   process recovery (3)
      --launch-seconds X    codec job launch (10)
      --bootstrap-seconds X application restart work (60)
Options:
  --interval HOURS|auto   checkpoint interval (production per phase); auto
                          (default) uses Daly's interval of each R
  --spares-per-group LIST evaluate exactly these R (default: every R with times,
                          or 1..8); an infeasible R is then an error
  --max-group-nodes N     largest group with >= 2 spares (256: Reed-Solomon
                          over GF(2^8))
  --target P              probability for "phases at target" and the
                          recommendation (0.9)
  --runs N                simulation runs per R (10000; 0: no simulation)
  --seed S                simulation seed (1)
Second level (drain every N-th checkpoint to a parallel file system; off
unless --pfs-bandwidth or --drain-seconds is given):
  --pfs-bandwidth MBPS    aggregate PFS bandwidth, MB/s; a drain takes
                          nodes x --drain-mb / MBPS seconds
  --drain-mb D            checkpoint MB per compute node (default: --ckpt-mb)
  --drain-seconds S       or the time of one whole drain directly
  --drain-visible F       fraction of the drain the application waits for
                          (1: blocking, the default; dlckpt drains in the
                          background, so F < 1 fits it once measured); with
                          F < 1 one drain must end before the next starts
  --pfs-restart-seconds S restart from the PFS (default: restart + drain time)
  --drain-every N|auto    evaluate this N; auto (default) recommends N
  --unrecoverable-rate X  failures per hour that parity cannot cover (default:
                          derived from the groups: a node loss in a group that
                          already lost R nodes within the exposure window)
  --system-loss-mtbf-hours H  whole-system losses (power, network) added to it
  --exposure-seconds W    window from a loss to the end of its rebuild
                          (default: the restart time of each R)
  Model (Moody et al., SC'10, closed form): λ1 failures/h restart from memory,
  λ2 from the PFS; a segment of d = τ + C1 (the last of a cycle + C2) takes
  M(d) = (1 - e^-λd) / (λ2 + λ1 e^-λ(R1+d)) and completes with P(d) = 1 - λ2 M(d);
  a cycle of N segments takes E = (A + (1 - Q) G2) / Q with Q = P(a)^(N-1) P(b),
  A = (1 - P(a)^(N-1))/λ2 + P(a)^(N-1) M(b), G2 = (e^λR2 - 1)/λ; efficiency N τ / E.
  N and τ (unless --interval) maximize it; λ2 = 0 means never drain.
  --json                  JSON instead of a table
  -h, --help              this text

Groups: with M spares and R per group there are floor(M/R) groups of R spares
and one group with the M mod R others; compute nodes are dealt out in
proportion to spares. Recommendation: the lowest overhead among the R that
finish P phases with probability >= target, else the most likely to finish.

Example (the thesis' baseline, Table 9.2):
  dlckpt-plan --nodes 5000 --spares 250 --mttf-hours 43800 --phases 1440 \
    --interval 0.5 --ckpt-seconds 13.2,28.2,39.6,58.8 \
    --restart-seconds 88.8,131.4,154.8,193.2
Two levels, same machine, 200 MB per node at 20 GB/s, drain in background:
  dlckpt-plan --nodes 5000 --spares 250 --mttf-hours 43800 --phases 1440 \
    --ckpt-mb 200 --spares-per-group 1,2 --runs 0 --pfs-bandwidth 20000 \
    --drain-visible 0.1 --system-loss-mtbf-hours 8760
Exit status: 0 success, 2 bad or inconsistent arguments, 1 unreadable or
malformed bench file, or output not written.
)";
}

Result<CliOptions> ParseCommandLine(std::span<const std::string> args) {
  CliOptions o;
  PlanRequest& req = o.request;
  bool have_nodes = false, have_spares = false, have_mttf = false, have_phases = false;
  std::vector<double> ckpt, restart;
  bool have_ckpt = false, have_restart = false, have_mb = false;
  bool have_model_flag = false, have_coeffs = false;
  std::string model_flag;
  Chapter7Params& ch7 = req.times.chapter7;
  TwoLevelRequest& two = req.two_level;
  bool have_bandwidth = false, have_drain_mb = false;
  std::string two_level_flag;  // the last second-level flag other than the two that enable it

  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg == "-h" || arg == "--help") {
      o.help = true;
      return o;
    }
    if (arg == "--json") {
      o.json = true;
      continue;
    }
    if (arg.substr(0, 2) != "--") {
      return Status::InvalidArgument("unexpected argument '" + std::string(arg) + "'");
    }
    std::string_view flag = arg, value;
    bool have_value = false;
    if (const size_t eq = arg.find('='); eq != std::string_view::npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      have_value = true;
    }
    auto take = [&]() -> Result<std::string_view> {
      if (have_value) return value;
      if (i + 1 >= args.size()) return Status::InvalidArgument(std::string(flag) + " needs a value");
      return std::string_view(args[++i]);
    };
    if (const ModelRate* rate = FindModelRate(flag)) {
      DLCKPT_ASSIGN_OR_RETURN(std::string_view v, take());
      DLCKPT_ASSIGN_OR_RETURN(ch7.*rate->field, Number(flag, v, rate->allow_zero));
      have_model_flag = true;
      model_flag = std::string(flag);
    } else if (flag == "--nodes") {
      DLCKPT_ASSIGN_OR_RETURN(std::string_view v, take());
      DLCKPT_ASSIGN_OR_RETURN(req.compute_nodes, Integer(flag, v, 1));
      have_nodes = true;
    } else if (flag == "--spares") {
      DLCKPT_ASSIGN_OR_RETURN(std::string_view v, take());
      DLCKPT_ASSIGN_OR_RETURN(req.spare_nodes, Integer(flag, v, 1));
      have_spares = true;
    } else if (flag == "--mttf-hours") {
      DLCKPT_ASSIGN_OR_RETURN(std::string_view v, take());
      DLCKPT_ASSIGN_OR_RETURN(req.mttf_hours, Number(flag, v, false));
      have_mttf = true;
    } else if (flag == "--phases") {
      DLCKPT_ASSIGN_OR_RETURN(std::string_view v, take());
      DLCKPT_ASSIGN_OR_RETURN(req.phases, Integer(flag, v, 1));
      have_phases = true;
    } else if (flag == "--interval") {
      DLCKPT_ASSIGN_OR_RETURN(std::string_view v, take());
      if (v == "auto") {
        req.interval_hours.reset();
      } else {
        DLCKPT_ASSIGN_OR_RETURN(double h, Number(flag, v, false));
        req.interval_hours = h;
      }
    } else if (flag == "--ckpt-seconds") {
      DLCKPT_ASSIGN_OR_RETURN(std::string_view v, take());
      DLCKPT_ASSIGN_OR_RETURN(ckpt, NumberList(flag, v));
      have_ckpt = true;
    } else if (flag == "--restart-seconds") {
      DLCKPT_ASSIGN_OR_RETURN(std::string_view v, take());
      DLCKPT_ASSIGN_OR_RETURN(restart, NumberList(flag, v));
      have_restart = true;
    } else if (flag == "--bench") {
      DLCKPT_ASSIGN_OR_RETURN(std::string_view v, take());
      if (v.empty()) return Status::InvalidArgument("--bench needs a file name");
      o.bench_path = std::string(v);
    } else if (flag == "--ckpt-mb") {
      DLCKPT_ASSIGN_OR_RETURN(std::string_view v, take());
      DLCKPT_ASSIGN_OR_RETURN(ch7.ckpt_mb, Number(flag, v, false));
      have_mb = true;
    } else if (flag == "--reduction") {
      DLCKPT_ASSIGN_OR_RETURN(std::string_view v, take());
      if (v == "tree") {
        ch7.tree_reduction = true;
      } else if (v == "rabenseifner") {
        ch7.tree_reduction = false;
      } else {
        return Bad(flag, v, "'tree' or 'rabenseifner'");
      }
      have_model_flag = true;
      model_flag = std::string(flag);
    } else if (flag == "--reduce-coeffs") {
      DLCKPT_ASSIGN_OR_RETURN(std::string_view v, take());
      const std::vector<std::string_view> ab = Split(v, ',');
      if (ab.size() != 2) return Bad(flag, v, "two numbers A,B");
      DLCKPT_ASSIGN_OR_RETURN(ch7.reduce_a, Number(flag, ab[0], true, /*allow_negative=*/true));
      DLCKPT_ASSIGN_OR_RETURN(ch7.reduce_b, Number(flag, ab[1], true, /*allow_negative=*/true));
      have_coeffs = true;
      have_model_flag = true;
      model_flag = std::string(flag);
    } else if (flag == "--pfs-bandwidth") {
      DLCKPT_ASSIGN_OR_RETURN(std::string_view v, take());
      DLCKPT_ASSIGN_OR_RETURN(two.pfs_mbps, Number(flag, v, false));
      have_bandwidth = true;
    } else if (flag == "--drain-seconds") {
      DLCKPT_ASSIGN_OR_RETURN(std::string_view v, take());
      DLCKPT_ASSIGN_OR_RETURN(two.drain_seconds, Number(flag, v, true));
    } else if (flag == "--drain-mb") {
      DLCKPT_ASSIGN_OR_RETURN(std::string_view v, take());
      DLCKPT_ASSIGN_OR_RETURN(two.drain_mb_per_node, Number(flag, v, false));
      have_drain_mb = true;
      two_level_flag = std::string(flag);
    } else if (flag == "--drain-visible") {
      DLCKPT_ASSIGN_OR_RETURN(std::string_view v, take());
      DLCKPT_ASSIGN_OR_RETURN(two.drain_visible, Number(flag, v, true));
      if (two.drain_visible > 1) return Bad(flag, v, "a fraction in [0, 1]");
      two_level_flag = std::string(flag);
    } else if (flag == "--pfs-restart-seconds") {
      DLCKPT_ASSIGN_OR_RETURN(std::string_view v, take());
      DLCKPT_ASSIGN_OR_RETURN(two.pfs_restart_seconds, Number(flag, v, true));
      two_level_flag = std::string(flag);
    } else if (flag == "--drain-every") {
      DLCKPT_ASSIGN_OR_RETURN(std::string_view v, take());
      if (v == "auto") {
        two.drain_every.reset();
      } else {
        DLCKPT_ASSIGN_OR_RETURN(two.drain_every, Integer(flag, v, 1));
      }
      two_level_flag = std::string(flag);
    } else if (flag == "--unrecoverable-rate") {
      DLCKPT_ASSIGN_OR_RETURN(std::string_view v, take());
      DLCKPT_ASSIGN_OR_RETURN(two.uncovered_rate, Number(flag, v, true));
      two_level_flag = std::string(flag);
    } else if (flag == "--system-loss-mtbf-hours") {
      DLCKPT_ASSIGN_OR_RETURN(std::string_view v, take());
      DLCKPT_ASSIGN_OR_RETURN(two.system_loss_mtbf_hours, Number(flag, v, false));
      two_level_flag = std::string(flag);
    } else if (flag == "--exposure-seconds") {
      DLCKPT_ASSIGN_OR_RETURN(std::string_view v, take());
      DLCKPT_ASSIGN_OR_RETURN(two.exposure_seconds, Number(flag, v, true));
      two_level_flag = std::string(flag);
    } else if (flag == "--spares-per-group") {
      DLCKPT_ASSIGN_OR_RETURN(std::string_view v, take());
      req.spares_per_group.clear();
      for (std::string_view item : Split(v, ',')) {
        DLCKPT_ASSIGN_OR_RETURN(int64_t r, Integer(flag, item, 1));
        req.spares_per_group.push_back(r);
      }
    } else if (flag == "--max-group-nodes") {
      DLCKPT_ASSIGN_OR_RETURN(std::string_view v, take());
      DLCKPT_ASSIGN_OR_RETURN(req.max_rs_group_nodes, Integer(flag, v, 2));
    } else if (flag == "--target") {
      DLCKPT_ASSIGN_OR_RETURN(std::string_view v, take());
      DLCKPT_ASSIGN_OR_RETURN(req.target, Number(flag, v, false));
      if (req.target >= 1) return Bad(flag, v, "a probability in (0, 1)");
    } else if (flag == "--runs") {
      DLCKPT_ASSIGN_OR_RETURN(std::string_view v, take());
      DLCKPT_ASSIGN_OR_RETURN(req.sim_runs, Integer(flag, v, 0));
    } else if (flag == "--seed") {
      DLCKPT_ASSIGN_OR_RETURN(std::string_view v, take());
      uint64_t seed = 0;
      const char* end = v.data() + v.size();
      auto [ptr, ec] = std::from_chars(v.data(), end, seed);
      if (v.empty() || ec != std::errc() || ptr != end) return Bad(flag, v, "an unsigned 64-bit integer");
      req.seed = seed;
    } else {
      return Status::InvalidArgument("unknown option '" + std::string(flag) + "'");
    }
  }

  if (!have_nodes) return Status::InvalidArgument("--nodes is required");
  if (!have_spares) return Status::InvalidArgument("--spares is required");
  if (!have_mttf) return Status::InvalidArgument("--mttf-hours is required");
  if (!have_phases) return Status::InvalidArgument("--phases is required");

  const int sources = (have_ckpt || have_restart ? 1 : 0) + (o.bench_path.empty() ? 0 : 1) + (have_mb ? 1 : 0);
  if (sources == 0) {
    return Status::InvalidArgument(
        "give the checkpoint and restart times: --ckpt-seconds and --restart-seconds, --bench FILE, or "
        "--ckpt-mb MB");
  }
  if (sources > 1) {
    return Status::InvalidArgument(
        "give only one of --ckpt-seconds/--restart-seconds, --bench and --ckpt-mb");
  }
  if (have_model_flag && !have_mb) {
    return Status::InvalidArgument(model_flag + " is a chapter 7 model parameter; it needs --ckpt-mb");
  }
  // The second level: on with --pfs-bandwidth or --drain-seconds.
  if (have_bandwidth && two.drain_seconds) {
    return Status::InvalidArgument("give only one of --pfs-bandwidth and --drain-seconds");
  }
  two.enabled = have_bandwidth || two.drain_seconds.has_value();
  if (!two.enabled && !two_level_flag.empty()) {
    return Status::InvalidArgument(two_level_flag +
                                   " is a second-level option; it needs --pfs-bandwidth or --drain-seconds");
  }
  if (have_drain_mb && !have_bandwidth) {
    return Status::InvalidArgument("--drain-mb needs --pfs-bandwidth (with --drain-seconds it is not used)");
  }
  if (have_bandwidth && !have_drain_mb) {
    if (!have_mb) {
      return Status::InvalidArgument(
          "--pfs-bandwidth needs the checkpoint size: --drain-mb MB (per compute node) or --ckpt-mb");
    }
    two.drain_mb_per_node = ch7.ckpt_mb;
  }
  if (have_ckpt != have_restart) {
    return Status::InvalidArgument(have_ckpt ? "--ckpt-seconds needs --restart-seconds"
                                             : "--restart-seconds needs --ckpt-seconds");
  }
  if (have_ckpt) {
    if (ckpt.size() == 1 && restart.size() == 1) {
      req.times.source = TimesSpec::Source::kSameForAll;
      req.times.same = {ckpt[0], restart[0]};
    } else {
      if (ckpt.size() > 1 && restart.size() > 1 && ckpt.size() != restart.size()) {
        return Status::InvalidArgument("--ckpt-seconds has " + std::to_string(ckpt.size()) +
                                       " values but --restart-seconds has " + std::to_string(restart.size()));
      }
      req.times.source = TimesSpec::Source::kPerSparesPerGroup;
      const size_t n = std::max(ckpt.size(), restart.size());
      for (size_t r = 0; r < n; ++r) {
        req.times.per_spares_per_group[static_cast<int64_t>(r) + 1] = {
            ckpt.size() == 1 ? ckpt[0] : ckpt[r], restart.size() == 1 ? restart[0] : restart[r]};
      }
    }
    req.times.origin = "command line";
  } else if (have_mb) {
    req.times.source = TimesSpec::Source::kChapter7;
    if (!ch7.tree_reduction && !have_coeffs) {
      ch7.reduce_a = 0.0254;  // TeraGrid, MPICH-GM 1.2.6 (§7.4)
      ch7.reduce_b = 0.1734;
    }
    req.times.origin = "chapter 7 model";
  } else {
    req.times.source = TimesSpec::Source::kPerSparesPerGroup;
    req.times.origin = "bench file " + o.bench_path;
  }
  return o;
}

int RunPlanTool(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  Result<CliOptions> parsed = ParseCommandLine(args);
  if (!parsed.ok()) {
    err << "dlckpt-plan: " << parsed.status().message() << "\nTry 'dlckpt-plan --help'.\n";
    return 2;
  }
  CliOptions& o = *parsed;
  if (o.help) {
    out << UsageText();
    return 0;
  }
  if (!o.bench_path.empty()) {
    Result<std::map<int64_t, Times>> rows = ReadBenchCsv(o.bench_path);
    if (!rows.ok()) {
      err << "dlckpt-plan: " << rows.status().message() << "\n";
      return 1;
    }
    o.request.times.per_spares_per_group = std::move(*rows);
  }
  Result<Plan> plan = MakePlan(o.request);
  if (!plan.ok()) {  // every MakePlan error is a bad or inconsistent argument
    err << "dlckpt-plan: " << plan.status().message() << "\n";
    return 2;
  }
  out << (o.json ? FormatJson(*plan) : FormatTable(*plan));
  out.flush();
  if (!out) {
    err << "dlckpt-plan: cannot write the output to standard output\n";
    return 1;
  }
  return 0;
}

}  // namespace dlckpt::plan

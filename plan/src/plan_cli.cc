// The command line of dlckpt-plan (see dlckpt/plan/plan.h and UsageText()).
#include <charconv>
#include <cmath>
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "dlckpt/base/cli.h"
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

// The options' names, value names, groups and help, in the order --help lists
// them; every one takes a value (ParseCommandLine checks it).
struct OptionDoc {
  const char* name;
  const char* value;
  const char* group;
  const char* help;
};
constexpr char kRequired[] = "Required";
constexpr char kTimes[] = "TIMES, exactly one of";
constexpr char kModel[] = "Chapter 7 model parameters (with --ckpt-mb)";
constexpr char kOptions[] = "Options";
constexpr char kSecond[] = "Second level (off unless --pfs-bandwidth or --drain-seconds is given)";
constexpr OptionDoc kOptionDocs[] = {
    {"--nodes", "N", kRequired, "compute nodes (1..10000000)"},
    {"--spares", "M", kRequired, "spare nodes (1..min(N, 4096))"},
    {"--mttf-hours", "H", kRequired, "MTTF of one node, hours; every node (spares too) fails"},
    {"--phases", "P", kRequired, "phases (checkpoint intervals) the job must finish"},
    {"--ckpt-seconds", "C", kTimes,
     "with --restart-seconds: one value for every R, or a comma list for "
     "R = 1, 2, ... (e.g. --ckpt-seconds 13.2,28.2,39.6,58.8); with a "
     "list, only the R it covers are evaluated"},
    {"--restart-seconds", "R", kTimes, "restart times, as --ckpt-seconds"},
    {"--bench", "FILE", kTimes,
     "CSV from the bench: a header line naming the columns "
     "spares_per_group,ckpt_seconds,restart_seconds (any order, other "
     "columns ignored), then one row per measurement; rows of the same R "
     "are averaged; blank and '#' lines are skipped"},
    {"--ckpt-mb", "D", kTimes,
     "derive the times from the chapter 7 model for D MB of checkpoint "
     "per process; its parameters below (defaults: the thesis' baseline, "
     "TeraGrid + MPICH-GM 1.2.5)"},
    {"--memcpy-mbps", "X", kModel, "memory copy rate (1500)"},
    {"--rs-mbps", "X", kModel, "Reed-Solomon encoding rate (207)"},
    {"--reduction", "tree|rabenseifner", kModel,
     "tree: (a d + b) ceil(lg n), default a,b = 0.00961,-0.09926\n"
     "rabenseifner: a (n-1) d/n + b, default 0.0254,0.1734"},
    {"--reduce-coeffs", "A,B", kModel, "override a and b (seconds per MB, seconds)"},
    {"--group-sd-seconds", "X", kModel, "std. deviation of group completion times (1)"},
    {"--comm-seconds", "X", kModel, "codec <-> application messages (1.5)"},
    {"--detect-seconds", "X", kModel, "failure detection (2.5)"},
    {"--recover-seconds", "X", kModel, "process recovery (3)"},
    {"--launch-seconds", "X", kModel, "codec job launch (10)"},
    {"--bootstrap-seconds", "X", kModel, "application restart work (60)"},
    {"--interval", "HOURS|auto", kOptions,
     "checkpoint interval (production per phase); auto (default) uses "
     "Daly's interval of each R"},
    {"--spares-per-group", "LIST", kOptions,
     "evaluate exactly these R (default: every R with times, or 1..8); "
     "an infeasible R is then an error"},
    {"--max-group-nodes", "N", kOptions, "largest group with >= 2 spares (256: Reed-Solomon over GF(2^8))"},
    {"--target", "P", kOptions,
     "probability for \"phases at target\" and the recommendation (0.9)"},
    {"--runs", "N", kOptions, "simulation runs per R (10000; 0: no simulation)"},
    {"--seed", "S", kOptions, "simulation seed (1)"},
    {"--pfs-bandwidth", "MBPS", kSecond,
     "drain every N-th checkpoint to a parallel file system (PFS) of this "
     "aggregate bandwidth, MB/s; a drain takes nodes x --drain-mb / MBPS "
     "seconds"},
    {"--drain-mb", "D", kSecond, "checkpoint MB per compute node (default: --ckpt-mb)"},
    {"--drain-seconds", "S", kSecond, "or the time of one whole drain directly"},
    {"--drain-visible", "F", kSecond,
     "fraction of the drain the application waits for (1: blocking, the "
     "default; dlckpt drains in the background, so F < 1 fits it once "
     "measured); with F < 1 one drain must end before the next starts"},
    {"--pfs-restart-seconds", "S", kSecond, "restart from the PFS (default: restart + drain time)"},
    {"--drain-every", "N|auto", kSecond, "evaluate this N; auto (default) recommends N"},
    {"--unrecoverable-rate", "X", kSecond,
     "failures per hour that parity cannot cover (default: derived from "
     "the groups: a node loss in a group that already lost R nodes within "
     "the exposure window)"},
    {"--system-loss-mtbf-hours", "H", kSecond, "whole-system losses (power, network) added to it"},
    {"--exposure-seconds", "W", kSecond,
     "window from a loss to the end of its rebuild (default: the restart "
     "time of each R)"},
};

constexpr char kDescription[] =
    R"(Chooses how many spares each checkpoint group should have and how often to
checkpoint (Lu 2005, ch. 7-9). For each feasible number of spares per group R
it prints the probability of finishing P phases without a catastrophe (a group
losing more nodes than it has spares), the expected overhead, the most phases
finished with probability >= target, from the analytical model (constant
failure rate) and from a Monte Carlo simulation (failure rate falling as nodes
are lost), plus Young's and Daly's intervals and a recommendation.)";

constexpr char kFooter[] = R"(Second-level model (Moody et al., SC'10, closed form): λ1 failures/h restart
from memory, λ2 from the PFS; a segment of d = τ + C1 (the last of a cycle
+ C2) takes M(d) = (1 - e^-λd) / (λ2 + λ1 e^-λ(R1+d)) and completes with
P(d) = 1 - λ2 M(d); a cycle of N segments takes E = (A + (1 - Q) G2) / Q with
Q = P(a)^(N-1) P(b), A = (1 - P(a)^(N-1))/λ2 + P(a)^(N-1) M(b),
G2 = (e^λR2 - 1)/λ; efficiency N τ / E. N and τ (unless --interval) maximize
it; λ2 = 0 means never drain.

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
malformed bench file, or output not written.)";

// The values given on the command line, as typed, by option name ("--nodes");
// the last one of a repeated option.
struct RawArgs {
  std::map<std::string, std::string, std::less<>> values;
  bool json = false;

  const std::string* Find(std::string_view name) const {
    auto it = values.find(name);
    return it == values.end() ? nullptr : &it->second;
  }
};

// dlckpt-plan's command line: every option of kOptionDocs and --json, filling *raw.
void DefineOptions(CLI::App& app, RawArgs* raw) {
  cli::SetUsage(app, "Usage: dlckpt-plan --nodes N --spares M --mttf-hours H --phases P TIMES [options]", 28);
  app.description(kDescription);
  app.footer(kFooter);
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  for (const OptionDoc& d : kOptionDocs) {
    const std::string name = d.name;
    app.add_option_function<std::string>(
           name, [raw, name](const std::string& v) { raw->values[name] = v; }, d.help)
        ->option_text(d.value)
        ->group(d.group);
  }
  app.add_flag("--json", raw->json, "JSON instead of a table")->group(kOptions);
  app.set_help_flag("-h,--help", "this text")->group(kOptions);
}

}  // namespace

std::string UsageText() {
  CLI::App app("", "dlckpt-plan");
  RawArgs raw;
  DefineOptions(app, &raw);
  return app.help();
}

Result<CliOptions> ParseCommandLine(std::span<const std::string> args) {
  CliOptions o;
  CLI::App app("", "dlckpt-plan");
  RawArgs raw;
  DefineOptions(app, &raw);
  bool help = false;
  if (Status st = cli::ParseArgs(app, std::vector<std::string>(args.begin(), args.end()), &help); !st.ok()) {
    return Status::InvalidArgument(st.message());
  }
  if (help) {
    o.help = true;
    return o;
  }
  o.json = raw.json;

  PlanRequest& req = o.request;
  Chapter7Params& ch7 = req.times.chapter7;
  TwoLevelRequest& two = req.two_level;
  std::vector<double> ckpt, restart;
  std::string model_flag;      // a chapter 7 model parameter given, "" if none
  std::string two_level_flag;  // a second-level option given other than the two that enable it
  const auto given = [&raw](std::string_view flag) { return raw.Find(flag) != nullptr; };

  for (const ModelRate& rate : kModelRates) {
    if (const std::string* v = raw.Find(rate.flag)) {
      DLCKPT_ASSIGN_OR_RETURN(ch7.*rate.field, Number(rate.flag, *v, rate.allow_zero));
      model_flag = std::string(rate.flag);
    }
  }
  if (const std::string* v = raw.Find("--nodes")) {
    DLCKPT_ASSIGN_OR_RETURN(req.compute_nodes, Integer("--nodes", *v, 1));
  }
  if (const std::string* v = raw.Find("--spares")) {
    DLCKPT_ASSIGN_OR_RETURN(req.spare_nodes, Integer("--spares", *v, 1));
  }
  if (const std::string* v = raw.Find("--mttf-hours")) {
    DLCKPT_ASSIGN_OR_RETURN(req.mttf_hours, Number("--mttf-hours", *v, false));
  }
  if (const std::string* v = raw.Find("--phases")) {
    DLCKPT_ASSIGN_OR_RETURN(req.phases, Integer("--phases", *v, 1));
  }
  if (const std::string* v = raw.Find("--interval"); v != nullptr && *v != "auto") {
    DLCKPT_ASSIGN_OR_RETURN(double h, Number("--interval", *v, false));
    req.interval_hours = h;
  }
  if (const std::string* v = raw.Find("--ckpt-seconds")) {
    DLCKPT_ASSIGN_OR_RETURN(ckpt, NumberList("--ckpt-seconds", *v));
  }
  if (const std::string* v = raw.Find("--restart-seconds")) {
    DLCKPT_ASSIGN_OR_RETURN(restart, NumberList("--restart-seconds", *v));
  }
  if (const std::string* v = raw.Find("--bench")) {
    if (v->empty()) return Status::InvalidArgument("--bench needs a file name");
    o.bench_path = *v;
  }
  if (const std::string* v = raw.Find("--ckpt-mb")) {
    DLCKPT_ASSIGN_OR_RETURN(ch7.ckpt_mb, Number("--ckpt-mb", *v, false));
  }
  if (const std::string* v = raw.Find("--reduction")) {
    if (*v == "tree") {
      ch7.tree_reduction = true;
    } else if (*v == "rabenseifner") {
      ch7.tree_reduction = false;
    } else {
      return Bad("--reduction", *v, "'tree' or 'rabenseifner'");
    }
    model_flag = "--reduction";
  }
  if (const std::string* v = raw.Find("--reduce-coeffs")) {
    const std::vector<std::string_view> ab = Split(*v, ',');
    if (ab.size() != 2) return Bad("--reduce-coeffs", *v, "two numbers A,B");
    DLCKPT_ASSIGN_OR_RETURN(ch7.reduce_a, Number("--reduce-coeffs", ab[0], true, /*allow_negative=*/true));
    DLCKPT_ASSIGN_OR_RETURN(ch7.reduce_b, Number("--reduce-coeffs", ab[1], true, /*allow_negative=*/true));
    model_flag = "--reduce-coeffs";
  }
  if (const std::string* v = raw.Find("--pfs-bandwidth")) {
    DLCKPT_ASSIGN_OR_RETURN(two.pfs_mbps, Number("--pfs-bandwidth", *v, false));
  }
  if (const std::string* v = raw.Find("--drain-seconds")) {
    DLCKPT_ASSIGN_OR_RETURN(two.drain_seconds, Number("--drain-seconds", *v, true));
  }
  if (const std::string* v = raw.Find("--drain-mb")) {
    DLCKPT_ASSIGN_OR_RETURN(two.drain_mb_per_node, Number("--drain-mb", *v, false));
    two_level_flag = "--drain-mb";
  }
  if (const std::string* v = raw.Find("--drain-visible")) {
    DLCKPT_ASSIGN_OR_RETURN(two.drain_visible, Number("--drain-visible", *v, true));
    if (two.drain_visible > 1) return Bad("--drain-visible", *v, "a fraction in [0, 1]");
    two_level_flag = "--drain-visible";
  }
  if (const std::string* v = raw.Find("--pfs-restart-seconds")) {
    DLCKPT_ASSIGN_OR_RETURN(two.pfs_restart_seconds, Number("--pfs-restart-seconds", *v, true));
    two_level_flag = "--pfs-restart-seconds";
  }
  if (const std::string* v = raw.Find("--drain-every")) {
    if (*v != "auto") {
      DLCKPT_ASSIGN_OR_RETURN(two.drain_every, Integer("--drain-every", *v, 1));
    }
    two_level_flag = "--drain-every";
  }
  if (const std::string* v = raw.Find("--unrecoverable-rate")) {
    DLCKPT_ASSIGN_OR_RETURN(two.uncovered_rate, Number("--unrecoverable-rate", *v, true));
    two_level_flag = "--unrecoverable-rate";
  }
  if (const std::string* v = raw.Find("--system-loss-mtbf-hours")) {
    DLCKPT_ASSIGN_OR_RETURN(two.system_loss_mtbf_hours, Number("--system-loss-mtbf-hours", *v, false));
    two_level_flag = "--system-loss-mtbf-hours";
  }
  if (const std::string* v = raw.Find("--exposure-seconds")) {
    DLCKPT_ASSIGN_OR_RETURN(two.exposure_seconds, Number("--exposure-seconds", *v, true));
    two_level_flag = "--exposure-seconds";
  }
  if (const std::string* v = raw.Find("--spares-per-group")) {
    for (std::string_view item : Split(*v, ',')) {
      DLCKPT_ASSIGN_OR_RETURN(int64_t r, Integer("--spares-per-group", item, 1));
      req.spares_per_group.push_back(r);
    }
  }
  if (const std::string* v = raw.Find("--max-group-nodes")) {
    DLCKPT_ASSIGN_OR_RETURN(req.max_rs_group_nodes, Integer("--max-group-nodes", *v, 2));
  }
  if (const std::string* v = raw.Find("--target")) {
    DLCKPT_ASSIGN_OR_RETURN(req.target, Number("--target", *v, false));
    if (req.target >= 1) return Bad("--target", *v, "a probability in (0, 1)");
  }
  if (const std::string* v = raw.Find("--runs")) {
    DLCKPT_ASSIGN_OR_RETURN(req.sim_runs, Integer("--runs", *v, 0));
  }
  if (const std::string* v = raw.Find("--seed")) {
    uint64_t seed = 0;
    const char* end = v->data() + v->size();
    auto [ptr, ec] = std::from_chars(v->data(), end, seed);
    if (v->empty() || ec != std::errc() || ptr != end) return Bad("--seed", *v, "an unsigned 64-bit integer");
    req.seed = seed;
  }
  const bool have_ckpt = given("--ckpt-seconds"), have_restart = given("--restart-seconds");
  const bool have_mb = given("--ckpt-mb"), have_coeffs = given("--reduce-coeffs");
  const bool have_bandwidth = given("--pfs-bandwidth"), have_drain_mb = given("--drain-mb");

  for (const char* required : {"--nodes", "--spares", "--mttf-hours", "--phases"}) {
    if (!given(required)) return Status::InvalidArgument(std::string(required) + " is required");
  }

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
  if (!model_flag.empty() && !have_mb) {
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

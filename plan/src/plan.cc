// MakePlan, the bench CSV reader and the table / JSON output of dlckpt/plan/plan.h.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "dlckpt/base/env.h"
#include "dlckpt/base/strings.h"
#include "dlckpt/plan/plan.h"

namespace dlckpt::plan {
namespace {

std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) return std::string();
  return std::string(buf, std::min(static_cast<size_t>(n), sizeof buf - 1));
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (;;) {
    const size_t pos = s.find(sep);
    out.push_back(Trim(s.substr(0, pos)));
    if (pos == std::string_view::npos) return out;
    s.remove_prefix(pos + 1);
  }
}

bool ParseDouble(std::string_view s, double* v) {
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, *v);
  return ec == std::errc() && ptr == end && std::isfinite(*v);
}

bool ParseInt(std::string_view s, int64_t* v) {
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, *v);
  return ec == std::errc() && ptr == end;
}

}  // namespace

// ------------------------------------------------------------ bench CSV --

Result<std::map<int64_t, Times>> ParseBenchCsv(std::string_view text, std::string_view name) {
  const std::string where(name);
  int column_r = -1, column_c = -1, column_rs = -1;
  size_t ncolumns = 0;
  bool have_header = false;
  std::map<int64_t, std::pair<Times, int>> sums;
  int line_no = 0;
  for (std::string_view line : Split(text, '\n')) {
    ++line_no;
    if (line.empty() || line.front() == '#') continue;
    const std::vector<std::string_view> fields = Split(line, ',');
    const std::string at = where + ":" + std::to_string(line_no) + ": ";
    if (!have_header) {
      for (size_t i = 0; i < fields.size(); ++i) {
        if (fields[i] == "spares_per_group") column_r = static_cast<int>(i);
        if (fields[i] == "ckpt_seconds") column_c = static_cast<int>(i);
        if (fields[i] == "restart_seconds") column_rs = static_cast<int>(i);
      }
      if (column_r < 0 || column_c < 0 || column_rs < 0) {
        return Status::InvalidArgument(
            at + "header must name the columns spares_per_group, ckpt_seconds, restart_seconds");
      }
      ncolumns = fields.size();
      have_header = true;
      continue;
    }
    if (fields.size() != ncolumns) {
      return Status::InvalidArgument(at + "expected " + std::to_string(ncolumns) + " fields, found " +
                                     std::to_string(fields.size()));
    }
    int64_t r;
    Times t;
    if (!ParseInt(fields[column_r], &r) || r < 1) {
      return Status::InvalidArgument(at + "spares_per_group '" + std::string(fields[column_r]) +
                                     "' is not a positive integer");
    }
    if (!ParseDouble(fields[column_c], &t.ckpt_seconds) || t.ckpt_seconds < 0) {
      return Status::InvalidArgument(at + "ckpt_seconds '" + std::string(fields[column_c]) +
                                     "' is not a non-negative number");
    }
    if (!ParseDouble(fields[column_rs], &t.restart_seconds) || t.restart_seconds < 0) {
      return Status::InvalidArgument(at + "restart_seconds '" + std::string(fields[column_rs]) +
                                     "' is not a non-negative number");
    }
    auto& [sum, n] = sums[r];
    sum.ckpt_seconds += t.ckpt_seconds;
    sum.restart_seconds += t.restart_seconds;
    ++n;
  }
  if (!have_header) return Status::InvalidArgument(where + ": no header line (empty file?)");
  if (sums.empty()) return Status::InvalidArgument(where + ": no data rows after the header");
  std::map<int64_t, Times> out;
  for (const auto& [r, sn] : sums) {
    out[r] = {sn.first.ckpt_seconds / sn.second, sn.first.restart_seconds / sn.second};
  }
  return out;
}

Result<std::map<int64_t, Times>> ReadBenchCsv(const std::string& path) {
  Result<std::string> text = Env::Default()->ReadFile(path);
  if (!text.ok()) return text.status().Prefixed("bench file");
  return ParseBenchCsv(*text, path);
}

// ------------------------------------------------------------- MakePlan --

namespace {

Status Validate(const PlanRequest& r) {
  auto bad = [](const std::string& m) { return Status::InvalidArgument(m); };
  if (r.compute_nodes < 1) return bad("--nodes must be at least 1, got " + std::to_string(r.compute_nodes));
  if (r.compute_nodes > kMaxComputeNodes) {
    return bad("--nodes must be at most " + std::to_string(kMaxComputeNodes) + ", got " +
               std::to_string(r.compute_nodes));
  }
  if (r.spare_nodes < 1) return bad("--spares must be at least 1, got " + std::to_string(r.spare_nodes));
  if (r.spare_nodes > r.compute_nodes) {
    return bad("--spares (" + std::to_string(r.spare_nodes) + ") exceeds --nodes (" +
               std::to_string(r.compute_nodes) + ")");
  }
  if (r.spare_nodes > kMaxSpares) {
    return bad("--spares must be at most " + std::to_string(kMaxSpares) + " (the model's cost grows as spares squared), got " +
               std::to_string(r.spare_nodes));
  }
  if (!(r.mttf_hours > 0) || !(r.mttf_hours <= kMaxHours)) {
    return bad(Format("--mttf-hours must be a positive number up to %g, got %g", kMaxHours, r.mttf_hours));
  }
  if (r.phases < 1 || r.phases > kMaxPhases) {
    return bad("--phases must be in 1.." + std::to_string(kMaxPhases) + ", got " + std::to_string(r.phases));
  }
  if (r.interval_hours && (!(*r.interval_hours > 0) || !(*r.interval_hours <= kMaxHours))) {
    return bad(Format("--interval must be a positive number of hours up to %g, or 'auto', got %g", kMaxHours,
                      *r.interval_hours));
  }
  if (!(r.target > 0 && r.target < 1)) return bad(Format("--target must be in (0, 1), got %g", r.target));
  if (r.sim_runs < 0 || r.sim_runs > kMaxSimRuns) {
    return bad("--runs must be in 0.." + std::to_string(kMaxSimRuns) + ", got " + std::to_string(r.sim_runs));
  }
  if (r.max_rs_group_nodes < 2) {
    return bad("--max-group-nodes must be at least 2, got " + std::to_string(r.max_rs_group_nodes));
  }
  DLCKPT_RETURN_IF_ERROR(ValidateTwoLevel(r.two_level));
  for (int64_t s : r.spares_per_group) {
    if (s < 1) return bad("--spares-per-group values must be at least 1, got " + std::to_string(s));
  }
  auto check_times = [&](const Times& t, const std::string& what) -> Status {
    if (!(t.ckpt_seconds >= 0) || !(t.ckpt_seconds <= kMaxHours)) {
      return bad(Format("checkpoint time %s must be a non-negative number of seconds, got %g", what.c_str(),
                        t.ckpt_seconds));
    }
    if (!(t.restart_seconds >= 0) || !(t.restart_seconds <= kMaxHours)) {
      return bad(Format("restart time %s must be a non-negative number of seconds, got %g", what.c_str(),
                        t.restart_seconds));
    }
    return Status::OK();
  };
  switch (r.times.source) {
    case TimesSpec::Source::kPerSparesPerGroup:
      if (r.times.per_spares_per_group.empty()) return bad("no checkpoint and restart times given");
      for (const auto& [s, t] : r.times.per_spares_per_group) {
        if (s < 1) return bad("times given for " + std::to_string(s) + " spares per group");
        DLCKPT_RETURN_IF_ERROR(check_times(t, "for " + std::to_string(s) + " spares per group"));
      }
      break;
    case TimesSpec::Source::kSameForAll:
      DLCKPT_RETURN_IF_ERROR(check_times(r.times.same, ""));
      break;
    case TimesSpec::Source::kChapter7: {
      const Chapter7Params& p = r.times.chapter7;
      const double positive[] = {p.ckpt_mb, p.memcpy_mbps, p.rs_mbps};
      const double non_negative[] = {p.group_sd_seconds, p.comm_seconds,   p.detect_seconds,
                                     p.recover_seconds,  p.launch_seconds, p.bootstrap_seconds};
      for (double v : positive) {
        if (!(v > 0) || !(v <= kMaxHours)) {
          return bad(Format("chapter 7 model: sizes and rates must be in (0, %g], got %g", kMaxHours, v));
        }
      }
      for (double v : non_negative) {
        if (!(v >= 0) || !(v <= kMaxHours)) {
          return bad(Format("chapter 7 model: times must be in [0, %g] seconds, got %g", kMaxHours, v));
        }
      }
      if (!(std::fabs(p.reduce_a) <= kMaxHours) || !(std::fabs(p.reduce_b) <= kMaxHours)) {
        return bad(Format("chapter 7 model: reduction coefficients must be within +-%g", kMaxHours));
      }
      break;
    }
  }
  return Status::OK();
}

std::string FormatProbability(double p) {
  if (p == 0) return "0";
  if (p >= 1e-3) return Format("%.4f", p);
  return Format("%.2e", p);
}

std::string FormatPhases(int64_t n) {
  return n >= kMaxPhases ? std::string(">=2^30") : std::to_string(n);
}

std::string FormatPercent(const std::optional<double>& v) {
  return v ? Format("%.2f%%", *v * 100) : std::string("-");
}

// "second level: drain every 14 checkpoints (every 4.97 h of work); ..." for
// the recommendation.
std::string TwoLevelSentence(const TwoLevelResult& t, const PlanRequest& req) {
  const TwoLevelChoice& c = t.choice;
  std::string s;
  if (!(c.efficiency > 1e-6)) {
    return Format("second level: no drain interval leaves time for work (one drain: %.4g s visible, "
                  "restart from the PFS: %.4g s, unrecoverable failures: %.3g per hour)",
                  t.visible_drain_seconds, t.pfs_restart_seconds, t.uncovered_rate);
  }
  if (c.drain_every == 0) {
    s = "second level: no failure needs the PFS (unrecoverable rate 0), so never drain";
  } else {
    s = Format("second level: %s every %lld checkpoint%s (every %.3g h of work)",
               req.two_level.drain_every ? "draining" : "drain", static_cast<long long>(c.drain_every),
               c.drain_every == 1 ? "" : "s", static_cast<double>(c.drain_every) * c.interval_hours);
    if (t.drain_every_is_cap) s += ", the search's cap: practically never";
    // The job's work is expected_hours x η (phases x the single-level interval).
    const double work = t.expected_hours * c.efficiency;
    if (static_cast<double>(c.drain_every) * c.interval_hours >= work) {
      s += Format(", more than the job's %.3g h of work: no drain is needed during the run", work);
    }
  }
  s += Format("; with level-1 checkpoints every %.3g h (%s) the expected efficiency is %.2f%%",
              c.interval_hours, t.interval_fixed ? "--interval" : "optimized", c.efficiency * 100);
  return s;
}

// The parity layout for the recommended grouping, and why.
void RecommendLayout(Plan& plan) {
  const PlanRequest& req = plan.request;
  const Candidate& c = plan.candidates[plan.recommended];
  const long long phases = static_cast<long long>(req.phases);
  const double gain = c.spread.compute_nodes / static_cast<double>(req.compute_nodes) - 1;
  const std::string memory =
      Format("each node keeps %.3g of its checkpoint in parity", c.spread.parity_per_node);
  if (c.spread.p_success >= c.model.p_success) {
    plan.layout = "spread";
    plan.layout_reason = Format("with the parity on the members, the %lld spare nodes compute too (%.3g%% more "
                                "nodes) and %s finish %lld phases with probability %s (spares: %s); %s",
                                static_cast<long long>(req.spare_nodes), gain * 100,
                                SparesPerGroupText(c.layout.spares_per_group).c_str(), phases,
                                FormatProbability(c.spread.p_success).c_str(),
                                FormatProbability(c.model.p_success).c_str(), memory.c_str());
  } else {
    plan.layout = "spares";
    plan.layout_reason = Format("parity on the spare nodes finishes %lld phases with probability %s, spread "
                                "parity only %s (more than %lld losses in one group within one phase)",
                                phases, FormatProbability(c.model.p_success).c_str(),
                                FormatProbability(c.spread.p_success).c_str(),
                                static_cast<long long>(c.layout.spares_per_group));
  }
}

// Chooses the recommended candidate and explains why.
void Recommend(Plan& plan) {
  const PlanRequest& req = plan.request;
  std::optional<size_t> best;
  for (size_t i = 0; i < plan.candidates.size(); ++i) {
    const ModelPoint& m = plan.candidates[i].model;
    if (m.p_success < req.target || !m.overhead) continue;
    if (!best || *m.overhead < *plan.candidates[*best].model.overhead) best = i;
  }
  std::string why;
  const long long phases = static_cast<long long>(req.phases);
  if (best) {
    why = Format("the lowest expected overhead (%s) of the groupings that finish %lld phases with "
                 "probability >= %g",
                 FormatPercent(plan.candidates[*best].model.overhead).c_str(), phases, req.target);
  } else {
    best = 0;
    for (size_t i = 1; i < plan.candidates.size(); ++i) {
      const Candidate& a = plan.candidates[i];
      const Candidate& b = plan.candidates[*best];
      if (a.model.p_success > b.model.p_success ||
          (a.model.p_success == b.model.p_success &&
           a.model_phases_at_target > b.model_phases_at_target)) {
        best = i;
      }
    }
    const Candidate& b = plan.candidates[*best];
    if (b.model.p_success > 0) {
      why = Format("the highest probability (%s) of finishing %lld phases; none reaches %g",
                   FormatProbability(b.model.p_success).c_str(), phases, req.target);
    } else if (b.model_phases_at_target > 0) {
      why = Format("no grouping finishes %lld phases with a probability above 1e-300; this one "
                   "finishes the most phases (%lld) with probability >= %g",
                   phases, static_cast<long long>(b.model_phases_at_target), req.target);
    } else {
      why = Format("no grouping finishes %lld phases, or even one, with a useful probability; "
                   "add spares, use more reliable nodes or checkpoint more often",
                   phases);
    }
  }
  plan.recommended = *best;
  const Candidate& c = plan.candidates[*best];
  plan.recommendation = SparesPerGroupText(c.layout.spares_per_group) + " (" +
                        c.layout.Describe() + " nodes), checkpoint every " +
                        Format("%.3g h: ", c.interval_hours) + why;
  if (c.two_level) {
    plan.recommendation += "; " + TwoLevelSentence(*c.two_level, req);
    // The grouping above is chosen by the single-level criterion (no
    // catastrophe); say so when another one is more efficient with two levels.
    const Candidate* most = &c;
    for (const Candidate& o : plan.candidates) {
      if (o.two_level && o.two_level->choice.efficiency > most->two_level->choice.efficiency) most = &o;
    }
    if (most != &c) {
      plan.recommendation +=
          Format(" (with two levels %s would reach %.2f%%)",
                 SparesPerGroupText(most->layout.spares_per_group).c_str(), most->two_level->choice.efficiency * 100);
    }
  }
}

}  // namespace

Result<Plan> MakePlan(const PlanRequest& request) {
  DLCKPT_RETURN_IF_ERROR(Validate(request));
  Plan plan;
  plan.request = request;
  const int64_t n = request.compute_nodes, m = request.spare_nodes;
  const double nodes = static_cast<double>(n + m);
  plan.system_mtbf_hours = request.mttf_hours / nodes;

  // Which spares-per-group values to evaluate.
  const bool explicit_list = !request.spares_per_group.empty();
  std::set<int64_t> values;
  if (explicit_list) {
    values.insert(request.spares_per_group.begin(), request.spares_per_group.end());
  } else if (request.times.source == TimesSpec::Source::kPerSparesPerGroup) {
    for (const auto& [r, t] : request.times.per_spares_per_group) values.insert(r);
  } else {
    for (int64_t r = 1; r <= std::min(kDefaultMaxSparesPerGroup, m); ++r) values.insert(r);
  }

  for (int64_t r : values) {
    const std::string what = SparesPerGroupText(r);
    Result<Layout> layout = MakeLayout(n, m, r, request.max_rs_group_nodes);
    if (!layout.ok()) {
      if (explicit_list) return layout.take_status();
      plan.skipped.push_back({r, layout.status().message()});
      continue;
    }
    Candidate cand;
    cand.layout = std::move(*layout);
    switch (request.times.source) {
      case TimesSpec::Source::kPerSparesPerGroup: {
        auto it = request.times.per_spares_per_group.find(r);
        if (it == request.times.per_spares_per_group.end()) {
          return Status::InvalidArgument("no checkpoint and restart times for " + what + " in the " +
                                         request.times.origin);
        }
        cand.times = it->second;
        break;
      }
      case TimesSpec::Source::kSameForAll:
        cand.times = request.times.same;
        break;
      case TimesSpec::Source::kChapter7:
        cand.times = Chapter7Times(cand.layout, request.times.chapter7);
        break;
    }
    const double ckpt_h = cand.times.ckpt_seconds / 3600;
    const double restart_h = cand.times.restart_seconds / 3600;
    cand.young_hours = YoungIntervalHours(plan.system_mtbf_hours, ckpt_h);
    cand.daly_hours = DalyIntervalHours(plan.system_mtbf_hours, ckpt_h);
    cand.interval_hours = request.interval_hours ? *request.interval_hours : cand.daly_hours;
    if (!(cand.interval_hours > 0)) {
      return Status::InvalidArgument("Daly's interval for " + what +
                                     " is 0 because its checkpoint time is 0; give --interval HOURS");
    }

    PhaseParams params;
    params.system_failure_rate = nodes / request.mttf_hours;
    params.interval_hours = cand.interval_hours;
    params.ckpt_hours = ckpt_h;
    params.restart_hours = restart_h;
    AnalyticModel model(params, SurvivalProbabilities(cand.layout.kinds, m));
    cand.model = model.At(request.phases);
    cand.model_phases_at_target = model.PhasesAtProbability(request.target);
    if (cand.model_phases_at_target > 0) cand.model_at_target = model.At(cand.model_phases_at_target);
    cand.spread = EvaluateSpread(cand.layout, params, request.phases);

    if (request.two_level.enabled) {
      Result<TwoLevelResult> two =
          EvaluateTwoLevel(request, cand.layout, cand.times, cand.interval_hours);
      if (!two.ok()) return two.take_status();
      cand.two_level = std::move(*two);
    }

    if (request.sim_runs > 0) {
      SimParams sp;
      sp.node_failure_rate = 1 / request.mttf_hours;
      sp.interval_hours = cand.interval_hours;
      sp.ckpt_hours = ckpt_h;
      sp.restart_hours = restart_h;
      SimOptions so;
      so.runs = request.sim_runs;
      so.seed = request.seed;
      so.target = request.target;
      so.marks.push_back(request.phases);
      if (cand.model_phases_at_target > 0) so.marks.push_back(cand.model_phases_at_target);
      cand.sim = Simulate(cand.layout, sp, so);
    }
    plan.candidates.push_back(std::move(cand));
  }
  if (plan.candidates.empty()) {
    std::string why;
    for (const Skipped& s : plan.skipped) why += "; " + s.reason;
    return Status::InvalidArgument("no feasible number of spares per group" + why);
  }
  Recommend(plan);
  RecommendLayout(plan);
  return plan;
}

SpreadPoint EvaluateSpread(const Layout& layout, const PhaseParams& params, int64_t phases) {
  SpreadPoint sp;
  const int64_t tolerable = layout.groups() * layout.spares_per_group;  // most losses survived in a phase
  const std::vector<double> survival = SurvivalProbabilities(layout.kinds, tolerable);
  const std::vector<double> f = PhaseFailureProbabilities(params, tolerable);
  double kept = 0;
  for (size_t k = 0; k < f.size() && k < survival.size(); ++k) kept += f[k] * survival[k];
  sp.phase_loss = std::clamp(1 - kept, 0.0, 1.0);
  sp.p_success = sp.phase_loss >= 1 ? 0 : std::exp(static_cast<double>(phases) * std::log1p(-sp.phase_loss));
  sp.compute_nodes = static_cast<double>(layout.nodes());
  const double s = static_cast<double>(layout.max_group_nodes()), r = static_cast<double>(layout.spares_per_group);
  sp.parity_per_node = s > r ? r / (s - r) : 0;
  return sp;
}

// --------------------------------------------------------------- output --

namespace {

using Json = nlohmann::ordered_json;

// v's value, or the string `absent` when v is empty.
template <typename T>
Json ValueOr(const std::optional<T>& v, std::string_view absent) {
  return v ? Json(*v) : Json(absent);
}

// v's value, or null when v is empty.
Json ValueOrNull(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }

Json PointJson(const ModelPoint& p) {
  return {{"phases", p.phases},
          {"p_success", p.p_success},
          {"expected_hours", ValueOrNull(p.hours)},
          {"overhead", ValueOrNull(p.overhead)}};
}

const char* SourceName(TimesSpec::Source s) {
  switch (s) {
    case TimesSpec::Source::kPerSparesPerGroup: return "per_spares_per_group";
    case TimesSpec::Source::kSameForAll: return "same_for_all";
    case TimesSpec::Source::kChapter7: return "chapter7_model";
  }
  return "?";
}

Json InputsJson(const PlanRequest& req) {
  Json in = {{"compute_nodes", req.compute_nodes},
             {"spare_nodes", req.spare_nodes},
             {"mttf_hours", req.mttf_hours},
             {"phases", req.phases},
             {"interval_hours", ValueOr(req.interval_hours, "auto")},
             {"target", req.target},
             {"times_source", SourceName(req.times.source)},
             {"times_origin", req.times.origin},
             {"max_group_nodes", req.max_rs_group_nodes},
             {"sim_runs", req.sim_runs},
             {"seed", std::to_string(req.seed)}};  // a string: JSON numbers lose precision past 2^53
  if (req.two_level.enabled) {
    const TwoLevelRequest& t = req.two_level;
    Json two = Json::object();
    if (t.drain_seconds) {
      two["drain_seconds"] = *t.drain_seconds;
    } else {
      two["pfs_mbps"] = t.pfs_mbps;
      two["drain_mb_per_node"] = t.drain_mb_per_node;
    }
    two["drain_visible"] = t.drain_visible;
    two["drain_every"] = ValueOr(t.drain_every, "auto");
    two["unrecoverable_rate_per_hour"] = ValueOr(t.uncovered_rate, "derived");
    two["system_loss_mtbf_hours"] = t.system_loss_mtbf_hours;
    in["two_level"] = std::move(two);
  }
  return in;
}

Json CandidateJson(const PlanRequest& req, const Candidate& c) {
  Json kinds = Json::array();
  for (const GroupKind& k : c.layout.kinds) {
    kinds.push_back({{"count", k.count}, {"compute", k.compute}, {"spares", k.spares}});
  }
  Json j = {{"spares_per_group", c.layout.spares_per_group},
            {"groups", c.layout.groups()},
            {"group_kinds", std::move(kinds)},
            {"ckpt_seconds", c.times.ckpt_seconds},
            {"restart_seconds", c.times.restart_seconds},
            {"interval_hours", c.interval_hours},
            {"young_hours", c.young_hours},
            {"daly_hours", c.daly_hours}};
  j["model"] = {{"at_phases", PointJson(c.model)},
                {"phases_at_target", c.model_phases_at_target},
                {"phases_at_target_is_cap", c.model_phases_at_target >= kMaxPhases},
                {"at_target", c.model_phases_at_target > 0 ? PointJson(c.model_at_target) : Json(nullptr)}};
  if (c.two_level) {
    const TwoLevelResult& t = *c.two_level;
    j["two_level"] = {
        {"group_loss_rate_per_hour", t.group_loss_rate},
        {"covered_rate_per_hour", t.covered_rate},
        {"uncovered_rate_per_hour", t.uncovered_rate},
        {"exposure_seconds", t.exposure_seconds},
        {"drain_seconds", t.drain_seconds},
        {"visible_drain_seconds", t.visible_drain_seconds},
        {"pfs_restart_seconds", t.pfs_restart_seconds},
        {"drain_every", t.choice.drain_every > 0 ? Json(t.choice.drain_every) : Json("never")},
        {"drain_every_is_cap", t.drain_every_is_cap},
        {"drain_every_given", req.two_level.drain_every.has_value()},
        {"interval_hours", t.choice.interval_hours},
        {"interval_given", t.interval_fixed},
        {"efficiency", t.choice.efficiency},
        {"cycle_hours", t.choice.cycle_hours},  // null (not finite) when never draining
        {"expected_hours", t.expected_hours},
        {"efficiency_drain_every_checkpoint", t.efficiency_every_checkpoint},
        {"first_order_drain_every", t.first_order_drain_every}};
  }
  Json sim = nullptr;
  if (c.sim) {
    Json marks = Json::array();
    for (const SimMark& mk : c.sim->marks) {
      marks.push_back({{"phases", mk.phases},
                       {"finished_runs", mk.finished_runs},
                       {"p_finish", mk.p_finish},
                       {"overhead", ValueOrNull(mk.overhead)}});
    }
    sim = {{"runs", c.sim->runs},
           {"phases_at_target", c.sim->phases_at_target},
           {"phases_at_target_is_cap", c.sim->phases_at_target >= kMaxPhases},
           {"marks", std::move(marks)}};
  }
  j["simulation"] = std::move(sim);
  j["spread"] = {{"p_success", c.spread.p_success},
                 {"phase_loss", c.spread.phase_loss},
                 {"compute_nodes", c.spread.compute_nodes},
                 {"parity_per_node", c.spread.parity_per_node}};
  return j;
}

}  // namespace

std::string FormatJson(const Plan& plan) {
  const PlanRequest& req = plan.request;
  Json j = {{"inputs", InputsJson(req)}, {"system_mtbf_hours", plan.system_mtbf_hours}};
  Json candidates = Json::array();
  for (const Candidate& c : plan.candidates) candidates.push_back(CandidateJson(req, c));
  j["candidates"] = std::move(candidates);
  Json skipped = Json::array();
  for (const Skipped& s : plan.skipped) {
    skipped.push_back({{"spares_per_group", s.spares_per_group}, {"reason", s.reason}});
  }
  j["skipped"] = std::move(skipped);
  const Candidate& best = plan.candidates[plan.recommended];
  Json rec = {{"spares_per_group", best.layout.spares_per_group}, {"interval_hours", best.interval_hours}};
  if (best.two_level) {
    rec["drain_every"] = best.two_level->choice.drain_every;  // 0: never
    rec["two_level_interval_hours"] = best.two_level->choice.interval_hours;
    rec["two_level_efficiency"] = best.two_level->choice.efficiency;
  }
  rec["reason"] = plan.recommendation;
  rec["parity"] = plan.layout;
  rec["parity_reason"] = plan.layout_reason;
  j["recommendation"] = std::move(rec);
  // Invalid UTF-8 (a bench file's name) is replaced rather than thrown on.
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

namespace {

// The second level's part of the table.
std::string FormatTwoLevelTable(const Plan& plan) {
  const PlanRequest& req = plan.request;
  const TwoLevelRequest& t = req.two_level;
  std::string s = "\nsecond level: drain to the PFS ";
  s += t.drain_seconds ? Format("(%g s per drain", *t.drain_seconds)
                       : Format("(%g MB per compute node at %g MB/s", t.drain_mb_per_node, t.pfs_mbps);
  s += Format(", %g of it visible%s)\nunrecoverable failures: %s\n", t.drain_visible,
              t.drain_visible == 1 ? ": blocking" : ": asynchronous",
              t.uncovered_rate ? Format("%g per hour (given)", *t.uncovered_rate).c_str()
                               : (std::string("> spares losses in a group within the exposure window") +
                                  (t.system_loss_mtbf_hours > 0
                                       ? Format(" + system loss every %g h", t.system_loss_mtbf_hours)
                                       : std::string()))
                                     .c_str());
  s += "spares  lambda1/h  lambda2/h  drain s  PFS restart s  drain every  interval h  efficiency"
       "  eff(N=1)  N first-order  expected h\n";
  for (const Candidate& c : plan.candidates) {
    if (!c.two_level) continue;
    const TwoLevelResult& r = *c.two_level;
    const std::string every = r.choice.drain_every == 0 ? std::string("never")
                              : Format("%lld%s", static_cast<long long>(r.choice.drain_every),
                                       r.drain_every_is_cap ? "(cap)" : "");
    s += Format("%6lld  %9.3g  %9.3g  %7.1f  %13.1f  %11s  %10.4g  %9.3f%%  %7.3f%%  %13s  %10.4g\n",
                static_cast<long long>(c.layout.spares_per_group), r.covered_rate, r.uncovered_rate,
                r.visible_drain_seconds, r.pfs_restart_seconds, every.c_str(), r.choice.interval_hours,
                r.choice.efficiency * 100, r.efficiency_every_checkpoint * 100,
                r.first_order_drain_every > 0 ? Format("%.1f", r.first_order_drain_every).c_str() : "-",
                r.expected_hours);
  }
  s += "(lambda1: failures parity covers, restart from memory; lambda2: failures only the PFS\n"
       " covers. drain every: level-1 checkpoints per drain (";
  s += t.drain_every ? "--drain-every" : "best";
  s += "); interval: level-1 work per checkpoint (";
  s += req.interval_hours ? "--interval" : "best";
  s += ");\n efficiency: work / expected wall-clock time (Moody et al. SC'10 two-level model);\n"
       " eff(N=1): draining every checkpoint at that interval; N first-order: sqrt(C2 l1/(C1 l2));\n";
  s += Format(" expected h: %lld phases x the first table's interval of work / efficiency. With a\n",
              static_cast<long long>(req.phases));
  s += " second level a catastrophe restarts from the PFS instead of ending the run.)\n";
  return s;
}

}  // namespace

std::string FormatTable(const Plan& plan) {
  const PlanRequest& req = plan.request;
  std::string s;
  s += Format("dlckpt-plan: %lld compute + %lld spare nodes, node MTTF %g h (system MTBF %.4g h), %lld phases\n",
              static_cast<long long>(req.compute_nodes), static_cast<long long>(req.spare_nodes),
              req.mttf_hours, plan.system_mtbf_hours, static_cast<long long>(req.phases));
  s += "checkpoint/restart times: " + req.times.origin + "; interval: " +
       (req.interval_hours ? Format("%g h for every grouping", *req.interval_hours)
                           : std::string("Daly's interval of each grouping")) +
       "\n\n";
  s += "spares  groups x nodes        ckpt s  restart s  interval h  Young h   Daly h\n";
  for (const Candidate& c : plan.candidates) {
    s += Format("%6lld  %-20s %7.2f  %9.2f  %10.4g  %7.4g  %7.4g\n",
                static_cast<long long>(c.layout.spares_per_group), c.layout.Describe().c_str(),
                c.times.ckpt_seconds, c.times.restart_seconds, c.interval_hours, c.young_hours,
                c.daly_hours);
  }
  const std::string pcol = Format("P(%lld)", static_cast<long long>(req.phases));
  const std::string tcol = Format("ph@%g", req.target);
  s += "\n        model (constant failure rate)";
  if (req.sim_runs > 0) {
    s += Format("                 simulation (%lld runs, seed %llu)", static_cast<long long>(req.sim_runs),
                static_cast<unsigned long long>(req.seed));
  }
  s += Format("\nspares  %-10s %9s %9s %10s", pcol.c_str(), "overhead", tcol.c_str(), "ovh@ph");
  if (req.sim_runs > 0) {
    s += Format("    %-10s %9s %9s %10s", pcol.c_str(), "overhead", tcol.c_str(), "ovh@ph");
  }
  s += "\n";
  for (const Candidate& c : plan.candidates) {
    s += Format("%6lld  %-10s %9s %9s %10s", static_cast<long long>(c.layout.spares_per_group),
                FormatProbability(c.model.p_success).c_str(), FormatPercent(c.model.overhead).c_str(),
                FormatPhases(c.model_phases_at_target).c_str(),
                FormatPercent(c.model_phases_at_target > 0 ? c.model_at_target.overhead : std::nullopt)
                    .c_str());
    if (c.sim) {
      const SimMark& at_p = c.sim->marks[0];
      std::optional<double> at_t;
      if (c.sim->marks.size() > 1) at_t = c.sim->marks[1].overhead;
      s += Format("    %-10s %9s %9s %10s", FormatProbability(at_p.p_finish).c_str(),
                  FormatPercent(at_p.overhead).c_str(), FormatPhases(c.sim->phases_at_target).c_str(),
                  FormatPercent(at_t).c_str());
    }
    s += "\n";
  }
  s += Format("(%s: P(finishing %lld phases without a catastrophe); overhead: (time - phases x interval)\n"
              " / (phases x interval) given success; %s: most phases finished with probability >= %g\n"
              " (\">=2^30\": at least the cap); ovh@ph: overhead of that many phases (the model's count,\n"
              " also for the simulation))\n",
              pcol.c_str(), static_cast<long long>(req.phases), tcol.c_str(), req.target);
  if (req.two_level.enabled) s += FormatTwoLevelTable(plan);
  s += Format("\nparity layout (dlckpt-run --parity): spares = parity on the %lld spare nodes, %lld compute;\n"
              "spread = the same groups, every node computes, parity on the members\n",
              static_cast<long long>(req.spare_nodes), static_cast<long long>(req.compute_nodes));
  s += Format("spares  %-12s %-12s %13s %17s\n", ("spares " + pcol).c_str(), ("spread " + pcol).c_str(),
              "P(group lost)", "parity per node");
  for (const Candidate& c : plan.candidates) {
    s += Format("%6lld  %-12s %-12s %13.3g %12.3g ckpt\n", static_cast<long long>(c.layout.spares_per_group),
                FormatProbability(c.model.p_success).c_str(), FormatProbability(c.spread.p_success).c_str(),
                c.spread.phase_loss, c.spread.parity_per_node);
  }
  s += "(P(group lost): a spread group loses more than its parity count within one phase; parity per\n"
       " node: of a node's checkpoint, under spread; under spares each spare keeps one checkpoint's worth)\n";
  for (const Skipped& k : plan.skipped) {
    s += "skipped: " + k.reason + "\n";
  }
  s += "\nrecommendation: " + plan.recommendation + "\n";
  s += "parity layout: --parity " + plan.layout + ": " + plan.layout_reason + "\n";
  return s;
}

}  // namespace dlckpt::plan

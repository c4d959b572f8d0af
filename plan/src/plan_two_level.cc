// The second level of dlckpt/plan/plan.h: every N-th in-memory checkpoint is
// drained to a parallel file system. The equations are in the header (the
// "two levels" section) and derived in plan/README.md.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "dlckpt/plan/plan.h"

namespace dlckpt::plan {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// The τ search range, hours: 3.6 ms to about 114 years.
constexpr double kMinIntervalHours = 1e-6;
constexpr double kMaxIntervalHours = 1e6;
// Every N up to this is tried; above it N grows by 1% per step.
constexpr int64_t kDenseDrainEvery = 2000;

// M(d) and ln P(d): P = 1 - λ2 M is kept as a logarithm (log1p) so that
// P^(N-1) stays accurate when λ2 M is tiny and N is large.
struct Segment {
  double mean = 0;   // M(d)
  double log_p = 0;  // ln P(d), -inf when P = 0
};

Segment SegmentOf(const TwoLevelParams& p, double d) {
  const double l1 = p.covered_rate, l2 = p.uncovered_rate, l = l1 + l2;
  Segment s;
  if (!(l > 0)) {
    s.mean = d;
    return s;
  }
  const double x = l * p.restart_hours, y = l * d;
  // M = e^x (e^y - 1) / (λ2 e^(x+y) + λ1), divided through by e^(x+y) so
  // that nothing overflows: (1 - e^-y) / (λ2 + λ1 e^-(x+y)).
  const double den = l2 + l1 * std::exp(-(x + y));
  s.mean = den > 0 ? -std::expm1(-y) / den : kInf;
  if (l2 > 0) {
    const double q = l2 * s.mean;  // 1 - P, in [0, 1] up to rounding
    s.log_p = q < 1 ? std::log1p(-q) : -kInf;
  }
  return s;
}

// Golden-section search for the maximum of f on [a, b] (f unimodal there).
template <class F>
double GoldenMax(F&& f, double a, double b) {
  const double g = (std::sqrt(5.0) - 1) / 2;
  double c = b - g * (b - a), d = a + g * (b - a);
  double fc = f(c), fd = f(d);
  for (int i = 0; i < 60 && (b - a) > 1e-12 * std::max(1.0, std::fabs(b)); ++i) {
    if (fc >= fd) {
      b = d;
      d = c;
      fd = fc;
      c = b - g * (b - a);
      fc = f(c);
    } else {
      a = c;
      c = d;
      fc = fd;
      d = a + g * (b - a);
      fd = f(d);
    }
  }
  return fc >= fd ? c : d;
}

std::string Fmt(const char* fmt, double a, double b = 0, double c = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, a, b, c);
  return buf;
}

}  // namespace

SegmentOutcome TwoLevelSegment(const TwoLevelParams& p, double segment_hours) {
  const Segment s = SegmentOf(p, segment_hours);
  return {s.mean, std::exp(s.log_p)};
}

double TwoLevelCycleHours(const TwoLevelParams& p, int64_t drain_every) {
  const double a = p.interval_hours + p.ckpt_hours;
  const double b = a + p.drain_hours;
  const Segment sa = SegmentOf(p, a), sb = SegmentOf(p, b);
  if (!std::isfinite(sa.mean) || !std::isfinite(sb.mean)) return kInf;
  const double l2 = p.uncovered_rate, l = p.covered_rate + l2;
  const double n1 = static_cast<double>(drain_every - 1);
  // ln P(a)^(N-1); N = 1 must not turn 0 · (-inf) into NaN.
  const double log_pa_n1 = drain_every == 1 ? 0.0 : n1 * sa.log_p;
  const double pa_n1 = std::exp(log_pa_n1);
  // A = Σ_{j<N-1} P(a)^j M(a) + P(a)^(N-1) M(b), the geometric sum in closed
  // form (M(a) = (1 - P(a))/λ2) when λ2 > 0.
  const double head = l2 > 0 ? -std::expm1(log_pa_n1) / l2 : n1 * sa.mean;
  const double A = head + pa_n1 * sb.mean;
  const double log_q = log_pa_n1 + sb.log_p;
  const double q = std::exp(log_q);
  if (!(q > 0)) return kInf;
  const double g2 = l > 0 ? std::expm1(l * p.pfs_restart_hours) / l : p.pfs_restart_hours;
  const double e = (A + -std::expm1(log_q) * g2) / q;
  return std::isfinite(e) ? e : kInf;
}

double TwoLevelEfficiency(const TwoLevelParams& p, int64_t drain_every) {
  if (drain_every <= 0) {
    // N -> ∞: the cycle never ends, so every level-2 failure throws away all
    // the work; with λ2 = 0 the cycle is a sequence of independent segments.
    if (p.uncovered_rate > 0) return 0;
    const double m = SegmentOf(p, p.interval_hours + p.ckpt_hours).mean;
    return std::isfinite(m) && m > 0 ? std::min(1.0, p.interval_hours / m) : 0;
  }
  const double e = TwoLevelCycleHours(p, drain_every);
  if (!std::isfinite(e) || !(e > 0)) return 0;
  return std::min(1.0, static_cast<double>(drain_every) * p.interval_hours / e);
}

TwoLevelChoice BestTwoLevelInterval(const TwoLevelParams& params, int64_t drain_every,
                                    double min_interval_hours) {
  TwoLevelParams p = params;
  auto eff = [&](double log_tau) {
    p.interval_hours = std::exp(log_tau);
    return TwoLevelEfficiency(p, drain_every);
  };
  const double lo = std::log(std::clamp(min_interval_hours, kMinIntervalHours, kMaxIntervalHours));
  const double hi = std::log(kMaxIntervalHours);
  // A scan at 5 points per decade, then golden section between the
  // neighbours of the best point (this assumes η has a single maximum in τ
  // near the best scan point, which holds in every case the tests try).
  const int steps = std::max(1, static_cast<int>(std::ceil((hi - lo) / std::log(10.0) * 5)));
  const double h = (hi - lo) / steps;
  int best = 0;
  double best_eff = -1;
  for (int i = 0; i <= steps; ++i) {
    const double e = eff(lo + i * h);
    if (e > best_eff) {
      best_eff = e;
      best = i;
    }
  }
  double x = lo + best * h;
  if (best_eff > 0 && steps > 1) {
    const double a = std::max(lo, x - h), b = std::min(hi, x + h);
    const double g = GoldenMax(eff, a, b);
    if (eff(g) > best_eff) x = g;
  }
  TwoLevelChoice c;
  c.drain_every = drain_every;
  c.interval_hours = std::exp(x);
  p.interval_hours = c.interval_hours;
  c.efficiency = TwoLevelEfficiency(p, drain_every);
  c.cycle_hours = drain_every > 0 ? TwoLevelCycleHours(p, drain_every) : kInf;
  return c;
}

Result<TwoLevelChoice> BestTwoLevel(const TwoLevelParams& params, bool fixed_interval,
                                    double min_cycle_hours) {
  TwoLevelParams p = params;
  if (!(p.uncovered_rate > 0)) {  // nothing needs the PFS: never drain
    if (fixed_interval) {
      return TwoLevelChoice{0, p.interval_hours, TwoLevelEfficiency(p, 0), kInf};
    }
    return BestTwoLevelInterval(p, 0);
  }
  std::optional<TwoLevelChoice> best;
  for (int64_t n = 1;; n = n < kDenseDrainEvery ? n + 1 : std::min(kMaxDrainEvery, n + n / 100)) {
    const double nd = static_cast<double>(n);
    std::optional<TwoLevelChoice> c;
    if (fixed_interval) {
      if (nd * (p.interval_hours + p.ckpt_hours) + p.drain_hours >= min_cycle_hours) {
        c = TwoLevelChoice{n, p.interval_hours, TwoLevelEfficiency(p, n), TwoLevelCycleHours(p, n)};
      }
    } else {
      // τ >= (min cycle - C2)/N - C1 keeps the drain inside the cycle.
      const double min_tau = (min_cycle_hours - p.drain_hours) / nd - p.ckpt_hours;
      if (min_tau <= kMaxIntervalHours) c = BestTwoLevelInterval(p, n, min_tau);
    }
    if (c && (!best || c->efficiency > best->efficiency)) best = c;
    if (n >= kMaxDrainEvery) break;
  }
  if (!best) {
    return Status::NotFound("no drain interval lets one drain end before the next one starts");
  }
  return *best;
}

double GroupLossRate(std::span<const GroupKind> kinds, double node_failure_rate, double window_hours) {
  int64_t nodes = 0, spares = 0;
  for (const GroupKind& k : kinds) {
    nodes += k.nodes() * k.count;
    spares += k.spares * k.count;
  }
  if (nodes < 2 || !(node_failure_rate > 0) || !(window_hours > 0)) return 0;
  // j <= spares other failures can still be survivable; S(spares + 1) = 0.
  const int64_t kmax = std::min(spares, nodes - 1);
  const std::vector<double> s = SurvivalProbabilities(kinds, kmax + 1);
  const double pf = -std::expm1(-node_failure_rate * window_hours);  // one node fails within w
  const double others = static_cast<double>(nodes - 1);
  double sum = 0;
  if (pf >= 1) {  // every other node fails within the window
    if (nodes - 1 <= kmax) sum = s[nodes - 1] - s[nodes];
  } else {
    const double log_pf = std::log(pf), log_qf = std::log1p(-pf);
    double log_choose = 0;  // ln C(T-1, j)
    for (int64_t j = 0; j <= kmax; ++j) {
      const double jd = static_cast<double>(j);
      const double pmf = std::exp(log_choose + jd * log_pf + (others - jd) * log_qf);
      sum += pmf * std::max(0.0, s[j] - s[j + 1]);
      log_choose += std::log((others - jd) / (jd + 1));
    }
  }
  return static_cast<double>(nodes) * node_failure_rate * sum;
}

Status ValidateTwoLevel(const TwoLevelRequest& t) {
  if (!t.enabled) return Status::OK();
  auto bad = [](const std::string& m) { return Status::InvalidArgument(m); };
  auto within = [](double v, bool allow_zero) { return (allow_zero ? v >= 0 : v > 0) && v <= kMaxHours; };
  if (t.drain_seconds) {
    if (!within(*t.drain_seconds, true)) return bad(Fmt("--drain-seconds must be in [0, %g], got %g", kMaxHours, *t.drain_seconds));
  } else {
    if (!within(t.pfs_mbps, false)) return bad(Fmt("--pfs-bandwidth must be in (0, %g] MB/s, got %g", kMaxHours, t.pfs_mbps));
    if (!within(t.drain_mb_per_node, false)) {
      return bad(Fmt("--drain-mb must be in (0, %g] MB per compute node, got %g", kMaxHours, t.drain_mb_per_node));
    }
  }
  if (!(t.drain_visible >= 0 && t.drain_visible <= 1)) {
    return bad(Fmt("--drain-visible must be a fraction in [0, 1], got %g", t.drain_visible));
  }
  if (t.pfs_restart_seconds && !within(*t.pfs_restart_seconds, true)) {
    return bad(Fmt("--pfs-restart-seconds must be in [0, %g], got %g", kMaxHours, *t.pfs_restart_seconds));
  }
  if (t.drain_every && (*t.drain_every < 1 || *t.drain_every > kMaxDrainEvery)) {
    return bad("--drain-every must be in 1.." + std::to_string(kMaxDrainEvery) + " or 'auto', got " +
               std::to_string(*t.drain_every));
  }
  if (t.uncovered_rate && !within(*t.uncovered_rate, true)) {
    return bad(Fmt("--unrecoverable-rate must be in [0, %g] per hour, got %g", kMaxHours, *t.uncovered_rate));
  }
  if (!within(t.system_loss_mtbf_hours, true)) {
    return bad(Fmt("--system-loss-mtbf-hours must be in [0, %g], got %g", kMaxHours, t.system_loss_mtbf_hours));
  }
  if (t.exposure_seconds && !within(*t.exposure_seconds, true)) {
    return bad(Fmt("--exposure-seconds must be in [0, %g], got %g", kMaxHours, *t.exposure_seconds));
  }
  return Status::OK();
}

Result<TwoLevelResult> EvaluateTwoLevel(const PlanRequest& req, const Layout& layout, const Times& times,
                                        double interval_hours) {
  const TwoLevelRequest& t = req.two_level;
  TwoLevelResult r;
  const double node_rate = 1 / req.mttf_hours;
  const double system_rate = static_cast<double>(layout.nodes()) * node_rate;
  r.exposure_seconds = t.exposure_seconds ? *t.exposure_seconds : times.restart_seconds;
  r.group_loss_rate = GroupLossRate(layout.kinds, node_rate, r.exposure_seconds / 3600);
  r.covered_rate = std::max(0.0, system_rate - r.group_loss_rate);
  r.uncovered_rate = t.uncovered_rate
                         ? *t.uncovered_rate
                         : r.group_loss_rate + (t.system_loss_mtbf_hours > 0 ? 1 / t.system_loss_mtbf_hours : 0);
  r.drain_seconds = t.drain_seconds ? *t.drain_seconds
                                    : static_cast<double>(layout.compute_nodes) * t.drain_mb_per_node / t.pfs_mbps;
  r.visible_drain_seconds = t.drain_visible * r.drain_seconds;
  r.pfs_restart_seconds = t.pfs_restart_seconds ? *t.pfs_restart_seconds : times.restart_seconds + r.drain_seconds;
  r.interval_fixed = req.interval_hours.has_value();

  TwoLevelParams p;
  p.covered_rate = r.covered_rate;
  p.uncovered_rate = r.uncovered_rate;
  p.interval_hours = interval_hours;
  p.ckpt_hours = times.ckpt_seconds / 3600;
  p.restart_hours = times.restart_seconds / 3600;
  p.drain_hours = r.visible_drain_seconds / 3600;
  p.pfs_restart_hours = r.pfs_restart_seconds / 3600;
  // An asynchronous drain must end before the next one starts.
  const double min_cycle = t.drain_visible < 1 ? r.drain_seconds / 3600 : 0;
  const std::string what = SparesPerGroupText(layout.spares_per_group);

  if (t.drain_every) {
    const int64_t n = *t.drain_every;
    const double nd = static_cast<double>(n);
    if (r.interval_fixed) {
      const double cycle = nd * (p.interval_hours + p.ckpt_hours) + p.drain_hours;
      if (cycle < min_cycle) {
        return Status::InvalidArgument(
            what + Fmt(": drains every %.0f checkpoints start every %.4g h but one takes %.4g h; "
                       "drain less often or give --drain-every auto",
                       nd, cycle, min_cycle));
      }
      r.choice = {n, p.interval_hours, TwoLevelEfficiency(p, n), TwoLevelCycleHours(p, n)};
    } else {
      r.choice = BestTwoLevelInterval(p, n, (min_cycle - p.drain_hours) / nd - p.ckpt_hours);
    }
  } else {
    Result<TwoLevelChoice> best = BestTwoLevel(p, r.interval_fixed, min_cycle);
    if (!best.ok()) return Status::InvalidArgument(what + ": " + best.status().message());
    r.choice = *best;
    r.drain_every_is_cap = r.choice.drain_every >= kMaxDrainEvery;
  }
  TwoLevelParams at = p;
  at.interval_hours = r.choice.interval_hours;
  r.efficiency_every_checkpoint = TwoLevelEfficiency(at, 1);
  if (p.uncovered_rate > 0 && p.ckpt_hours > 0) {
    r.first_order_drain_every = std::sqrt(p.drain_hours * p.covered_rate / (p.ckpt_hours * p.uncovered_rate));
  }
  const double work = static_cast<double>(req.phases) * interval_hours;
  r.expected_hours = r.choice.efficiency > 0 ? work / r.choice.efficiency : kInf;
  return r;
}

}  // namespace dlckpt::plan

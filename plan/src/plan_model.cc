// The analytical side of dlckpt/plan/plan.h: group layout, S(k) by generating
// functions, the phase model of chapter 8, checkpoint-interval formulas and
// the chapter 7 time model.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "dlckpt/plan/plan.h"

namespace dlckpt::plan {
namespace {

// Probabilities below this (relative to the largest, which is 1) are set to
// 0: they cannot change any reported figure and would otherwise turn into
// slow subnormal arithmetic.
constexpr double kFlush = 1e-290;

// t[k] = ln C(n, k) for k = 0..kmax (kmax <= n), by running sums of
// ln((n-k)/(k+1)), which avoids the cancellation of lgamma differences.
std::vector<double> LogChooseTable(int64_t n, int64_t kmax) {
  std::vector<double> t(static_cast<size_t>(kmax) + 1);
  t[0] = 0;
  for (int64_t k = 0; k < kmax; ++k) {
    t[k + 1] = t[k] + std::log(static_cast<double>(n - k) / static_cast<double>(k + 1));
  }
  return t;
}

// A generating function over `nodes` nodes whose coefficient k is divided by
// C(nodes, k): b[k] = (ways to place k failures that every group survives) /
// (ways to place k failures), i.e. S(k) of those nodes.
struct NormPoly {
  int64_t nodes = 0;
  std::vector<double> b{1.0};
};

NormPoly Multiply(const NormPoly& x, const NormPoly& y, int64_t max_k) {
  if (x.nodes == 0) return y;
  if (y.nodes == 0) return x;
  const int64_t d1 = static_cast<int64_t>(x.b.size()) - 1;
  const int64_t d2 = static_cast<int64_t>(y.b.size()) - 1;
  const int64_t d = std::min(d1 + d2, max_k);
  const std::vector<double> l1 = LogChooseTable(x.nodes, d1);
  const std::vector<double> l2 = LogChooseTable(y.nodes, d2);
  const std::vector<double> l = LogChooseTable(x.nodes + y.nodes, d);
  NormPoly out;
  out.nodes = x.nodes + y.nodes;
  out.b.assign(static_cast<size_t>(d) + 1, 0.0);
  for (int64_t i = 0; i <= d1 && i <= d; ++i) {
    if (x.b[i] == 0) continue;
    const int64_t jmax = std::min(d2, d - i);
    for (int64_t j = 0; j <= jmax; ++j) {
      if (y.b[j] == 0) continue;
      // Hypergeometric weight C(T1,i) C(T2,j) / C(T1+T2,i+j) <= 1.
      out.b[i + j] += x.b[i] * y.b[j] * std::exp(l1[i] + l2[j] - l[i + j]);
    }
  }
  for (double& v : out.b) v = std::min(v, 1.0);  // rounding only
  return out;
}

NormPoly Power(NormPoly base, int64_t e, int64_t max_k) {
  NormPoly result;
  while (e > 0) {
    if (e & 1) result = Multiply(result, base, max_k);
    e >>= 1;
    if (e > 0) base = Multiply(base, base, max_k);
  }
  return result;
}

}  // namespace

// ---------------------------------------------------------------- layout --

std::string SparesPerGroupText(int64_t r) {
  return std::to_string(r) + (r == 1 ? " spare per group" : " spares per group");
}

int64_t Layout::groups() const {
  int64_t g = 0;
  for (const GroupKind& k : kinds) g += k.count;
  return g;
}

int64_t Layout::max_group_nodes() const {
  int64_t mx = 0;
  for (const GroupKind& k : kinds) mx = std::max(mx, k.nodes());
  return mx;
}

std::string Layout::Describe() const {
  std::string s;
  for (const GroupKind& k : kinds) {
    if (!s.empty()) s += " + ";
    s += std::to_string(k.count) + " x " + std::to_string(k.nodes());
  }
  return s;
}

Result<Layout> MakeLayout(int64_t compute_nodes, int64_t spare_nodes, int64_t spares_per_group,
                          int64_t max_rs_group_nodes) {
  const int64_t n = compute_nodes, m = spare_nodes, r = spares_per_group;
  if (n < 1) return Status::InvalidArgument("need at least 1 compute node, got " + std::to_string(n));
  if (m < 1) return Status::InvalidArgument("need at least 1 spare node, got " + std::to_string(m));
  if (n > kMaxComputeNodes || m > kMaxSpares) {
    return Status::InvalidArgument("at most " + std::to_string(kMaxComputeNodes) + " compute nodes and " +
                                   std::to_string(kMaxSpares) + " spares");
  }
  if (m > n) {
    return Status::InvalidArgument("more spares (" + std::to_string(m) + ") than compute nodes (" +
                                   std::to_string(n) + ")");
  }
  if (r < 1) {
    return Status::InvalidArgument("spares per group must be at least 1, got " + std::to_string(r));
  }
  const std::string what = SparesPerGroupText(r);
  if (r > m) {
    return Status::InvalidArgument(what + " needs at least " + std::to_string(r) +
                                   " spares; there are " + std::to_string(m));
  }
  const int64_t full = m / r, rest = m % r;
  const int64_t groups = full + (rest > 0 ? 1 : 0);
  if (groups > n) {
    return Status::InvalidArgument(what + " makes " + std::to_string(groups) +
                                   " groups but there are only " + std::to_string(n) +
                                   " compute nodes");
  }
  // Compute nodes in proportion to spares: group g gets
  // floor(n·S_g/m) - floor(n·S_{g-1}/m), S_g = spares in groups 1..g.
  // n·S_g <= n·m stays far below 2^63 for the sizes MakePlan accepts.
  std::map<std::pair<int64_t, int64_t>, int64_t> count;  // (compute, spares) -> groups
  int64_t cum = 0, prev = 0;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t q = (g < full) ? r : rest;
    cum += q;
    const int64_t upto = n * cum / m;
    const int64_t c = upto - prev;
    prev = upto;
    if (c < 1) {
      return Status::InvalidArgument(what + " leaves a group of " + std::to_string(q) +
                                     " spares without a compute node");
    }
    if (q >= 2 && c + q > max_rs_group_nodes) {
      return Status::InvalidArgument(
          what + " needs groups of " + std::to_string(c + q) + " nodes, above the " +
          std::to_string(max_rs_group_nodes) +
          "-node limit of Reed-Solomon over GF(2^8); use fewer spares per group or more spares");
    }
    ++count[{c, q}];
  }
  Layout layout;
  layout.compute_nodes = n;
  layout.spare_nodes = m;
  layout.spares_per_group = r;
  for (const auto& [key, cnt] : count) layout.kinds.push_back({key.first, key.second, cnt});
  std::sort(layout.kinds.begin(), layout.kinds.end(), [](const GroupKind& a, const GroupKind& b) {
    return a.nodes() != b.nodes() ? a.nodes() > b.nodes() : a.spares > b.spares;
  });
  return layout;
}

// -------------------------------------------------------------- S(k, R) --

double LogChoose(int64_t n, int64_t k) {
  if (k > n - k) k = n - k;
  return LogChooseTable(n, k)[static_cast<size_t>(k)];
}

std::vector<double> SurvivalProbabilities(std::span<const GroupKind> kinds, int64_t max_k) {
  NormPoly total;
  for (const GroupKind& kind : kinds) {
    if (kind.count <= 0) continue;
    // One group of s nodes surviving `spares` failures: sum_{j<=spares}
    // C(s,j) x^j, which normalized by C(s,j) is all ones.
    NormPoly one;
    one.nodes = kind.nodes();
    one.b.assign(static_cast<size_t>(std::min(kind.spares, max_k)) + 1, 1.0);
    total = Multiply(total, Power(std::move(one), kind.count, max_k), max_k);
  }
  total.b.resize(static_cast<size_t>(max_k) + 1, 0.0);
  return std::move(total.b);
}

// ------------------------------------------------------ phase model (§8.2) --

double ExpectedFailureTime(double rate, double t) {
  // E(t) = 1/rate - t e^{-rate t} / (1 - e^{-rate t}) = t·g(x), x = rate·t,
  // g(x) = 1/x - 1/(e^x - 1) = 1/2 - x/12 + x^3/720 - ...
  const double x = rate * t;
  double g;
  if (x < 1e-3) {
    g = 0.5 - x / 12 + x * x * x / 720;
  } else {
    g = 1 / x - 1 / std::expm1(x);  // expm1 -> inf for huge x gives 1/x
  }
  return t * g;
}

std::vector<double> PhaseFailureProbabilities(const PhaseParams& p, int64_t max_k) {
  const double first = p.interval_hours + p.ckpt_hours;  // c + C
  const double redo = p.restart_hours + first;           // Rs + c + C
  const double lam = p.system_failure_rate;
  std::vector<double> f(static_cast<size_t>(max_k) + 1, 0.0);
  f[0] = std::exp(-lam * first);                     // Rl(c + C)
  double term = -std::expm1(-lam * first) * std::exp(-lam * redo);  // \bar{Rl}(c+C)·Rl(redo)
  const double q = -std::expm1(-lam * redo);         // \bar{Rl}(redo)
  for (int64_t k = 1; k <= max_k; ++k) {
    f[k] = term;
    term *= q;
  }
  return f;
}

std::vector<double> PhaseDurations(const PhaseParams& p, int64_t max_k) {
  const double first = p.interval_hours + p.ckpt_hours;
  const double redo = p.restart_hours + first;
  const double e_first = ExpectedFailureTime(p.system_failure_rate, first);
  const double e_redo = ExpectedFailureTime(p.system_failure_rate, redo);
  std::vector<double> pt(static_cast<size_t>(max_k) + 1);
  pt[0] = first;
  for (int64_t k = 1; k <= max_k; ++k) {
    pt[k] = e_first + static_cast<double>(k - 1) * e_redo + redo;
  }
  return pt;
}

// ------------------------------------------------------- AnalyticModel --

namespace {

// Rescales so that max p == 1, recording the factor in log_scale, and
// flushes negligible entries.
template <class Dual>
void Normalize(Dual& d) {
  double mx = 0;
  for (double v : d.p) mx = std::max(mx, v);
  if (!(mx > 0) || !std::isfinite(mx)) {
    d.zero = true;
    return;
  }
  const double inv = 1 / mx;
  for (size_t k = 0; k < d.p.size(); ++k) {
    d.p[k] *= inv;
    d.w[k] *= inv;
    if (d.p[k] < kFlush) d.p[k] = d.w[k] = 0;
  }
  d.log_scale += std::log(mx);
}

}  // namespace

AnalyticModel::AnalyticModel(const PhaseParams& params, std::vector<double> survival)
    : params_(params), survival_(std::move(survival)) {
  if (survival_.empty()) survival_.push_back(1.0);
  const int64_t kmax = static_cast<int64_t>(survival_.size()) - 1;
  Dual one;
  one.p = PhaseFailureProbabilities(params_, kmax);
  const std::vector<double> pt = PhaseDurations(params_, kmax);
  one.w.resize(one.p.size());
  for (size_t k = 0; k < one.p.size(); ++k) one.w[k] = one.p[k] * pt[k];
  Normalize(one);
  powers_.push_back(std::move(one));
}

AnalyticModel::Dual AnalyticModel::Multiply(const Dual& a, const Dual& b) const {
  Dual out;
  const size_t n = survival_.size();
  out.p.assign(n, 0.0);
  out.w.assign(n, 0.0);
  if (a.zero || b.zero) {
    out.zero = true;
    return out;
  }
  size_t b_last = 0;
  for (size_t j = 0; j < n; ++j) {
    if (b.p[j] != 0) b_last = j;
  }
  // (p1 + εw1)(p2 + εw2) = p1 p2 + ε(p1 w2 + w1 p2), each a convolution
  // truncated at n-1 failures.
  for (size_t i = 0; i < n; ++i) {
    const double ap = a.p[i], aw = a.w[i];
    if (ap == 0) continue;  // w is flushed together with p
    const size_t jmax = std::min(n - 1 - i, b_last);
    double* op = out.p.data() + i;
    double* ow = out.w.data() + i;
    const double* bp = b.p.data();
    const double* bw = b.w.data();
    for (size_t j = 0; j <= jmax; ++j) {
      op[j] += ap * bp[j];
      ow[j] += ap * bw[j] + aw * bp[j];
    }
  }
  out.log_scale = a.log_scale + b.log_scale;
  Normalize(out);
  return out;
}

const AnalyticModel::Dual& AnalyticModel::Power(int bit) {
  while (static_cast<int>(powers_.size()) <= bit) {
    powers_.push_back(Multiply(powers_.back(), powers_.back()));
  }
  return powers_[static_cast<size_t>(bit)];
}

double AnalyticModel::SuccessScaled(const Dual& d) const {
  if (d.zero) return 0;
  double s = 0;
  for (size_t k = 0; k < survival_.size(); ++k) s += survival_[k] * d.p[k];
  return s;
}

ModelPoint AnalyticModel::Evaluate(const Dual& d, int64_t phases) const {
  ModelPoint pt;
  pt.phases = phases;
  const double s = SuccessScaled(d);
  if (!(s > 0)) return pt;
  pt.p_success = std::min(1.0, std::exp(d.log_scale + std::log(s)));
  double sw = 0;
  for (size_t k = 0; k < survival_.size(); ++k) sw += survival_[k] * d.w[k];
  const double tt = sw / s;
  const double ideal = static_cast<double>(phases) * params_.interval_hours;
  pt.hours = tt;
  pt.overhead = (tt - ideal) / ideal;
  return pt;
}

ModelPoint AnalyticModel::At(int64_t phases) {
  phases = std::clamp<int64_t>(phases, 1, kMaxPhases);
  std::optional<Dual> acc;
  for (int bit = 0; (phases >> bit) != 0; ++bit) {
    if (((phases >> bit) & 1) == 0) continue;
    const Dual& pw = Power(bit);
    acc = acc ? Multiply(*acc, pw) : pw;
  }
  return Evaluate(*acc, phases);
}

int64_t AnalyticModel::PhasesAtProbability(double target) {
  const double log_target = std::log(target);
  auto reaches = [&](const Dual& d) {
    const double s = SuccessScaled(d);
    return s > 0 && d.log_scale + std::log(s) >= log_target;
  };
  if (!reaches(Power(0))) return 0;
  int top = 0;
  constexpr int kTopBit = 30;
  static_assert(kMaxPhases == int64_t{1} << kTopBit);
  while (top < kTopBit && reaches(Power(top + 1))) ++top;
  if (top == kTopBit) return kMaxPhases;
  // P is non-increasing in N: set bits from the top while P stays >= target.
  Dual acc = Power(top);
  int64_t n = int64_t{1} << top;
  for (int bit = top - 1; bit >= 0; --bit) {
    Dual cand = Multiply(acc, Power(bit));
    if (reaches(cand)) {
      acc = std::move(cand);
      n += int64_t{1} << bit;
    }
  }
  return n;
}

// ------------------------------------------------------------ intervals --

double YoungIntervalHours(double mtbf_hours, double ckpt_hours) {
  return std::sqrt(2 * mtbf_hours * ckpt_hours);
}

double DalyIntervalHours(double mtbf_hours, double ckpt_hours) {
  const double m = mtbf_hours, c = ckpt_hours;
  if (c >= 2 * m) return m;
  const double x = c / (2 * m);
  return std::sqrt(2 * c * m) * (1 + std::sqrt(x) / 3 + x / 9) - c;
}

// ------------------------------------------------------------ chapter 7 --

double ExpectedMaxOfNormals(int64_t n) {
  if (n <= 1) return 0;
  // E[Y] = ∫_0^12 (1 - Φ^n) dx - ∫_{-12}^0 Φ^n dx (the tails beyond ±12 are
  // below 1e-30 for any n this tool sees), each by Simpson's rule.
  const double dn = static_cast<double>(n);
  auto log_phi = [](double x) { return std::log1p(-0.5 * std::erfc(x / std::sqrt(2.0))); };
  auto upper = [&](double x) { return -std::expm1(dn * log_phi(x)); };  // 1 - Φ(x)^n
  auto lower = [&](double x) { return std::exp(dn * log_phi(x)); };     // Φ(x)^n
  auto simpson = [](auto&& f, double a, double b) {
    constexpr int kSteps = 12000;  // even
    const double h = (b - a) / kSteps;
    double s = f(a) + f(b);
    for (int i = 1; i < kSteps; ++i) s += f(a + i * h) * ((i % 2) ? 4 : 2);
    return s * h / 3;
  };
  return simpson(upper, 0.0, 12.0) - simpson(lower, -12.0, 0.0);
}

Times Chapter7Times(const Layout& layout, const Chapter7Params& p) {
  const double d = p.ckpt_mb;
  const double memcpy_s = d / p.memcpy_mbps;
  const double rs_s = d / p.rs_mbps;
  double slowest = 0;
  for (const GroupKind& kind : layout.kinds) {
    const int64_t n = kind.nodes();
    double red;
    if (p.tree_reduction) {
      int lg = 0;
      while ((int64_t{1} << lg) < n) ++lg;  // ceil(lg n)
      red = (p.reduce_a * d + p.reduce_b) * lg;
    } else {
      red = p.reduce_a * static_cast<double>(n - 1) * d / static_cast<double>(n) + p.reduce_b;
    }
    red = std::max(red, 0.0);
    const double t = memcpy_s + (kind.spares == 1 ? red : static_cast<double>(kind.spares) * (rs_s + red));
    slowest = std::max(slowest, t);
  }
  Times out;
  out.ckpt_seconds =
      slowest + p.group_sd_seconds * ExpectedMaxOfNormals(layout.groups()) + p.comm_seconds;
  out.restart_seconds = p.detect_seconds + p.recover_seconds + p.launch_seconds +
                        p.bootstrap_seconds +
                        (layout.spares_per_group == 1 ? 1 : 2) * out.ckpt_seconds;
  return out;
}

}  // namespace dlckpt::plan

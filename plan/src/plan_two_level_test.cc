// Tests of the second level of dlckpt/plan/plan.h (drain every N-th
// checkpoint to a PFS): the closed form against a hand calculation and an
// independent Monte Carlo simulation of the process, the limits (λ2 -> 0:
// never drain; λ2 huge: drain every checkpoint), monotonicity, Young/Daly
// for one level, the first-order two-level optimum of Benoit et al. (IEEE TC
// 2017), the group-loss rate, and the tool's new options.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "dlckpt/plan/plan.h"

namespace dlckpt::plan {
namespace {

TwoLevelParams HandParams() {
  TwoLevelParams p;
  p.covered_rate = 0.1;  // λ1 per hour
  p.uncovered_rate = 0.01;  // λ2
  p.interval_hours = 1.0;  // τ
  p.ckpt_hours = 0.1;  // C1
  p.restart_hours = 0.2;  // R1
  p.drain_hours = 0.4;  // C2
  p.pfs_restart_hours = 0.5;  // R2
  return p;
}

// Hand calculation, N = 3, λ = λ1 + λ2 = 0.11, a = τ + C1 = 1.1, b = a + C2 = 1.5:
//   e^{λR1} = e^0.022 = 1.0222438, e^{λa} = e^0.121 = 1.1286249, e^{λb} = e^0.165 = 1.1793931
//   M(a) = e^{λR1}(e^{λa} - 1) / (λ2 e^{λ(R1+a)} + λ1)
//        = 1.0222438 x 0.1286249 / (0.01 x 1.0222438 x 1.1286249 + 0.1)
//        = 0.1314860 / 0.1115373 = 1.1788525 h
//   P(a) = 1 - λ2 M(a) = 0.9882115
//   M(b) = 1.0222438 x 0.1793931 / (0.01 x 1.0222438 x 1.1793931 + 0.1) = 1.6365304 h
//   P(b) = 1 - 0.016365304 = 0.9836347
//   Q = P(a)^2 P(b) = 0.9605802
//   A = M(a) + P(a) M(a) + P(a)^2 M(b) = 1.1788525 + 1.1649556 + 1.5981758 = 3.9419813 h
//   G2 = (e^{λR2} - 1)/λ = (e^0.055 - 1)/0.11 = 0.5140056 h
//   E = (A + (1 - Q) G2) / Q = (3.9419813 + 0.0394198 x 0.5140056) / 0.9605802 = 4.1248438 h
//   η = N τ / E = 3 / 4.1248438 = 0.7273003
TEST(PlanTwoLevel, ReproducesTheHandCalculation) {
  const TwoLevelParams p = HandParams();
  const SegmentOutcome a = TwoLevelSegment(p, 1.1), b = TwoLevelSegment(p, 1.5);
  EXPECT_NEAR(a.mean_hours, 1.1788525, 1e-6);
  EXPECT_NEAR(a.p_complete, 0.9882115, 1e-6);
  EXPECT_NEAR(b.mean_hours, 1.6365304, 1e-6);
  EXPECT_NEAR(b.p_complete, 0.9836347, 1e-6);
  EXPECT_NEAR(TwoLevelCycleHours(p, 3), 4.1248438, 1e-6);
  EXPECT_NEAR(TwoLevelEfficiency(p, 3), 0.7273003, 1e-6);
}

// λ2 = 0 is Daly's (2006) exact single-level model: a segment of d after a
// restart R takes e^{λR}(e^{λd} - 1)/λ in expectation.
TEST(PlanTwoLevel, OneLevelIsDalysExactModel) {
  TwoLevelParams p = HandParams();
  p.uncovered_rate = 0;
  const double l = 0.1, d = 1.1;
  const double daly = std::exp(l * 0.2) * std::expm1(l * d) / l;
  EXPECT_NEAR(TwoLevelSegment(p, d).mean_hours, daly, 1e-12);
  EXPECT_EQ(TwoLevelSegment(p, d).p_complete, 1.0);
  // N segments: N-1 of a, the last one of b = a + C2.
  EXPECT_NEAR(TwoLevelCycleHours(p, 4), 3 * daly + std::exp(l * 0.2) * std::expm1(l * 1.5) / l, 1e-9);
  // Never draining costs nothing when nothing needs the PFS.
  EXPECT_NEAR(TwoLevelEfficiency(p, 0), 1.0 / daly, 1e-12);
  // Only level-2 failures: a cycle is one segment of N a + C2 with restart R2.
  p = HandParams();
  p.covered_rate = 0;
  p.ckpt_hours = 0;
  const double l2 = 0.01, len = 3 * 1.0 + 0.4;
  EXPECT_NEAR(TwoLevelCycleHours(p, 3), std::exp(l2 * 0.5) * std::expm1(l2 * len) / l2, 1e-9);
}

// An independent event-by-event simulation of the process the model
// describes: segments of a (the last of a cycle b), exponential failures of
// rate λ, each of level 2 with probability λ2/λ; R1 after a level-1 failure
// (redone after a level-1 failure, abandoned for R2 after a level-2 one), R2
// redone after any failure, then the cycle starts over.
double SimulateCycle(const TwoLevelParams& p, int64_t n, std::mt19937_64& rng) {
  const double l = p.covered_rate + p.uncovered_rate;
  std::exponential_distribution<double> next(l);
  std::uniform_real_distribution<double> u(0, 1);
  auto level2 = [&] { return u(rng) < p.uncovered_rate / l; };
  const double a = p.interval_hours + p.ckpt_hours, b = a + p.drain_hours;
  double t = 0;
  int64_t j = 0;
  enum { kWork, kRestart1, kRestart2 } state = kWork;
  while (j < n) {
    const double len = state == kWork ? (j == n - 1 ? b : a)
                       : state == kRestart1 ? p.restart_hours
                                            : p.pfs_restart_hours;
    const double x = next(rng);
    if (x >= len) {
      t += len;
      if (state == kWork) ++j;
      state = kWork;
      continue;
    }
    t += x;
    if (state == kRestart2 || level2()) {
      state = kRestart2;
      j = 0;
    } else {
      state = kRestart1;
    }
  }
  return t;
}

TEST(PlanTwoLevel, AgreesWithAMonteCarloSimulationOfTheProcess) {
  TwoLevelParams heavy = HandParams();  // many failures, also during restarts
  heavy.covered_rate = 0.5;
  heavy.uncovered_rate = 0.2;
  heavy.restart_hours = 0.5;
  heavy.pfs_restart_hours = 1.0;
  struct Case {
    TwoLevelParams p;
    int64_t n;
  } cases[] = {{HandParams(), 3}, {HandParams(), 1}, {heavy, 4}};
  std::mt19937_64 rng(20);
  for (const Case& c : cases) {
    constexpr int kRuns = 200000;
    double sum = 0, sum2 = 0;
    for (int i = 0; i < kRuns; ++i) {
      const double t = SimulateCycle(c.p, c.n, rng);
      sum += t;
      sum2 += t * t;
    }
    const double mean = sum / kRuns;
    const double se = std::sqrt((sum2 / kRuns - mean * mean) / kRuns);
    const double model = TwoLevelCycleHours(c.p, c.n);
    EXPECT_NEAR(mean, model, 4 * se) << "N = " << c.n << ", standard error " << se;
    EXPECT_LT(se, 0.01 * model);
  }
}

TEST(PlanTwoLevel, NoUnrecoverableFailuresMeansNeverDrain) {
  TwoLevelParams p = HandParams();
  p.uncovered_rate = 0;
  Result<TwoLevelChoice> c = BestTwoLevel(p, /*fixed_interval=*/true);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->drain_every, 0);
  EXPECT_FALSE(std::isfinite(c->cycle_hours));
  EXPECT_NEAR(c->efficiency, TwoLevelEfficiency(p, 0), 1e-15);
  // As λ2 falls the best N grows as λ2^(-1/2) (first order): x10 per x100.
  p.interval_hours = 0.5;
  int64_t previous = 0;
  for (double l2 : {1e-2, 1e-4, 1e-6}) {
    p.uncovered_rate = l2;
    c = BestTwoLevel(p, true);
    ASSERT_TRUE(c.ok());
    if (previous > 0) {
      const double ratio = static_cast<double>(c->drain_every) / static_cast<double>(previous);
      EXPECT_GT(ratio, 7) << l2;
      EXPECT_LT(ratio, 13) << l2;
    }
    previous = c->drain_every;
  }
  EXPECT_GT(previous, 1000);
}

TEST(PlanTwoLevel, FrequentUnrecoverableFailuresMeanDrainEveryCheckpoint) {
  TwoLevelParams p = HandParams();
  for (double l2 : {1.0, 10.0}) {
    p.uncovered_rate = l2;
    for (bool fixed : {true, false}) {
      Result<TwoLevelChoice> c = BestTwoLevel(p, fixed);
      ASSERT_TRUE(c.ok());
      EXPECT_EQ(c->drain_every, 1) << l2 << " " << fixed;
      EXPECT_GT(c->efficiency, 0);
    }
  }
  // All failures need the PFS and level-1 checkpoints cost something: they
  // only add cost, so one segment per drain.
  p = HandParams();
  p.covered_rate = 0;
  p.uncovered_rate = 0.1;
  Result<TwoLevelChoice> c = BestTwoLevel(p, false);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->drain_every, 1);
}

TEST(PlanTwoLevel, EfficiencyFallsAsCostsAndFailuresGrow) {
  const TwoLevelParams base = HandParams();
  double prev = 1;
  for (double l2 : {0.0, 0.001, 0.01, 0.05, 0.2}) {  // more unrecoverable failures
    TwoLevelParams p = base;
    p.uncovered_rate = l2;
    const double e = TwoLevelEfficiency(p, 3);
    EXPECT_LT(e, prev) << l2;
    prev = e;
  }
  prev = 1;
  for (double c2 : {0.0, 0.1, 0.4, 2.0}) {  // slower PFS: costlier drains
    TwoLevelParams p = base;
    p.drain_hours = c2;
    const double e = TwoLevelEfficiency(p, 3);
    EXPECT_LT(e, prev) << c2;
    prev = e;
    // ... and at the best N too, which never drains more often as drains cost more.
  }
  int64_t prev_n = 0;
  double prev_best = 1;
  for (double c2 : {0.01, 0.1, 0.4, 2.0, 10.0}) {
    TwoLevelParams p = base;
    p.drain_hours = c2;
    Result<TwoLevelChoice> c = BestTwoLevel(p, true);
    ASSERT_TRUE(c.ok());
    EXPECT_GE(c->drain_every, prev_n) << c2;
    EXPECT_LT(c->efficiency, prev_best) << c2;
    prev_n = c->drain_every;
    prev_best = c->efficiency;
  }
  prev = 1;
  for (double r2 : {0.0, 0.5, 2.0}) {  // slower restarts from the PFS
    TwoLevelParams p = base;
    p.pfs_restart_hours = r2;
    const double e = TwoLevelEfficiency(p, 3);
    EXPECT_LT(e, prev) << r2;
    prev = e;
  }
  // More unrecoverable failures: drain at least as often.
  prev_n = kMaxDrainEvery + 1;
  for (double l2 : {1e-4, 1e-3, 1e-2, 1e-1}) {
    TwoLevelParams p = base;
    p.uncovered_rate = l2;
    Result<TwoLevelChoice> c = BestTwoLevel(p, false);
    ASSERT_TRUE(c.ok());
    EXPECT_LE(c->drain_every, prev_n) << l2;
    prev_n = c->drain_every;
  }
}

// One level (λ2 = 0, no drain): the optimal τ is Daly's higher-order
// estimate within 1% and Young's first-order sqrt(2 C M) within 6%.
TEST(PlanTwoLevel, OneLevelOptimumIsYoungAndDaly) {
  for (double mtbf : {10.0, 100.0}) {
    for (double ckpt : {0.01, 0.1}) {
      TwoLevelParams p;
      p.covered_rate = 1 / mtbf;
      p.ckpt_hours = ckpt;
      p.restart_hours = 0.2;
      const TwoLevelChoice c = BestTwoLevelInterval(p, 0);
      EXPECT_NEAR(c.interval_hours, DalyIntervalHours(mtbf, ckpt), 0.01 * DalyIntervalHours(mtbf, ckpt))
          << mtbf << " " << ckpt;
      EXPECT_NEAR(c.interval_hours, YoungIntervalHours(mtbf, ckpt), 0.06 * YoungIntervalHours(mtbf, ckpt));
      // Only unrecoverable failures, nothing at level 1: the drain period is Daly's.
      TwoLevelParams q;
      q.uncovered_rate = 1 / mtbf;
      q.drain_hours = ckpt;
      q.pfs_restart_hours = 0.2;
      Result<TwoLevelChoice> d = BestTwoLevel(q, false);
      ASSERT_TRUE(d.ok());
      const double period = static_cast<double>(d->drain_every) * d->interval_hours;
      EXPECT_NEAR(period, DalyIntervalHours(mtbf, ckpt), 0.01 * DalyIntervalHours(mtbf, ckpt));
    }
  }
}

// First-order optimum of a two-level pattern (Benoit, Cavelan, Le Fèvre,
// Robert, Sun, "Towards optimal multi-level checkpointing", IEEE TC 2017;
// also Di et al., IPDPS 2014): time per unit of work ≈ 1 + (N C1 + C2)/W +
// λ1 W/(2N) + λ2 W/2 for a pattern of W work, minimized at
//   N* = sqrt(C2 λ1 / (C1 λ2)), W* = sqrt(2 (N C1 + C2) / (λ1/N + λ2)),
//   overhead* = sqrt(2 λ1 C1) + sqrt(2 λ2 C2).
// Here λ1 = 0.01/h, C1 = 0.01 h, λ2 = 1e-4/h, C2 = 0.25 h, R1 = R2 = 0:
//   N* = sqrt(0.25 x 0.01 / (0.01 x 1e-4)) = 50, W* = sqrt(2 x 0.75 / 3e-4) = 70.71 h,
//   τ* = W*/N* = 1.414 h, overhead* = 0.014142 + 0.007071 = 0.021213.
TEST(PlanTwoLevel, MatchesTheFirstOrderTwoLevelOptimum) {
  TwoLevelParams p;
  p.covered_rate = 0.01;
  p.ckpt_hours = 0.01;
  p.uncovered_rate = 1e-4;
  p.drain_hours = 0.25;
  Result<TwoLevelChoice> c = BestTwoLevel(p, false);
  ASSERT_TRUE(c.ok());
  EXPECT_NEAR(static_cast<double>(c->drain_every), 50, 5);
  EXPECT_NEAR(c->interval_hours, 1.414, 0.1);
  const double overhead = 1 / c->efficiency - 1;
  EXPECT_NEAR(overhead, 0.021213, 0.05 * 0.021213);
  // Fixing τ at its first-order value gives N* too.
  p.interval_hours = 1.414;
  c = BestTwoLevel(p, true);
  ASSERT_TRUE(c.ok());
  EXPECT_NEAR(static_cast<double>(c->drain_every), 50, 5);
}

TEST(PlanTwoLevel, AsynchronousDrainsDoNotOverlap) {
  TwoLevelParams p = HandParams();
  p.uncovered_rate = 1.0;  // would drain every checkpoint if drains could overlap
  p.drain_hours = 0.04;     // 10% of a 0.4 h drain is visible
  Result<TwoLevelChoice> c = BestTwoLevel(p, true, /*min_cycle_hours=*/2.5);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->drain_every, 3);  // 3 x 1.1 + 0.04 >= 2.5 > 2 x 1.1 + 0.04
  c = BestTwoLevel(p, false, 2.5);
  ASSERT_TRUE(c.ok());
  EXPECT_GE(static_cast<double>(c->drain_every) * (c->interval_hours + 0.1) + 0.04, 2.5 - 1e-9);
  EXPECT_FALSE(BestTwoLevel(p, true, 1e12).ok());
}

// ------------------------------------------------------ group-loss rate --

TEST(PlanTwoLevel, GroupLossRateOfOneSparePerGroup) {
  // 250 groups of 21 nodes, XOR: ≈ T λn (s-1) λn w (a failure with another
  // of its group lost in the last w).
  const GroupKind kinds[] = {{20, 1, 250}};
  const double ln = 1 / 43800.0, w = 0.025;
  const double approx = 5250 * ln * 20 * ln * w;
  EXPECT_NEAR(GroupLossRate(kinds, ln, w), approx, 1e-3 * approx);
  EXPECT_EQ(GroupLossRate(kinds, ln, 0), 0);
  EXPECT_LT(GroupLossRate(kinds, ln, w), GroupLossRate(kinds, ln, 2 * w));
  // Two spares per group: ≈ T λn C(s-1, 2) (λn w)^2, far smaller.
  const GroupKind two[] = {{40, 2, 125}};
  const double approx2 = 5250 * ln * (41.0 * 40 / 2) * std::pow(ln * w, 2);
  EXPECT_NEAR(GroupLossRate(two, ln, w), approx2, 2e-3 * approx2);
}

TEST(PlanTwoLevel, GroupLossRateByHandForTwoSmallGroups) {
  // 2 groups of 3 nodes, 1 spare each; T = 6. S(0) = S(1) = 1; two failures
  // survive if they hit different groups, S(2) = 3·3/C(6,2) = 9/15 = 0.6;
  // three always put two in one group, S(3) = 0. With pf = 1 - e^{-λn w},
  // the 5 other nodes' failures are Binomial(5, pf):
  //   λ_grp = 6 λn [ (1-pf)^5 (S0 - S1) + 5 pf (1-pf)^4 (S1 - S2) + 10 pf^2 (1-pf)^3 (S2 - S3) ]
  //         = 6 λn [ 5 pf (1-pf)^4 x 0.4 + 10 pf^2 (1-pf)^3 x 0.6 ].
  // λn = 0.1, w = 1: pf = 0.0951626, 1 - pf = 0.9048374:
  //   = 0.6 [ 2 x 0.0951626 x 0.6703200 + 6 x 0.0090559 x 0.7408182 ]
  //   = 0.6 [ 0.1275788 + 0.0402527 ] = 0.1006989.
  const GroupKind kinds[] = {{2, 1, 2}};
  EXPECT_NEAR(GroupLossRate(kinds, 0.1, 1.0), 0.1006989, 1e-6);
}

// ------------------------------------------------------------------ tool --

struct ToolRun {
  int code;
  std::string out, err;
};
ToolRun RunTool(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = RunPlanTool(args, out, err);
  return {code, out.str(), err.str()};
}

const std::vector<std::string> kArgs = {"--nodes", "5000", "--spares", "250", "--mttf-hours", "43800",
                                        "--phases", "1440", "--ckpt-mb", "200", "--spares-per-group",
                                        "1,2", "--runs", "0", "--pfs-bandwidth", "20000"};

TEST(PlanTwoLevelTool, RecommendsADrainIntervalInTextAndJson) {
  ToolRun r = RunTool(kArgs);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("second level: drain to the PFS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("; second level: drain every"), std::string::npos) << r.out;

  std::vector<std::string> args = kArgs;
  args.insert(args.end(), {"--unrecoverable-rate", "0.001", "--json"});
  r = RunTool(args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"two_level\""), std::string::npos);
  EXPECT_NE(r.out.find("\"uncovered_rate_per_hour\": 0.001,"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"two_level_efficiency\""), std::string::npos);

  // The plan itself: 1 TB at 20 GB/s is a 50 s drain; the restart from the
  // PFS reads it back after the level-1 restart; N is near first order.
  Result<CliOptions> o = ParseCommandLine(kArgs);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  o->request.two_level.uncovered_rate = 0.001;
  Result<Plan> plan = MakePlan(o->request);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  for (const Candidate& c : plan->candidates) {
    ASSERT_TRUE(c.two_level.has_value());
    const TwoLevelResult& t = *c.two_level;
    EXPECT_DOUBLE_EQ(t.drain_seconds, 50);
    EXPECT_DOUBLE_EQ(t.visible_drain_seconds, 50);
    EXPECT_DOUBLE_EQ(t.pfs_restart_seconds, c.times.restart_seconds + 50);
    EXPECT_DOUBLE_EQ(t.uncovered_rate, 0.001);
    EXPECT_NEAR(t.covered_rate, 5250 / 43800.0, 1e-4);
    EXPECT_GT(t.choice.drain_every, 1);
    EXPECT_NEAR(static_cast<double>(t.choice.drain_every), t.first_order_drain_every,
                0.25 * t.first_order_drain_every);
    EXPECT_GE(t.choice.efficiency, t.efficiency_every_checkpoint);
    EXPECT_NEAR(t.expected_hours, 1440 * c.interval_hours / t.choice.efficiency, 1e-9);
  }
}

TEST(PlanTwoLevelTool, EvaluatesAGivenDrainEveryAndInterval) {
  std::vector<std::string> args = kArgs;
  args.insert(args.end(), {"--drain-every", "7", "--interval", "0.25", "--drain-visible", "0.5"});
  Result<CliOptions> o = ParseCommandLine(args);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  Result<Plan> plan = MakePlan(o->request);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const TwoLevelResult& t = *plan->candidates[0].two_level;
  EXPECT_EQ(t.choice.drain_every, 7);
  EXPECT_DOUBLE_EQ(t.choice.interval_hours, 0.25);
  EXPECT_DOUBLE_EQ(t.visible_drain_seconds, 25);
  EXPECT_NE(plan->recommendation.find("draining every 7 checkpoints"), std::string::npos)
      << plan->recommendation;
}

TEST(PlanTwoLevelTool, BadSecondLevelOptionsAreClearErrors) {
  const std::vector<std::string> base = {"--nodes", "100", "--spares", "10", "--mttf-hours", "1000",
                                         "--phases", "10", "--ckpt-seconds", "10", "--restart-seconds",
                                         "60", "--runs", "0"};
  struct Case {
    std::vector<std::string> extra;
    const char* words;
  } cases[] = {
      {{"--drain-every", "4"}, "--drain-every is a second-level option"},
      {{"--pfs-bandwidth", "1000"}, "--pfs-bandwidth needs the checkpoint size"},
      {{"--pfs-bandwidth", "1000", "--drain-seconds", "5"}, "only one of --pfs-bandwidth and --drain-seconds"},
      {{"--drain-seconds", "5", "--drain-visible", "1.5"}, "--drain-visible: '1.5' is not a fraction"},
      {{"--drain-seconds", "5", "--drain-every", "0"}, "--drain-every: '0' is not an integer >= 1"},
      {{"--drain-seconds", "5", "--unrecoverable-rate", "-1"}, "--unrecoverable-rate: '-1'"},
      {{"--drain-seconds", "5", "--drain-mb", "100"}, "--drain-mb needs --pfs-bandwidth"},
      // Drains of 3600 s, 10% visible, every checkpoint of a 0.1 h interval: they would overlap.
      {{"--drain-seconds", "3600", "--drain-visible", "0.1", "--drain-every", "1", "--interval", "0.1"},
       "drains every 1 checkpoints start every"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = base;
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    const ToolRun r = RunTool(args);
    EXPECT_EQ(r.code, 2) << c.words;
    EXPECT_NE(r.err.find(c.words), std::string::npos) << r.err;
  }
  // --drain-seconds alone is enough, and --help documents the second level.
  std::vector<std::string> args = base;
  args.insert(args.end(), {"--drain-seconds", "5", "--system-loss-mtbf-hours", "8760"});
  EXPECT_EQ(RunTool(args).code, 0);
  EXPECT_NE(RunTool({"--help"}).out.find("--pfs-bandwidth MBPS"), std::string::npos);
}

}  // namespace
}  // namespace dlckpt::plan

// dlckpt/plan/plan.h — performability planning: how to split N compute nodes and
// M spares into groups, and how often to checkpoint (Lu 2005, chapters 7–9).
// Backs the `dlckpt-plan` tool; every function here is pure computation except
// ReadBenchCsv (one file read) and RunPlanTool (writes to the given streams).
//
// Terms (thesis §8.1). A *group* holds compute nodes and spares and survives
// as long as at most `spares` of its nodes (compute or spare alike) have
// failed. A *phase* is one checkpoint interval of production c (hours)
// followed by a checkpoint of C; a failure costs the work since the last
// checkpoint, a restart Rs, and a redo of the phase. A *catastrophe* is a
// group with more failed nodes than spares: the run cannot continue.
//
// Interpretation choices (the thesis' equations were OCR'd; where it is
// silent or ambiguous this is what the code does):
//  - Spares that do not divide evenly: with M spares and R spares per group
//    there are floor(M/R) groups with R spares and, if M mod R > 0, one
//    smaller group with the remaining spares. Compute nodes are dealt out in
//    proportion to spares (cumulative rounding), so every group has about the
//    same node:spare ratio. The thesis' s = R(n+m)/m and m/R groups are this
//    layout when R divides M and M divides N.
//  - All n+m nodes fail at rate λ = 1/MTTF (the thesis does not distinguish
//    spare from compute failures); the system MTBF is MTTF/(n+m).
//  - The analytical model keeps the system failure rate (n+m)λ constant
//    (§8.2); the simulation lowers it as nodes are lost (§9.6).
//  - "Reliability" is the largest number of phases finished with probability
//    >= target (0.9 in the thesis); "overhead" is (TT(N) - N c)/(N c) with
//    TT(N) the expected time of N phases given that the run succeeds (§8.1).
//    The thesis' Figure 9.1 overheads are reproduced when the overhead is
//    taken at N = the reliability, so both it and the overhead at the user's
//    phase count are reported.
//  - Checkpoint and restart times of a layout are those of its R (its largest
//    groups); smaller remainder groups finish earlier and do not set the time.
//
// The second level (issue 20: every N-th checkpoint drained to a parallel
// file system, failures parity cannot cover restart from it) is the "two
// levels" section below; plan/README.md derives its equations.
//
// Thread safety: free functions are thread-safe; AnalyticModel caches powers
// and is not (use one per thread).
#ifndef DLCKPT_PLAN_PLAN_H_
#define DLCKPT_PLAN_PLAN_H_

#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dlckpt/base/status.h"

namespace dlckpt::plan {

// Groups with two or more spares use Reed-Solomon over GF(2^8) with Cauchy
// matrices (ISA-L), which allows at most 256 data + parity members. XOR
// groups (one spare) have no limit.
inline constexpr int64_t kMaxReedSolomonGroupNodes = 256;
// Phase counts are capped here (about 61,000 years of half-hour phases);
// a reliability equal to this cap means "at least".
inline constexpr int64_t kMaxPhases = int64_t{1} << 30;
// Spares-per-group values tried when the times apply to any value.
inline constexpr int64_t kDefaultMaxSparesPerGroup = 8;
// Input limits. The model's cost grows as the square of the spares (S(k) and
// PP(N, k) are kept for k up to the number of spares).
inline constexpr int64_t kMaxComputeNodes = 10'000'000;
inline constexpr int64_t kMaxSpares = 4096;
inline constexpr int64_t kMaxSimRuns = 10'000'000;
// Largest MTTF and interval (hours), and times (seconds): keeps every
// product of phases and hours far from overflow.
inline constexpr double kMaxHours = 1e12;

// ---------------------------------------------------------------- layout --

// `count` groups, each of `compute` compute nodes and `spares` spares.
struct GroupKind {
  int64_t compute = 0;
  int64_t spares = 0;
  int64_t count = 0;
  int64_t nodes() const { return compute + spares; }
};

struct Layout {
  int64_t compute_nodes = 0;
  int64_t spare_nodes = 0;
  int64_t spares_per_group = 0;
  std::vector<GroupKind> kinds;  // largest groups first

  int64_t groups() const;
  int64_t nodes() const { return compute_nodes + spare_nodes; }
  int64_t max_group_nodes() const;
  // "250 x 21" or "62 x 84 + 1 x 42" (groups x nodes per group).
  std::string Describe() const;
};

// "1 spare per group", "3 spares per group".
std::string SparesPerGroupText(int64_t spares_per_group);

// Splits `compute_nodes` and `spare_nodes` into groups of `spares_per_group`
// spares (see the header comment for remainders). InvalidArgument when a
// count is < 1 or above kMaxComputeNodes / kMaxSpares, spares > compute nodes, spares_per_group > spare_nodes, a
// group would get no compute node, or a group with >= 2 spares would exceed
// `max_rs_group_nodes`; the message says which.
Result<Layout> MakeLayout(int64_t compute_nodes, int64_t spare_nodes, int64_t spares_per_group,
                          int64_t max_rs_group_nodes = kMaxReedSolomonGroupNodes);

// -------------------------------------------- survival probability S(k) --

// S(k) for k = 0..max_k: the probability that k failures, placed uniformly at
// random on distinct nodes of the groups in `kinds`, leave every group with
// at most `spares` failures (thesis §8.2–8.3, S(k, R)).
//
// Computed as the generating function prod_groups sum_{j<=spares} C(s,j) x^j
// (eq. 8.1), each kind raised to its count by exponentiation by squaring,
// with coefficient k divided by C(nodes, k) at every step so that values stay
// in [0, 1] (the raw counts overflow a double beyond ~1,000 nodes): the
// product of two normalized polynomials weights term (i, k-i) by the
// hypergeometric probability C(T1,i) C(T2,k-i) / C(T1+T2,k). Values far below
// 1e-300 underflow to 0.
std::vector<double> SurvivalProbabilities(std::span<const GroupKind> kinds, int64_t max_k);

// ln C(n, k) for 0 <= k <= n.
double LogChoose(int64_t n, int64_t k);

// ------------------------------------------------ analytical model (ch. 8) --

struct PhaseParams {
  double system_failure_rate = 0;  // per hour, (n+m)·λ
  double interval_hours = 0;       // c, production per phase (> 0)
  double ckpt_hours = 0;           // C
  double restart_hours = 0;        // Rs
};

// E(t): expected time of the first failure given one occurs within t, for a
// Poisson process of `rate` per hour (§8.2). Accurate also for rate·t -> 0.
double ExpectedFailureTime(double rate, double t);
// F(k) for k = 0..max_k: probability of k failures in one phase (§8.2).
std::vector<double> PhaseFailureProbabilities(const PhaseParams& p, int64_t max_k);
// PT(k) for k = 0..max_k: expected duration of a phase with k failures.
std::vector<double> PhaseDurations(const PhaseParams& p, int64_t max_k);

struct ModelPoint {
  int64_t phases = 0;
  double p_success = 0;  // P(no catastrophe in `phases` phases)
  // Expected time-to-solution given success, and (TT - N c)/(N c). Absent
  // only when the success probability underflows to 0.
  std::optional<double> hours;
  std::optional<double> overhead;
};

// The model of §8.1–8.3: PP(N, k) and the unnormalized PP(N,k)·TT(N,k) are
// the N-th convolution power of the one-phase pair (F(k), F(k)·PT(k)), a
// dual-number power computed by squaring with each product rescaled to keep
// its largest PP at 1 (the logarithm of the scale is kept aside), so neither
// thousands of phases nor thousands of nodes overflow or underflow. PP is
// truncated at k = survival.size()-1 failures, which is exact for every
// k it keeps because all terms are non-negative.
class AnalyticModel final {
 public:
  // `survival` = S(0..K) from SurvivalProbabilities, K = most failures any
  // run can survive.
  AnalyticModel(const PhaseParams& params, std::vector<double> survival);
  AnalyticModel(const AnalyticModel&) = delete;
  AnalyticModel& operator=(const AnalyticModel&) = delete;

  // Success probability and overhead of `phases` (1..kMaxPhases) phases.
  ModelPoint At(int64_t phases);
  // Largest N <= kMaxPhases with P(success of N phases) >= target, 0 if not
  // even one phase reaches it. P is non-increasing in N, so this walks the
  // bits of N from the top over cached powers: O(log N) products.
  int64_t PhasesAtProbability(double target);

 private:
  struct Dual {
    std::vector<double> p, w;  // PP(N,k) and PP(N,k)·TT(N,k), both / exp(log_scale)
    double log_scale = 0;
    bool zero = false;  // everything underflowed
  };
  Dual Multiply(const Dual& a, const Dual& b) const;
  const Dual& Power(int bit);  // F^(2^bit)
  double SuccessScaled(const Dual& d) const;
  ModelPoint Evaluate(const Dual& d, int64_t phases) const;

  PhaseParams params_;
  std::vector<double> survival_;
  std::vector<Dual> powers_;
};

// --------------------------------------------- simulation (thesis §9.6) --

struct SimParams {
  double node_failure_rate = 0;  // λ per hour
  double interval_hours = 0;
  double ckpt_hours = 0;
  double restart_hours = 0;
};

struct SimOptions {
  int64_t runs = 10000;
  uint64_t seed = 1;
  double target = 0.9;
  std::vector<int64_t> marks;  // phase counts to report; each in 1..kMaxPhases
};

struct SimMark {
  int64_t phases = 0;
  int64_t finished_runs = 0;  // runs that finished `phases` phases
  double p_finish = 0;
  std::optional<double> overhead;  // mean over finished runs; absent if none
};

struct SimResult {
  int64_t runs = 0;
  std::vector<SimMark> marks;  // in the order of SimOptions::marks
  int64_t phases_at_target = 0;  // largest N that >= target of the runs finished
};

// Monte Carlo runs of `layout`: the time to the next failure is exponential
// with rate (nodes still up)·λ; phases are counted, the failed node is drawn
// uniformly among the nodes still up, and a run ends at its first catastrophe
// (or at kMaxPhases phases). Deterministic for a given seed (mt19937_64 with
// the library's own uniform and exponential transforms). Preconditions
// (checked by MakePlan): rate > 0, interval > 0, runs >= 1.
SimResult Simulate(const Layout& layout, const SimParams& params, const SimOptions& options);

// ------------------------------------------- checkpoint interval formulas --

// Young (1974): sqrt(2 M C).
double YoungIntervalHours(double mtbf_hours, double ckpt_hours);
// Daly (2006, higher-order estimate): sqrt(2 C M)·(1 + sqrt(C/2M)/3 + (C/2M)/9) - C
// for C < 2M, else M.
double DalyIntervalHours(double mtbf_hours, double ckpt_hours);

// ---------------------------------------- checkpoint and restart times --

struct Times {
  double ckpt_seconds = 0;
  double restart_seconds = 0;
};

// The performance model of chapter 7, with §9.1's baseline as defaults
// (NCSA TeraGrid, MPICH-GM 1.2.5, 200 MB per process). For a layout with R
// spares per group and groups of up to n nodes:
//   C  = d/memcpy + (R == 1 ? red(n) : R·(d/rs + red(n))) + σ·E[max of G normals] + comm
//   Rs = detect + recover + launch + bootstrap + (R == 1 ? 1 : 2)·C
// with red(n) = (a d + b)·ceil(lg n) for the binary-tree reduction (MPICH
// <= 1.2.5) or a (n-1) d / n + b for Rabenseifner's (MPICH 1.2.6), floored
// at 0, G the number of groups and n the group size including spares.
struct Chapter7Params {
  double ckpt_mb = 200;         // d, checkpoint per process
  double memcpy_mbps = 1500;
  double rs_mbps = 207;         // Reed-Solomon encoding rate
  bool tree_reduction = true;   // false: Rabenseifner
  double reduce_a = 0.00961;    // seconds per MB
  double reduce_b = -0.09926;   // seconds
  double group_sd_seconds = 1;  // σ of group completion times (§7.5)
  double comm_seconds = 1.5;    // codec <-> application
  double detect_seconds = 2.5;
  double recover_seconds = 3;
  double launch_seconds = 10;
  double bootstrap_seconds = 60;
};
Times Chapter7Times(const Layout& layout, const Chapter7Params& p);
// E[max of n i.i.d. standard normal variables] (Table 7.1); 0 for n <= 1.
double ExpectedMaxOfNormals(int64_t n);

// Bench CSV: comma-separated, first non-blank non-'#' line a header naming
// at least the columns spares_per_group, ckpt_seconds, restart_seconds (any
// order, other columns ignored), then one row per measurement, e.g.
//   spares_per_group,ckpt_seconds,restart_seconds
//   1,13.2,88.8
//   2,28.2,131.4
// Rows with the same spares_per_group are averaged. `name` (the path) is
// used in error messages, which also give the line number.
Result<std::map<int64_t, Times>> ParseBenchCsv(std::string_view text, std::string_view name);
Result<std::map<int64_t, Times>> ReadBenchCsv(const std::string& path);

// ------------------------------------------- two levels: drain to a PFS --
//
// Level 1 is the in-memory checkpoint protected by parity (cost C1, restart
// R1, as above); every N-th level-1 checkpoint is also drained to a parallel
// file system (level 2: application-visible cost C2, restart from it R2).
// Failures are Poisson: λ1 per hour are covered by parity (restart from the
// newest level-1 checkpoint), λ2 per hour are not (more than `spares` losses
// in one group before the rebuild, or a whole-system loss: restart from the
// newest drained checkpoint). λ = λ1 + λ2. A level-1 failure during R1
// restarts R1, a level-2 failure during R1 goes to R2, any failure during R2
// restarts R2; a failure during a checkpoint or a drain loses its segment
// (as in the phase model of §8.2 and in Moody et al.'s model).
//
// A *cycle* is N segments of τ work + C1, the last also + C2, between drains.
// With x = λ R1 and y = λ d, a segment of length d (τ + C1, or τ + C1 + C2)
// retried after level-1 failures, until it completes or a level-2 failure
// strikes, has
//   M(d) = E[time spent]           = (1 - e^-y) / (λ2 + λ1 e^-(x+y))
//   P(d) = P(completes, no lvl 2)  = 1 - λ2 M(d)
// (P(d) is the Laplace transform at λ2 of the level-1-only segment time,
// whose mean for λ2 = 0 is Daly's e^{λR}(e^{λd} - 1)/λ; M = (1 - P)/λ2).
// With Q = P(a)^(N-1) P(b) (a cycle without a level-2 failure), a = τ + C1,
// b = a + C2, and G2 = (e^{λ R2} - 1)/λ the expected time of a restart from
// the PFS that any failure restarts, the expected time of one cycle is
//   A = (1 - P(a)^(N-1)) / λ2 + P(a)^(N-1) M(b)       [(N-1) M(a) + M(b) if λ2 = 0]
//   E = (A + (1 - Q) G2) / Q = (1/Q - 1)(1/λ2 + G2)   (the second form for λ2 > 0)
// and the efficiency is η = N τ / E (useful work per wall-clock hour). This
// is the expected absorption time of the two-level case of Moody et al.'s
// Markov model (SC'10; states: computing segment j, restarting from level 1,
// restarting from level 2), solved in closed form instead of numerically;
// plan/README.md derives it.
// For λ2 = 0 the best N is infinite (never drain); for λ2 -> ∞ it is 1.
// First order (Benoit et al., IEEE TC 2017): N* ≈ sqrt(C2 λ1 / (C1 λ2)),
// N τ* ≈ sqrt(2 (N C1 + C2) / (λ1/N + λ2)), overhead ≈ sqrt(2λ1C1) + sqrt(2λ2C2).
struct TwoLevelParams {
  double covered_rate = 0;       // λ1 per hour
  double uncovered_rate = 0;     // λ2 per hour
  double interval_hours = 0;     // τ, work per level-1 segment (> 0)
  double ckpt_hours = 0;         // C1
  double restart_hours = 0;      // R1
  double drain_hours = 0;        // C2, application-visible part of one drain
  double pfs_restart_hours = 0;  // R2
};

// M(d) and P(d) above for a segment of `segment_hours`.
struct SegmentOutcome {
  double mean_hours = 0;   // M(d); +inf when it overflows
  double p_complete = 1;   // P(d)
};
SegmentOutcome TwoLevelSegment(const TwoLevelParams& p, double segment_hours);
// E above: expected wall-clock hours of one cycle of `drain_every` (>= 1)
// segments; +inf when the cycle practically never completes.
double TwoLevelCycleHours(const TwoLevelParams& p, int64_t drain_every);
// N τ / E, in [0, 1]; the limit N -> ∞ (never drain) when drain_every == 0.
double TwoLevelEfficiency(const TwoLevelParams& p, int64_t drain_every);

// Largest N the search tries; an optimum there is reported as "at the cap".
inline constexpr int64_t kMaxDrainEvery = 1'000'000;

struct TwoLevelChoice {
  int64_t drain_every = 0;  // 0: never drain (λ2 == 0)
  double interval_hours = 0;
  double efficiency = 0;
  double cycle_hours = 0;   // E; +inf when drain_every == 0
};
// The τ that maximizes η for a fixed N (p.interval_hours is ignored), over
// τ >= min_interval_hours (and >= 1e-6 h, <= 1e6 h): a log-spaced scan, then
// golden-section refinement around the best scan point.
TwoLevelChoice BestTwoLevelInterval(const TwoLevelParams& p, int64_t drain_every,
                                    double min_interval_hours = 0);
// The N (and, unless `fixed_interval`, the τ) that maximize η. Every N in
// 1..2000, then N growing by 1% up to kMaxDrainEvery. `min_cycle_hours`: an
// asynchronous drain must end before the next one starts, so only cycles
// with N (τ + C1) + C2 >= min_cycle_hours are allowed; NotFound if none is.
// λ2 == 0 gives drain_every = 0 (never).
Result<TwoLevelChoice> BestTwoLevel(const TwoLevelParams& p, bool fixed_interval,
                                    double min_cycle_hours = 0);

// The rate (per hour) of node failures parity cannot cover: a failure that
// strikes a group whose other losses of the last `window_hours` (the time
// from a loss until its rebuild on a spare ends) already equal its spares.
// With T nodes failing at `node_failure_rate` λn each, the j other failures
// of the window are Binomial(T-1, 1 - e^{-λn w}) and uniformly placed, so
//   λ_grp = T λn Σ_j Binom(j) (S(j) - S(j+1))
// with S(j) from SurvivalProbabilities (S(j) - S(j+1) = P(j failures are
// survivable and one more is not)). For one spare per group of s nodes this
// is ≈ T λn (s-1) λn w. Assumes a rebuilt group is fully protected again
// (lost nodes replaced); spare exhaustion is the single-level model's concern.
double GroupLossRate(std::span<const GroupKind> kinds, double node_failure_rate, double window_hours);

// What the user asks of the second level (PlanRequest::two_level).
struct TwoLevelRequest {
  bool enabled = false;
  // Wall-clock time of one whole drain: `drain_seconds`, else compute nodes
  // x drain_mb_per_node / pfs_mbps.
  std::optional<double> drain_seconds;
  double pfs_mbps = 0;
  double drain_mb_per_node = 0;
  double drain_visible = 1;  // fraction of the drain the application waits for (1: blocking)
  std::optional<double> pfs_restart_seconds;  // default: R1 + the drain time (read back)
  std::optional<int64_t> drain_every;         // absent: recommend
  std::optional<double> uncovered_rate;       // λ2 per hour; absent: GroupLossRate + system loss
  double system_loss_mtbf_hours = 0;          // whole-system losses; 0: none
  std::optional<double> exposure_seconds;     // window of GroupLossRate; default R1
};

struct TwoLevelResult {
  double group_loss_rate = 0;  // λ_grp per hour (always computed)
  double covered_rate = 0;     // λ1 = (n+m)/MTTF - λ_grp
  double uncovered_rate = 0;   // λ2
  double exposure_seconds = 0;
  double drain_seconds = 0;          // whole drain
  double visible_drain_seconds = 0;  // C2
  double pfs_restart_seconds = 0;    // R2
  bool interval_fixed = false;       // τ from --interval, else optimized
  TwoLevelChoice choice;             // the evaluated or recommended (N, τ)
  bool drain_every_is_cap = false;
  double efficiency_every_checkpoint = 0;  // N = 1 at the same τ, for comparison
  double first_order_drain_every = 0;      // sqrt(C2 λ1 / (C1 λ2)); 0 if undefined
  double expected_hours = 0;  // phases x candidate interval of work / η; +inf if η = 0
};

// InvalidArgument naming the flag when an enabled request has a value out of
// range; OK when it is disabled.
Status ValidateTwoLevel(const TwoLevelRequest& t);

// --------------------------------------------- parity layouts (issue 32) --
//
// dlckpt-run --parity spares keeps each group's R parity on its R spare nodes
// (the layout of everything above); --parity spread runs the application on
// every node and keeps the parity on the group's members (each of a group of
// s nodes holds R/(s-R) of its checkpoint in parity), and a loss is rebuilt
// from the survivors, whose ranks then run oversubscribed. For the same nodes
// grouped alike, a spread group is lost only when more than R of its nodes
// fail within one phase (each checkpoint re-protects the survivors), so with
// F(k) the phase failure probabilities and S(k) the grouping's survival
//   P(N phases) = (Σ_k F(k) S(k))^N.
// This ignores the slowdown of oversubscribed nodes and a group left with R
// live nodes or fewer (then unprotected); the spares layout's model above
// counts losses over the whole run instead, as spares are used up.
struct SpreadPoint {
  double p_success = 0;         // P(phases) above
  double phase_loss = 0;        // 1 - Σ_k F(k) S(k): P(a group is lost in one phase)
  double compute_nodes = 0;     // every node: compute + spares
  double parity_per_node = 0;   // R/(s-R) of a node's checkpoint, s the largest group
};
SpreadPoint EvaluateSpread(const Layout& layout, const PhaseParams& params, int64_t phases);

// ------------------------------------------------------------------ plan --

struct TimesSpec {
  enum class Source { kPerSparesPerGroup, kSameForAll, kChapter7 };
  Source source = Source::kPerSparesPerGroup;
  std::map<int64_t, Times> per_spares_per_group;  // kPerSparesPerGroup
  Times same;                                     // kSameForAll
  Chapter7Params chapter7;                        // kChapter7
  std::string origin = "command line";            // for humans: "bench file x.csv"
};

struct PlanRequest {
  int64_t compute_nodes = 0;
  int64_t spare_nodes = 0;
  double mttf_hours = 0;
  int64_t phases = 0;
  std::optional<double> interval_hours;  // absent: Daly's interval of each R
  TimesSpec times;
  // Empty: every R with times (kPerSparesPerGroup) or 1..kDefaultMaxSparesPerGroup;
  // infeasible ones are skipped with a reason. Non-empty: exactly these, and an
  // infeasible one is an error.
  std::vector<int64_t> spares_per_group;
  int64_t max_rs_group_nodes = kMaxReedSolomonGroupNodes;
  double target = 0.9;
  int64_t sim_runs = 10000;  // 0: no simulation
  uint64_t seed = 1;
  TwoLevelRequest two_level;  // the second level (drain to a PFS), if enabled
};

struct Candidate {
  Layout layout;
  Times times;
  double interval_hours = 0;  // used for the model and simulation
  double young_hours = 0;
  double daly_hours = 0;
  ModelPoint model;               // at request.phases
  int64_t model_phases_at_target = 0;
  ModelPoint model_at_target;     // at model_phases_at_target (if > 0)
  std::optional<SimResult> sim;   // marks: request.phases, then model_phases_at_target if > 0
  std::optional<TwoLevelResult> two_level;  // when request.two_level.enabled
  SpreadPoint spread;             // the same nodes and grouping with --parity spread
};

struct Skipped {
  int64_t spares_per_group = 0;
  std::string reason;
};

struct Plan {
  PlanRequest request;
  double system_mtbf_hours = 0;
  std::vector<Candidate> candidates;  // by spares per group
  std::vector<Skipped> skipped;
  size_t recommended = 0;  // index into candidates
  std::string recommendation;  // one sentence: why
  // The parity layout (dlckpt-run --parity) for the recommended grouping:
  // "spread" when it finishes the phases at least as likely as the spares
  // layout (it also computes on the spares), else "spares"; and why.
  std::string layout;
  std::string layout_reason;
};

// The second level for one grouping (`layout`, its level-1 `times`, and the
// single-level interval `interval_hours`, which sets the work: phases x
// interval). λ1 = (n+m)/MTTF - λ_grp; λ2 = --unrecoverable-rate, else λ_grp +
// 1/system-loss MTBF. τ is request.interval_hours when given, else optimized;
// N is two_level.drain_every when given, else optimized (BestTwoLevel).
// InvalidArgument when a given N and τ make asynchronous drains overlap.
Result<TwoLevelResult> EvaluateTwoLevel(const PlanRequest& req, const Layout& layout, const Times& times,
                                        double interval_hours);

// Validates the request (InvalidArgument naming the field) and evaluates
// every candidate. Recommendation: among candidates whose model finishes
// `phases` phases with probability >= target, the lowest overhead; if none
// does, the highest probability (then the most phases at target).
Result<Plan> MakePlan(const PlanRequest& request);

std::string FormatTable(const Plan& plan);
std::string FormatJson(const Plan& plan);

// ------------------------------------------------------------------- CLI --

struct CliOptions {
  PlanRequest request;
  std::string bench_path;  // --bench: RunPlanTool reads it into request.times
  bool help = false;
  bool json = false;
};
// Parses dlckpt-plan's arguments (without argv[0]). Reads no file.
// InvalidArgument naming the flag on any bad or missing value.
Result<CliOptions> ParseCommandLine(std::span<const std::string> args);
std::string UsageText();
// The whole tool: 0 on success (and --help), 2 on a bad or inconsistent
// argument (ParseCommandLine or MakePlan), 1 on a bench file error or when
// `out` fails; messages go to `err` prefixed "dlckpt-plan: ".
int RunPlanTool(std::span<const std::string> args, std::ostream& out, std::ostream& err);

}  // namespace dlckpt::plan

#endif  // DLCKPT_PLAN_PLAN_H_

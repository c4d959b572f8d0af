// Monte Carlo simulation of dlckpt/plan/plan.h (thesis §9.6): like the analytical
// model, but the system failure rate falls as nodes are lost.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

#include "dlckpt/plan/plan.h"

namespace dlckpt::plan {
namespace {

// mt19937_64's output sequence is fixed by the standard; the transforms
// below are ours, so a seed gives the same runs with any standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  // Uniform in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }
  // Exponential with `rate` (> 0); finite because 1 - U > 0.
  double Exponential(double rate) { return -std::log1p(-Uniform()) / rate; }

 private:
  std::mt19937_64 gen_;
};

}  // namespace

SimResult Simulate(const Layout& layout, const SimParams& params, const SimOptions& options) {
  // Groups are interchangeable within a kind, so the state is: for each kind
  // and each failure count f = 0..spares, how many groups have f failed
  // nodes. A failed node is drawn uniformly among the nodes still up, i.e. a
  // bucket with probability count·(nodes - f) / up.
  struct Bucket {
    int64_t nodes;
    int64_t failures;
    bool last;  // f == spares: one more failure is a catastrophe
  };
  std::vector<Bucket> buckets;
  std::vector<int64_t> initial;
  for (const GroupKind& kind : layout.kinds) {
    for (int64_t f = 0; f <= kind.spares; ++f) {
      buckets.push_back({kind.nodes(), f, f == kind.spares});
      initial.push_back(f == 0 ? kind.count : 0);
    }
  }

  const size_t nmarks = options.marks.size();
  std::vector<size_t> order(nmarks);
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return options.marks[a] < options.marks[b]; });
  std::vector<int64_t> finished(nmarks, 0);
  std::vector<double> overhead_sum(nmarks, 0.0);

  const double lam = params.node_failure_rate;
  const double c = params.interval_hours;
  const double phase = c + params.ckpt_hours;           // first try of a phase
  const double redo = params.restart_hours + phase;     // after a failure
  const int64_t runs = std::max<int64_t>(options.runs, 1);
  std::vector<int64_t> done_per_run(static_cast<size_t>(runs));
  Rng rng(options.seed);
  std::vector<int64_t> count;

  for (int64_t run = 0; run < runs; ++run) {
    count = initial;
    double up = static_cast<double>(layout.nodes());
    double t = 0;
    int64_t done = 0;
    size_t next = 0;  // next mark in `order`
    bool restarting = false;
    // Records every mark in (before, done]: phase before+1 began at t_before
    // and took `first`, each later one took `phase`.
    auto record = [&](int64_t before, double t_before, double first) {
      while (next < nmarks && options.marks[order[next]] <= done) {
        const int64_t mark = options.marks[order[next]];
        const double at = t_before + first + static_cast<double>(mark - before - 1) * phase;
        const double ideal = static_cast<double>(mark) * c;
        finished[order[next]] += 1;
        overhead_sum[order[next]] += (at - ideal) / ideal;
        ++next;
      }
    };
    double ttf = rng.Exponential(up * lam);
    for (;;) {
      if (restarting && ttf >= redo) {
        t += redo;
        ttf -= redo;
        ++done;
        restarting = false;
        record(done - 1, t - redo, redo);
        if (done >= kMaxPhases) break;
      }
      if (!restarting) {
        const double fit = std::floor(ttf / phase);
        const int64_t room = kMaxPhases - done;
        const int64_t k = fit >= static_cast<double>(room) ? room : static_cast<int64_t>(fit);
        const int64_t before = done;
        const double t_before = t;
        done += k;
        t += static_cast<double>(k) * phase;
        ttf = std::max(0.0, ttf - static_cast<double>(k) * phase);
        record(before, t_before, phase);
        if (done >= kMaxPhases) break;
      }
      // A failure: the work since the last checkpoint is lost.
      t += ttf;
      restarting = true;
      const double u = rng.Uniform() * up;
      double acc = 0;
      size_t pick = buckets.size();
      size_t last_nonempty = 0;
      for (size_t b = 0; b < buckets.size(); ++b) {
        if (count[b] == 0) continue;
        last_nonempty = b;
        acc += static_cast<double>(count[b]) * static_cast<double>(buckets[b].nodes - buckets[b].failures);
        if (u < acc) {
          pick = b;
          break;
        }
      }
      if (pick == buckets.size()) pick = last_nonempty;  // u rounded up to `up`
      if (buckets[pick].last) break;                     // catastrophe
      --count[pick];
      ++count[pick + 1];
      up -= 1;
      ttf = rng.Exponential(up * lam);
    }
    done_per_run[static_cast<size_t>(run)] = done;
  }

  SimResult result;
  result.runs = runs;
  for (size_t i = 0; i < nmarks; ++i) {
    SimMark mark;
    mark.phases = options.marks[i];
    mark.finished_runs = finished[i];
    mark.p_finish = static_cast<double>(finished[i]) / static_cast<double>(runs);
    if (finished[i] > 0) mark.overhead = overhead_sum[i] / static_cast<double>(finished[i]);
    result.marks.push_back(mark);
  }
  // The largest N that at least ceil(target·runs) runs finished: the
  // ceil(target·runs)-th largest phase count.
  int64_t need = static_cast<int64_t>(std::ceil(options.target * static_cast<double>(runs) - 1e-9));
  need = std::clamp<int64_t>(need, 1, runs);
  auto nth = done_per_run.begin() + (need - 1);
  std::nth_element(done_per_run.begin(), nth, done_per_run.end(), std::greater<int64_t>());
  result.phases_at_target = *nth;
  return result;
}

}  // namespace dlckpt::plan

#include <evodispatch/search/fitness.hpp>

#include <cmath>
#include <cstdio>

namespace evodispatch::search {

namespace {
bool usable(double us) { return std::isfinite(us) && us > 0; }

std::string fixed3(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}
}  // namespace

Fitness score_latencies(std::span<const double> baseline_us, std::span<const double> program_us,
                        std::span<const double> oracle_us, const FitnessOptions& opts) {
  Fitness f;
  f.score = kFailedScore;
  const std::size_t n = program_us.size();
  if (n == 0 || baseline_us.size() != n || (!oracle_us.empty() && oracle_us.size() != n)) {
    f.error = "no shapes to score";
    return f;
  }
  int failed = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (!usable(program_us[i]) || !usable(baseline_us[i])) ++failed;
  if (failed) {
    f.error = std::to_string(failed) + " of " + std::to_string(n) + " shapes have no measurement";
    return f;
  }
  f.ok = true;
  const double log_floor = opts.floor > 0 ? std::log(opts.floor) : -INFINITY;
  double log_sum = 0, shortfall = 0, oracle_log_sum = 0;
  f.speedups.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double r = baseline_us[i] / program_us[i];
    f.speedups[i] = r;
    const double lr = std::log(r);
    log_sum += lr;
    if (f.worst_index < 0 || r < f.worst) {
      f.worst = r;
      f.worst_index = static_cast<int>(i);
    }
    if (lr < log_floor) {
      ++f.below_floor;
      shortfall += log_floor - lr;
    }
    if (!oracle_us.empty()) oracle_log_sum += std::log(baseline_us[i] / std::min(oracle_us[i], baseline_us[i]));
  }
  f.geomean = std::exp(log_sum / static_cast<double>(n));
  f.score = log_sum / static_cast<double>(n) - opts.penalty * shortfall;
  if (!oracle_us.empty() && oracle_log_sum > 1e-12) f.oracle_fraction = log_sum / oracle_log_sum;
  f.feasible = f.below_floor == 0;
  if (!f.feasible)
    f.error = std::to_string(f.below_floor) + " shape(s) under the floor of " + fixed3(opts.floor) + "x (worst " +
              fixed3(f.worst) + "x)";
  return f;
}

}  // namespace evodispatch::search

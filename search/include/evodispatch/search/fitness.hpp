#pragma once
// Fitness (DESIGN.md §5): the geometric-mean speedup over the baseline policy on a set
// of shapes, subject to a floor on every shape, and the share of the per-shape oracle's
// gain that it captures. Pure arithmetic on latencies, so tests can check it by hand.
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <evodispatch/heuristics/contract.hpp>

namespace evodispatch::search {

struct FitnessOptions {
  double floor = 0.99;    // a shape under this speedup makes the program infeasible
  double penalty = 10.0;  // weight of the shortfall below the floor in the score
};

struct Fitness {
  bool ok = false;        // every shape has a latency
  bool feasible = false;  // ok, and no shape under the floor
  std::string error;      // why not ok or not feasible
  double geomean = 0;     // exp(mean(log(speedup)))
  double worst = 0;       // the lowest speedup
  int worst_index = -1;   // its position in the shapes scored
  int below_floor = 0;
  // sum(log speedup) / sum(log oracle speedup): 1 = all the gain the oracle has; unset
  // when there is no oracle or it gains nothing.
  std::optional<double> oracle_fraction;
  // The ranking key: log(geomean) - penalty * sum over shapes of max(0, log(floor) -
  // log(speedup)). Feasible programs rank by geomean alone; an infeasible one ranks by
  // how far it falls short, so the search can walk back across the floor.
  double score = 0;
  std::vector<double> speedups;  // baseline / program, per shape
};

inline constexpr double kFailedScore = -1e9;

// Latencies per shape, in the same order; a latency that is not finite and positive is
// a failed shape. `oracle_us` may be empty (no oracle).
Fitness score_latencies(std::span<const double> baseline_us, std::span<const double> program_us,
                        std::span<const double> oracle_us, const FitnessOptions&);

using evodispatch::geomean;  // heuristics/contract.hpp

}  // namespace evodispatch::search

#pragma once
// Curves over one shape family, measured through the store:
//  * the split U-curve: latency against num_splits for one shape;
//  * the batch cliff curve: latency against batch size under a policy, with each step's
//    excess over the batch's own growth (a wave cliff shows as a large excess).
#include <functional>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include <evodispatch/heuristics/policy.hpp>
#include <evodispatch/search/stored_evaluator.hpp>

namespace evodispatch {

struct SplitPoint {
  Decision decision;
  Measurement measurement;
};

struct SplitCurve {
  Shape shape;
  std::vector<SplitPoint> points;
  int best = -1;  // index of the fastest successful point
};

SplitCurve sweep_splits(StoredEvaluator& evaluator, const Shape& shape, const std::vector<int>& splits,
                        const std::vector<bool>& pack_gqa, int sm_margin,
                        const std::function<void(std::size_t, std::size_t)>& progress = {},
                        const std::function<bool()>& stop = {});

struct BatchPoint {
  Shape shape;
  DispatchOutcome decision;
  std::optional<Measurement> measurement;
  // Against the previous point: latency ratio, and how far it exceeds the growth of the
  // batch itself: step / (batch / previous batch) - 1.
  std::optional<double> step;
  std::optional<double> excess;
};

struct BatchCurve {
  std::vector<BatchPoint> points;  // sorted by batch
  int worst = -1;                  // index of the largest excess
};

// `shapes` may come in any order; they are sorted by batch (the other fields should be
// equal — a family — but nothing requires it).
BatchCurve sweep_batch(StoredEvaluator& evaluator, Policy& policy, std::vector<Shape> shapes,
                       const std::function<void(std::size_t, std::size_t)>& progress = {},
                       const std::function<bool()>& stop = {});

nlohmann::json to_json(const SplitCurve&);
nlohmann::json to_json(const BatchCurve&);

}  // namespace evodispatch

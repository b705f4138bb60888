#include <evodispatch/search/sweep.hpp>

#include <algorithm>

namespace evodispatch {

SplitCurve sweep_splits(StoredEvaluator& evaluator, const Shape& shape, const std::vector<int>& splits,
                        const std::vector<bool>& pack_gqa, int sm_margin,
                        const std::function<void(std::size_t, std::size_t)>& progress,
                        const std::function<bool()>& stop) {
  std::vector<MeasureRequest> requests;
  for (bool pack : pack_gqa)
    for (int k : splits) requests.push_back({shape, resolve(Decision{k, pack, sm_margin}, shape)});
  const auto measured = evaluator.measure(requests, progress, stop);
  SplitCurve curve;
  curve.shape = shape;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    curve.points.push_back({requests[i].decision, measured[i]});
    const auto& m = measured[i];
    if (m.ok && (curve.best < 0 || m.median_us < curve.points[curve.best].measurement.median_us))
      curve.best = static_cast<int>(i);
  }
  return curve;
}

BatchCurve sweep_batch(StoredEvaluator& evaluator, Policy& policy, std::vector<Shape> shapes,
                       const std::function<void(std::size_t, std::size_t)>& progress,
                       const std::function<bool()>& stop) {
  std::stable_sort(shapes.begin(), shapes.end(), [](const Shape& a, const Shape& b) { return a.batch < b.batch; });
  const DeviceInfo& hw = evaluator.evaluator().device();
  BatchCurve curve;
  std::vector<MeasureRequest> requests;
  std::vector<int> slot;
  for (const auto& s : shapes) {
    BatchPoint p;
    p.shape = s;
    p.decision = policy.decide(s, hw);
    slot.push_back(p.decision.ok() ? static_cast<int>(requests.size()) : -1);
    if (p.decision.ok()) requests.push_back({s, p.decision.decision});
    curve.points.push_back(std::move(p));
  }
  const auto measured = evaluator.measure(requests, progress, stop);
  const BatchPoint* previous = nullptr;
  double worst = 0;
  for (std::size_t i = 0; i < curve.points.size(); ++i) {
    BatchPoint& p = curve.points[i];
    if (slot[i] < 0) {
      previous = nullptr;
      continue;
    }
    p.measurement = measured[slot[i]];
    if (!p.measurement->ok) {
      previous = nullptr;
      continue;
    }
    if (previous && previous->shape.batch < p.shape.batch) {
      p.step = p.measurement->median_us / previous->measurement->median_us;
      p.excess = *p.step / (double(p.shape.batch) / previous->shape.batch) - 1;
      if (curve.worst < 0 || *p.excess > worst) {
        worst = *p.excess;
        curve.worst = static_cast<int>(i);
      }
    }
    previous = &p;
  }
  return curve;
}

nlohmann::json to_json(const SplitCurve& c) {
  nlohmann::json j = {{"shape", to_json(c.shape)}, {"points", nlohmann::json::array()}};
  for (const auto& p : c.points) {
    nlohmann::json row = to_json(p.decision);
    if (p.measurement.ok) {
      row["median_us"] = p.measurement.median_us;
      row["p10_us"] = p.measurement.p10_us;
      row["p90_us"] = p.measurement.p90_us;
    } else {
      row["error"] = p.measurement.error;
    }
    j["points"].push_back(row);
  }
  if (c.best >= 0) j["best"] = to_json(c.points[c.best].decision);
  return j;
}

nlohmann::json to_json(const BatchCurve& c) {
  nlohmann::json j = {{"points", nlohmann::json::array()}};
  for (const auto& p : c.points) {
    nlohmann::json row = {{"shape", to_json(p.shape)}};
    if (p.decision.ok()) row["decision"] = to_json(p.decision.decision);
    else row["error"] = p.decision.error;
    if (p.measurement && p.measurement->ok) row["median_us"] = p.measurement->median_us;
    else if (p.measurement) row["error"] = p.measurement->error;
    if (p.step) row["step"] = *p.step;
    if (p.excess) row["excess"] = *p.excess;
    j["points"].push_back(row);
  }
  if (c.worst >= 0) j["worst_excess"] = *c.points[c.worst].excess;
  return j;
}

}  // namespace evodispatch

#include <evodispatch/search/bench.hpp>

#include <algorithm>
#include <vector>

#include <evodispatch/search/fitness.hpp>

namespace evodispatch {

void summarise(BenchReport& r) {
  BenchSummary& s = r.summary;
  s.shapes = static_cast<int>(r.rows.size());
  std::vector<double> speedups;
  for (const auto& row : r.rows) {
    if (!row.error.empty()) ++s.failed;
    if (row.baseline && row.baseline->ok() && row.candidate.ok() && !(row.baseline->decision == row.candidate.decision))
      ++s.changed;
    if (row.candidate_m && row.candidate_m->ok) s.candidate_total_us += row.candidate_m->median_us;
    if (!row.speedup) continue;
    speedups.push_back(*row.speedup);
    if (!s.worst_speedup || *row.speedup < *s.worst_speedup) {
      s.worst_speedup = row.speedup;
      s.worst_shape = row.shape;
    }
    if (!s.best_speedup || *row.speedup > *s.best_speedup) s.best_speedup = row.speedup;
  }
  if (!speedups.empty()) s.geomean_speedup = search::geomean(speedups);
}

BenchReport run_bench(Policy& candidate, Policy* baseline, const Workload& workload, StoredEvaluator& evaluator,
                      const std::function<void(std::size_t, std::size_t)>& progress,
                      const std::function<bool()>& stop) {
  const DeviceInfo& hw = evaluator.evaluator().device();
  BenchReport report;
  std::vector<MeasureRequest> requests;
  // Where each row's measurements sit in `requests` (-1: nothing to measure).
  std::vector<std::pair<int, int>> slots;
  for (const auto& shape : workload.shapes) {
    BenchRow row;
    row.shape = shape;
    row.candidate = candidate.decide(shape, hw);
    if (baseline) row.baseline = baseline->decide(shape, hw);
    std::pair<int, int> slot{-1, -1};
    if (!row.candidate.ok()) {
      row.error = row.candidate.error;
    } else if (row.baseline && !row.baseline->ok()) {
      row.error = "baseline: " + row.baseline->error;
    } else {
      slot.first = static_cast<int>(requests.size());
      requests.push_back({shape, row.candidate.decision});
      if (row.baseline) {
        slot.second = static_cast<int>(requests.size());
        requests.push_back({shape, row.baseline->decision});
      }
    }
    slots.push_back(slot);
    report.rows.push_back(std::move(row));
  }

  const auto measured = evaluator.measure(requests, progress, stop);
  for (std::size_t i = 0; i < report.rows.size(); ++i) {
    BenchRow& row = report.rows[i];
    if (slots[i].first < 0) continue;
    row.candidate_m = measured[slots[i].first];
    if (!row.candidate_m->ok) row.error = row.candidate_m->error;
    if (slots[i].second < 0) continue;
    row.baseline_m = measured[slots[i].second];
    if (!row.baseline_m->ok && row.error.empty()) row.error = "baseline: " + row.baseline_m->error;
    if (row.candidate_m->ok && row.baseline_m->ok && row.candidate_m->median_us > 0)
      row.speedup = row.baseline_m->median_us / row.candidate_m->median_us;
  }
  summarise(report);
  report.stats = evaluator.stats();
  return report;
}

nlohmann::json to_json(const BenchRow& r) {
  nlohmann::json j = {{"shape", to_json(r.shape)}};
  if (r.candidate.ok()) j["decision"] = to_json(r.candidate.decision);
  if (r.baseline && r.baseline->ok()) j["baseline_decision"] = to_json(r.baseline->decision);
  if (r.candidate_m && r.candidate_m->ok) {
    j["median_us"] = r.candidate_m->median_us;
    j["p10_us"] = r.candidate_m->p10_us;
    j["p90_us"] = r.candidate_m->p90_us;
  }
  if (r.baseline_m && r.baseline_m->ok) j["baseline_median_us"] = r.baseline_m->median_us;
  if (r.speedup) j["speedup"] = *r.speedup;
  if (!r.error.empty()) j["error"] = r.error;
  return j;
}

nlohmann::json to_json(const BenchSummary& s) {
  nlohmann::json j = {{"shapes", s.shapes}, {"failed", s.failed}, {"changed", s.changed},
                      {"candidate_total_us", s.candidate_total_us}};
  if (s.geomean_speedup) j["geomean_speedup"] = *s.geomean_speedup;
  if (s.worst_speedup) j["worst_speedup"] = *s.worst_speedup;
  if (s.best_speedup) j["best_speedup"] = *s.best_speedup;
  if (s.worst_shape) j["worst_shape"] = to_json(*s.worst_shape);
  return j;
}

}  // namespace evodispatch

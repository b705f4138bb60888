#include <evodispatch/search/oracle.hpp>

#include <algorithm>

namespace evodispatch {

std::vector<int> DecisionSpace::default_splits() {
  std::vector<int> out;
  for (int k = 1; k <= 64; ++k) out.push_back(k);
  return out;
}

std::vector<Decision> DecisionSpace::decisions(const Shape& shape) const {
  std::vector<Decision> out;
  const bool grouped = features(shape).qpk > 1;
  for (int k : splits)
    for (bool pack : pack_gqa)
      for (int margin : sm_margins) {
        const Decision d = resolve(Decision{k, grouped ? pack : false, margin}, shape);
        if (std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
      }
  return out;
}

BenchReport run_oracle_bench(const DecisionSpace& space, Policy* baseline, const Workload& workload,
                             StoredEvaluator& evaluator, const std::function<void(std::size_t, std::size_t)>& progress,
                             const std::function<bool()>& stop) {
  const DeviceInfo& hw = evaluator.evaluator().device();
  std::vector<MeasureRequest> requests;
  struct Slots {
    std::size_t first = 0, count = 0;
    int baseline = -1;
  };
  std::vector<Slots> slots;
  BenchReport report;
  for (const auto& shape : workload.shapes) {
    BenchRow row;
    row.shape = shape;
    Slots s;
    s.first = requests.size();
    for (const auto& d : space.decisions(shape))
      if (!decision_error(d, hw)) requests.push_back({shape, d});
    s.count = requests.size() - s.first;
    if (s.count == 0) row.error = "the decision space holds no legal decision for this device";
    if (baseline) {
      row.baseline = baseline->decide(shape, hw);
      if (row.baseline->ok()) {
        s.baseline = static_cast<int>(requests.size());
        requests.push_back({shape, row.baseline->decision});
      } else if (row.error.empty()) {
        row.error = "baseline: " + row.baseline->error;
      }
    }
    slots.push_back(s);
    report.rows.push_back(std::move(row));
  }

  const auto measured = evaluator.measure(requests, progress, stop);
  for (std::size_t i = 0; i < report.rows.size(); ++i) {
    BenchRow& row = report.rows[i];
    const Slots& s = slots[i];
    // The baseline's own decision belongs to the oracle's space (last, so a tie keeps the
    // space's choice): whatever the bounded space misses, the oracle never loses to it.
    const Measurement* best = nullptr;
    auto consider = [&](const Measurement& m) {
      if (m.ok && (!best || m.median_us < best->median_us)) best = &m;
    };
    for (std::size_t j = s.first; j < s.first + s.count; ++j) consider(measured[j]);
    if (s.baseline >= 0) consider(measured[static_cast<std::size_t>(s.baseline)]);
    if (best) {
      row.candidate.decision = best->key.decision;
      row.candidate_m = *best;
    } else {
      if (row.error.empty()) row.error = "every decision failed: " + measured[s.first].error;
      row.candidate.error = row.error;
    }
    if (s.baseline >= 0) {
      row.baseline_m = measured[s.baseline];
      if (!row.baseline_m->ok && row.error.empty()) row.error = "baseline: " + row.baseline_m->error;
      if (best && row.baseline_m->ok) row.speedup = row.baseline_m->median_us / best->median_us;
    }
  }
  summarise(report);
  report.stats = evaluator.stats();
  return report;
}

}  // namespace evodispatch

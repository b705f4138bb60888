#include <evodispatch/search/run_shapes.hpp>

namespace evodispatch {

namespace {
// A measurement's decision (its key holds it resolved) and median, when it succeeded.
void take(const std::optional<Measurement>& m, std::optional<Decision>& decision, std::optional<double>& us) {
  if (!m) return;
  decision = m->key.decision;
  if (m->ok) us = m->median_us;
}
}  // namespace

std::vector<results::RunShapeRecord> run_shapes(const BenchReport& report) {
  std::vector<results::RunShapeRecord> out;
  for (const BenchRow& row : report.rows) {
    results::RunShapeRecord r;
    r.shape = row.shape;
    if (row.candidate.ok()) r.candidate = resolve(row.candidate.decision, row.shape);
    if (row.baseline && row.baseline->ok()) r.baseline = resolve(row.baseline->decision, row.shape);
    take(row.candidate_m, r.candidate, r.candidate_us);
    take(row.baseline_m, r.baseline, r.baseline_us);
    r.speedup = row.speedup;
    r.error = row.error;
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<results::RunShapeRecord> run_shapes(const RegressReport& report) {
  std::vector<results::RunShapeRecord> out;
  for (const RegressRow& row : report.rows) {
    results::RunShapeRecord r;
    r.shape = row.shape;
    r.candidate = row.heuristic;
    r.baseline = row.baseline;
    r.error = row.error;
    // The first comparison is what the report's figures are taken over.
    if (row.first && row.first->ok) {
      r.candidate_us = row.first->candidate_us;
      r.baseline_us = row.first->baseline_us;
      r.speedup = row.first->speedup;
    } else if (row.first && r.error.empty()) {
      r.error = row.first->error;
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<results::RunShapeRecord> run_shapes(const BatchCurve& curve) {
  std::vector<results::RunShapeRecord> out;
  for (const BatchPoint& p : curve.points) {
    results::RunShapeRecord r;
    r.shape = p.shape;
    if (p.decision.ok()) r.candidate = resolve(p.decision.decision, p.shape);
    else r.error = p.decision.error;
    take(p.measurement, r.candidate, r.candidate_us);
    if (p.measurement && !p.measurement->ok) r.error = p.measurement->error;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace evodispatch

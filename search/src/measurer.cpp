#include <evodispatch/search/measurer.hpp>

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include <evodispatch/results/measurements.hpp>

namespace evodispatch::search {

namespace {
constexpr double kFailed = std::numeric_limits<double>::quiet_NaN();

std::string shape_key(const Shape& s) { return to_json(s).dump(); }
}  // namespace

MeasureCache::MeasureCache(std::vector<Shape> shapes) : shapes_(std::move(shapes)), per_shape_(shapes_.size()) {
  for (std::size_t i = 0; i < shapes_.size(); ++i) index_.emplace(shape_key(shapes_[i]), static_cast<int>(i));
}

std::optional<double> MeasureCache::find(int shape, const Decision& d) const {
  const auto& m = per_shape_[static_cast<std::size_t>(shape)];
  auto it = m.find(decision_code(d));
  if (it == m.end()) return std::nullopt;
  return it->second;
}

void MeasureCache::put(int shape, const Decision& d, double us) {
  if (per_shape_[static_cast<std::size_t>(shape)].insert_or_assign(decision_code(d), us).second) ++size_;
}

int MeasureCache::index_of(const Shape& s) const {
  auto it = index_.find(shape_key(s));
  return it == index_.end() ? -1 : it->second;
}

Measurer::Measurer(results::Database& db, std::vector<Evaluator*> evaluators, TimingOptions timing,
                   std::vector<Shape> shapes, std::optional<std::int64_t> run_id)
    : stored_(db, std::move(evaluators), timing, false, run_id), cache_(std::move(shapes)) {}

MeasurerStats Measurer::stats() const {
  return {loaded_, stored_.stats().measured, stored_.stats().failed};
}

void Measurer::load() {
  results::MeasurementFilter f;
  f.device = fingerprint();
  f.kernel_build = kernel_build();
  f.measuring_protocol = stored_.evaluator().measuring_protocol();  // rows timed another way are not reused
  f.l2 = timing().l2;
  for (const auto& row : results::Measurements(stored_.db()).list(f)) {
    const int i = cache_.index_of(row.measurement.key.shape);
    if (i < 0) continue;
    cache_.put(i, row.measurement.key.decision, row.measurement.ok ? row.measurement.median_us : kFailed);
    ++loaded_;
  }
}

std::vector<double> Measurer::latencies(std::span<const LatencyRequest> requests, const std::function<bool()>& stop,
                                        const std::function<void(std::size_t, std::size_t)>& progress) {
  std::vector<double> out(requests.size(), kFailed);
  std::vector<LatencyRequest> todo;
  std::unordered_map<std::uint64_t, std::size_t> todo_index;  // (shape, decision) -> position in todo
  std::vector<std::size_t> waiting;                            // requests answered by todo
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const auto& r = requests[i];
    if (auto us = cache_.find(r.shape, r.decision)) {
      out[i] = *us;
      continue;
    }
    const std::uint64_t key = decision_code(r.decision) ^ (static_cast<std::uint64_t>(r.shape) << 40);
    if (todo_index.emplace(key, todo.size()).second) todo.push_back(r);
    waiting.push_back(i);
  }
  if (todo.empty()) return out;

  std::vector<MeasureRequest> missing;
  missing.reserve(todo.size());
  for (const auto& r : todo) missing.push_back({cache_.shapes()[static_cast<std::size_t>(r.shape)], r.decision});
  std::size_t count = 0;
  stored_.measure_now(missing, stop, [&](std::size_t i, const Measurement& m) {
    cache_.put(todo[i].shape, todo[i].decision, m.ok ? m.median_us : kFailed);
    if (progress) progress(++count, todo.size());
  });
  for (std::size_t i : waiting) out[i] = *cache_.find(requests[i].shape, requests[i].decision);
  return out;
}

}  // namespace evodispatch::search

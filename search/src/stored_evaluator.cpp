#include <evodispatch/search/stored_evaluator.hpp>

#include <chrono>
#include <map>

#include <nlohmann/json.hpp>

#include <evodispatch/results/measurements.hpp>

namespace evodispatch {

namespace {
// Batches writes so a fast evaluator (the simulator) does not pay one fsync per row,
// while a slow one (a GPU) still commits every row within a fraction of a second.
constexpr auto kFlushEvery = std::chrono::milliseconds(250);

std::string key_text(const MeasurementKey& k) { return to_json(k).dump(); }
}  // namespace

StoredEvaluator::StoredEvaluator(results::Database& db, Evaluator& evaluator, TimingOptions timing, bool remeasure,
                                 std::optional<std::int64_t> run_id)
    : db_(&db), evaluator_(&evaluator), timing_(timing), remeasure_(remeasure), run_id_(run_id) {}

std::vector<Measurement> StoredEvaluator::measure(std::span<const MeasureRequest> requests,
                                                  const std::function<void(std::size_t, std::size_t)>& progress,
                                                  const std::function<bool()>& stop) {
  results::Measurements store(*db_);
  std::vector<MeasurementKey> keys;
  keys.reserve(requests.size());
  for (const auto& r : requests) keys.push_back(evaluator_->key(r.shape, r.decision, timing_));

  std::vector<std::optional<Measurement>> found(keys.size());
  if (!remeasure_) found = store.find_many(keys);

  // Identical keys share one measurement.
  std::map<std::string, std::size_t> first_of_key;
  std::vector<Measurement> out(requests.size());
  std::vector<Measurement> pending;
  auto last_flush = std::chrono::steady_clock::now();
  auto flush = [&] {
    if (pending.empty()) return;
    store.put_many(pending, remeasure_, run_id_);
    pending.clear();
    last_flush = std::chrono::steady_clock::now();
  };

  std::size_t done = 0;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const std::string text = key_text(keys[i]);
    if (auto it = first_of_key.find(text); it != first_of_key.end()) {
      out[i] = out[it->second];
    } else if (found[i]) {
      out[i] = *found[i];
      ++stats_.reused;
      stats_.failed += out[i].ok ? 0 : 1;
    } else {
      if (stop && stop()) {
        flush();
        throw Stopped{};
      }
      out[i] = evaluator_->measure(requests[i].shape, requests[i].decision, timing_);
      ++stats_.measured;
      stats_.failed += out[i].ok ? 0 : 1;
      pending.push_back(out[i]);
      if (std::chrono::steady_clock::now() - last_flush > kFlushEvery) flush();
    }
    first_of_key.emplace(text, i);
    if (progress) progress(++done, requests.size());
  }
  flush();
  return out;
}

}  // namespace evodispatch

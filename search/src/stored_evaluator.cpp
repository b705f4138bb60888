#include <evodispatch/search/stored_evaluator.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include <evodispatch/results/measurements.hpp>

namespace evodispatch {

namespace {
// Batches writes so a fast evaluator (the simulator) does not pay one commit per row,
// while a slow one (a GPU) still commits every row within a fraction of a second.
constexpr auto kFlushEvery = std::chrono::milliseconds(250);

std::string key_text(const MeasurementKey& k) { return to_json(k).dump(); }

// Rows on their way to the store.
class PendingRows {
 public:
  PendingRows(results::Database& db, bool replace, std::optional<std::int64_t> run_id)
      : store_(db), replace_(replace), run_id_(run_id) {}
  void add(const Measurement& m) {
    rows_.push_back(m);
    if (std::chrono::steady_clock::now() - last_flush_ > kFlushEvery) flush();
  }
  void flush() {
    if (rows_.empty()) return;
    store_.put_many(rows_, replace_, run_id_);
    rows_.clear();
    last_flush_ = std::chrono::steady_clock::now();
  }

 private:
  results::Measurements store_;
  bool replace_;
  std::optional<std::int64_t> run_id_;
  std::vector<Measurement> rows_;
  std::chrono::steady_clock::time_point last_flush_ = std::chrono::steady_clock::now();
};
}  // namespace

StoredEvaluator::StoredEvaluator(results::Database& db, std::vector<Evaluator*> evaluators, TimingOptions timing,
                                 bool remeasure, std::optional<std::int64_t> run_id)
    : db_(&db), evaluators_(std::move(evaluators)), timing_(timing), remeasure_(remeasure), run_id_(run_id) {
  if (evaluators_.empty()) throw InputError("no device to measure on");
  const Evaluator& first = *evaluators_.front();
  for (const auto* e : evaluators_)
    if (e->fingerprint() != first.fingerprint() || e->kernel_build() != first.kernel_build())
      throw InputError("--device: " + e->spec() + " measures " + e->fingerprint() + " but " + first.spec() +
                       " measures " + first.fingerprint() + "; the workers of one search must be the same device model");
}

StoredEvaluator::StoredEvaluator(results::Database& db, Evaluator& evaluator, TimingOptions timing, bool remeasure,
                                 std::optional<std::int64_t> run_id)
    : StoredEvaluator(db, std::vector<Evaluator*>{&evaluator}, timing, remeasure, run_id) {}

std::vector<Measurement> StoredEvaluator::measure(std::span<const MeasureRequest> requests,
                                                  const std::function<void(std::size_t, std::size_t)>& progress,
                                                  const std::function<bool()>& stop) {
  std::vector<MeasurementKey> keys;
  keys.reserve(requests.size());
  for (const auto& r : requests) keys.push_back(evaluator().key(r.shape, r.decision, timing_));
  std::vector<std::optional<Measurement>> found(keys.size());
  if (!remeasure_) found = results::Measurements(*db_).find_many(keys);

  // Identical keys share one measurement: `first[i]` is the request that answers i.
  std::map<std::string, std::size_t> first_of_key;
  std::vector<std::size_t> first(requests.size());
  std::vector<Measurement> out(requests.size());
  std::vector<std::size_t> todo;
  std::size_t done = 0;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const auto [it, fresh] = first_of_key.emplace(key_text(keys[i]), i);
    first[i] = it->second;
    if (!fresh) continue;
    if (!found[i]) {
      todo.push_back(i);
      continue;
    }
    out[i] = std::move(*found[i]);
    ++stats_.reused;
    stats_.failed += out[i].ok ? 0 : 1;
  }
  done = requests.size() - todo.size();
  if (progress && done) progress(done, requests.size());

  std::vector<MeasureRequest> missing;
  for (std::size_t i : todo) missing.push_back(requests[i]);
  measure_now(missing, stop, [&](std::size_t k, const Measurement& m) {
    out[todo[k]] = m;
    if (progress) progress(++done, requests.size());
  });
  for (std::size_t i = 0; i < requests.size(); ++i)
    if (first[i] != i) out[i] = out[first[i]];
  return out;
}

void StoredEvaluator::measure_now(std::span<const MeasureRequest> requests, const std::function<bool()>& stop,
                                  const std::function<void(std::size_t, const Measurement&)>& on_row) {
  if (requests.empty()) return;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<std::size_t, Measurement>> arrived;  // guarded by mu
  std::size_t active = evaluators_.size();                  // guarded by mu
  std::atomic<std::size_t> next{0};
  std::atomic<bool> halt{false};

  auto worker = [&](Evaluator* ev) {
    for (;;) {
      {
        std::lock_guard lock(mu);
        if (!halt && stop && stop()) halt = true;
      }
      if (halt) break;
      const std::size_t i = next.fetch_add(1);
      if (i >= requests.size()) break;
      const auto& r = requests[i];
      Measurement m;
      try {
        m = ev->measure(r.shape, r.decision, timing_);
      } catch (const std::exception& e) {
        // A worker that dies mid-measurement: the row records it as failed.
        m = Measurement{};
        m.key = ev->key(r.shape, r.decision, timing_);
        m.error = std::string("the evaluator failed: ") + e.what();
      }
      std::lock_guard lock(mu);
      arrived.emplace_back(i, std::move(m));
      cv.notify_one();
    }
    std::lock_guard lock(mu);
    --active;
    cv.notify_one();
  };

  std::vector<std::thread> threads;
  for (Evaluator* ev : evaluators_) threads.emplace_back(worker, ev);
  PendingRows pending(*db_, remeasure_, run_id_);
  std::size_t finished = 0;
  std::exception_ptr failure;
  std::unique_lock lock(mu);
  for (;;) {
    cv.wait(lock, [&] { return !arrived.empty() || active == 0; });
    while (!arrived.empty()) {
      auto [i, m] = std::move(arrived.front());
      arrived.pop_front();
      ++finished;
      lock.unlock();
      if (!failure) {
        try {
          ++stats_.measured;
          stats_.failed += m.ok ? 0 : 1;
          pending.add(m);
          on_row(i, m);
        } catch (...) {
          // Stop the workers and rethrow once they are joined.
          failure = std::current_exception();
          halt = true;
        }
      }
      lock.lock();
    }
    if (active == 0 && arrived.empty()) break;
  }
  lock.unlock();
  for (auto& t : threads) t.join();
  pending.flush();
  if (failure) std::rethrow_exception(failure);
  if (finished != requests.size()) throw Stopped{};
}

}  // namespace evodispatch

#include <evodispatch/search/measurer.hpp>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include <evodispatch/results/measurements.hpp>

namespace evodispatch::search {

namespace {
// A slow evaluator (a GPU) still commits every row within a fraction of a second; a
// fast one (the simulator) does not pay one commit per row.
constexpr auto kFlushEvery = std::chrono::milliseconds(250);
constexpr double kFailed = std::numeric_limits<double>::quiet_NaN();

std::string shape_key(const Shape& s) { return to_json(s).dump(); }
}  // namespace

MeasureCache::MeasureCache(std::vector<Shape> shapes) : shapes_(std::move(shapes)), per_shape_(shapes_.size()) {
  for (std::size_t i = 0; i < shapes_.size(); ++i) index_.emplace(shape_key(shapes_[i]), static_cast<int>(i));
}

std::uint64_t MeasureCache::code(const Decision& d) {
  const std::uint64_t pack = !d.pack_gqa ? 0 : (*d.pack_gqa ? 1 : 2);
  return static_cast<std::uint64_t>(d.num_splits) | (pack << 16) | (static_cast<std::uint64_t>(d.sm_margin) << 20);
}

std::optional<double> MeasureCache::find(int shape, const Decision& d) const {
  const auto& m = per_shape_[static_cast<std::size_t>(shape)];
  auto it = m.find(code(d));
  if (it == m.end()) return std::nullopt;
  return it->second;
}

void MeasureCache::put(int shape, const Decision& d, double us) {
  if (per_shape_[static_cast<std::size_t>(shape)].insert_or_assign(code(d), us).second) ++size_;
}

int MeasureCache::index_of(const Shape& s) const {
  auto it = index_.find(shape_key(s));
  return it == index_.end() ? -1 : it->second;
}

Measurer::Measurer(results::Database& db, std::vector<Evaluator*> evaluators, TimingOptions timing,
                   std::vector<Shape> shapes, std::optional<std::int64_t> run_id)
    : db_(&db), evaluators_(std::move(evaluators)), timing_(timing), run_id_(run_id), cache_(std::move(shapes)) {
  if (evaluators_.empty()) throw InputError("no device to measure on");
  for (const auto* e : evaluators_)
    if (e->fingerprint() != evaluators_.front()->fingerprint() || e->kernel_build() != evaluators_.front()->kernel_build())
      throw InputError("--device: " + e->spec() + " measures " + e->fingerprint() + " but " +
                       evaluators_.front()->spec() + " measures " + evaluators_.front()->fingerprint() +
                       "; the workers of one search must be the same device model");
}

void Measurer::load() {
  results::MeasurementFilter f;
  f.device = fingerprint();
  f.kernel_build = kernel_build();
  f.measuring_protocol = evaluators_.front()->measuring_protocol();  // rows timed another way are not reused
  f.l2 = timing_.l2;
  for (const auto& row : results::Measurements(*db_).list(f)) {
    const int i = cache_.index_of(row.measurement.key.shape);
    if (i < 0) continue;
    cache_.put(i, row.measurement.key.decision, row.measurement.ok ? row.measurement.median_us : kFailed);
    ++stats_.loaded;
  }
}

bool Measurer::run_workers(std::span<const LatencyRequest> todo, const std::function<bool()>& stop,
                           const std::function<void(std::size_t, Measurement&&)>& on_done) {
  if (todo.empty()) return true;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<std::size_t, Measurement>> done;  // guarded by mu
  std::size_t active = evaluators_.size();               // guarded by mu
  std::atomic<std::size_t> next{0};
  std::atomic<bool> halt{false};

  auto worker = [&](Evaluator* ev) {
    while (!halt.load()) {
      const std::size_t i = next.fetch_add(1);
      if (i >= todo.size()) break;
      const auto& r = todo[i];
      const Shape& shape = cache_.shapes()[static_cast<std::size_t>(r.shape)];
      Measurement m;
      try {
        m = ev->measure(shape, r.decision, timing_);
      } catch (const std::exception& e) {
        // A worker that dies mid-measurement: the row records it as failed.
        m = Measurement{};
        m.key = ev->key(shape, r.decision, timing_);
        m.error = std::string("the evaluator failed: ") + e.what();
      }
      std::lock_guard lock(mu);
      done.emplace_back(i, std::move(m));
      cv.notify_one();
    }
    std::lock_guard lock(mu);
    --active;
    cv.notify_one();
  };

  std::vector<std::thread> threads;
  for (Evaluator* ev : evaluators_) threads.emplace_back(worker, ev);
  std::size_t finished = 0;
  bool stopped = false;
  std::exception_ptr failure;
  std::unique_lock lock(mu);
  for (;;) {
    cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return !done.empty() || active == 0; });
    while (!done.empty()) {
      auto item = std::move(done.front());
      done.pop_front();
      ++finished;
      lock.unlock();
      if (!failure) {
        try {
          on_done(item.first, std::move(item.second));
        } catch (...) {
          // Stop the workers and rethrow once they are joined.
          failure = std::current_exception();
          halt = true;
        }
      }
      lock.lock();
    }
    if (!stopped && stop && stop()) {
      stopped = true;
      halt = true;
    }
    if (active == 0 && done.empty()) break;
  }
  lock.unlock();
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
  return finished == todo.size();
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
    const std::uint64_t key = MeasureCache::code(r.decision) ^ (static_cast<std::uint64_t>(r.shape) << 40);
    if (todo_index.emplace(key, todo.size()).second) todo.push_back(r);
    waiting.push_back(i);
  }
  if (todo.empty()) return out;

  results::Measurements store(*db_);
  std::vector<Measurement> pending;
  auto last_flush = std::chrono::steady_clock::now();
  auto flush = [&] {
    if (pending.empty()) return;
    store.put_many(pending, false, run_id_);
    pending.clear();
    last_flush = std::chrono::steady_clock::now();
  };
  std::size_t count = 0;
  const bool complete = run_workers(todo, stop, [&](std::size_t i, Measurement&& m) {
    ++stats_.measured;
    if (!m.ok) ++stats_.failed;
    cache_.put(todo[i].shape, todo[i].decision, m.ok ? m.median_us : kFailed);
    pending.push_back(std::move(m));
    if (std::chrono::steady_clock::now() - last_flush > kFlushEvery) flush();
    if (progress) progress(++count, todo.size());
  });
  flush();
  if (!complete) throw Stopped{};
  for (std::size_t i : waiting) out[i] = *cache_.find(requests[i].shape, requests[i].decision);
  return out;
}

std::vector<Measurement> Measurer::remeasure(std::span<const LatencyRequest> requests, const std::function<bool()>& stop) {
  std::vector<Measurement> out(requests.size());
  const bool complete = run_workers(requests, stop, [&](std::size_t i, Measurement&& m) { out[i] = std::move(m); });
  if (!complete) throw Stopped{};
  return out;
}

}  // namespace evodispatch::search

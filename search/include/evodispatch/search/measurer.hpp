#pragma once
// Latencies for the search, through the results store (DESIGN.md §1, §4).
//
// The store's rows for the run's device are read once, at start, into an in-memory
// cache keyed by (shape, resolved decision): a store lookup costs about 10 us, a cache
// lookup nanoseconds, and the search asks for each pair thousands of times. Missing
// pairs go to the evaluators, one worker thread per evaluator (one per GPU), and each
// row is committed to the store as it arrives, so a killed search loses at most the
// measurements in flight and never measures anything twice.
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <evodispatch/evaluator/evaluator.hpp>
#include <evodispatch/results/database.hpp>

namespace evodispatch::search {

// Latencies by (shape index, resolved decision). NaN: measured, and it failed.
class MeasureCache {
 public:
  explicit MeasureCache(std::vector<Shape> shapes);
  static std::uint64_t code(const Decision& resolved);
  std::optional<double> find(int shape, const Decision& resolved) const;
  void put(int shape, const Decision& resolved, double us);
  // The index of a shape, or -1 when it is not one of the cache's shapes.
  int index_of(const Shape&) const;
  std::size_t size() const { return size_; }
  const std::vector<Shape>& shapes() const { return shapes_; }

 private:
  std::vector<Shape> shapes_;
  std::unordered_map<std::string, int> index_;
  std::vector<std::unordered_map<std::uint64_t, double>> per_shape_;
  std::size_t size_ = 0;
};

struct LatencyRequest {
  int shape = 0;      // index into the measurer's shapes
  Decision decision;  // resolved
};

struct MeasurerStats {
  std::int64_t loaded = 0;    // rows read from the store at start
  std::int64_t measured = 0;  // taken by the evaluators in this process
  std::int64_t failed = 0;    // of those, failed rows
};

class Measurer {
 public:
  // Every evaluator must measure the same device (fingerprint) with the same kernel
  // build: they are workers of one device model. Throws InputError otherwise.
  Measurer(results::Database& db, std::vector<Evaluator*> evaluators, TimingOptions timing, std::vector<Shape> shapes,
           std::optional<std::int64_t> run_id);

  // Reads the store's rows of this device, kernel build and L2 mode into the cache.
  void load();

  // One latency per request (NaN: failed). Missing ones are measured (identical
  // requests once) and stored as they arrive. When stop() turns true no new
  // measurement starts; those in flight are stored and Stopped is thrown.
  std::vector<double> latencies(std::span<const LatencyRequest> requests, const std::function<bool()>& stop = {},
                                const std::function<void(std::size_t, std::size_t)>& progress = {});
  struct Stopped {};

  // A fresh measurement of each (shape, decision), bypassing cache and store: the
  // confirmation's re-measurements. Spread over the evaluators like latencies().
  std::vector<Measurement> remeasure(std::span<const LatencyRequest> requests, const std::function<bool()>& stop = {});

  const MeasureCache& cache() const { return cache_; }
  const MeasurerStats& stats() const { return stats_; }
  const DeviceInfo& device() const { return evaluators_.front()->device(); }
  const std::string& fingerprint() const { return evaluators_.front()->fingerprint(); }
  const std::string& kernel_build() const { return evaluators_.front()->kernel_build(); }
  std::size_t workers() const { return evaluators_.size(); }
  const TimingOptions& timing() const { return timing_; }

 private:
  // Measures `todo` across the evaluators; `on_done(i, m)` runs on this thread as rows
  // arrive (in any order). Returns false when stopped before all were measured.
  bool run_workers(std::span<const LatencyRequest> todo, const std::function<bool()>& stop,
                   const std::function<void(std::size_t, Measurement&&)>& on_done);

  results::Database* db_;
  std::vector<Evaluator*> evaluators_;
  TimingOptions timing_;
  std::optional<std::int64_t> run_id_;
  MeasureCache cache_;
  MeasurerStats stats_;
};

}  // namespace evodispatch::search

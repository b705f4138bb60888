#pragma once
// Latencies for the search (DESIGN.md §1, §4): an in-memory cache in front of the
// store. The store's rows for the run's device are read once, at start, into a cache
// keyed by (shape, resolved decision): a store lookup costs about 10 us, a cache lookup
// nanoseconds, and the search asks for each pair thousands of times. Missing pairs are
// measured through the StoredEvaluator, which stores each row as it arrives.
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <evodispatch/evaluator/evaluator.hpp>
#include <evodispatch/results/database.hpp>
#include <evodispatch/search/stored_evaluator.hpp>

namespace evodispatch::search {

// Latencies by (shape index, resolved decision). NaN: measured, and it failed.
class MeasureCache {
 public:
  explicit MeasureCache(std::vector<Shape> shapes);
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
  // The evaluators are workers of one device model (StoredEvaluator's rule).
  Measurer(results::Database& db, std::vector<Evaluator*> evaluators, TimingOptions timing, std::vector<Shape> shapes,
           std::optional<std::int64_t> run_id);

  // Reads the store's rows of this device, kernel build and L2 mode into the cache.
  void load();

  // One latency per request (NaN: failed). Missing ones are measured through the store
  // (identical requests once). When stop() turns true no new measurement starts; those
  // in flight are stored and MeasurementStopped is thrown.
  std::vector<double> latencies(std::span<const LatencyRequest> requests, const std::function<bool()>& stop = {},
                                const std::function<void(std::size_t, std::size_t)>& progress = {});

  const MeasureCache& cache() const { return cache_; }
  MeasurerStats stats() const;
  const DeviceInfo& device() const { return stored_.evaluator().device(); }
  const std::string& fingerprint() const { return stored_.evaluator().fingerprint(); }
  const std::string& kernel_build() const { return stored_.evaluator().kernel_build(); }
  std::size_t workers() const { return stored_.workers(); }
  const TimingOptions& timing() const { return stored_.timing(); }

 private:
  StoredEvaluator stored_;
  MeasureCache cache_;
  std::int64_t loaded_ = 0;
};

}  // namespace evodispatch::search

#pragma once
// The store in front of the evaluators (DESIGN.md §1, §4): asks the results database
// which (shape, decision) pairs are already measured, hands only the missing ones to the
// evaluators (one worker thread each: one per GPU), and stores what comes back as it
// arrives — so an interrupted run loses at most the measurements in flight and nothing
// is ever measured twice. The only class that writes measurements; the search's
// latency cache (measurer.hpp) measures through it.
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include <evodispatch/evaluator/evaluator.hpp>
#include <evodispatch/results/database.hpp>

namespace evodispatch {

struct MeasureRequest {
  Shape shape;
  Decision decision;
};

struct MeasureStats {
  int reused = 0;    // found in the store
  int measured = 0;  // taken now (failed ones included)
  int failed = 0;    // rows with ok = false, reused or new
};

// Thrown when stop() turned true before every request was measured: the rows taken so
// far are stored.
struct MeasurementStopped {};

class StoredEvaluator {
 public:
  // Every evaluator must measure the same device (fingerprint) with the same kernel
  // build: they are workers of one device model. Throws InputError otherwise.
  // `remeasure` measures again and replaces stored rows; `run_id` tags new rows.
  StoredEvaluator(results::Database& db, std::vector<Evaluator*> evaluators, TimingOptions timing,
                  bool remeasure = false, std::optional<std::int64_t> run_id = std::nullopt);
  StoredEvaluator(results::Database& db, Evaluator& evaluator, TimingOptions timing, bool remeasure = false,
                  std::optional<std::int64_t> run_id = std::nullopt);

  // One measurement per request, in order. Identical requests are measured once.
  // `progress(done, total)` is called as rows are found or arrive; when `stop()` turns
  // true the rows taken so far are committed and Stopped is thrown.
  std::vector<Measurement> measure(std::span<const MeasureRequest> requests,
                                   const std::function<void(std::size_t, std::size_t)>& progress = {},
                                   const std::function<bool()>& stop = {});

  // Measures every request now, without asking the store, spread over the evaluators;
  // each row is stored as it arrives and handed to `on_row(index, row)` on this thread.
  // `stop` is polled before each measurement starts (never from two threads at once).
  void measure_now(std::span<const MeasureRequest> requests, const std::function<bool()>& stop,
                   const std::function<void(std::size_t, const Measurement&)>& on_row);

  using Stopped = MeasurementStopped;

  const MeasureStats& stats() const { return stats_; }
  Evaluator& evaluator() { return *evaluators_.front(); }
  const Evaluator& evaluator() const { return *evaluators_.front(); }
  std::size_t workers() const { return evaluators_.size(); }
  const TimingOptions& timing() const { return timing_; }
  results::Database& db() { return *db_; }

 private:
  results::Database* db_;
  std::vector<Evaluator*> evaluators_;
  TimingOptions timing_;
  bool remeasure_;
  std::optional<std::int64_t> run_id_;
  MeasureStats stats_;
};

}  // namespace evodispatch

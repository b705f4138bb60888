#pragma once
// The store in front of the evaluator (DESIGN.md §1, §4): asks the results database
// which (shape, decision) pairs are already measured, hands only the missing ones to
// the evaluator, and stores what comes back as it arrives — so an interrupted run
// loses at most the measurement in flight and nothing is ever measured twice.
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

class StoredEvaluator {
 public:
  // `remeasure` measures again and replaces stored rows; `run_id` tags new rows.
  StoredEvaluator(results::Database& db, Evaluator& evaluator, TimingOptions timing, bool remeasure = false,
                  std::optional<std::int64_t> run_id = std::nullopt);

  // One measurement per request, in order. Identical requests are measured once.
  // `progress(done, total)` is called as rows arrive; when `stop()` turns true the rows
  // taken so far are committed and Stopped is thrown.
  std::vector<Measurement> measure(std::span<const MeasureRequest> requests,
                                   const std::function<void(std::size_t, std::size_t)>& progress = {},
                                   const std::function<bool()>& stop = {});

  struct Stopped {};

  const MeasureStats& stats() const { return stats_; }
  Evaluator& evaluator() { return *evaluator_; }

 private:
  results::Database* db_;
  Evaluator* evaluator_;
  TimingOptions timing_;
  bool remeasure_;
  std::optional<std::int64_t> run_id_;
  MeasureStats stats_;
};

}  // namespace evodispatch

#pragma once
// Interleaved A/B comparisons of a candidate against a baseline on one shape
// (DESIGN.md §4): the confirmations of a search's top candidates and the rows of a
// regression report.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <evodispatch/evaluator/evaluator.hpp>
#include <evodispatch/evaluator/measurement.hpp>
#include <evodispatch/heuristics/contract.hpp>
#include <evodispatch/results/database.hpp>

namespace evodispatch::results {

// Which side of Evaluator::compare(shape, a, b) ran the baseline. The evaluator's ratio is
// time(a) / time(b); a row's speedup is always baseline / candidate, whatever the side.
enum class BaselineSide { a, b };

struct ComparisonRecord {
  std::int64_t id = 0;                     // filled on insert / read
  std::int64_t run_id = 0;
  std::optional<std::int64_t> program_id;  // unset for a heuristic that is not a stored program
  Shape shape;
  std::string device;                      // fingerprint
  std::string kernel_build;                // hash
  L2Mode l2 = L2Mode::cold;
  Decision candidate;                      // stored resolved
  Decision baseline;                       // stored resolved
  BaselineSide baseline_side = BaselineSide::a;  // how the evaluator was called
  int attempt = 1;                         // 2: the re-measurement that confirms a first result
  bool ok = false;
  std::string error;
  double candidate_us = 0;                 // medians of the interleaved replays
  double baseline_us = 0;
  double speedup = 0;                      // baseline / candidate: median of the pairwise ratios
  double speedup_lo = 0;                   // its confidence interval
  double speedup_hi = 0;
  int pairs = 0;                           // interleaved pairs measured
  nlohmann::json details = nlohmann::json::object();
  std::string created_at;                  // filled on read
};

// Fills the measured part of a row (ok, error, pairs, both medians, the speedup
// baseline / candidate and its interval, baseline_side) from an evaluator comparison
// whose baseline ran on `side`. The one place a comparison's direction is turned into a
// speedup. A ratio of 0 is a failed row.
void set_measured(ComparisonRecord&, const Comparison&, BaselineSide side);

class Comparisons {
 public:
  explicit Comparisons(Database& db) : db_(&db) {}
  // Inserts a row. (run, program, shape, attempt) is unique: a duplicate is a DbError.
  std::int64_t insert(const ComparisonRecord&);
  // A run's rows in insertion order, optionally those of one program only.
  std::vector<ComparisonRecord> list_by_run(std::int64_t run_id,
                                            std::optional<std::int64_t> program_id = std::nullopt) const;

 private:
  Database* db_;
};

}  // namespace evodispatch::results

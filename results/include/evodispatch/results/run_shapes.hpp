#pragma once
// What a run found on each of its shapes (schema version 4): the candidate's, the
// baseline's and the oracle's decisions and times, and the speedups the run reported.
// Written once when a run finishes; read by `results run`, `results compare` and the report.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <evodispatch/heuristics/contract.hpp>
#include <evodispatch/results/database.hpp>

namespace evodispatch::results {

// "workload": a bench, sweep or regress shape; the others are a search's splits.
enum class ShapeSplit { workload, train, validation, test };
std::string_view to_string(ShapeSplit);
std::optional<ShapeSplit> parse_shape_split(std::string_view);

struct RunShapeRecord {
  ShapeSplit split = ShapeSplit::workload;
  Shape shape;
  std::optional<Decision> candidate, baseline, oracle;  // resolved (pack_gqa set)
  std::optional<double> candidate_us, baseline_us, oracle_us;
  std::optional<double> speedup;         // baseline over candidate, as the run reported it
  std::optional<double> oracle_speedup;  // baseline over the oracle
  std::string error;                     // why a part is missing, if one is
};

class RunShapes {
 public:
  explicit RunShapes(Database& db) : db_(&db) {}
  // Stores the rows of `run_id`, replacing any row of the same (split, shape), in one
  // transaction (a savepoint inside the caller's).
  void put(std::int64_t run_id, std::span<const RunShapeRecord>);
  // In split order (train, validation, test, workload), then by shape id.
  std::vector<RunShapeRecord> list(std::int64_t run_id) const;

 private:
  Database* db_;
};

}  // namespace evodispatch::results

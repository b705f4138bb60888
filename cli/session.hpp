#pragma once
// What a measuring verb opens: the evaluator, the database and a run row, with the
// device and the workload recorded, so every verb stores the same provenance.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <evodispatch/evaluator/evaluator.hpp>
#include <evodispatch/evaluator/workload.hpp>
#include <evodispatch/results/database.hpp>
#include <evodispatch/results/run_shapes.hpp>

namespace evodispatch::cli {

struct RunSession {
  std::unique_ptr<Evaluator> evaluator;
  results::Database db;
  std::int64_t run_id = 0;
  // Marks the run finished with its summary and per-shape rows, in one transaction; or
  // interrupted.
  void finish(const nlohmann::json& summary, const std::vector<results::RunShapeRecord>& shapes = {});
  void interrupted();
};

// Opens `db_path`, makes the evaluator for `device`, records the device, the workload
// (when given) and a run of `kind` with `config`.
RunSession open_run_session(const std::string& kind, const std::string& device, const std::string& db_path,
                            nlohmann::json config, const Workload* workload = nullptr);

}  // namespace evodispatch::cli

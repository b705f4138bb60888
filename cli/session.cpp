#include "session.hpp"

#include <evodispatch/results/results.hpp>
#include <evodispatch/search/replay_evaluator.hpp>

namespace evodispatch::cli {

void RunSession::finish(const nlohmann::json& summary, const std::vector<results::RunShapeRecord>& shapes) {
  db.in_transaction([&] {
    results::RunShapes(db).put(run_id, shapes);
    results::Runs(db).finish(run_id, results::RunStatus::finished, summary);
  });
}

void RunSession::interrupted() { results::Runs(db).finish(run_id, results::RunStatus::interrupted); }

RunSession open_run_session(const std::string& kind, const std::string& device, const std::string& db_path,
                            nlohmann::json config, const Workload* workload) {
  auto evaluator = search::make_any_evaluator(device);
  auto db = results::Database::open(db_path);
  results::RunRecord run;
  run.kind = kind;
  run.device = evaluator->fingerprint();
  run.kernel_build = evaluator->kernel_build();
  config["device"] = evaluator->spec();
  run.config = std::move(config);
  const std::int64_t run_id = db.in_transaction([&] {
    results::DeviceRecord device_row;
    device_row.fingerprint = evaluator->fingerprint();
    device_row.info = evaluator->device();
    results::Devices(db).upsert(device_row);
    if (workload) {
      nlohmann::json spec = {{"shapes", nlohmann::json::array()}};
      for (const auto& s : workload->shapes) spec["shapes"].push_back(to_json(s));
      run.workload_id = results::Workloads(db).upsert(workload->name, spec);
    }
    return results::Runs(db).create(run);
  });
  return RunSession{std::move(evaluator), std::move(db), run_id};
}

}  // namespace evodispatch::cli

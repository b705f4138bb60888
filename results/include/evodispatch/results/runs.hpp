#pragma once
// Runs: one row per bench, sweep, search, regress, calibrate or distill invocation.
// A search keeps its resumable state here (state), next to what it was asked to do
// (config) and what it concluded (summary).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <evodispatch/results/database.hpp>

namespace evodispatch::results {

// running: in progress, or killed (a run left "running" by a dead process is
// resumable); interrupted: stopped by Ctrl-C after committing; finished; failed.
enum class RunStatus { running, finished, failed, interrupted };
std::string_view to_string(RunStatus);
std::optional<RunStatus> parse_run_status(std::string_view);

struct RunRecord {
  std::int64_t id = 0;                       // filled by create / on read
  std::string kind;                          // "bench", "search", "sweep", "regress", ...
  RunStatus status = RunStatus::running;     // create() always starts a run as running
  nlohmann::json config = nlohmann::json::object();
  std::optional<std::int64_t> seed;
  std::string device;                        // fingerprint; empty: none
  std::string kernel_build;                  // hash of the build it measures; empty: none
  std::optional<std::int64_t> workload_id;   // Workloads::upsert
  nlohmann::json summary = nlohmann::json::object();  // final figures, set by finish()
  nlohmann::json state = nlohmann::json::object();    // resumable engine state
  std::string started_at;                    // filled on read
  std::optional<std::string> finished_at;    // filled on read
};

struct RunFilter {
  std::optional<std::string> kind;
  std::optional<RunStatus> status;
  std::optional<std::int64_t> limit;  // newest first
};

class Runs {
 public:
  explicit Runs(Database& db) : db_(&db) {}
  // Returns the new run's id; `kind` must not be empty.
  std::int64_t create(const RunRecord&);
  // Sets the final status, finished_at and the summary. DbError when there is no such run.
  void finish(std::int64_t id, RunStatus, const nlohmann::json& summary = nlohmann::json::object());
  // Changes the status only (e.g. back to running when resumed); clears finished_at
  // when the new status is running.
  void set_status(std::int64_t id, RunStatus);
  void save_state(std::int64_t id, const nlohmann::json& state);
  std::optional<RunRecord> get(std::int64_t id) const;
  std::vector<RunRecord> list(const RunFilter& = {}) const;

 private:
  Database* db_;
};

}  // namespace evodispatch::results

#pragma once
// The evolutionary search (DESIGN.md §5): islands of rule-list programs, MAP-Elites
// archives, the cascade (sandbox -> estimate -> measurement -> confirmation), a
// validation split that picks the winner, and a run that survives being killed.
//
// Durability: the search advances in steps. A step generates a batch of candidates from
// the stored state alone (the generator state is part of it), checks and scores them,
// and commits the new programs, their evaluations and the whole engine state in one
// transaction. Measurements are committed as they arrive (they are a cache keyed by
// what was measured, so a step repeated after a kill finds them and measures nothing
// twice). Killed at any instant, a resumed run repeats the interrupted step exactly; with
// a fixed seed on the simulator the winner does not depend on where it was killed or on
// how many workers measured.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <evodispatch/evaluator/evaluator.hpp>
#include <evodispatch/results/database.hpp>
#include <evodispatch/search/config.hpp>

namespace evodispatch::search {

struct SearchStatus {
  std::string phase;  // "setup", "search", "validation", "confirmation", "done"
  std::string message;  // what setup is doing
  std::int64_t run_id = 0;
  std::int64_t step = 0;
  std::int64_t evaluations = 0;      // programs scored or failed
  std::int64_t max_evaluations = 0;  // 0: no limit
  std::int64_t duplicates = 0;       // candidates equal to a program already seen
  std::int64_t failures = 0;         // sandbox or external-mutator failures
  std::int64_t measured = 0;         // measurements taken in this process
  std::size_t done = 0, total = 0;   // progress of the current setup task
  std::optional<double> best_fitness;  // training geomean of the best feasible program
  std::optional<double> best_worst;
  std::optional<double> best_oracle_fraction;
  double elapsed_s = 0;
  double minutes = 0;  // the configured limit, 0: none
};

struct EngineOptions {
  std::vector<Evaluator*> evaluators;  // one per device; at least one
  std::string device_spec;             // as the user gave it (stored with the run)
  std::function<bool()> stop;          // polled between units of work (Ctrl-C)
  std::function<void(const SearchStatus&)> progress;
};

// Thrown when stop() turned true: everything up to the last step is committed and the
// run is marked interrupted (resumable).
struct SearchInterrupted {
  std::int64_t run_id = 0;
};

class SearchEngine {
 public:
  // A new run (runs row created, status running). `seed` overrides the config's.
  static std::unique_ptr<SearchEngine> start(results::Database& db, SearchConfig config, EngineOptions options,
                                             std::optional<std::uint64_t> seed = std::nullopt);
  // Continues a search run that is running (its process died) or interrupted, from its
  // stored config and state. Throws InputError for a finished run or another device.
  static std::unique_ptr<SearchEngine> resume(results::Database& db, std::int64_t run_id, EngineOptions options);
  // The newest search run that is running or interrupted, if any.
  static std::optional<std::int64_t> newest_resumable(results::Database& db);
  // What `--resume` without an id continues: the newest resumable run, else the newest
  // finished one (a job script restarted after its search ended reports it), if any.
  static std::optional<std::int64_t> run_to_resume(results::Database& db);
  // The stored summary of a search run that has finished; nullopt for any other run.
  static std::optional<nlohmann::json> finished_summary(results::Database& db, std::int64_t run_id);

  ~SearchEngine();

  // Search steps until a stop condition holds, then the final phase (validation,
  // confirmation); marks the run finished and returns its summary (Runs::finish's).
  nlohmann::json run();
  // One committed step; false (and nothing done) when a stop condition holds.
  bool step();
  // The final phase and the summary (idempotent across kills, like the steps).
  nlohmann::json finish();

  std::int64_t run_id() const;
  const SearchConfig& config() const;
  SearchStatus status() const;

  struct Impl;

 private:
  explicit SearchEngine(std::unique_ptr<Impl>);
  std::unique_ptr<Impl> impl_;
};

}  // namespace evodispatch::search

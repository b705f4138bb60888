#pragma once
// The engine's state and helpers, shared by engine.cpp (setup, state, the loop),
// engine_step.cpp (one generation step) and engine_final.cpp (validation,
// confirmation, summary).
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include <evodispatch/evaluator/evaluator.hpp>
#include <evodispatch/evaluator/workload.hpp>
#include <evodispatch/results/database.hpp>
#include <evodispatch/search/archive.hpp>
#include <evodispatch/search/checker.hpp>
#include <evodispatch/search/config.hpp>
#include <evodispatch/search/engine.hpp>
#include <evodispatch/search/fitness.hpp>
#include <evodispatch/search/measurer.hpp>
#include <evodispatch/search/operators.hpp>
#include <evodispatch/search/program.hpp>
#include <evodispatch/search/rng.hpp>
#include <evodispatch/search/split.hpp>

namespace evodispatch::results {
struct ProgramRecord;
}

namespace evodispatch::search {

// Fills the program part of a row: its source with the base policy apart (stored once per
// run, results::ProgramRecord::base) and its rule list.
void set_program(results::ProgramRecord& row, const Program& p);

// What the engine remembers of one stored program.
struct Record {
  std::int64_t id = 0;
  std::string hash;
  bool has_program = false;  // false: a failed external attempt (no rules, no base)
  std::vector<Rule> rules;
  std::string base_name;
  std::string base_key;      // into Impl::bases
  std::string origin;
  int island = 0;
  int generation = 0;
  bool scored = false;       // measured on the training shapes
  bool feasible = false;
  double score = kFailedScore;
  double geomean = 0;
  double worst = 0;
  std::optional<double> oracle_fraction;
  std::vector<double> speedups;  // per training shape
  mutable std::vector<double> losses;  // per training shape, computed when first asked
  int cell = -1;
  std::optional<double> estimate_score;  // when the cascade has an estimate stage
};

// A candidate of the step being built.
struct Candidate {
  Program program;
  std::string base_key;  // content_hash of program.base_source
  std::string hash;
  std::vector<std::int64_t> parents;
  std::string origin;
  int island = 0;
  int generation = 0;
  std::string failure;       // an external mutator attempt that produced nothing
  std::string failed_source; // what it wrote, for the failure row
};

// Persistent counters (part of the run state).
struct Counters {
  std::int64_t step = 0;
  std::int64_t evaluations = 0;
  std::int64_t duplicates = 0;
  std::int64_t failures = 0;
  std::int64_t best = 0;  // the best feasible program (training score); 0: none
  std::int64_t since_improvement = 0;
  std::int64_t empty_steps = 0;  // consecutive steps that found nothing new
  double elapsed_s = 0;   // over all sessions, up to the last commit
};

struct SearchEngine::Impl {
  results::Database* db = nullptr;
  SearchConfig config;
  EngineOptions options;
  std::int64_t run_id = 0;
  std::string phase = "search";  // "search", "final", "done"
  std::string stop_reason;

  // The workload and its split.
  Workload workload;
  ShapeSplit split;
  std::vector<FeatureValues> features;  // per workload shape
  std::vector<int> train_regions;       // region per training shape
  std::unique_ptr<CellSpace> cells;

  // The baseline and the oracle, per workload shape.
  std::string baseline_name, baseline_source;
  std::vector<Decision> baseline_decisions;
  std::vector<double> baseline_us;
  std::vector<double> oracle_us;            // empty without an oracle
  std::vector<Decision> oracle_decisions;   // empty without an oracle

  // The cascade. The search checks its programs on the training shapes (all it
  // measures them on); finalists are checked on every shape of the workload.
  std::unique_ptr<Checker> checker;       // training shapes, in split.train order
  std::unique_ptr<Checker> full_checker;  // every workload shape
  std::unique_ptr<Measurer> measurer;
  std::unique_ptr<Evaluator> estimate_evaluator;  // owned; null without an estimate stage
  std::unique_ptr<Measurer> estimator;
  std::vector<double> estimate_baseline_us;

  OperatorContext operators;

  // The search state.
  Rng rng;
  Counters counters;
  std::vector<Island> islands;
  std::unordered_map<std::int64_t, Record> records;
  std::unordered_set<std::string> hashes;
  std::unordered_map<std::string, std::string> bases;  // base key -> canonical source
  std::chrono::steady_clock::time_point session_start = std::chrono::steady_clock::now();
  double elapsed_before = 0;  // elapsed_s when this session started

  // --- engine.cpp
  void prepare();                  // workload, split, checker, measurer, baseline, oracle

  void load_records();             // a resumed run's programs and evaluations
  nlohmann::json state_json() const;
  void load_state(const nlohmann::json&);
  void save_state();               // inside the caller's transaction
  std::optional<std::string> stop_condition() const;
  double elapsed() const;
  void report(const std::string& phase, const std::string& message = {}, std::size_t done = 0,
              std::size_t total = 0) const;
  SearchStatus status(const std::string& phase) const;
  bool stop_requested() const { return options.stop && options.stop(); }
  [[noreturn]] void interrupt();

  // Helpers on programs.
  std::string intern_base(const std::string& source);
  // The base key of a candidate derived from `parent` (the parent's when the base is
  // unchanged, which is almost always: hashing a base costs more than comparing it).
  std::string base_key_for(const Program& child, const Record* parent);
  Program program_of(const Record&) const;
  FitnessOptions fitness_options() const { return {config.fitness.floor, config.fitness.penalty}; }
  double score_of(std::int64_t id) const;
  const std::vector<double>& losses_of(const Record&) const;  // per training shape; empty without an oracle
  // Latencies of a program's decisions on some shapes (NaN: failed); interrupts on stop.
  std::vector<double> latencies(const std::vector<Decision>& decisions, const std::vector<int>& shapes, Measurer& m);

  // --- engine_step.cpp
  void seed_run();  // step 0 of a fresh run: the seed program in every island
  bool step();
  std::vector<Candidate> generate();
  std::optional<Candidate> make_candidate(int island, const std::unordered_set<std::string>& step_hashes,
                                         int sequence);
  std::int64_t select_parent(int island);
  std::vector<std::int64_t> inspirations(int island, std::int64_t parent);
  Candidate external_candidate(const Record& parent, const std::vector<std::int64_t>& inspirations, int island,
                               int sequence);
  // Checks, estimates, measures and scores candidates, then commits them with the
  // state in one transaction. The seed goes to every island.
  void evaluate_and_commit(std::vector<Candidate> candidates, bool seed);

  // --- engine_final.cpp
  nlohmann::json finish();
  std::vector<std::int64_t> finalists() const;  // repaired programs excluded: they come after
  // A program without the rules that put validation shapes under the floor; nullopt
  // when nothing is to repair or a base decision is under the floor.
  std::optional<Program> repair(Program p);
  // A repaired program, stored and scored on the training shapes (or the stored one with
  // its hash); 0 when it cannot be scored.
  std::int64_t store_repaired(const Program& p, std::int64_t parent);
  nlohmann::json summary(std::optional<std::int64_t> winner, const nlohmann::json& finalists_json) const;
};

// Whole-percent text etc. shared by the files.
nlohmann::json shape_json(const Shape&);

}  // namespace evodispatch::search

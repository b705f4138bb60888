#pragma once
// The engine's state and helpers, shared by engine.cpp (setup, state, the loop),
// engine_step.cpp (one generation step) and engine_final.cpp (validation,
// confirmation, summary).
#include <chrono>
#include <functional>
#include <span>
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
#include <evodispatch/results/programs.hpp>
#include <evodispatch/search/archive.hpp>
#include <evodispatch/search/checker.hpp>
#include <evodispatch/search/config.hpp>
#include <evodispatch/search/evaluation_details.hpp>
#include <evodispatch/search/engine.hpp>
#include <evodispatch/search/fitness.hpp>
#include <evodispatch/search/latency_fit.hpp>
#include <evodispatch/search/measurer.hpp>
#include <evodispatch/search/operators.hpp>
#include <evodispatch/search/program.hpp>
#include <evodispatch/search/rng.hpp>
#include <evodispatch/search/split.hpp>


namespace evodispatch::search {

// The test split a new run stores with its config (null: none): `samples` fresh shapes of
// the config's test domain (or the workload's own domain), none of the workload's.
nlohmann::json draw_test_split(const SearchConfig&, const Workload&);

// The figures of a fitness (geomean, worst, oracle fraction) on its evaluation row, when
// every shape was measured.
void set_figures(results::EvaluationRecord&, const Fitness&);

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

// A decision and its median time (NaN: it failed), for the per-shape rows of a run.
struct TimedDecision {
  Decision decision;
  double us = 0;
};
// The stored row of one shape: decisions resolved, speedups over the baseline where both
// times are finite.
results::RunShapeRecord shape_row(results::ShapeSplit, const Shape&, const TimedDecision& baseline,
                                  const std::optional<TimedDecision>& candidate,
                                  const std::optional<TimedDecision>& oracle);

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
  double elapsed_s = 0;   // search time over all sessions, up to the last commit (setup excluded)
  double setup_s = 0;     // setup time (store reads, baseline, oracle) over all sessions
};

// How a batch of candidates joins the run.
enum class Admission {
  seed,    // step 0: the seed program, offered to every island
  step,    // a generation step: offered to its island, counted as a step
  repair,  // a repaired finalist: scored and stored, joins no archive, never cut by the estimate
};

// What a candidate became on its way through the cascade.
struct Outcome {
  std::string stage = "measured";  // the last stage it reached
  std::string error;
  std::vector<Decision> decisions;  // per training shape
  std::optional<Fitness> estimate;
  std::optional<Fitness> fitness;
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

  // The test split (engine_test.cpp): fresh shapes of a domain, only reported.
  std::string test_workload;
  std::vector<Shape> test_shapes;

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
  // The latency model's fit (to_json(LatencyFit)) when the run seeded the model family;
  // null otherwise. Part of the run state: a resumed run reports it without refitting.
  nlohmann::json model_fit;

  // The search state.
  Rng rng;
  Counters counters;
  std::vector<Island> islands;
  std::unordered_map<std::int64_t, Record> records;
  std::unordered_set<std::string> hashes;
  std::unordered_map<std::string, std::string> bases;  // base key -> canonical source
  std::chrono::steady_clock::time_point session_start = std::chrono::steady_clock::now();  // of search time
  double elapsed_before = 0;  // elapsed_s when this session started
  double setup_before = 0;    // setup_s of earlier sessions
  double session_setup_s = 0;

  // --- engine.cpp
  void prepare();                  // workload, split, checker, measurer, baseline, oracle
  void load_workload();            // as stored with the run
  void make_checkers(const DeviceInfo&);
  void measure_baseline();
  // The oracle's best decision per shape, and per training shape the latency of every
  // decision of its space (what add_rule chooses from).
  std::vector<std::unordered_map<std::uint64_t, double>> measure_oracle(const DeviceInfo&);
  // The oracle's decision space (config.oracle) on each of these shapes.
  std::vector<LatencyRequest> oracle_requests(const std::vector<Shape>& shapes, const DeviceInfo&) const;
  void make_estimator(const Evaluator&);
  void prepare_operators(std::vector<std::unordered_map<std::uint64_t, double>> train_table);

  void load_records();             // a resumed run's programs and evaluations
  nlohmann::json state_json() const;
  void load_state(const nlohmann::json&);
  void save_state();               // inside the caller's transaction
  std::optional<std::string> stop_condition() const;
  double elapsed() const;          // search time
  double setup_seconds() const;
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
  // Whether the program belongs to the model-based family (its base is a latency model).
  bool is_model(const Record&) const;
  mutable std::unordered_map<std::string, bool> model_bases;  // base key -> is a latency model
  // A candidate's rules as verify_boxes leaves them on the training shapes: those with
  // fewer than decisions.min_support shapes of evidence (decisions.evidence_only: shapes
  // where they change the base's decision) dropped, the rest boxed around their evidence
  // when decisions.verified_boxes.
  Program verified(const Program&) const;
  FitnessOptions fitness_options() const { return {config.fitness.floor, config.fitness.penalty}; }
  double score_of(std::int64_t id) const;
  const std::vector<double>& losses_of(const Record&) const;  // per training shape; empty without an oracle
  // The one place a stop request during a measurement becomes an interrupt.
  std::vector<double> measure(Measurer& m, std::span<const LatencyRequest> requests,
                              const std::function<void(std::size_t, std::size_t)>& progress = {});
  // Latencies of a program's decisions on some shapes (NaN: failed); interrupts on stop.
  std::vector<double> latencies(const std::vector<Decision>& decisions, const std::vector<int>& shapes, Measurer& m);
  // A training shape's requests for decisions given in split.train order.
  std::vector<LatencyRequest> train_requests(const std::vector<Decision>& train_decisions) const;

  // --- engine_step.cpp
  void seed_run();  // step 0 of a fresh run: the seed program (and the model) in the islands
  std::optional<Candidate> model_seed();
  bool seed_joins(const Record&, std::size_t island) const;
  bool step();
  std::vector<Candidate> generate();
  std::optional<Candidate> make_candidate(int island, const std::unordered_set<std::string>& step_hashes,
                                         int sequence);
  std::int64_t select_parent(int island);
  std::vector<std::int64_t> inspirations(int island, std::int64_t parent);
  Candidate external_candidate(const Record& parent, const std::vector<std::int64_t>& inspirations, int island,
                               int sequence);
  // Checks, estimates, measures and scores candidates, then commits them with the
  // state in one transaction.
  void evaluate_and_commit(std::vector<Candidate> candidates, Admission);
  // The cascade's stages; `alive` holds the candidates still in it.
  std::vector<std::size_t> sandbox(const std::vector<Candidate>&, std::vector<Outcome>&);
  std::vector<std::size_t> estimate(const std::vector<Candidate>&, std::vector<Outcome>&, std::vector<std::size_t> alive,
                                    Admission);
  void measure_training(std::vector<Outcome>&, const std::vector<std::size_t>& alive);
  // Inside the step's transaction: one candidate's program and evaluation rows; its id.
  std::int64_t commit(const Candidate&, const Outcome&, Admission);
  results::ProgramRecord program_row(const Candidate&) const;
  Record record_of(const Candidate&, std::int64_t id);
  results::EvaluationRecord train_row(std::int64_t program, const std::string& stage) const;
  results::EvaluationRecord score(Record&, const Fitness&, Admission) const;
  // The details every scored row carries; split_shapes: the split the fitness was taken on.
  EvaluationDetails scored_details(const Fitness&, const std::vector<int>& split_shapes) const;
  void offer(std::int64_t id, int island, Admission, bool& improved);
  void end_step(bool improved, std::int64_t added);

  // --- engine_test.cpp
  void load_test_split(const nlohmann::json& stored);  // the run config's "test"
  // `rows`, when given, receives the per-shape rows the run stores.
  nlohmann::json test_report(const std::optional<Program>& winner, std::vector<results::RunShapeRecord>* rows = nullptr);
  std::vector<results::RunShapeRecord> test_shape_rows(const std::vector<Decision>& base,
                                                       const std::vector<double>& base_us,
                                                       const std::vector<Decision>& mine,
                                                       const std::vector<double>& mine_us,
                                                       const std::vector<Decision>& oracle,
                                                       const std::vector<double>& oracle_us) const;
  std::vector<double> test_oracle(Measurer&, const std::vector<double>& base_us, std::vector<Decision>& decisions);
  std::vector<std::optional<double>> confirm_on_test(const std::vector<Decision>& base,
                                                     const std::vector<Decision>& decisions, const std::string& whose);
  nlohmann::json under_floor_rows(const Fitness&, const std::vector<Decision>& base, const std::vector<Decision>& mine,
                                  const std::vector<std::optional<double>>& confirmed) const;
  nlohmann::json confirmed_figures(const std::vector<std::optional<double>>& mine,
                                   const std::vector<std::optional<double>>& oracle) const;

  // --- engine_final.cpp
  nlohmann::json finish();
  std::vector<std::int64_t> finalists() const;  // repaired programs excluded: they come after
  // A program without the rules that put validation shapes under the floor; nullopt
  // when nothing is to repair or a base decision is under the floor.
  std::optional<Program> repair(Program p);
  // One repair of `p` for these workload shapes: the rules deciding them are dropped, or,
  // when none did, a latency-model base asks for twice the gain; nullopt when neither can.
  std::optional<Program> without_deciders(Program p, const std::vector<int>& shapes) const;
  // `p` repaired for these workload shapes until it decides differently on every one of
  // them than `decided` (its decisions per workload shape); nullopt when it cannot.
  std::optional<Program> repair_at(Program p, const std::vector<int>& shapes, const std::vector<Decision>& decided);
  // A repaired program, stored and scored on the training shapes (or the stored one with
  // its hash); 0 when it cannot be scored.
  std::int64_t store_repaired(const Program& p, std::int64_t parent);
  nlohmann::json summary(std::optional<std::int64_t> winner, const nlohmann::json& finalists_json) const;
  nlohmann::json winner_json(const Record&) const;
  // Per workload shape: the values of `per_shape` at these shapes (empty stays empty).
  static std::vector<double> at(const std::vector<double>& per_shape, const std::vector<int>& shapes);
  // The workload shape at a position of a split's list.
  const Shape& shape_at(const std::vector<int>& split_shapes, int position) const;
};


}  // namespace evodispatch::search

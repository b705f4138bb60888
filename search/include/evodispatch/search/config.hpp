#pragma once
// The search configuration: every knob of the engine, read strictly from JSON (unknown
// fields and wrong types are InputErrors naming the JSON path). Each default below is
// the value a config gets when it leaves the field out; search/README-search.md lists
// them all with what they do.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <evodispatch/search/features.hpp>

namespace evodispatch::search {

struct RegionAxis {
  Feature feature = Feature::ctas;
  std::vector<std::int64_t> edges;  // ascending; value < edges[0] is bucket 0, ...
};

struct OperatorWeights {
  double perturb = 0.30;        // move a threshold, a constant or an expression term
  double add_rule = 0.25;       // a new rule in front (guided by the parent's worst shapes)
  double drop_rule = 0.05;
  double swap_rules = 0.05;     // two adjacent rules change places
  double merge_rules = 0.05;    // two adjacent rules become one over their hull
  double to_expression = 0.10;  // a constant num_splits becomes an expression
  double crossover = 0.15;      // rule lists of the parent and an inspiration
  double base_literal = 0.05;   // a numeric literal of the base script changes
  double external = 0.0;        // the external mutator command (needs external.command)
};

struct SearchConfig {
  std::string name = "search";
  std::string description;

  // What is searched, on what, against what.
  std::string workload = "paper-safety-160";  // shipped name or JSON file
  std::string baseline = "fa3";               // the policy speedups are measured against
  std::string seed_policy;                    // the base of every program; empty: the baseline
  std::uint64_t seed = 1;                     // --seed overrides
  std::string l2 = "cold";                    // cold | hot
  FeatureSet features;                        // features rules may use; default all

  struct Split {
    double validation_fraction = 0.3;  // share of the workload's shapes held out
    std::uint64_t seed = 1;            // fixed apart from the run seed, so runs compare
  } split;

  struct Fitness {
    double floor = 0.99;    // every training shape must keep this speedup
    double penalty = 10.0;  // score = log(geomean) - penalty * sum of log shortfalls below the floor
  } fitness;

  struct Oracle {
    bool enabled = true;
    int min_splits = 1;  // the bounded decision space: num_splits in [min, max] ...
    int max_splits = 64;
    std::vector<int> splits;  // ... or exactly these (when not empty) ...
    std::vector<bool> pack_gqa = {true, false};  // ... x pack_gqa ...
    std::vector<int> sm_margins = {0};           // ... x sm_margin
    std::vector<int> split_values() const;  // `splits`, or min..max
  } oracle;

  struct Decisions {
    int max_splits = 64;              // what rules may return
    std::vector<int> sm_margins = {0};
    int max_rules = 12;
  } decisions;

  struct Islands {
    int count = 4;
    int batch = 8;                // candidates per island per step
    int migration_interval = 10;  // steps between migrations (0: never)
    int migration_count = 2;      // elites each island sends to the next on the ring
    int recent = 32;              // programs an island remembers for exploration
  } islands;

  struct Archive {
    std::vector<int> rule_buckets = {1, 2, 4, 8};  // rule-count bucket edges
    std::vector<RegionAxis> regions = {{Feature::ctas, {8, 32}}, {Feature::nblk, {5, 16}}};
  } archive;

  struct Selection {
    double exploration = 0.3;   // parent: any program the island remembers
    double exploitation = 0.6;  // parent: a tournament among the archive's elites
    double elite = 0.1;         // parent: the island's best
    int tournament = 3;
    int inspirations = 2;       // other elites shown to crossover and the external mutator
  } selection;

  OperatorWeights operators;

  struct External {
    std::vector<std::string> command;  // argv; empty: no external mutator
    double timeout_s = 30;
    std::size_t max_output_bytes = 1 << 20;
  } external;

  struct Cascade {
    // The cheap estimate measured before the device: "auto" (the simulator profile of
    // the device's GPU model when measuring on a GPU; nothing on the simulator, where
    // the estimate is the measurement), "none", or a "sim:PROFILE" spec.
    std::string estimate = "auto";
    // Measure on the device only when the estimated score is within this much (in
    // log-speedup) of the island's best estimate.
    double estimate_slack = 0.02;
    int threads = 0;  // sandbox threads; 0: one per core
  } cascade;

  struct Final {
    int candidates = 8;    // best training programs (distinct on the training shapes) scored on validation
    bool elites = true;    // also every feasible MAP-Elites elite of every island (simpler programs)
    int repair = 8;        // of the best training finalists under the floor on validation, how many are repaired
    int confirm_top = 3;   // of those, how many are re-measured against the baseline
    int confirm_pairs = 30;   // interleaved candidate / baseline pairs per shape (Evaluator::compare)
  } final;

  struct Stop {
    std::int64_t max_evaluations = 5000;  // programs scored (0: no limit)
    double minutes = 0;                   // wall time over all sessions (0: no limit)
    double target_fitness = 0;            // training geomean that ends the search (0: none)
    int stagnation_steps = 0;             // steps without a better training score (0: never)
  } stop;

  struct Sandbox {
    std::uint64_t max_instructions = 1'000'000;
    std::size_t max_memory_bytes = 8u << 20;
  } sandbox;
};

// Strict parsing; `source` prefixes errors ("quickstart.json: $.islands.count: ...").
SearchConfig parse_search_config(const nlohmann::json&, const std::string& source);
SearchConfig parse_search_config_text(std::string_view text, const std::string& source);
// A shipped config name (search_config_names()) or a path to a JSON file.
SearchConfig load_search_config(std::string_view name_or_path);
std::vector<std::string> search_config_names();
// The JSON text of a shipped config, or nullopt.
std::optional<std::string> shipped_search_config(std::string_view name);

// Every field, defaults filled in: what a run stores as its config and resumes from.
nlohmann::json to_json(const SearchConfig&);

}  // namespace evodispatch::search

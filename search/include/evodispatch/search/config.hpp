#pragma once
// The search configuration: every knob of the engine, read strictly from JSON (unknown
// fields and wrong types are InputErrors naming the JSON path). Each default below is
// the value a config gets when it leaves the field out. What each field means and accepts
// is declared once, beside its parser, in search/src/config.cpp; search_config_reference()
// prints it (`evodispatch search --config-reference`, and README.md's config table).
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
  double perturb = 0.30;
  double add_rule = 0.25;
  double drop_rule = 0.05;
  double swap_rules = 0.05;
  double merge_rules = 0.05;
  double to_expression = 0.10;
  double crossover = 0.15;
  double base_literal = 0.05;
  double external = 0.0;
};

// Each member is a config field of the same name (nested structs are JSON sections); its
// meaning and range are in the declaration table in search/src/config.cpp.
struct SearchConfig {
  std::string name = "search";
  std::string description;

  std::string workload = "paper-safety-160";
  int domain_samples = 0;  // 0: the domain's own "samples"
  std::string baseline = "fa3";
  std::string seed_policy;
  std::uint64_t seed = 1;
  std::string l2 = "cold";
  FeatureSet features = FeatureSet::search_default();

  struct Split {
    double validation_fraction = 0.3;
    std::uint64_t seed = 1;
  } split;

  struct Fitness {
    double floor = 0.99;
    double penalty = 10.0;
  } fitness;

  struct Oracle {
    bool enabled = true;
    int min_splits = 1;
    int max_splits = 64;
    std::vector<int> splits;
    std::vector<bool> pack_gqa = {true, false};
    std::vector<int> sm_margins = {0};
    std::vector<int> split_values() const;  // `splits`, or min..max
  } oracle;

  struct Decisions {
    int max_splits = 64;
    std::vector<int> sm_margins = {0};
    int max_rules = 12;
    bool verified_boxes = true;
    int min_support = 2;
    bool evidence_only = true;
    // Within this factor (percent) of an evidence shape in every feature a rule holds;
    // 0: anywhere in its box (Rule::reach). On the H100 the rules held near their evidence
    // put no test shape under the floor where boxes alone put 1-3, at 3-6 points of
    // validation's share of the oracle's gain (docs/search.md, seventeenth session).
    int reach_percent = 200;
  } decisions;

  // The model-based program family: a latency model fitted to the oracle's measurements.
  struct Model {
    bool enabled = true;
    // Perturbed restarts of the fit, each kept if it chooses better on the training
    // shapes. None by default: on an H100 they chose better on training and worse on
    // validation (docs/search.md, sixteenth session); on the simulator they changed nothing.
    int restarts = 0;
  } model;

  struct Islands {
    int count = 4;
    int batch = 8;
    int migration_interval = 10;
    int migration_count = 2;
    int recent = 32;
  } islands;

  struct Archive {
    std::vector<int> rule_buckets = {1, 2, 4, 8};  // rule-count bucket edges
    std::vector<RegionAxis> regions = {{Feature::ctas, {8, 32}}, {Feature::nblk, {5, 16}}};
  } archive;

  struct Selection {
    double exploration = 0.3;
    double exploitation = 0.6;
    double elite = 0.1;
    int tournament = 3;
    int inspirations = 2;
  } selection;

  OperatorWeights operators;

  struct External {
    std::vector<std::string> command;
    double timeout_s = 30;
    std::size_t max_output_bytes = 1 << 20;
  } external;

  struct Cascade {
    std::string estimate = "auto";
    double estimate_slack = 0.02;
    int threads = 0;
  } cascade;

  struct Final {
    int candidates = 8;
    bool elites = true;
    int repair = 8;
    int confirm_top = 3;
    int confirm_pairs = 30;
  } final;

  // The test split: fresh shapes of a domain, disjoint from the workload, drawn with their
  // own seed when the run starts; they select nothing and are only reported.
  struct Test {
    std::string workload;
    int samples = 200;
    std::uint64_t seed = 2;
  } test;

  struct Stop {
    std::int64_t max_evaluations = 5000;
    double minutes = 0;
    double target_fitness = 0;
    int stagnation_steps = 0;
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

// A markdown table of every field: JSON path, default, allowed values, meaning.
std::string search_config_reference();

}  // namespace evodispatch::search

#pragma once
// Mutation and crossover of rule-list programs (DESIGN.md §5). Every operator is a pure
// function of (parent, inspirations, context, rng): the same inputs and generator state
// give the same child, which is what makes a resumed search repeat itself exactly. The
// child is normalised and uses only the features the run allows; nullopt when the
// operator does not apply (no rule to drop, no constant to turn into an expression...).
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <evodispatch/heuristics/contract.hpp>
#include <evodispatch/search/config.hpp>
#include <evodispatch/search/program.hpp>
#include <evodispatch/search/rng.hpp>

namespace evodispatch::search {

enum class OperatorKind {
  perturb,
  add_rule,
  drop_rule,
  swap_rules,
  merge_rules,
  to_expression,
  crossover,
  base_literal,
  external,
};
inline constexpr int kNumOperators = 9;
std::string_view to_string(OperatorKind);
// The weights in OperatorKind order.
std::vector<double> operator_weights(const OperatorWeights&);

// What the operators may know about the run: its limits and the training shapes.
struct OperatorContext {
  int max_rules = 12;
  int max_splits = 64;
  std::vector<int> sm_margins = {0};
  FeatureSet allowed;                        // features a rule may use
  DeviceInfo device;                         // bounds base_literal's latency-model parameters (lowest_on)
  std::vector<FeatureValues> train;          // feature values per training shape
  std::vector<Decision> train_oracle;        // the oracle's decision per training shape; empty: unknown

  // What add_rule uses to choose among its proposals (all empty without an oracle): per
  // training shape the baseline's and the oracle's latency, and the latency of every
  // decision of the oracle's space (measured once at setup, so the choice depends on
  // nothing that changes during the run), keyed by decision_code().
  std::vector<double> train_baseline_us;
  std::vector<double> train_oracle_us;
  std::vector<std::unordered_map<std::uint64_t, double>> train_table;
  double floor = 0.99;
  int proposals = 12;  // rules add_rule weighs before it picks one

  // Derived by prepare(): condition features (allowed and varying over the training
  // shapes), the sorted distinct values of each feature, divisor features.
  std::vector<Feature> condition_features;
  std::vector<std::vector<std::int64_t>> distinct;  // indexed by Feature
  std::vector<Feature> divisors;
  void prepare();
};

// The estimated change in the sum over training shapes of log(speedup) when `rule` is put
// in front of a program with these per-shape latencies, from the context's table, minus
// a penalty for every shape it would push under the floor; nullopt when the table lacks
// a decision the rule would take.
std::optional<double> front_rule_gain(const Rule& rule, std::span<const double> parent_us, const OperatorContext&);

// `losses`: per training shape, how far the parent is from the oracle (log of its
// latency over the oracle's); empty when unknown. add_rule aims at the worst shapes and,
// with the context's table, keeps the best of several proposals, simplified.
std::optional<Program> apply_operator(OperatorKind, const Program& parent, std::span<const Program* const> inspirations,
                                      std::span<const double> losses, const OperatorContext&, Rng&);

}  // namespace evodispatch::search

#pragma once
// What the search stores beside an evaluation's figures (results::EvaluationRecord::
// details): written and read here and nowhere else, so a renamed or retyped field is a
// compile error at every use rather than a silent default when a run resumes. Which
// fields a row carries depends on its stage:
//   estimate   score, device (the estimator's fingerprint), repair
//   measured   score, feasible, below_floor, speedups, worst_shape; on training rows also
//              cell and region (not for repaired programs, which join no archive)
//   confirmed  compared, worst_shape, below_floor, under_floor, pairs
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <evodispatch/heuristics/contract.hpp>

namespace evodispatch::search {

struct EvaluationDetails {
  std::optional<double> score;  // the ranking key (fitness.hpp's Fitness::score)
  std::optional<bool> feasible;
  std::optional<int> cell;      // MAP-Elites cell; -1: none
  std::optional<int> region;    // the shape-space region the program wins
  std::optional<int> below_floor;
  std::optional<std::vector<double>> speedups;  // baseline / program, per shape of the split
  std::optional<Shape> worst_shape;
  std::optional<std::string> device;
  bool repair = false;          // the estimate of a repaired program (measured whatever it estimates)
  std::optional<int> compared;  // shapes re-measured against the baseline
  std::optional<std::vector<int>> under_floor;  // workload shape indices confirmed under the floor
  std::optional<int> pairs;     // interleaved pairs per confirmed shape
};

nlohmann::json to_json(const EvaluationDetails&);
// Strict: an unknown field or a wrong type is an InputError naming `where`.
EvaluationDetails evaluation_details_from_json(const nlohmann::json&, const std::string& where);

}  // namespace evodispatch::search

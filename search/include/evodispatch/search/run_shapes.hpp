#pragma once
// The per-shape rows a measuring verb stores with its run (results::RunShapes), so
// `results run N`, `results compare` and the report read every verb's shapes alike.
#include <vector>

#include <evodispatch/results/run_shapes.hpp>
#include <evodispatch/search/bench.hpp>
#include <evodispatch/search/regress.hpp>
#include <evodispatch/search/sweep.hpp>

namespace evodispatch {

std::vector<results::RunShapeRecord> run_shapes(const BenchReport&);
std::vector<results::RunShapeRecord> run_shapes(const RegressReport&);
std::vector<results::RunShapeRecord> run_shapes(const BatchCurve&);  // the policy as the candidate

}  // namespace evodispatch

#pragma once
// The train / validation split of a workload: deterministic in (seed, the shapes
// themselves), independent of the order the workload lists them in.
#include <cstdint>
#include <vector>

#include <evodispatch/heuristics/contract.hpp>

namespace evodispatch::search {

struct ShapeSplit {
  std::vector<int> train;       // indices into the workload's shapes, ascending
  std::vector<int> validation;  // ascending
};

// round(fraction * n) shapes go to validation (at least 1 when fraction > 0 and n >= 2;
// never all of them): those with the smallest keyed hash of their description.
ShapeSplit split_shapes(const std::vector<Shape>& shapes, double validation_fraction, std::uint64_t seed);

}  // namespace evodispatch::search

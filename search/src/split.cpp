#include <evodispatch/search/split.hpp>

#include <algorithm>
#include <cmath>
#include <utility>

#include <nlohmann/json.hpp>

#include <evodispatch/search/hash.hpp>
#include <evodispatch/search/rng.hpp>

namespace evodispatch::search {

ShapeSplit split_shapes(const std::vector<Shape>& shapes, double validation_fraction, std::uint64_t seed) {
  const int n = static_cast<int>(shapes.size());
  int k = static_cast<int>(std::lround(validation_fraction * n));
  if (validation_fraction > 0 && n >= 2) k = std::max(k, 1);
  k = std::clamp(k, 0, std::max(n - 1, 0));

  // The key mixes the seed into a hash of the shape's JSON, so each shape's
  // side depends on the shape and the seed alone.
  std::vector<std::pair<std::uint64_t, int>> keyed;
  keyed.reserve(shapes.size());
  for (int i = 0; i < n; ++i) {
    std::uint64_t state = fnv1a64(to_json(shapes[i]).dump()) ^ seed;
    keyed.push_back({splitmix64(state), i});
  }
  std::sort(keyed.begin(), keyed.end());
  ShapeSplit out;
  for (int j = 0; j < n; ++j) (j < k ? out.validation : out.train).push_back(keyed[j].second);
  std::sort(out.train.begin(), out.train.end());
  std::sort(out.validation.begin(), out.validation.end());
  return out;
}

}  // namespace evodispatch::search

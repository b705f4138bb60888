#pragma once
// Islands and their MAP-Elites archives (DESIGN.md §5). An island keeps, per cell of a
// small grid of meaningful features (how many rules; which region of the shape space
// the program gains most in), the best program seen there, plus the programs it saw
// last (for exploration). Islands sit on a ring and periodically send their best
// elites to the next one. Plain data over program ids; scores are looked up.
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <evodispatch/search/config.hpp>

namespace evodispatch::search {

// The grid: rule-count bucket x region. Region n_regions() ("none") holds programs that
// gain nowhere.
class CellSpace {
 public:
  CellSpace(std::vector<int> rule_buckets, std::vector<RegionAxis> regions);
  int rule_bucket(int rule_count) const;
  int regions() const { return regions_; }  // without "none"
  int cells() const { return (static_cast<int>(rule_buckets_.size()) + 1) * (regions_ + 1); }
  int cell(int rule_count, int region) const { return rule_bucket(rule_count) * (regions_ + 1) + region; }
  // The region of one shape from its feature values.
  int region_of_shape(const FeatureValues&) const;
  // Where a program gains most: the region whose shapes' log-speedups sum highest,
  // or regions() when no region gains. `shape_regions` is region_of_shape per shape.
  int region_of_program(std::span<const double> speedups, std::span<const int> shape_regions) const;

 private:
  std::vector<int> rule_buckets_;
  std::vector<RegionAxis> axes_;
  int regions_ = 1;
};

using ScoreOf = std::function<double(std::int64_t program)>;

struct Island {
  std::map<int, std::int64_t> archive;  // cell -> program id
  std::vector<std::int64_t> recent;     // oldest first, at most islands.recent long
  std::int64_t best = 0;                // the best program this island has seen; 0: none
};

// Offers a scored program to an island: it takes its cell when the cell is empty or it
// scores strictly higher (ties keep the incumbent, so the outcome is deterministic), and
// becomes the island's best likewise. Returns whether it took the cell.
bool offer(Island&, int cell, std::int64_t program, const ScoreOf& score_of);
void remember(Island&, std::int64_t program, int capacity);

// The island's elites, best first (score, then the older program).
std::vector<std::int64_t> ranked_elites(const Island&, const ScoreOf& score_of);

// Every island sends its `count` best elites to the next island on the ring; all
// emigrants are chosen before any arrives. `cell_of` gives a program's cell.
void migrate(std::vector<Island>&, int count, const std::function<int(std::int64_t)>& cell_of,
             const ScoreOf& score_of);

nlohmann::json to_json(const Island&);
Island island_from_json(const nlohmann::json&, const std::string& path);

}  // namespace evodispatch::search

#include <evodispatch/search/archive.hpp>

#include <algorithm>
#include <cmath>

#include <evodispatch/heuristics/json_reader.hpp>

namespace evodispatch::search {

CellSpace::CellSpace(std::vector<int> rule_buckets, std::vector<RegionAxis> regions)
    : rule_buckets_(std::move(rule_buckets)), axes_(std::move(regions)) {
  for (const auto& a : axes_) regions_ *= static_cast<int>(a.edges.size()) + 1;
}

int CellSpace::rule_bucket(int rule_count) const {
  int b = 0;
  for (int edge : rule_buckets_)
    if (rule_count >= edge) ++b;
  return b;
}

int CellSpace::region_of_shape(const FeatureValues& v) const {
  int region = 0;
  for (const auto& a : axes_) {
    const std::int64_t x = v[static_cast<int>(a.feature)];
    int bucket = 0;
    for (std::int64_t e : a.edges)
      if (x >= e) ++bucket;
    region = region * (static_cast<int>(a.edges.size()) + 1) + bucket;
  }
  return region;
}

int CellSpace::region_of_program(std::span<const double> speedups, std::span<const int> shape_regions) const {
  std::vector<double> gain(static_cast<std::size_t>(regions_), 0.0);
  for (std::size_t i = 0; i < speedups.size() && i < shape_regions.size(); ++i)
    gain[static_cast<std::size_t>(shape_regions[i])] += std::log(speedups[i]);
  int best = regions_;
  double best_gain = 1e-9;  // a gain below this is noise, not a region won
  for (int r = 0; r < regions_; ++r)
    if (gain[r] > best_gain) {
      best_gain = gain[r];
      best = r;
    }
  return best;
}

namespace {
// a ranks before b: higher score, then the older (smaller id) program.
bool better(std::int64_t a, std::int64_t b, const ScoreOf& score_of) {
  const double sa = score_of(a), sb = score_of(b);
  if (sa != sb) return sa > sb;
  return a < b;
}
}  // namespace

bool offer(Island& island, int cell, std::int64_t program, const ScoreOf& score_of) {
  if (island.best == 0 || score_of(program) > score_of(island.best)) island.best = program;
  auto it = island.archive.find(cell);
  if (it == island.archive.end()) {
    island.archive.emplace(cell, program);
    return true;
  }
  if (it->second == program || !(score_of(program) > score_of(it->second))) return false;
  it->second = program;
  return true;
}

void remember(Island& island, std::int64_t program, int capacity) {
  island.recent.push_back(program);
  if (static_cast<int>(island.recent.size()) > capacity)
    island.recent.erase(island.recent.begin(), island.recent.end() - capacity);
}

std::vector<std::int64_t> ranked_elites(const Island& island, const ScoreOf& score_of) {
  std::vector<std::int64_t> out;
  for (const auto& [cell, id] : island.archive) out.push_back(id);
  std::sort(out.begin(), out.end(), [&](std::int64_t a, std::int64_t b) { return better(a, b, score_of); });
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void migrate(std::vector<Island>& islands, int count, const std::function<int(std::int64_t)>& cell_of,
             const ScoreOf& score_of) {
  const std::size_t n = islands.size();
  if (n < 2 || count <= 0) return;
  std::vector<std::vector<std::int64_t>> emigrants(n);
  for (std::size_t i = 0; i < n; ++i) {
    auto elites = ranked_elites(islands[i], score_of);
    if (static_cast<int>(elites.size()) > count) elites.resize(static_cast<std::size_t>(count));
    emigrants[i] = std::move(elites);
  }
  for (std::size_t i = 0; i < n; ++i)
    for (std::int64_t id : emigrants[i]) offer(islands[(i + 1) % n], cell_of(id), id, score_of);
}

nlohmann::json to_json(const Island& island) {
  nlohmann::json cells = nlohmann::json::array();
  for (const auto& [cell, id] : island.archive) cells.push_back({cell, id});
  return {{"archive", cells}, {"recent", island.recent}, {"best", island.best}};
}

Island island_from_json(const nlohmann::json& j, const std::string& path) {
  JsonReader r(j, path);
  Island island;
  const auto* cells = r.member("archive");
  if (!cells || !cells->is_array()) throw InputError(r.path_of("archive") + ": expected an array of [cell, program]");
  for (std::size_t i = 0; i < cells->size(); ++i) {
    const std::string at = r.path_of("archive") + "[" + std::to_string(i) + "]";
    const auto& c = (*cells)[i];
    if (!c.is_array() || c.size() != 2) throw InputError(at + ": expected [cell, program]");
    island.archive[static_cast<int>(json_integer(c[0], at + "[0]"))] = json_integer(c[1], at + "[1]");
  }
  const auto* recent = r.member("recent");
  if (!recent || !recent->is_array()) throw InputError(r.path_of("recent") + ": expected an array of program ids");
  for (std::size_t i = 0; i < recent->size(); ++i)
    island.recent.push_back(json_integer((*recent)[i], r.path_of("recent") + "[" + std::to_string(i) + "]"));
  island.best = r.required_integer("best");
  r.finish();
  return island;
}

}  // namespace evodispatch::search

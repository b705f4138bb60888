#include <evodispatch/search/evaluation_details.hpp>

#include <evodispatch/heuristics/json_reader.hpp>

namespace evodispatch::search {

namespace {
template <typename T>
void put(nlohmann::json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = *v;
}

template <typename T>
std::optional<std::vector<T>> array_of(JsonReader& r, const std::string& field) {
  const nlohmann::json* a = r.member(field);
  if (!a) return std::nullopt;
  const std::string path = r.path_of(field);
  if (!a->is_array()) throw InputError(path + ": expected an array");
  std::vector<T> out;
  for (std::size_t i = 0; i < a->size(); ++i) {
    const auto& v = (*a)[i];
    const bool fits = std::is_integral_v<T> ? v.is_number_integer() : v.is_number();
    if (!fits) throw InputError(path + "[" + std::to_string(i) + "]: expected a number");
    out.push_back(v.get<T>());
  }
  return out;
}

std::optional<int> int_field(JsonReader& r, const std::string& field) {
  if (auto v = r.integer(field)) return static_cast<int>(*v);
  return std::nullopt;
}
}  // namespace

nlohmann::json to_json(const EvaluationDetails& d) {
  nlohmann::json j = nlohmann::json::object();
  put(j, "score", d.score);
  put(j, "feasible", d.feasible);
  put(j, "cell", d.cell);
  put(j, "region", d.region);
  put(j, "below_floor", d.below_floor);
  put(j, "speedups", d.speedups);
  if (d.worst_shape) j["worst_shape"] = to_json(*d.worst_shape);
  put(j, "device", d.device);
  if (d.repair) j["repair"] = true;
  put(j, "compared", d.compared);
  put(j, "under_floor", d.under_floor);
  put(j, "pairs", d.pairs);
  return j;
}

EvaluationDetails evaluation_details_from_json(const nlohmann::json& j, const std::string& where) {
  JsonReader r(j, where);
  EvaluationDetails d;
  d.score = r.number("score");
  d.feasible = r.boolean("feasible");
  d.cell = int_field(r, "cell");
  d.region = int_field(r, "region");
  d.below_floor = int_field(r, "below_floor");
  d.speedups = array_of<double>(r, "speedups");
  if (const auto* w = r.member("worst_shape"); w && !w->is_null()) d.worst_shape = shape_from_json(*w, r.path_of("worst_shape"));
  d.device = r.string("device");
  d.repair = r.boolean("repair").value_or(false);
  d.compared = int_field(r, "compared");
  d.under_floor = array_of<int>(r, "under_floor");
  d.pairs = int_field(r, "pairs");
  r.finish();
  return d;
}

}  // namespace evodispatch::search

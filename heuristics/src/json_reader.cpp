#include <evodispatch/heuristics/contract.hpp>
#include <evodispatch/heuristics/json_reader.hpp>

#include <cmath>

namespace evodispatch {

std::string json_kind(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::boolean: return v.get<bool>() ? "true" : "false";
    case nlohmann::json::value_t::string: return "a string";
    case nlohmann::json::value_t::array: return "an array";
    case nlohmann::json::value_t::object: return "an object";
    default: return v.dump();
  }
}

std::int64_t json_integer(const nlohmann::json& v, const std::string& path) {
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) return static_cast<std::int64_t>(d);
  }
  throw InputError(path + ": expected an integer, got " + json_kind(v));
}

JsonReader::JsonReader(const nlohmann::json& j, std::string path) : j_(j), path_(std::move(path)) {
  if (!j_.is_object()) throw InputError(path_ + ": expected an object, got " + json_kind(j_));
}

bool JsonReader::has(const std::string& field) const { return j_.contains(field); }

const nlohmann::json* JsonReader::member(const std::string& field) {
  auto it = j_.find(field);
  if (it == j_.end()) return nullptr;
  read_.insert(field);
  return &*it;
}

std::optional<std::int64_t> JsonReader::integer(const std::string& field) {
  const auto* v = member(field);
  if (!v) return std::nullopt;
  return json_integer(*v, path_of(field));
}

std::optional<double> JsonReader::number(const std::string& field) {
  const auto* v = member(field);
  if (!v) return std::nullopt;
  if (!v->is_number()) throw InputError(path_of(field) + ": expected a number, got " + json_kind(*v));
  return v->get<double>();
}

std::optional<bool> JsonReader::boolean(const std::string& field) {
  const auto* v = member(field);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) throw InputError(path_of(field) + ": expected true or false, got " + json_kind(*v));
  return v->get<bool>();
}

std::optional<std::string> JsonReader::string(const std::string& field) {
  const auto* v = member(field);
  if (!v) return std::nullopt;
  if (!v->is_string()) throw InputError(path_of(field) + ": expected a string, got " + json_kind(*v));
  return v->get<std::string>();
}

std::int64_t JsonReader::required_integer(const std::string& field) {
  auto v = integer(field);
  if (!v) throw InputError(path_of(field) + ": missing (an integer is required)");
  return *v;
}

std::string JsonReader::required_string(const std::string& field) {
  auto v = string(field);
  if (!v) throw InputError(path_of(field) + ": missing (a string is required)");
  return *v;
}

void JsonReader::allow_only(std::initializer_list<const char*> fields) const {
  for (auto it = j_.begin(); it != j_.end(); ++it) {
    bool known = false;
    for (const char* f : fields) known |= it.key() == f;
    if (!known) throw InputError(path_of(it.key()) + ": unknown field");
  }
}

void JsonReader::finish() const {
  for (auto it = j_.begin(); it != j_.end(); ++it)
    if (!read_.count(it.key())) throw InputError(path_of(it.key()) + ": unknown field");
}

}  // namespace evodispatch

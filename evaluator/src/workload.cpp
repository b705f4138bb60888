// Workload files: explicit shape lists and cartesian products (format in workload.hpp).
#include <evodispatch/evaluator/workload.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <span>

#include <evodispatch/heuristics/embedded.hpp>
#include <evodispatch/heuristics/json_reader.hpp>

#include "workload_json.hpp"

namespace evodispatch::embedded {
std::span<const EmbeddedFile> workload_files();  // evaluator/workloads/*.json, by cmake/Modules.cmake
}

namespace evodispatch {

namespace {

// Guards against a typo such as {"from": 1, "to": 1e9} eating all memory.
constexpr std::int64_t kMaxListValues = 1 << 20;
constexpr std::int64_t kMaxShapes = 1 << 20;

}  // namespace

namespace workload_json {

std::string index_path(const std::string& path, std::size_t i) { return path + "[" + std::to_string(i) + "]"; }

namespace {

// {"from": A, "to": B[, "step": S | "times": F]} as the list of its values.
std::vector<std::int64_t> range_values(const nlohmann::json& j, const std::string& path) {
  JsonReader r(j, path);
  const std::int64_t from = r.required_integer("from");
  const std::int64_t to = r.required_integer("to");
  const auto step = r.integer("step");
  const auto times = r.integer("times");
  r.finish();
  if (step && times) throw InputError(path + ": give \"step\" or \"times\", not both");
  if (from > to)
    throw InputError(r.path_of("to") + ": must be >= from (" + std::to_string(from) + "), got " + std::to_string(to));
  if (step && *step < 1) throw InputError(r.path_of("step") + ": must be >= 1, got " + std::to_string(*step));
  if (times && *times < 2) throw InputError(r.path_of("times") + ": must be >= 2, got " + std::to_string(*times));
  if (times && from < 1) throw InputError(r.path_of("from") + ": must be >= 1 with \"times\", got " + std::to_string(from));
  std::vector<std::int64_t> out;
  for (std::int64_t v = from; v <= to;) {
    if (static_cast<std::int64_t>(out.size()) == kMaxListValues)
      throw InputError(path + ": more than " + std::to_string(kMaxListValues) + " values");
    out.push_back(v);
    if (times) {
      if (v > to / *times) break;
      v *= *times;
    } else {
      const std::int64_t s = step.value_or(1);
      if (v > to - s) break;
      v += s;
    }
  }
  return out;
}

}  // namespace

// A list of integers written as one number, an array or a range.
std::vector<std::int64_t> integer_list(const nlohmann::json& j, const std::string& path) {
  if (j.is_array()) {
    std::vector<std::int64_t> out;
    for (size_t i = 0; i < j.size(); ++i) out.push_back(json_integer(j[i], index_path(path, i)));
    if (out.empty()) throw InputError(path + ": an empty list gives no shapes");
    return out;
  }
  if (j.is_object()) return range_values(j, path);
  return {json_integer(j, path)};
}

std::string checked_dtype(const nlohmann::json& v, const std::string& path) {
  if (!v.is_string()) throw InputError(path + ": expected a string, got " + json_kind(v));
  const auto s = v.get<std::string>();
  if (!parse_dtype(s)) throw InputError(path + ": must be \"bf16\", \"fp16\" or \"fp8\", got \"" + s + "\"");
  return s;
}

}  // namespace workload_json

namespace {

using workload_json::checked_dtype;
using workload_json::index_path;
using workload_json::integer_list;

bool checked_bool(const nlohmann::json& v, const std::string& path) {
  if (!v.is_boolean()) throw InputError(path + ": expected true or false, got " + json_kind(v));
  return v.get<bool>();
}

// One product field: the JSON values it takes, already type-checked.
struct Axis {
  std::string field;
  std::vector<nlohmann::json> values;
};

Axis read_axis(const std::string& field, const nlohmann::json& j, const std::string& path) {
  Axis a{field, {}};
  if (field == "dtype") {
    if (j.is_array()) {
      for (size_t i = 0; i < j.size(); ++i) a.values.emplace_back(checked_dtype(j[i], index_path(path, i)));
      if (a.values.empty()) throw InputError(path + ": an empty list gives no shapes");
    } else {
      a.values.emplace_back(checked_dtype(j, path));
    }
  } else if (field == "causal") {
    if (j.is_array()) {
      for (size_t i = 0; i < j.size(); ++i) a.values.emplace_back(checked_bool(j[i], index_path(path, i)));
      if (a.values.empty()) throw InputError(path + ": an empty list gives no shapes");
    } else {
      a.values.emplace_back(checked_bool(j, path));
    }
  } else {
    for (auto v : integer_list(j, path)) a.values.emplace_back(v);
  }
  return a;
}

// h_q written in terms of h_kv.
struct HqRule {
  enum Kind { max_with_h_kv, qpk } kind;
  std::int64_t n;
  std::int64_t apply(std::int64_t h_kv) const { return kind == max_with_h_kv ? std::max(h_kv, n) : n * h_kv; }
};

std::optional<HqRule> read_hq_rule(const nlohmann::json& j, const std::string& path) {
  if (!j.is_object() || j.contains("from")) return std::nullopt;  // a number, a list or a range
  JsonReader r(j, path);
  const auto max_with = r.integer("max_with_h_kv");
  const auto qpk = r.integer("qpk");
  r.finish();
  if (max_with.has_value() == qpk.has_value())
    throw InputError(path + ": expected a number, a list, a range, {\"max_with_h_kv\": N} or {\"qpk\": N}");
  const std::int64_t n = max_with ? *max_with : *qpk;
  if (n < 1) throw InputError(r.path_of(max_with ? "max_with_h_kv" : "qpk") + ": must be >= 1, got " + std::to_string(n));
  return HqRule{max_with ? HqRule::max_with_h_kv : HqRule::qpk, n};
}

// Fields in expansion order: the first varies slowest. h_kv precedes h_q so that a rule
// for h_q sees the h_kv of the same shape.
constexpr const char* kProductFields[] = {"batch",    "h_kv",  "h_q",       "seqlen_q", "seqlen_k",
                                          "head_dim", "dtype", "page_size", "causal"};

void expand_product(const nlohmann::json& j, const std::string& path, std::vector<Shape>& out) {
  JsonReader r(j, path);
  std::vector<Axis> axes;
  std::optional<HqRule> hq_rule;
  for (const char* field : kProductFields) {
    const auto* v = r.member(field);
    if (!v) continue;
    if (std::string_view(field) == "h_q" && (hq_rule = read_hq_rule(*v, r.path_of(field)))) continue;
    axes.push_back(read_axis(field, *v, r.path_of(field)));
  }
  r.finish();
  if (hq_rule && !r.has("h_kv"))
    throw InputError(r.path_of("h_q") + ": a rule in terms of h_kv needs h_kv in the same product");

  std::int64_t count = 1;
  for (const auto& a : axes) {
    count *= static_cast<std::int64_t>(a.values.size());
    if (count > kMaxShapes) throw InputError(path + ": more than " + std::to_string(kMaxShapes) + " shapes");
  }

  std::vector<size_t> at(axes.size(), 0);  // an odometer over the axes, the last one fastest
  for (std::int64_t n = 0; n < count; ++n) {
    nlohmann::json s = nlohmann::json::object();
    for (size_t i = 0; i < axes.size(); ++i) s[axes[i].field] = axes[i].values[at[i]];
    if (hq_rule) s["h_q"] = hq_rule->apply(s["h_kv"].get<std::int64_t>());
    try {
      out.push_back(shape_from_json(s, path));
    } catch (const InputError& e) {
      throw InputError(std::string(e.what()) + " (in the shape " + s.dump() + ")");
    }
    for (size_t i = axes.size(); i-- > 0;) {
      if (++at[i] < axes[i].values.size()) break;
      at[i] = 0;
    }
  }
}

std::vector<int> read_sweep(const nlohmann::json& j, const std::string& path) {
  JsonReader r(j, path);
  const auto* splits = r.member("num_splits");
  r.finish();
  if (!splits) throw InputError(r.path_of("num_splits") + ": missing (the sweep needs values)");
  std::vector<int> out;
  std::set<std::int64_t> seen;
  const auto values = integer_list(*splits, r.path_of("num_splits"));
  for (size_t i = 0; i < values.size(); ++i) {
    const auto v = values[i];
    if (v < 1 || v > kMaxSplits)
      throw InputError((splits->is_array() ? index_path(r.path_of("num_splits"), i) : r.path_of("num_splits")) +
                       ": must be in [1, " + std::to_string(kMaxSplits) + "], got " + std::to_string(v));
    if (seen.insert(v).second) out.push_back(static_cast<int>(v));
  }
  return out;
}

// The domain's own sample, after the listed shapes and distinct from them.
void append_domain_sample(const Domain& domain, std::vector<Shape>& shapes) {
  try {
    for (const auto& s : sample_domain(domain, domain.samples, domain.seed, shapes)) shapes.push_back(s);
  } catch (const InputError& e) {
    throw InputError(std::string("$.domain.samples: ") + e.what());
  }
}

Workload read_workload(const nlohmann::json& j, const std::string& default_name) {
  JsonReader r(j, "$");
  Workload w;
  w.name = r.string("name").value_or(default_name);
  if (w.name.empty()) throw InputError("$.name: must not be empty");
  w.description = r.string("description").value_or("");

  std::vector<Shape> all;
  if (const auto* shapes = r.member("shapes")) {
    if (!shapes->is_array()) throw InputError(r.path_of("shapes") + ": expected an array, got " + json_kind(*shapes));
    for (size_t i = 0; i < shapes->size(); ++i) all.push_back(shape_from_json((*shapes)[i], index_path(r.path_of("shapes"), i)));
  }
  if (const auto* products = r.member("products")) {
    if (!products->is_array())
      throw InputError(r.path_of("products") + ": expected an array, got " + json_kind(*products));
    for (size_t i = 0; i < products->size(); ++i) {
      expand_product((*products)[i], index_path(r.path_of("products"), i), all);
      if (static_cast<std::int64_t>(all.size()) > kMaxShapes)
        throw InputError(r.path_of("products") + ": more than " + std::to_string(kMaxShapes) + " shapes");
    }
  }
  if (const auto* sweep = r.member("sweep")) w.split_sweep = read_sweep(*sweep, r.path_of("sweep"));
  if (const auto* domain = r.member("domain")) w.domain = domain_from_json(*domain, r.path_of("domain"));
  r.finish();

  std::set<std::string> seen;  // stable de-duplication: the first occurrence keeps its place
  for (const auto& s : all)
    if (seen.insert(to_json(s).dump()).second) w.shapes.push_back(s);
  if (w.domain) append_domain_sample(*w.domain, w.shapes);
  if (w.shapes.empty()) throw InputError("$: no shapes (give \"shapes\" or \"products\")");
  return w;
}

std::string stem_of(const std::string& path) { return std::filesystem::path(path).stem().string(); }

// "a, b; domains: c, d": the shape lists, then the domains (told apart by their "domain"
// member, without drawing their samples).
std::string shipped_names_by_kind() {
  std::vector<std::string> lists, domains;
  for (const auto& f : embedded::workload_files()) {
    const bool domain = parse_json_text(f.text, std::string(f.name)).contains("domain");
    (domain ? domains : lists).push_back(stem_of(std::string(f.name)));
  }
  auto joined = [](std::vector<std::string> names) {
    std::sort(names.begin(), names.end());
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
  };
  return joined(lists) + (domains.empty() ? "" : "; domains: " + joined(domains));
}

}  // namespace

nlohmann::json parse_json_text(std::string_view text, const std::string& source) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is 1-based and points at the offending character.
    const size_t end = std::min<size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
    size_t line = 1, column = 1;
    for (size_t i = 0; i < end; ++i) {
      if (text[i] == '\n') line++, column = 1;
      else column++;
    }
    // Keep nlohmann's explanation, drop its own prefix and position.
    std::string detail = e.what();
    if (const auto c = detail.find("column "); c != std::string::npos)
      if (const auto colon = detail.find(": ", c); colon != std::string::npos) detail = detail.substr(colon + 2);
    throw InputError(source + ": line " + std::to_string(line) + ", column " + std::to_string(column) +
                     ": invalid JSON: " + detail);
  }
}

std::string read_text_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw InputError(path + ": no such file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot read (" + std::strerror(errno) + ")");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw InputError(path + ": read error");
  return text.str();
}

Workload parse_workload(std::string_view text, const std::string& source, const std::string& default_name) {
  const nlohmann::json j = parse_json_text(text, source);
  try {
    Workload w = read_workload(j, default_name);
    w.source = source;
    return w;
  } catch (const InputError& e) {
    throw InputError(source + ": " + e.what());
  }
}

Workload resample_domain(Workload w, std::size_t samples) {
  if (!w.domain) throw InputError("workload " + w.name + " is not a domain: it cannot draw more shapes");
  w.shapes.resize(w.shapes.size() - std::min(w.shapes.size(), w.domain->samples));
  w.domain->samples = samples;
  append_domain_sample(*w.domain, w.shapes);
  return w;
}

std::vector<std::string> workload_names() {
  std::vector<std::string> names;
  for (const auto& f : embedded::workload_files()) names.push_back(stem_of(std::string(f.name)));
  std::sort(names.begin(), names.end());
  return names;
}

Workload load_workload(std::string_view name_or_path) {
  const std::string arg(name_or_path);
  if (const auto* f = find_embedded(embedded::workload_files(), arg + ".json"))
    return parse_workload(f->text, "workloads/" + std::string(f->name), arg);
  std::error_code ec;
  if (std::filesystem::exists(arg, ec)) return parse_workload(read_text_file(arg), arg, stem_of(arg));
  throw InputError("unknown workload \"" + arg + "\": not a shipped workload (" + shipped_names_by_kind() +
                   ") and no such file");
}

}  // namespace evodispatch

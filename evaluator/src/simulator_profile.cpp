// Simulator profiles: strict JSON, shipped ones embedded in the binary.
#include <evodispatch/evaluator/simulator.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <span>

#include <evodispatch/evaluator/workload.hpp>
#include <evodispatch/heuristics/embedded.hpp>
#include <evodispatch/heuristics/json_reader.hpp>

namespace evodispatch::embedded {
std::span<const EmbeddedFile> profile_files();  // evaluator/profiles/*.json, by cmake/Modules.cmake
}

namespace evodispatch {

namespace {

// Every model field is required: a profile states each parameter it predicts with, so a
// new A100 profile cannot silently inherit an H100 number.
double required_number(JsonReader& r, const std::string& field, double lo, double hi) {
  const auto v = r.number(field);
  if (!v) throw InputError(r.path_of(field) + ": missing (a number is required)");
  if (!std::isfinite(*v) || *v < lo || *v > hi) {
    char range[96];
    std::snprintf(range, sizeof range, "must be in [%g, %g], got %g", lo, hi, *v);
    throw InputError(r.path_of(field) + ": " + range);
  }
  return *v;
}

int required_int(JsonReader& r, const std::string& field, int lo, int hi) {
  const auto v = r.required_integer(field);
  if (v < lo || v > hi)
    throw InputError(r.path_of(field) + ": must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                     std::to_string(v));
  return static_cast<int>(v);
}

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

nlohmann::json to_json(const SimModel& m) {
  return {{"launch_first_us", m.launch_first_us},
          {"launch_extra_us", m.launch_extra_us},
          {"dram_efficiency", m.dram_efficiency},
          {"l2_bw_bytes_per_s", m.l2_bw_bytes_per_s},
          {"l2_fit_fraction", m.l2_fit_fraction},
          {"sm_dram_bw_bytes_per_s", m.sm_dram_bw_bytes_per_s},
          {"sm_l2_bw_bytes_per_s", m.sm_l2_bw_bytes_per_s},
          {"cta_start_us", m.cta_start_us},
          {"tile_us", m.tile_us},
          {"fp8_stream_fraction", m.fp8_stream_fraction},
          {"combine_cta_us", m.combine_cta_us},
          {"combine_split_row_us", m.combine_split_row_us},
          {"combine_ctas_per_sm", m.combine_ctas_per_sm},
          {"max_ctas_per_sm", m.max_ctas_per_sm}};
}

nlohmann::json to_json(const SimProfile& p) {
  nlohmann::json j = {{"name", p.name}, {"device", to_json(p.device)}, {"model", to_json(p.model)}};
  if (!p.description.empty()) j["description"] = p.description;
  if (!p.calibration.is_null()) j["calibration"] = p.calibration;
  return j;
}

SimModel sim_model_from_json(const nlohmann::json& j, const std::string& path) {
  JsonReader r(j, path);
  SimModel m;
  constexpr double kMaxUs = 1e6, kMaxBw = 1e15;
  m.launch_first_us = required_number(r, "launch_first_us", 0, kMaxUs);
  m.launch_extra_us = required_number(r, "launch_extra_us", 0, kMaxUs);
  m.dram_efficiency = required_number(r, "dram_efficiency", 0.01, 1);
  m.l2_bw_bytes_per_s = required_number(r, "l2_bw_bytes_per_s", 1e6, kMaxBw);
  m.l2_fit_fraction = required_number(r, "l2_fit_fraction", 0, 1);
  m.sm_dram_bw_bytes_per_s = required_number(r, "sm_dram_bw_bytes_per_s", 1e6, kMaxBw);
  m.sm_l2_bw_bytes_per_s = required_number(r, "sm_l2_bw_bytes_per_s", 1e6, kMaxBw);
  m.cta_start_us = required_number(r, "cta_start_us", 0, kMaxUs);
  m.tile_us = required_number(r, "tile_us", 0, kMaxUs);
  m.fp8_stream_fraction = required_number(r, "fp8_stream_fraction", 0.01, 1);
  m.combine_cta_us = required_number(r, "combine_cta_us", 0, kMaxUs);
  m.combine_split_row_us = required_number(r, "combine_split_row_us", 0, kMaxUs);
  m.combine_ctas_per_sm = required_int(r, "combine_ctas_per_sm", 1, 64);
  m.max_ctas_per_sm = required_int(r, "max_ctas_per_sm", 0, 64);
  r.finish();
  return m;
}

SimProfile sim_profile_from_json(const nlohmann::json& j, const std::string& path) {
  JsonReader r(j, path);
  SimProfile p;
  p.name = r.required_string("name");
  if (p.name.empty()) throw InputError(r.path_of("name") + ": must not be empty");
  p.description = r.string("description").value_or("");
  const auto* device = r.member("device");
  if (!device) throw InputError(r.path_of("device") + ": missing (an object is required)");
  p.device = device_from_json(*device, r.path_of("device"));
  if (!(p.device.mem_bw_bytes_per_s > 0) || !std::isfinite(p.device.mem_bw_bytes_per_s))
    throw InputError(r.path_of("device") + ".mem_bw_bytes_per_s: required, a bandwidth > 0 in bytes/s");
  if (p.device.l2_bytes < 0) throw InputError(r.path_of("device") + ".l2_bytes: must be >= 0");
  const auto* model = r.member("model");
  if (!model) throw InputError(r.path_of("model") + ": missing (an object is required)");
  p.model = sim_model_from_json(*model, r.path_of("model"));
  if (const auto* cal = r.member("calibration")) {
    if (!cal->is_object()) throw InputError(r.path_of("calibration") + ": expected an object, got " + json_kind(*cal));
    p.calibration = *cal;
  }
  r.finish();
  return p;
}

SimProfile parse_sim_profile(std::string_view text, const std::string& source) {
  const nlohmann::json j = parse_json_text(text, source);
  try {
    return sim_profile_from_json(j);
  } catch (const InputError& e) {
    throw InputError(source + ": " + e.what());
  }
}

std::vector<std::string> sim_profile_names() {
  std::vector<std::string> names;
  for (const auto& f : embedded::profile_files()) names.push_back(std::filesystem::path(f.name).stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

SimProfile load_sim_profile(std::string_view name_or_path) {
  const std::string arg(name_or_path);
  if (const auto* f = find_embedded(embedded::profile_files(), arg + ".json")) {
    SimProfile p = parse_sim_profile(f->text, "profiles/" + std::string(f->name));
    if (p.name != arg)  // the fingerprint carries the name: a shipped file must agree with it
      throw InputError("profiles/" + std::string(f->name) + ": $.name: must be \"" + arg + "\", got \"" + p.name + "\"");
    return p;
  }
  std::error_code ec;
  if (std::filesystem::exists(arg, ec)) return parse_sim_profile(read_text_file(arg), arg);
  std::string names;
  for (const auto& n : sim_profile_names()) names += (names.empty() ? "" : ", ") + n;
  throw InputError("unknown simulator profile \"" + arg + "\": not a shipped profile (" + names +
                   ") and no such file");
}

std::string profile_hash(const SimProfile& p) {
  const nlohmann::json j = {{"device", to_json(p.device)}, {"model", to_json(p.model)}};
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(j.dump())));
  return hex;
}

}  // namespace evodispatch

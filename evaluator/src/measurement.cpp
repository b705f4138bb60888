#include <evodispatch/evaluator/measurement.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include <evodispatch/heuristics/json_reader.hpp>

namespace evodispatch {

std::string_view to_string(L2Mode m) { return m == L2Mode::hot ? "hot" : "cold"; }

std::optional<L2Mode> parse_l2_mode(std::string_view s) {
  if (s == "cold") return L2Mode::cold;
  if (s == "hot") return L2Mode::hot;
  return std::nullopt;
}

SampleStats sample_stats(std::vector<double> v) {
  SampleStats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto quantile = [&](double q) {
    const double pos = q * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<std::size_t>(pos);
    const std::size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
  };
  s.median = quantile(0.5);
  s.p10 = quantile(0.1);
  s.p90 = quantile(0.9);
  return s;
}

nlohmann::json to_json(const TimingOptions& t) {
  return {{"l2", to_string(t.l2)}, {"min_replay_us", t.min_replay_us}, {"replays", t.replays}, {"warmup", t.warmup},
          {"check", t.check}};
}

TimingOptions timing_from_json(const nlohmann::json& j, const std::string& path) {
  JsonReader r(j, path);
  TimingOptions t;
  if (const auto l2 = r.string("l2")) {
    const auto mode = parse_l2_mode(*l2);
    if (!mode) throw InputError(r.path_of("l2") + ": must be \"cold\" or \"hot\", got \"" + *l2 + "\"");
    t.l2 = *mode;
  }
  if (const auto v = r.number("min_replay_us")) {
    if (!std::isfinite(*v) || *v < 0 || *v > 1e7) throw InputError(r.path_of("min_replay_us") + ": must be in [0, 1e7]");
    t.min_replay_us = *v;
  }
  auto count = [&](const char* field, int& out) {
    if (const auto v = r.integer(field)) {
      if (*v < 0 || *v > 1'000'000) throw InputError(r.path_of(field) + ": must be in [0, 1000000]");
      out = static_cast<int>(*v);
    }
  };
  count("replays", t.replays);
  count("warmup", t.warmup);
  if (const auto v = r.boolean("check")) t.check = *v;
  r.finish();
  return t;
}

nlohmann::json to_json(const MeasurementKey& k) {
  return {{"device", k.device},
          {"kernel_build", k.kernel_build},
          {"shape", to_json(k.shape)},
          {"decision", to_json(k.decision)},
          {"l2", to_string(k.l2)},
          {"measuring_protocol", k.measuring_protocol}};
}

int measuring_protocol_from_json(const nlohmann::json* value, const std::string& path) {
  if (!value) throw InputError(path + ": missing (an integer >= 1 is required)");
  const auto v = json_integer(*value, path);
  if (v < 1 || v > std::numeric_limits<int>::max()) throw InputError(path + ": must be an integer >= 1");
  return static_cast<int>(v);
}

nlohmann::json to_json(const Measurement& m) {
  nlohmann::json j = {{"key", to_json(m.key)},      {"ok", m.ok},           {"median_us", m.median_us},
                      {"p10_us", m.p10_us},          {"p90_us", m.p90_us},   {"samples", m.samples},
                      {"plan", m.plan}};
  if (!m.error.empty()) j["error"] = m.error;
  // JSON has no NaN: a non-finite error (NaN in the output) is written as null.
  if (m.rel_error) j["rel_error"] = std::isfinite(*m.rel_error) ? nlohmann::json(*m.rel_error) : nlohmann::json();
  return j;
}

namespace {

MeasurementKey key_from_json(const nlohmann::json& j, const std::string& path) {
  JsonReader r(j, path);
  MeasurementKey k;
  k.device = r.required_string("device");
  k.kernel_build = r.required_string("kernel_build");
  const auto* shape = r.member("shape");
  if (!shape) throw InputError(r.path_of("shape") + ": missing (an object is required)");
  k.shape = shape_from_json(*shape, r.path_of("shape"));
  const auto* decision = r.member("decision");
  if (!decision) throw InputError(r.path_of("decision") + ": missing (an object is required)");
  k.decision = decision_from_json(*decision, r.path_of("decision"));
  const std::string l2 = r.required_string("l2");
  const auto mode = parse_l2_mode(l2);
  if (!mode) throw InputError(r.path_of("l2") + ": must be \"cold\" or \"hot\", got \"" + l2 + "\"");
  k.l2 = *mode;
  k.measuring_protocol = measuring_protocol_from_json(r.member("measuring_protocol"), r.path_of("measuring_protocol"));
  r.finish();
  return k;
}

// Times are finite and non-negative; a row that says otherwise is corrupt.
double time_us(JsonReader& r, const std::string& field) {
  const auto v = r.number(field);
  if (!v) throw InputError(r.path_of(field) + ": missing (a number is required)");
  if (!std::isfinite(*v) || *v < 0) throw InputError(r.path_of(field) + ": must be a finite time >= 0");
  return *v;
}

}  // namespace

Measurement measurement_from_json(const nlohmann::json& j, const std::string& path) {
  JsonReader r(j, path);
  Measurement m;
  const auto* key = r.member("key");
  if (!key) throw InputError(r.path_of("key") + ": missing (an object is required)");
  m.key = key_from_json(*key, r.path_of("key"));
  const auto ok = r.boolean("ok");
  if (!ok) throw InputError(r.path_of("ok") + ": missing (true or false is required)");
  m.ok = *ok;
  m.error = r.string("error").value_or("");
  m.median_us = time_us(r, "median_us");
  m.p10_us = time_us(r, "p10_us");
  m.p90_us = time_us(r, "p90_us");
  const auto samples = r.integer("samples").value_or(0);
  if (samples < 0 || samples > 1'000'000'000)
    throw InputError(r.path_of("samples") + ": must be in [0, 1e9], got " + std::to_string(samples));
  m.samples = static_cast<int>(samples);
  if (const auto* rel = r.member("rel_error")) {
    if (rel->is_null()) m.rel_error = std::nan("");
    else if (!rel->is_number() || !(rel->get<double>() >= 0))
      throw InputError(r.path_of("rel_error") + ": expected a number >= 0 or null, got " + json_kind(*rel));
    else m.rel_error = rel->get<double>();
  }
  if (const auto* plan = r.member("plan")) m.plan = *plan;
  r.finish();
  if (!m.ok && m.error.empty()) throw InputError(r.path_of("error") + ": a failed row must say why");
  return m;
}

}  // namespace evodispatch

#include <evodispatch/search/features.hpp>

#include <nlohmann/json.hpp>

#include <evodispatch/heuristics/json_reader.hpp>

namespace evodispatch::search {

namespace {
struct Info {
  std::string_view name;
  std::string_view lua;
  std::int64_t min;
};
// Indexed by Feature.
constexpr Info kInfo[kNumFeatures] = {
    {"batch", "s.batch", 1},       {"seqlen_q", "s.seqlen_q", 1}, {"seqlen_k", "s.seqlen_k", 1},
    {"h_q", "s.h_q", 1},           {"h_kv", "s.h_kv", 1},         {"qpk", "s.qpk", 1},
    {"head_dim", "s.head_dim", 8}, {"nblk", "s.nblk", 1},         {"page_size", "s.page_size", 0},
    {"ctas", "(s.batch * s.h_kv)", 1}, {"num_sms", "hw.num_sms", 1},
    {"waves_pct", "(s.batch * s.h_kv * 100 // hw.num_sms)", 0},
    {"kv_kib", "(s.seqlen_k * s.head_dim * (s.dtype == \"fp8\" and 2 or 4) // 1024)", 0},
};
}  // namespace

std::string_view name(Feature f) { return kInfo[static_cast<int>(f)].name; }

std::optional<Feature> parse_feature(std::string_view n) {
  for (int i = 0; i < kNumFeatures; ++i)
    if (kInfo[i].name == n) return static_cast<Feature>(i);
  return std::nullopt;
}

std::string feature_names() {
  std::string names;
  for (int i = 0; i < kNumFeatures; ++i) names += (i ? ", " : "") + std::string(kInfo[i].name);
  return names;
}

Feature feature_at(const nlohmann::json& v, const std::string& path, UnknownFeature report) {
  if (!v.is_string()) throw InputError(path + ": expected a feature name, got " + json_kind(v));
  const auto f = parse_feature(v.get<std::string>());
  if (f) return *f;
  std::string what = path + ": unknown feature \"" + v.get<std::string>() + "\"";
  if (report == UnknownFeature::list_choices) what += " (features: " + feature_names() + ")";
  throw InputError(what);
}

std::string_view lua_expression(Feature f) { return kInfo[static_cast<int>(f)].lua; }
std::int64_t domain_min(Feature f) { return kInfo[static_cast<int>(f)].min; }
bool positive(Feature f) { return domain_min(f) > 0; }
bool categorical(Feature f) { return f == Feature::head_dim || f == Feature::page_size; }

std::int64_t value(Feature f, const Shape& s, const DeviceInfo& hw) {
  switch (f) {
    case Feature::batch: return s.batch;
    case Feature::seqlen_q: return s.seqlen_q;
    case Feature::seqlen_k: return s.seqlen_k;
    case Feature::h_q: return s.h_q;
    case Feature::h_kv: return s.h_kv;
    case Feature::qpk: return features(s).qpk;
    case Feature::head_dim: return s.head_dim;
    case Feature::nblk: return features(s).nblk;
    case Feature::page_size: return s.page_size;
    case Feature::ctas: return static_cast<std::int64_t>(s.batch) * s.h_kv;
    case Feature::num_sms: return hw.num_sms;
    case Feature::waves_pct: return evodispatch::waves_pct(s, hw);
    case Feature::kv_kib: return evodispatch::kv_kib(s);
  }
  return 0;
}

FeatureValues feature_values(const Shape& s, const DeviceInfo& hw) {
  FeatureValues v{};
  for (int i = 0; i < kNumFeatures; ++i) v[i] = value(static_cast<Feature>(i), s, hw);
  return v;
}

FeatureSet::FeatureSet() : bits_((1u << kNumFeatures) - 1) {}

FeatureSet FeatureSet::search_default() {
  FeatureSet s;
  s.bits_ &= ~((1u << static_cast<int>(Feature::waves_pct)) | (1u << static_cast<int>(Feature::kv_kib)));
  return s;
}

FeatureSet::FeatureSet(const std::vector<Feature>& fs) {
  for (Feature f : fs) bits_ |= 1u << static_cast<int>(f);
}

std::vector<Feature> FeatureSet::list() const {
  std::vector<Feature> out;
  for (int i = 0; i < kNumFeatures; ++i)
    if (contains(static_cast<Feature>(i))) out.push_back(static_cast<Feature>(i));
  return out;
}

}  // namespace evodispatch::search

#pragma once
// The shape features a rule may test or compute with. Each has a name (configs and
// the rule JSON), a Lua expression over the dispatch arguments (s, hw), and a C++
// value, so the rendered program and the engine agree on what a feature means.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include <evodispatch/heuristics/contract.hpp>

namespace evodispatch::search {

enum class Feature : std::uint8_t {
  batch,
  seqlen_q,
  seqlen_k,
  h_q,
  h_kv,
  qpk,
  head_dim,
  nblk,       // KV tiles of the built-in kernel: ceil(seqlen_k / block_n)
  page_size,  // 0 = contiguous
  ctas,       // batch * h_kv: the CTAs of one split when GQA is packed (seqlen_q = 1)
  num_sms,    // of the device
  // The two below carry across GPUs and head dims, where batch, h_kv and seqlen_k do not.
  waves_pct,  // ctas * 100 / num_sms: one split's CTAs as a percentage of one wave
  kv_kib,     // KiB of K and V one CTA reads unsplit: 2 * seqlen_k * head_dim * element bytes / 1024
};
inline constexpr int kNumFeatures = 13;

std::string_view name(Feature);
std::optional<Feature> parse_feature(std::string_view);
// Every feature name in enum order, comma-separated ("batch, seqlen_q, ...").
std::string feature_names();

// How feature_at reports a name it does not know. A config is written by hand, so its
// error lists the choices; a stored rule list is written by the engine, so naming the
// value is enough.
enum class UnknownFeature { name_it, list_choices };
// The feature a JSON string names; otherwise an InputError at `path`.
Feature feature_at(const nlohmann::json&, const std::string& path, UnknownFeature = UnknownFeature::name_it);
// The Lua expression of the feature, parenthesised where it is a product.
std::string_view lua_expression(Feature);
// The smallest value a valid shape can give (a lower bound at or below it is no condition).
std::int64_t domain_min(Feature);
// Whether the feature can never be 0, so dividing by it is safe.
bool positive(Feature);
// Whether the feature names a kind rather than a quantity (head_dim, page_size): the only
// features a rule may test for equality; every other is tested by range.
bool categorical(Feature);

std::int64_t value(Feature, const Shape&, const DeviceInfo&);

// Every feature's value for one shape, in enum order.
using FeatureValues = std::array<std::int64_t, kNumFeatures>;
FeatureValues feature_values(const Shape&, const DeviceInfo&);

// A set of features a run may use (config "features"); all of them by default.
class FeatureSet {
 public:
  FeatureSet();  // all
  explicit FeatureSet(const std::vector<Feature>&);
  // What a search uses unless its config says otherwise: all but waves_pct and kv_kib. On
  // one GPU those two repeat what ctas and seqlen_k x head_dim say, and offered to the
  // operators they cost the simulator's models-decode winner about 12 points of the
  // oracle's gain (docs/search.md); they are for rules meant to cross GPUs.
  static FeatureSet search_default();
  bool contains(Feature f) const { return (bits_ >> static_cast<int>(f)) & 1u; }
  std::vector<Feature> list() const;  // in enum order
  bool empty() const { return bits_ == 0; }
  bool operator==(const FeatureSet&) const = default;

 private:
  std::uint32_t bits_ = 0;
};

}  // namespace evodispatch::search

// The decision-function IR of distill.hpp: features, the interpreter, JSON, shape sets.
#include <evodispatch/heuristics/distill.hpp>
#include <evodispatch/heuristics/policy.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>

namespace evodispatch::distill {

namespace {
constexpr std::string_view kNames[kNumFeatures] = {"batch", "seqlen_q", "seqlen_k", "h_q",       "h_kv",
                                                   "qpk",   "head_dim", "nblk",     "page_size", "ctas",
                                                   "num_sms", "dtype",  "causal",   "cc",   "waves_pct",
                                                   "kv_kib"};

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
}  // namespace

std::string_view name(Feature f) { return kNames[static_cast<int>(f)]; }

std::string_view name(Fallback f) {
  switch (f) {
    case Fallback::fa3: return "fa3";
    case Fallback::fa3_kvcache: return "fa3-kvcache";
    case Fallback::none: break;
  }
  return "none";
}

std::optional<Feature> parse_feature(std::string_view n) {
  for (int i = 0; i < kNumFeatures; ++i)
    if (kNames[i] == n) return static_cast<Feature>(i);
  return std::nullopt;
}

Values feature_values(const Shape& s, const DeviceInfo& hw) {
  const Features f = features(s);
  Values v{};
  v[int(Feature::batch)] = s.batch;
  v[int(Feature::seqlen_q)] = s.seqlen_q;
  v[int(Feature::seqlen_k)] = s.seqlen_k;
  v[int(Feature::h_q)] = s.h_q;
  v[int(Feature::h_kv)] = s.h_kv;
  v[int(Feature::qpk)] = f.qpk;
  v[int(Feature::head_dim)] = s.head_dim;
  v[int(Feature::nblk)] = f.nblk;
  v[int(Feature::page_size)] = s.page_size;
  v[int(Feature::ctas)] = std::int64_t(s.batch) * s.h_kv;
  v[int(Feature::num_sms)] = hw.num_sms;
  v[int(Feature::dtype)] = static_cast<int>(s.dtype);
  v[int(Feature::causal)] = s.causal ? 1 : 0;
  v[int(Feature::cc)] = hw.cc;
  v[int(Feature::waves_pct)] = waves_pct(s, hw);
  v[int(Feature::kv_kib)] = kv_kib(s);
  return v;
}

namespace {
bool holds(const Rule& r, const Values& v) {
  for (const auto& b : r.when) {
    const std::int64_t x = v[int(b.feature)];
    if (x < b.lo || x > b.hi) return false;
  }
  return true;
}

int eval_split(const SplitExpr& e, const Values& v) {
  if (e.is_constant()) return e.constant;
  std::int64_t x = std::numeric_limits<std::int64_t>::max();
  if (e.quotient) x = floor_div(v[int(e.quotient->num)], v[int(e.quotient->den)] * e.quotient->div);
  if (e.ceil_div) {
    const std::int64_t k = e.ceil_div->k;
    x = std::min(x, floor_div(v[int(e.ceil_div->of)] + k - 1, k));
  }
  return static_cast<int>(std::clamp<std::int64_t>(x, e.lo, e.hi));
}
}  // namespace

Decision evaluate(const DecisionFunction& fn, const Shape& s, const DeviceInfo& hw) {
  const Values v = feature_values(s, hw);
  for (const auto& r : fn.rules) {
    if (!holds(r, v)) continue;
    Decision d;
    d.num_splits = eval_split(r.num_splits, v);
    d.pack_gqa = r.pack_gqa;
    d.sm_margin = r.sm_margin;
    return resolve(d, s);
  }
  if (fn.fallback == Fallback::fa3 || fn.fallback == Fallback::fa3_kvcache) {
    const Decision base = fn.fallback == Fallback::fa3 ? fa3_reference(s, hw) : fa3_kvcache_reference(s, hw);
    return fn.model ? model_decision(*fn.model, s, hw, base) : resolve(base, s);
  }
  throw InputError("distilled function: no rule holds for " + describe(s) + " and there is no fallback");
}

std::vector<Feature> features_used(const DecisionFunction& fn) {
  std::set<Feature> fs;
  for (const auto& r : fn.rules) {
    for (const auto& b : r.when) fs.insert(b.feature);
    if (r.num_splits.quotient) {
      fs.insert(r.num_splits.quotient->num);
      fs.insert(r.num_splits.quotient->den);
    }
    if (r.num_splits.ceil_div) fs.insert(r.num_splits.ceil_div->of);
  }
  if (fn.model)
    for (Feature f : {Feature::batch, Feature::seqlen_q, Feature::seqlen_k, Feature::h_q, Feature::h_kv, Feature::head_dim,
                      Feature::dtype, Feature::num_sms})
      fs.insert(f);
  return {fs.begin(), fs.end()};
}

// ---- JSON ------------------------------------------------------------------------

namespace {
nlohmann::json bound_json(std::int64_t x) {
  if (x == INT64_MIN || x == INT64_MAX) return nullptr;
  return x;
}

nlohmann::json split_json(const SplitExpr& e) {
  // An expression has no constant: null, so the reader never sees a placeholder.
  nlohmann::json j = {{"constant", e.is_constant() ? nlohmann::json(e.constant) : nlohmann::json(nullptr)},
                      {"lo", e.lo},
                      {"hi", e.hi}};
  j["quotient"] = e.quotient ? nlohmann::json{{"num", name(e.quotient->num)},
                                              {"den", name(e.quotient->den)},
                                              {"div", e.quotient->div}}
                             : nlohmann::json(nullptr);
  j["ceil_div"] = e.ceil_div ? nlohmann::json{{"of", name(e.ceil_div->of)}, {"k", e.ceil_div->k}}
                             : nlohmann::json(nullptr);
  return j;
}

[[noreturn]] void bad(const std::string& path, const std::string& what) { throw InputError(path + ": " + what); }

void allow_only(const nlohmann::json& j, const std::string& path, std::initializer_list<std::string_view> keys) {
  if (!j.is_object()) bad(path, "must be an object");
  for (const auto& [k, _] : j.items())
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) bad(path + "." + k, "unknown field");
}

std::int64_t get_int(const nlohmann::json& j, const std::string& path) {
  if (!j.is_number_integer()) bad(path, "must be an integer");
  return j.get<std::int64_t>();
}

int get_small(const nlohmann::json& j, const std::string& path, std::int64_t lo, std::int64_t hi) {
  const std::int64_t x = get_int(j, path);
  if (x < lo || x > hi) bad(path, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                                      std::to_string(x));
  return static_cast<int>(x);
}

Feature get_feature(const nlohmann::json& j, const std::string& path) {
  if (!j.is_string()) bad(path, "must be a feature name");
  auto f = parse_feature(j.get<std::string>());
  if (!f) bad(path, "unknown feature '" + j.get<std::string>() + "'");
  return *f;
}

const nlohmann::json& member(const nlohmann::json& j, const std::string& key, const std::string& path) {
  if (!j.contains(key)) bad(path + "." + key, "is required");
  return j.at(key);
}
}  // namespace

nlohmann::json to_json(const DecisionFunction& fn) {
  nlohmann::json rules = nlohmann::json::array();
  for (const auto& r : fn.rules) {
    nlohmann::json when = nlohmann::json::array();
    for (const auto& b : r.when) when.push_back({{"feature", name(b.feature)}, {"lo", bound_json(b.lo)}, {"hi", bound_json(b.hi)}});
    rules.push_back({{"when", when},
                     {"num_splits", split_json(r.num_splits)},
                     {"pack_gqa", r.pack_gqa ? nlohmann::json(*r.pack_gqa) : nlohmann::json(nullptr)},
                     {"sm_margin", r.sm_margin}});
  }
  nlohmann::json j = {{"schema", kSchemaVersion},
                      {"method", fn.method},
                      {"fallback", name(fn.fallback)},
                      {"rules", rules},
                      {"provenance", fn.provenance}};
  if (fn.model) j["model"] = to_json(*fn.model);
  return j;
}

DecisionFunction decision_function_from_json(const nlohmann::json& j, const std::string& path) {
  allow_only(j, path, {"schema", "method", "fallback", "rules", "model", "provenance"});
  DecisionFunction fn;
  const int schema = get_small(member(j, "schema", path), path + ".schema", 1, 1000);
  if (schema != kSchemaVersion)
    bad(path + ".schema", "version " + std::to_string(schema) + " is not supported (this build reads " +
                              std::to_string(kSchemaVersion) + ")");
  if (j.contains("method")) {
    if (!j["method"].is_string()) bad(path + ".method", "must be a string");
    fn.method = j["method"].get<std::string>();
  }
  const auto& fb = member(j, "fallback", path);
  if (fb == "fa3") fn.fallback = Fallback::fa3;
  else if (fb == "fa3-kvcache") fn.fallback = Fallback::fa3_kvcache;
  else if (fb == "none") fn.fallback = Fallback::none;
  else bad(path + ".fallback", "must be \"fa3\", \"fa3-kvcache\" or \"none\"");
  const auto& rules = member(j, "rules", path);
  if (!rules.is_array()) bad(path + ".rules", "must be an array");
  for (std::size_t i = 0; i < rules.size(); ++i) {
    const std::string rp = path + ".rules[" + std::to_string(i) + "]";
    const auto& rj = rules[i];
    allow_only(rj, rp, {"when", "num_splits", "pack_gqa", "sm_margin"});
    Rule r;
    const auto& when = member(rj, "when", rp);
    if (!when.is_array()) bad(rp + ".when", "must be an array");
    for (std::size_t k = 0; k < when.size(); ++k) {
      const std::string bp = rp + ".when[" + std::to_string(k) + "]";
      allow_only(when[k], bp, {"feature", "lo", "hi"});
      Bound b;
      b.feature = get_feature(member(when[k], "feature", bp), bp + ".feature");
      if (when[k].contains("lo") && !when[k]["lo"].is_null()) b.lo = get_int(when[k]["lo"], bp + ".lo");
      if (when[k].contains("hi") && !when[k]["hi"].is_null()) b.hi = get_int(when[k]["hi"], bp + ".hi");
      r.when.push_back(b);
    }
    const std::string sp = rp + ".num_splits";
    const auto& sj = member(rj, "num_splits", rp);
    allow_only(sj, sp, {"constant", "lo", "hi", "quotient", "ceil_div"});
    r.num_splits.lo = sj.contains("lo") ? get_small(sj["lo"], sp + ".lo", 1, kMaxSplits) : 1;
    r.num_splits.hi = sj.contains("hi") ? get_small(sj["hi"], sp + ".hi", 1, kMaxSplits) : kMaxSplits;
    if (sj.contains("quotient") && !sj["quotient"].is_null()) {
      const auto& q = sj["quotient"];
      allow_only(q, sp + ".quotient", {"num", "den", "div"});
      Quotient qt;
      qt.num = get_feature(member(q, "num", sp + ".quotient"), sp + ".quotient.num");
      qt.den = get_feature(member(q, "den", sp + ".quotient"), sp + ".quotient.den");
      qt.div = get_small(member(q, "div", sp + ".quotient"), sp + ".quotient.div", 1, 1 << 20);
      r.num_splits.quotient = qt;
    }
    if (sj.contains("ceil_div") && !sj["ceil_div"].is_null()) {
      const auto& c = sj["ceil_div"];
      allow_only(c, sp + ".ceil_div", {"of", "k"});
      CeilDiv cd;
      cd.of = get_feature(member(c, "of", sp + ".ceil_div"), sp + ".ceil_div.of");
      cd.k = get_small(member(c, "k", sp + ".ceil_div"), sp + ".ceil_div.k", 1, 1 << 20);
      r.num_splits.ceil_div = cd;
    }
    // An expression's constant is unused: null (earlier files wrote 0), never read.
    if (r.num_splits.is_constant())
      r.num_splits.constant = get_small(member(sj, "constant", sp), sp + ".constant", 1, kMaxSplits);
    if (rj.contains("pack_gqa") && !rj["pack_gqa"].is_null()) {
      if (!rj["pack_gqa"].is_boolean()) bad(rp + ".pack_gqa", "must be true, false or null");
      r.pack_gqa = rj["pack_gqa"].get<bool>();
    }
    r.sm_margin = rj.contains("sm_margin") ? get_small(rj["sm_margin"], rp + ".sm_margin", 0, 1 << 20) : 0;
    fn.rules.push_back(std::move(r));
  }
  if (j.contains("provenance")) fn.provenance = j["provenance"];
  if (j.contains("model")) {
    fn.model = latency_model_from_json(j["model"], path + ".model");
    if (fn.fallback == Fallback::none)
      bad(path + ".model", "a latency model needs fallback \"fa3\" or \"fa3-kvcache\" (its baseline)");
  }
  if (fn.fallback == Fallback::none && (fn.rules.empty() || !fn.rules.back().when.empty()))
    bad(path + ".rules", "with fallback \"none\" the last rule must be unconditional");
  return fn;
}

// ---- shapes ------------------------------------------------------------------------

Domain Domain::dense() {
  Domain d;
  d.batch = {1, 2, 3, 4, 5, 6, 8, 12, 16, 17, 24, 32, 33, 48, 64, 65, 96, 128, 129, 192, 256};
  d.seqlen_k = {1,    64,   127,  128,  129,  255,  256,   257,   384,   511,   512,   513,   768,   1024,  1025,
                1536, 2048, 2049, 3072, 4096, 4097, 6144, 8192, 8193, 16384, 16385, 32768, 65536, 131072};
  d.seqlen_q = {1, 4};
  d.h_kv = {1, 2, 4, 8, 16, 32};
  d.qpk = {1, 2, 4, 8, 16};
  d.head_dim = {64, 128, 256};
  d.page_size = {0, 256};
  d.dtype = {Dtype::bf16, Dtype::fp16};
  d.causal = {true};
  return d;
}

Domain Domain::small() {
  Domain d;
  d.batch = {1, 2, 4, 8, 16, 17, 32, 64};
  d.seqlen_k = {1, 128, 129, 512, 1024, 2048, 2049, 4096, 8192};
  d.seqlen_q = {1};
  d.h_kv = {1, 2, 8, 32};
  d.qpk = {1, 8};
  d.head_dim = {128};
  d.page_size = {0};
  d.dtype = {Dtype::bf16};
  d.causal = {true};
  return d;
}

nlohmann::json Domain::to_json() const {
  std::vector<std::string> dt;
  for (Dtype x : dtype) dt.emplace_back(to_string(x));
  std::vector<bool> c(causal.begin(), causal.end());
  return {{"batch", batch}, {"seqlen_k", seqlen_k}, {"seqlen_q", seqlen_q}, {"h_kv", h_kv},     {"qpk", qpk},
          {"head_dim", head_dim}, {"page_size", page_size}, {"dtype", dt}, {"causal", c}};
}

std::vector<Shape> grid_shapes(const Domain& d) {
  std::vector<Shape> out;
  for (int hd : d.head_dim)
    for (Dtype dt : d.dtype)
      for (int ps : d.page_size)
        for (int lq : d.seqlen_q)
          for (bool c : d.causal)
            for (int hkv : d.h_kv)
              for (int q : d.qpk)
                for (int b : d.batch)
                  for (int lk : d.seqlen_k) {
                    Shape s;
                    s.batch = b;
                    s.seqlen_q = lq;
                    s.seqlen_k = lk;
                    s.h_kv = hkv;
                    s.h_q = hkv * q;
                    s.head_dim = hd;
                    s.dtype = dt;
                    s.page_size = ps;
                    s.causal = c;
                    out.push_back(s);
                  }
  return out;
}

std::vector<Shape> random_shapes(const Domain& d, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](const auto& v) { return v[std::uniform_int_distribution<std::size_t>(0, v.size() - 1)(rng)]; };
  auto range = [&](const std::vector<int>& v) {
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    return std::uniform_int_distribution<int>(*lo, *hi)(rng);
  };
  const auto [klo, khi] = std::minmax_element(d.seqlen_k.begin(), d.seqlen_k.end());
  std::uniform_real_distribution<double> logk(std::log(double(*klo)), std::log(double(*khi) + 1));
  std::vector<Shape> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    Shape s;
    s.batch = range(d.batch);
    s.seqlen_q = range(d.seqlen_q);
    s.seqlen_k = std::clamp(static_cast<int>(std::exp(logk(rng))), *klo, *khi);
    s.h_kv = pick(d.h_kv);
    s.h_q = s.h_kv * pick(d.qpk);
    s.head_dim = pick(d.head_dim);
    s.dtype = pick(d.dtype);
    s.page_size = pick(d.page_size);
    s.causal = pick(d.causal);
    out.push_back(s);
  }
  return out;
}

}  // namespace evodispatch::distill

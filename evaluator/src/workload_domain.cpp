// Domain workloads: the "domain" object of a workload file and its seeded sampler
// (format in workload.hpp).
#include <algorithm>
#include <bit>
#include <limits>
#include <set>

#include <evodispatch/evaluator/workload.hpp>
#include <evodispatch/heuristics/json_reader.hpp>

#include "workload_json.hpp"

namespace evodispatch {

namespace {

using workload_json::index_path;

constexpr std::int64_t kMaxSamples = 1 << 20;

// splitmix64: a whole generator in one word of state, integer arithmetic only, so a seed
// gives the same stream on every machine (the search's Rng lives in search/, which the
// evaluator must not depend on; std::uniform_*_distribution differs between libraries).
class SampleRng {
 public:
  explicit SampleRng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n), n > 0: rejects the short last interval so no value is favoured.
  std::uint64_t below(std::uint64_t n) {
    const std::uint64_t threshold = (0 - n) % n;  // 2^64 mod n
    for (;;)
      if (const std::uint64_t x = next(); x >= threshold) return x % n;
  }

 private:
  std::uint64_t state_;
};

constexpr int kLogFractionBits = 32;

// log2(x) for x >= 1 in fixed point with 32 fraction bits, by repeated squaring in
// integers: no libm, so every machine rounds the same way. Monotone in x.
std::uint64_t log2_fixed(std::uint64_t x) {
  const int whole = std::bit_width(x) - 1;
  constexpr int kOne = 62;  // y holds x / 2^whole in [1, 2) with 62 fraction bits
  std::uint64_t y = whole <= kOne ? x << (kOne - whole) : x >> (whole - kOne);
  std::uint64_t fraction = 0;
  for (int bit = 0; bit < kLogFractionBits; ++bit) {
    y = static_cast<std::uint64_t>((static_cast<unsigned __int128>(y) * y) >> kOne);  // y in [1, 4)
    fraction <<= 1;
    if (y >> (kOne + 1)) {
      y >>= 1;
      fraction |= 1;
    }
  }
  return (static_cast<std::uint64_t>(whole) << kLogFractionBits) | fraction;
}

// An integer of [lo, hi] whose logarithm is uniform: the real x drawn log-uniformly in
// [lo, hi + 1), rounded down. Every factor of 2 of the range is about equally likely.
int draw_log_uniform(int lo, int hi, SampleRng& rng) {
  const std::uint64_t log_lo = log2_fixed(static_cast<std::uint64_t>(lo));
  const std::uint64_t span = log2_fixed(static_cast<std::uint64_t>(hi) + 1) - log_lo;
  const std::uint64_t t = log_lo + static_cast<std::uint64_t>((static_cast<unsigned __int128>(span) * (rng.next() >> 32)) >> 32);
  int a = lo, b = hi;  // the largest v in [lo, hi] with log2(v) <= t
  while (a < b) {
    const int mid = a + (b - a + 1) / 2;
    if (log2_fixed(static_cast<std::uint64_t>(mid)) <= t) a = mid;
    else b = mid - 1;
  }
  return a;
}

int draw(const DomainAxis& axis, SampleRng& rng) {
  switch (axis.draw) {
    case DomainAxis::Draw::log_uniform: return draw_log_uniform(axis.lo, axis.hi, rng);
    case DomainAxis::Draw::uniform:
      return axis.lo + static_cast<int>(rng.below(static_cast<std::uint64_t>(axis.hi - axis.lo) + 1));
    case DomainAxis::Draw::values: break;
  }
  return axis.values[rng.below(axis.values.size())];
}

template <class T>
const T& pick(const std::vector<T>& values, SampleRng& rng) {
  return values[rng.below(values.size())];
}

// The per-GPU heads of every (model, applicable degree) pair, in file order: the draw
// picks one of these uniformly, so a configuration many models share is drawn more often.
std::vector<Shape> head_configs(const Domain& d) {
  std::vector<Shape> out;
  for (const auto& m : d.models)
    for (int tp : d.tensor_parallel)
      if (auto heads = heads_per_gpu(m, tp)) out.push_back(*heads);
  return out;
}

bool same_heads(const Shape& a, const Shape& b) {
  return a.h_q == b.h_q && a.h_kv == b.h_kv && a.head_dim == b.head_dim;
}

std::string shape_key(const Shape& s) { return to_json(s).dump(); }

std::int64_t saturating_product(std::initializer_list<std::int64_t> factors) {
  std::int64_t p = 1;
  for (std::int64_t f : factors) {
    if (f != 0 && p > std::numeric_limits<std::int64_t>::max() / f) return std::numeric_limits<std::int64_t>::max();
    p *= f;
  }
  return p;
}

Shape draw_shape(const Domain& d, const std::vector<Shape>& heads, SampleRng& rng) {
  Shape s = pick(heads, rng);
  s.dtype = pick(d.dtypes, rng);
  // Drawn only for an fp8 cache, so that a domain without one samples as it always did.
  if (s.dtype == Dtype::fp8) s.q_dtype = d.q_dtypes.size() == 1 ? d.q_dtypes[0] : pick(d.q_dtypes, rng);
  s.page_size = pick(d.page_sizes, rng);
  s.batch = draw(d.batch, rng);
  s.seqlen_q = draw(d.seqlen_q, rng);
  s.seqlen_k = draw(d.seqlen_k, rng);
  s.causal = true;
  return s;
}

// ---- reading the "domain" object ----

std::string out_of_range(std::int64_t v) { return ", got " + std::to_string(v); }

int in_range(std::int64_t v, const std::string& path, std::int64_t lo, std::int64_t hi, const std::string& what) {
  if (v < lo || v > hi) throw InputError(path + ": " + what + out_of_range(v));
  return static_cast<int>(v);
}

int bounded_int(const nlohmann::json& j, const std::string& path, std::int64_t lo, std::int64_t hi, const std::string& what) {
  return in_range(json_integer(j, path), path, lo, hi, what);
}

// One value or an array of them, each read by `one`; repeats are dropped.
template <class T, class Read>
std::vector<T> one_or_many(const nlohmann::json& j, const std::string& path, Read one) {
  std::vector<T> out;
  auto add = [&](T v) {
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  };
  if (!j.is_array()) {
    add(one(j, path));
    return out;
  }
  if (j.empty()) throw InputError(path + ": an empty list gives no shapes");
  for (std::size_t i = 0; i < j.size(); ++i) add(one(j[i], index_path(path, i)));
  return out;
}

DomainAxis axis_from_json(const nlohmann::json& j, const std::string& path) {
  DomainAxis a;
  if (!j.is_object()) {
    a.values = one_or_many<int>(j, path, [](const nlohmann::json& v, const std::string& p) {
      return bounded_int(v, p, 1, std::numeric_limits<int>::max(), "must be >= 1");
    });
    a.lo = *std::min_element(a.values.begin(), a.values.end());
    a.hi = *std::max_element(a.values.begin(), a.values.end());
    return a;
  }
  JsonReader r(j, path);
  r.allow_only({"from", "to", "distribution"});
  const std::int64_t from = r.required_integer("from");
  const std::int64_t to = r.required_integer("to");
  const std::string how = r.string("distribution").value_or("log-uniform");
  r.finish();
  a.lo = in_range(from, r.path_of("from"), 1, std::numeric_limits<int>::max() - 1, "must be >= 1");
  a.hi = in_range(to, r.path_of("to"), a.lo, std::numeric_limits<int>::max() - 1, "must be >= from (" + std::to_string(a.lo) + ")");
  if (how == "log-uniform") a.draw = DomainAxis::Draw::log_uniform;
  else if (how == "uniform") a.draw = DomainAxis::Draw::uniform;
  else throw InputError(r.path_of("distribution") + ": must be \"log-uniform\" or \"uniform\", got \"" + how + "\"");
  return a;
}

// The axis's extremes must make valid shapes (batch <= 65536, seqlen_q <= 16, ...).
void check_axis_bounds(const DomainAxis& a, int Shape::*field, const std::string& domain_path) {
  for (int v : {a.lo, a.hi}) {
    Shape s{1, 1, 1, 1, 1, 128, Dtype::bf16, 0, true};
    s.*field = v;
    validate(s, domain_path);
  }
}

DomainModel model_from_json(const nlohmann::json& j, const std::string& path) {
  JsonReader r(j, path);
  DomainModel m;
  m.name = r.required_string("name");
  m.source = r.required_string("source");
  const auto head = [&](const char* field) {
    return in_range(r.required_integer(field), r.path_of(field), 1, 4096, "must be in [1, 4096]");
  };
  m.h_q = head("h_q");
  m.h_kv = head("h_kv");
  m.head_dim = head("head_dim");
  r.finish();
  if (m.name.empty()) throw InputError(r.path_of("name") + ": must not be empty");
  if (m.source.empty()) throw InputError(r.path_of("source") + ": must say where the numbers come from");
  validate(Shape{1, 1, 1, m.h_q, m.h_kv, m.head_dim, Dtype::bf16, 0, true}, path);
  return m;
}

std::vector<DomainModel> models_from_json(const nlohmann::json& j, const std::string& path) {
  if (!j.is_array()) throw InputError(path + ": expected an array, got " + json_kind(j));
  if (j.empty()) throw InputError(path + ": an empty list gives no shapes");
  std::vector<DomainModel> out;
  for (std::size_t i = 0; i < j.size(); ++i) out.push_back(model_from_json(j[i], index_path(path, i)));
  return out;
}

std::string list_text(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return "[" + s + "]";
}

// A model that no listed degree applies to would never be drawn: most likely a typo.
void check_every_model_applies(const Domain& d, const std::string& models_path) {
  for (std::size_t i = 0; i < d.models.size(); ++i) {
    const auto& m = d.models[i];
    const bool applies = std::any_of(d.tensor_parallel.begin(), d.tensor_parallel.end(),
                                     [&](int tp) { return heads_per_gpu(m, tp).has_value(); });
    if (!applies)
      throw InputError(index_path(models_path, i) + ": no tensor-parallel degree of " + list_text(d.tensor_parallel) +
                       " applies to h_q " + std::to_string(m.h_q) + ", h_kv " + std::to_string(m.h_kv) +
                       " (a degree must divide h_q, and divide h_kv or be a multiple of it)");
  }
}

}  // namespace

std::int64_t DomainAxis::count() const {
  return draw == Draw::values ? static_cast<std::int64_t>(values.size()) : static_cast<std::int64_t>(hi) - lo + 1;
}

bool DomainAxis::contains(int v) const {
  if (draw == Draw::values) return std::find(values.begin(), values.end(), v) != values.end();
  return v >= lo && v <= hi;
}

std::optional<Shape> heads_per_gpu(const DomainModel& m, int tp) {
  if (tp < 1 || m.h_q % tp != 0 || (m.h_kv % tp != 0 && tp % m.h_kv != 0)) return std::nullopt;
  Shape s;
  s.h_q = m.h_q / tp;
  s.h_kv = std::max(1, m.h_kv / tp);
  s.head_dim = m.head_dim;
  return s;
}

bool domain_contains(const Domain& d, const Shape& s) {
  const auto heads = head_configs(d);
  const bool heads_ok = std::any_of(heads.begin(), heads.end(), [&](const Shape& h) { return same_heads(h, s); });
  auto has = [](const auto& values, const auto& v) { return std::find(values.begin(), values.end(), v) != values.end(); };
  const bool q_ok = s.dtype != Dtype::fp8 || has(d.q_dtypes, s.q_dtype);
  return heads_ok && s.causal && has(d.dtypes, s.dtype) && q_ok && has(d.page_sizes, s.page_size) && d.batch.contains(s.batch) &&
         d.seqlen_q.contains(s.seqlen_q) && d.seqlen_k.contains(s.seqlen_k);
}

std::int64_t domain_size(const Domain& d) {
  std::vector<Shape> distinct;
  for (const auto& h : head_configs(d))
    if (std::none_of(distinct.begin(), distinct.end(), [&](const Shape& o) { return same_heads(o, h); }))
      distinct.push_back(h);
  // An fp8 cache counts once per query dtype.
  const bool fp8 = std::find(d.dtypes.begin(), d.dtypes.end(), Dtype::fp8) != d.dtypes.end();
  const auto kv_types = static_cast<std::int64_t>(d.dtypes.size() + (fp8 ? d.q_dtypes.size() - 1 : 0));
  return saturating_product({static_cast<std::int64_t>(distinct.size()), kv_types,
                             static_cast<std::int64_t>(d.page_sizes.size()), d.batch.count(), d.seqlen_q.count(),
                             d.seqlen_k.count()});
}

std::vector<Shape> sample_domain(const Domain& d, std::size_t n, std::uint64_t seed, const std::vector<Shape>& exclude) {
  std::set<std::string> taken;
  std::int64_t excluded_inside = 0;
  for (const auto& s : exclude)
    if (taken.insert(shape_key(s)).second && domain_contains(d, s)) ++excluded_inside;
  const std::int64_t size = domain_size(d);
  if (static_cast<std::int64_t>(n) > size - excluded_inside)
    throw InputError("cannot draw " + std::to_string(n) + " distinct shapes: the domain holds " + std::to_string(size) +
                     (excluded_inside ? ", " + std::to_string(excluded_inside) + " of them excluded" : std::string()));

  const auto heads = head_configs(d);
  if (n > 0 && heads.empty()) throw InputError("cannot draw shapes: no tensor-parallel degree applies to any model");
  // Rejection sampling; a domain barely larger than n would take forever to fill.
  const std::uint64_t max_draws = 100 * static_cast<std::uint64_t>(n) + 10000;
  SampleRng rng(seed);
  std::vector<Shape> out;
  for (std::uint64_t draws = 0; out.size() < n; ++draws) {
    if (draws == max_draws)
      throw InputError("cannot draw " + std::to_string(n) + " distinct shapes: " + std::to_string(max_draws) +
                       " draws gave only " + std::to_string(out.size()) + " (ask for fewer, or widen the domain)");
    const Shape s = draw_shape(d, heads, rng);
    if (taken.insert(shape_key(s)).second) out.push_back(s);
  }
  return out;
}

Domain domain_from_json(const nlohmann::json& j, const std::string& path) {
  JsonReader r(j, path);
  r.allow_only(
      {"models", "tensor_parallel", "batch", "seqlen_k", "seqlen_q", "dtype", "q_dtype", "page_size", "samples", "seed"});
  Domain d;
  const auto required = [&](const char* field) -> const nlohmann::json& {
    const auto* v = r.member(field);
    if (!v) throw InputError(r.path_of(field) + ": missing");
    return *v;
  };
  d.models = models_from_json(required("models"), r.path_of("models"));
  if (const auto* tp = r.member("tensor_parallel"))
    d.tensor_parallel = one_or_many<int>(*tp, r.path_of("tensor_parallel"), [](const nlohmann::json& v, const std::string& p) {
      return bounded_int(v, p, 1, 4096, "must be in [1, 4096]");
    });
  d.batch = axis_from_json(required("batch"), r.path_of("batch"));
  d.seqlen_k = axis_from_json(required("seqlen_k"), r.path_of("seqlen_k"));
  if (const auto* lq = r.member("seqlen_q")) d.seqlen_q = axis_from_json(*lq, r.path_of("seqlen_q"));
  else d.seqlen_q.values = {1};
  if (const auto* dt = r.member("dtype"))
    d.dtypes = one_or_many<Dtype>(*dt, r.path_of("dtype"), [](const nlohmann::json& v, const std::string& p) {
      return *parse_dtype(workload_json::checked_dtype(v, p));
    });
  if (const auto* qt = r.member("q_dtype")) {
    d.q_dtypes = one_or_many<Dtype>(*qt, r.path_of("q_dtype"), [](const nlohmann::json& v, const std::string& p) {
      const Dtype t = *parse_dtype(workload_json::checked_dtype(v, p));
      if (t == Dtype::fp8) throw InputError(p + ": queries are bf16 or fp16");
      return t;
    });
    if (std::find(d.dtypes.begin(), d.dtypes.end(), Dtype::fp8) == d.dtypes.end())
      throw InputError(r.path_of("q_dtype") + ": only an fp8 KV cache (dtype \"fp8\") takes a query dtype");
  }
  if (const auto* ps = r.member("page_size"))
    d.page_sizes = one_or_many<int>(*ps, r.path_of("page_size"), [](const nlohmann::json& v, const std::string& p) {
      return bounded_int(v, p, 0, 1 << 24, "must be 0 (contiguous) or a page size in [1, 16777216]");
    });
  if (const auto* n = r.member("samples"))
    d.samples = static_cast<std::size_t>(bounded_int(*n, r.path_of("samples"), 1, kMaxSamples,
                                                     "must be in [1, " + std::to_string(kMaxSamples) + "]"));
  if (const auto* seed = r.member("seed")) {
    const std::int64_t v = json_integer(*seed, r.path_of("seed"));
    if (v < 0) throw InputError(r.path_of("seed") + ": must be >= 0" + out_of_range(v));
    d.seed = static_cast<std::uint64_t>(v);
  }
  r.finish();
  check_axis_bounds(d.batch, &Shape::batch, path);
  check_axis_bounds(d.seqlen_k, &Shape::seqlen_k, path);
  check_axis_bounds(d.seqlen_q, &Shape::seqlen_q, path);
  check_every_model_applies(d, r.path_of("models"));
  return d;
}

}  // namespace evodispatch

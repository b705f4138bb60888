#include <evodispatch/heuristics/contract.hpp>

#include <cmath>
#include <limits>
#include <sstream>

#include <evodispatch/heuristics/json_reader.hpp>

namespace evodispatch {

std::string_view to_string(Dtype d) {
  switch (d) {
    case Dtype::bf16: return "bf16";
    case Dtype::fp16: return "fp16";
    case Dtype::fp8: return "fp8";
  }
  return "?";
}

std::optional<Dtype> parse_dtype(std::string_view s) {
  if (s == "bf16") return Dtype::bf16;
  if (s == "fp16") return Dtype::fp16;
  if (s == "fp8") return Dtype::fp8;
  return std::nullopt;
}

int dtype_bytes(Dtype d) { return d == Dtype::fp8 ? 1 : 2; }

// The built-in kernel streams K/V in tiles of 128 rows up to head_dim 128 and of 64
// rows above, which keeps a double-buffered K+V tile within 64 KiB of shared memory.
int builtin_block_n(int head_dim) { return head_dim <= 128 ? 128 : 64; }

Features features(const Shape& s) {
  Features f{};
  f.qpk = s.h_kv > 0 ? s.h_q / s.h_kv : 0;
  f.block_n = builtin_block_n(s.head_dim);
  f.nblk = s.seqlen_k > 0 ? (s.seqlen_k + f.block_n - 1) / f.block_n : 0;
  return f;
}

std::int64_t waves_pct(const Shape& s, const DeviceInfo& hw) {
  return hw.num_sms > 0 ? std::int64_t(s.batch) * s.h_kv * 100 / hw.num_sms : 0;
}

std::int64_t kv_kib(const Shape& s) { return 2 * std::int64_t(s.seqlen_k) * s.head_dim * dtype_bytes(s.dtype) / 1024; }
double geomean(std::span<const double> values) {
  if (values.empty()) return 0;
  double sum = 0;
  for (double v : values) sum += std::log(v);
  return std::exp(sum / static_cast<double>(values.size()));
}

std::int64_t kv_bytes(const Shape& s) {
  return 2 * std::int64_t(s.batch) * s.seqlen_k * s.h_kv * s.head_dim * dtype_bytes(s.dtype);
}

namespace {
void require(bool ok, std::string_view where, std::string_view field, const std::string& what) {
  if (!ok) throw InputError(std::string(where) + "." + std::string(field) + ": " + what);
}
}  // namespace

void validate(const Shape& s, std::string_view where) {
  constexpr int kMaxSeq = 1 << 24;
  require(s.batch >= 1 && s.batch <= 65536, where, "batch", "must be in [1, 65536], got " + std::to_string(s.batch));
  require(s.seqlen_q >= 1 && s.seqlen_q <= 16, where, "seqlen_q", "must be in [1, 16], got " + std::to_string(s.seqlen_q));
  require(s.seqlen_k >= 1 && s.seqlen_k <= kMaxSeq, where, "seqlen_k",
          "must be in [1, " + std::to_string(kMaxSeq) + "], got " + std::to_string(s.seqlen_k));
  require(s.h_kv >= 1 && s.h_kv <= 1024, where, "h_kv", "must be in [1, 1024], got " + std::to_string(s.h_kv));
  require(s.h_q >= 1 && s.h_q <= 4096, where, "h_q", "must be in [1, 4096], got " + std::to_string(s.h_q));
  require(s.h_q % s.h_kv == 0, where, "h_q",
          "must be a multiple of h_kv (" + std::to_string(s.h_q) + " % " + std::to_string(s.h_kv) + " != 0)");
  require(s.head_dim >= 8 && s.head_dim <= 512 && s.head_dim % 8 == 0, where, "head_dim",
          "must be a multiple of 8 in [8, 512], got " + std::to_string(s.head_dim));
  require(s.dtype == Dtype::fp8 ? s.q_dtype != Dtype::fp8 : s.q_dtype == Dtype::bf16, where, "q_dtype",
          s.dtype == Dtype::fp8 ? "queries and outputs are bf16 or fp16" : "only an fp8 KV cache takes a query dtype");
  require(s.page_size >= 0 && s.page_size <= kMaxSeq, where, "page_size",
          "must be 0 (contiguous) or a page size >= 1, got " + std::to_string(s.page_size));
}

std::string describe(const Shape& s) {
  std::ostringstream o;
  o << "B=" << s.batch << " Lq=" << s.seqlen_q << " Lk=" << s.seqlen_k << " Hq=" << s.h_q << " Hkv=" << s.h_kv
    << " D=" << s.head_dim << " " << to_string(s.dtype);
  if (s.dtype == Dtype::fp8 && s.q_dtype != Dtype::bf16) o << " q=" << to_string(s.q_dtype);
  if (s.page_size > 0) o << " page=" << s.page_size;
  if (s.seqlen_q > 1 && !s.causal) o << " noncausal";
  return o.str();
}

Dtype query_dtype(const Shape& s) { return s.dtype == Dtype::fp8 ? s.q_dtype : s.dtype; }

Decision resolve(const Decision& d, const Shape& s) {
  Decision r = d;
  if (!r.pack_gqa) r.pack_gqa = features(s).qpk > 1;
  return r;
}

std::uint64_t decision_code(const Decision& d) {
  const std::uint64_t pack = !d.pack_gqa ? 0 : (*d.pack_gqa ? 1 : 2);
  return static_cast<std::uint64_t>(d.num_splits) | (pack << 16) | (static_cast<std::uint64_t>(d.sm_margin) << 20);
}

std::optional<std::string> decision_error(const Decision& d, const DeviceInfo& hw) {
  if (d.num_splits < 1 || d.num_splits > kMaxSplits)
    return "num_splits must be in [1, " + std::to_string(kMaxSplits) + "], got " + std::to_string(d.num_splits);
  const int max_margin = hw.num_sms > 0 ? hw.num_sms - 1 : std::numeric_limits<int>::max();
  if (d.sm_margin < 0 || d.sm_margin > max_margin)
    return "sm_margin must be in [0, " + std::to_string(max_margin) + "], got " + std::to_string(d.sm_margin);
  return std::nullopt;
}

std::string describe(const Decision& d) {
  std::ostringstream o;
  o << "splits=" << d.num_splits << " pack=";
  if (d.pack_gqa) o << (*d.pack_gqa ? 1 : 0);
  else o << "auto";
  o << " margin=" << d.sm_margin;
  return o.str();
}

nlohmann::json to_json(const Shape& s) {
  nlohmann::json j = {{"batch", s.batch},         {"seqlen_q", s.seqlen_q},   {"seqlen_k", s.seqlen_k},
                      {"h_q", s.h_q},             {"h_kv", s.h_kv},           {"head_dim", s.head_dim},
                      {"dtype", to_string(s.dtype)}, {"page_size", s.page_size}, {"causal", s.causal}};
  // Only where it is not the default, so that every other shape keeps its key.
  if (s.q_dtype != Dtype::bf16) j["q_dtype"] = to_string(s.q_dtype);
  return j;
}

nlohmann::json to_json(const Decision& d) {
  nlohmann::json j = {{"num_splits", d.num_splits}, {"sm_margin", d.sm_margin}};
  if (d.pack_gqa) j["pack_gqa"] = *d.pack_gqa;
  return j;
}

nlohmann::json to_json(const DeviceInfo& h) {
  return {{"name", h.name}, {"num_sms", h.num_sms}, {"l2_bytes", h.l2_bytes},
          {"mem_bw_bytes_per_s", h.mem_bw_bytes_per_s}, {"cc", h.cc}};
}

namespace {
int to_int(std::int64_t v, const std::string& path) {
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
    throw InputError(path + ": " + std::to_string(v) + " is out of range");
  return static_cast<int>(v);
}
}  // namespace

Shape shape_from_json(const nlohmann::json& j, const std::string& path) {
  JsonReader r(j, path);
  r.allow_only({"batch", "seqlen_q", "seqlen_k", "h_q", "h_kv", "head_dim", "dtype", "q_dtype", "page_size", "causal",
                "qpk", "block_n", "nblk"});
  Shape s;
  s.batch = to_int(r.integer("batch").value_or(1), r.path_of("batch"));
  s.seqlen_q = to_int(r.integer("seqlen_q").value_or(1), r.path_of("seqlen_q"));
  s.seqlen_k = to_int(r.required_integer("seqlen_k"), r.path_of("seqlen_k"));
  s.h_q = to_int(r.required_integer("h_q"), r.path_of("h_q"));
  s.h_kv = to_int(r.integer("h_kv").value_or(s.h_q), r.path_of("h_kv"));
  s.head_dim = to_int(r.integer("head_dim").value_or(128), r.path_of("head_dim"));
  if (auto d = r.string("dtype")) {
    auto dt = parse_dtype(*d);
    if (!dt) throw InputError(r.path_of("dtype") + ": must be \"bf16\", \"fp16\" or \"fp8\", got \"" + *d + "\"");
    s.dtype = *dt;
  }
  if (auto d = r.string("q_dtype")) {
    auto dt = parse_dtype(*d);
    if (!dt || *dt == Dtype::fp8 || s.dtype != Dtype::fp8)
      throw InputError(r.path_of("q_dtype") + ": " +
                       (s.dtype != Dtype::fp8 ? std::string("only an fp8 KV cache (dtype \"fp8\") takes a query dtype")
                                              : "must be \"bf16\" or \"fp16\", got \"" + *d + "\""));
    s.q_dtype = *dt;
  }
  s.page_size = to_int(r.integer("page_size").value_or(0), r.path_of("page_size"));
  s.causal = r.boolean("causal").value_or(true);
  // Derived features may be present in exported rows; they must agree with the shape.
  for (const char* derived : {"qpk", "block_n", "nblk"}) r.member(derived);
  r.finish();
  validate(s, path);
  const Features f = features(s);
  auto check_derived = [&](const char* field, int want) {
    if (j.contains(field) && json_integer(j[field], r.path_of(field)) != want)
      throw InputError(r.path_of(field) + ": is derived and must be " + std::to_string(want));
  };
  check_derived("qpk", f.qpk);
  check_derived("block_n", f.block_n);
  check_derived("nblk", f.nblk);
  return s;
}

Decision decision_from_json(const nlohmann::json& j, const std::string& path) {
  JsonReader r(j, path);
  Decision d;
  d.num_splits = to_int(r.integer("num_splits").value_or(1), r.path_of("num_splits"));
  d.pack_gqa = r.boolean("pack_gqa");
  d.sm_margin = to_int(r.integer("sm_margin").value_or(0), r.path_of("sm_margin"));
  r.finish();
  if (d.num_splits < 1 || d.num_splits > kMaxSplits)
    throw InputError(r.path_of("num_splits") + ": must be in [1, 256], got " + std::to_string(d.num_splits));
  if (d.sm_margin < 0) throw InputError(r.path_of("sm_margin") + ": must be >= 0, got " + std::to_string(d.sm_margin));
  return d;
}

DeviceInfo device_from_json(const nlohmann::json& j, const std::string& path) {
  JsonReader r(j, path);
  DeviceInfo h;
  h.name = r.required_string("name");
  h.num_sms = to_int(r.required_integer("num_sms"), r.path_of("num_sms"));
  h.l2_bytes = r.required_integer("l2_bytes");
  h.mem_bw_bytes_per_s = r.number("mem_bw_bytes_per_s").value_or(0);
  h.cc = to_int(r.required_integer("cc"), r.path_of("cc"));
  r.finish();
  if (h.num_sms < 1) throw InputError(r.path_of("num_sms") + ": must be >= 1");
  return h;
}

}  // namespace evodispatch

// The emitters of distill.hpp: C++ header, Python module, FA3 body, and the files of a
// distilled heuristic's directory.
#include <evodispatch/heuristics/distill.hpp>

#include "distill_model_emit.hpp"

#include <fstream>
#include <sstream>

namespace evodispatch::distill {

namespace {

// FlashAttention-3's dispatch, the same logic as heuristics/src/fa3_reference.cpp (the
// twin the fa3 policy is tested against), with plain ints and no containers. FA3
// computes its efficiencies in float; so does this.
constexpr std::string_view kCppFa3 = R"CPP(
namespace detail {
inline int ceil_div(int a, int b) { return (a + b - 1) / b; }
inline int fa3_round_up_headdim(int d) {
  if (d <= 64) return 64;
  if (d <= 96) return 96;
  if (d <= 128) return 128;
  if (d <= 192) return 192;
  return 256;
}
// tile_size_fwd_sm90 (hopper/tile_size.h): {kBlockM, kBlockN}.
inline void fa3_tile(int d, bool causal, int elem, bool paged_non_tma, int& bm, int& bn) {
  if (elem == 2) {
    if (d <= 64) { bm = 192; bn = (causal || paged_non_tma) ? 128 : 192; return; }
    if (d <= 96) { bm = 192; bn = paged_non_tma ? 128 : 144; return; }
    if (d <= 128) { bm = 128; bn = (causal || paged_non_tma) ? 128 : 176; return; }
    if (d <= 192) { bm = 128; bn = paged_non_tma ? 96 : 112; return; }
    bm = 128; bn = 80; return;
  }
  if (d <= 64) { bm = 192; bn = 160; return; }
  if (d <= 96) { bm = 192; bn = 128; return; }
  if (d <= 128) { bm = 128; bn = paged_non_tma ? 160 : 224; return; }
  if (d <= 192) { bm = 128; bn = 160; return; }
  bm = 128; bn = 128;
}
// num_splits_heuristic (hopper/heuristics.h).
inline int fa3_num_splits(int total_mblocks, int num_sms, int num_n_blocks, int num_m_blocks,
                          std::int64_t size_one_kv_head, bool is_causal_or_local, int max_splits) {
  if (total_mblocks >= 0.8f * num_sms) {
    const std::int64_t size_l2 = 50 * 1024 * 1024;
    if (size_one_kv_head > size_l2 && num_m_blocks >= num_sms * 2 && !is_causal_or_local)
      return static_cast<int>(std::min<std::int64_t>((size_one_kv_head + size_l2 - 1) / size_l2, max_splits));
    return 1;
  }
  if (num_n_blocks <= 4) return 1;
  max_splits = std::min(max_splits, std::min(num_sms, num_n_blocks));
  float max_efficiency = 0.f;
  for (int s = 1; s <= max_splits; ++s) {
    const float n_waves = float(total_mblocks * s) / num_sms;
    const float eff = n_waves / std::ceil(n_waves);
    if (eff > max_efficiency) max_efficiency = eff;
  }
  for (int s = 1; s <= max_splits; ++s) {
    const float n_waves = float(total_mblocks * s) / num_sms;
    const float eff = n_waves / std::ceil(n_waves);
    if (eff >= 0.85 * max_efficiency) return s;
  }
  return 1;
}
inline Decision fa3_dispatch(const Shape& s, const DeviceInfo& hw) {
  const bool paged = s.page_size > 0;
  const int seqlen_k = paged ? ceil_div(s.seqlen_k, s.page_size) * s.page_size : s.seqlen_k;
  const int qpk = s.h_q / s.h_kv;
  const int elem = s.dtype == 2 ? 1 : 2;
  const int dr = fa3_round_up_headdim(s.head_dim);
  bool causal = s.causal != 0;
  if (s.seqlen_q == 1 && (s.head_dim <= 64 || s.head_dim > 128 || !paged)) causal = false;
  bool pagedkv_tma = false;
  int bm = 0, bn = 0;
  if (paged) {
    fa3_tile(dr, causal, elem, false, bm, bn);
    pagedkv_tma = s.page_size % bn == 0 && s.seqlen_q * qpk > bm;
  }
  const bool paged_non_tma = paged && !pagedkv_tma;
  fa3_tile(dr, causal, elem, paged_non_tma, bm, bn);
  const int num_n_blocks = ceil_div(seqlen_k, bn);
  const int num_m_blocks = ceil_div(s.seqlen_q * qpk, bm);
  const std::int64_t size_one_kv_head = std::int64_t(seqlen_k) * (s.head_dim + s.head_dim) * elem;
  const int total_mblocks = s.batch * s.h_kv * num_m_blocks;
  Decision d{};
  d.num_splits = fa3_num_splits(total_mblocks, hw.num_sms, num_n_blocks, num_m_blocks, size_one_kv_head, causal, 128);
  if (paged_non_tma || d.num_splits > 1) d.pack_gqa = 1;
  else if (s.h_q == s.h_kv) d.pack_gqa = 0;
  else {
    const float nopack = float(s.seqlen_q) / float(ceil_div(s.seqlen_q, bm) * bm);
    const float pack = float(s.seqlen_q * qpk) / float(ceil_div(s.seqlen_q * qpk, bm) * bm);
    d.pack_gqa = nopack < 0.9 * pack ? 1 : 0;
  }
  d.sm_margin = 0;
  return d;
}
}  // namespace detail
)CPP";

// The same in Python; float32 steps are rounded through struct (one float64 operation
// followed by rounding to float32 equals the float32 operation for these operands).
constexpr std::string_view kPyFa3 = R"PY(
def _f32(x):
    return _struct.unpack("f", _struct.pack("f", x))[0]


def _ceil_div(a, b):
    return (a + b - 1) // b


def _fa3_round_up_headdim(d):
    for r in (64, 96, 128, 192):
        if d <= r:
            return r
    return 256


def _fa3_tile(d, causal, elem, paged_non_tma):
    if elem == 2:
        if d <= 64:
            return 192, (128 if (causal or paged_non_tma) else 192)
        if d <= 96:
            return 192, (128 if paged_non_tma else 144)
        if d <= 128:
            return 128, (128 if (causal or paged_non_tma) else 176)
        if d <= 192:
            return 128, (96 if paged_non_tma else 112)
        return 128, 80
    if d <= 64:
        return 192, 160
    if d <= 96:
        return 192, 128
    if d <= 128:
        return 128, (160 if paged_non_tma else 224)
    if d <= 192:
        return 128, 160
    return 128, 128


def _fa3_num_splits(total_mblocks, num_sms, num_n_blocks, num_m_blocks, size_one_kv_head, causal, max_splits):
    if _f32(total_mblocks) >= _f32(_f32(0.8) * num_sms):
        size_l2 = 50 * 1024 * 1024
        if size_one_kv_head > size_l2 and num_m_blocks >= num_sms * 2 and not causal:
            return min((size_one_kv_head + size_l2 - 1) // size_l2, max_splits)
        return 1
    if num_n_blocks <= 4:
        return 1
    max_splits = min(max_splits, num_sms, num_n_blocks)
    effs = []
    for s in range(1, max_splits + 1):
        n_waves = _f32(_f32(total_mblocks * s) / num_sms)
        effs.append(_f32(n_waves / _math.ceil(n_waves)))
    best = max(effs)
    for s in range(1, max_splits + 1):
        if effs[s - 1] >= 0.85 * best:
            return s
    return 1


def _fa3_dispatch(s, hw):
    paged = s["page_size"] > 0
    seqlen_k = _ceil_div(s["seqlen_k"], s["page_size"]) * s["page_size"] if paged else s["seqlen_k"]
    qpk = s["h_q"] // s["h_kv"]
    elem = 1 if s["dtype"] == 2 else 2
    d = s["head_dim"]
    dr = _fa3_round_up_headdim(d)
    causal = bool(s["causal"])
    if s["seqlen_q"] == 1 and (d <= 64 or d > 128 or not paged):
        causal = False
    pagedkv_tma = False
    if paged:
        bm, bn = _fa3_tile(dr, causal, elem, False)
        pagedkv_tma = s["page_size"] % bn == 0 and s["seqlen_q"] * qpk > bm
    paged_non_tma = paged and not pagedkv_tma
    bm, bn = _fa3_tile(dr, causal, elem, paged_non_tma)
    num_n_blocks = _ceil_div(seqlen_k, bn)
    num_m_blocks = _ceil_div(s["seqlen_q"] * qpk, bm)
    size_one_kv_head = seqlen_k * (d + d) * elem
    total_mblocks = s["batch"] * s["h_kv"] * num_m_blocks
    splits = _fa3_num_splits(total_mblocks, hw["num_sms"], num_n_blocks, num_m_blocks, size_one_kv_head, causal, 128)
    if paged_non_tma or splits > 1:
        pack = 1
    elif s["h_q"] == s["h_kv"]:
        pack = 0
    else:
        lq = s["seqlen_q"]
        nopack = _f32(lq / (_ceil_div(lq, bm) * bm))
        pk = _f32(lq * qpk / (_ceil_div(lq * qpk, bm) * bm))
        pack = 1 if nopack < 0.9 * pk else 0
    return {"num_splits": splits, "pack_gqa": pack, "sm_margin": 0}
)PY";

// fa3-kvcache (heuristics/src/fa3_reference.cpp's fa3_kvcache_reference): FA3's rules with
// batch 1 as the bound, then the dynamic split of flash_prepare_scheduler.cu.
constexpr std::string_view kCppFa3Kvcache = R"CPP(
namespace detail {
inline Decision fa3_kvcache_dispatch(const Shape& s, const DeviceInfo& hw) {
  const bool dynamic = s.batch <= 992;  // prepare_varlen_num_blocks handles up to 992 requests
  Shape bound = s;
  if (dynamic) bound.batch = 1;  // get_num_splits "pretending that batch = 1"
  Decision d = fa3_dispatch(bound, hw);
  if (!dynamic) return d;
  const bool paged = s.page_size > 0;
  const int qpk = s.h_q / s.h_kv;
  const int elem = s.dtype == 2 ? 1 : 2;
  const int dr = fa3_round_up_headdim(s.head_dim);
  bool causal = s.causal != 0;
  if (s.seqlen_q == 1 && (s.head_dim <= 64 || s.head_dim > 128 || !paged)) causal = false;
  int bm = 0, bn = 0;
  bool pagedkv_tma = false;
  if (paged) {
    fa3_tile(dr, causal, elem, false, bm, bn);
    pagedkv_tma = s.page_size % bn == 0 && s.seqlen_q * qpk > bm;
  }
  fa3_tile(dr, causal, elem, paged && !pagedkv_tma, bm, bn);
  const bool packed = d.pack_gqa != 0;
  const int num_m_blocks = ceil_div(s.seqlen_q * (packed ? qpk : 1), bm);
  const int num_n_blocks = ceil_div(s.seqlen_k, bn);
  const int heads = packed ? s.h_kv : s.h_q;
  const int total_blocks = s.batch * num_m_blocks * num_n_blocks;
  const int blocks_per_sm = static_cast<int>(std::ceil(float(total_blocks) * 1.1f * float(heads) / float(hw.num_sms)));
  d.num_splits = std::max(std::min(ceil_div(num_n_blocks, blocks_per_sm), d.num_splits), 1);
  return d;
}
}  // namespace detail
)CPP";

constexpr std::string_view kPyFa3Kvcache = R"PY(

def _fa3_kvcache_dispatch(s, hw):
    dynamic = s["batch"] <= 992
    d = _fa3_dispatch(dict(s, batch=1) if dynamic else s, hw)
    if not dynamic:
        return d
    paged = s["page_size"] > 0
    qpk = s["h_q"] // s["h_kv"]
    elem = 1 if s["dtype"] == 2 else 2
    dr = _fa3_round_up_headdim(s["head_dim"])
    causal = bool(s["causal"])
    if s["seqlen_q"] == 1 and (s["head_dim"] <= 64 or s["head_dim"] > 128 or not paged):
        causal = False
    pagedkv_tma = False
    if paged:
        bm, bn = _fa3_tile(dr, causal, elem, False)
        pagedkv_tma = s["page_size"] % bn == 0 and s["seqlen_q"] * qpk > bm
    bm, bn = _fa3_tile(dr, causal, elem, paged and not pagedkv_tma)
    packed = d["pack_gqa"] == 1
    num_m_blocks = _ceil_div(s["seqlen_q"] * (qpk if packed else 1), bm)
    num_n_blocks = _ceil_div(s["seqlen_k"], bn)
    heads = s["h_kv"] if packed else s["h_q"]
    total_blocks = s["batch"] * num_m_blocks * num_n_blocks
    blocks_per_sm = _math.ceil(_f32(_f32(_f32(_f32(total_blocks) * _f32(1.1)) * heads) / hw["num_sms"]))
    d["num_splits"] = max(min(_ceil_div(num_n_blocks, blocks_per_sm), d["num_splits"]), 1)
    return d
)PY";

std::string cpp_int(std::int64_t x) {
  // Literals beyond int range would need a suffix; every bound here is an int64 compare.
  return "INT64_C(" + std::to_string(x) + ")";
}

std::string conditions(const Rule& r, const char* and_op, bool python) {
  std::string out;
  for (const auto& b : r.when) {
    const std::string f(name(b.feature));
    auto add = [&](const std::string& c) {
      if (!out.empty()) out += and_op;
      out += c;
    };
    if (b.lo == b.hi) {
      add(f + " == " + (python ? std::to_string(b.lo) : cpp_int(b.lo)));
      continue;
    }
    if (b.lo != INT64_MIN) add(f + " >= " + (python ? std::to_string(b.lo) : cpp_int(b.lo)));
    if (b.hi != INT64_MAX) add(f + " <= " + (python ? std::to_string(b.hi) : cpp_int(b.hi)));
  }
  if (out.empty()) out = python ? "True" : "true";
  return out;
}

std::string split_expr(const SplitExpr& e, bool python) {
  if (e.is_constant()) return std::to_string(e.constant);
  std::vector<std::string> terms;
  if (e.quotient) {
    const std::string num(name(e.quotient->num)), den(name(e.quotient->den));
    terms.push_back(python ? num + " // (" + den + " * " + std::to_string(e.quotient->div) + ")"
                           : "floor_div(" + num + ", " + den + " * " + std::to_string(e.quotient->div) + ")");
  }
  if (e.ceil_div) {
    const std::string of(name(e.ceil_div->of)), k = std::to_string(e.ceil_div->k);
    terms.push_back(python ? "(" + of + " + " + k + " - 1) // " + k : "floor_div(" + of + " + " + k + " - 1, " + k + ")");
  }
  std::string x = terms[0];
  if (terms.size() == 2) x = python ? "min(" + terms[0] + ", " + terms[1] + ")" : "std::min(" + terms[0] + ", " + terms[1] + ")";
  if (python) return "max(" + std::to_string(e.lo) + ", min(" + x + ", " + std::to_string(e.hi) + "))";
  return "static_cast<int>(std::clamp<std::int64_t>(" + x + ", " + std::to_string(e.lo) + ", " + std::to_string(e.hi) + "))";
}

std::string provenance_comment(const DecisionFunction& fn, const char* prefix) {
  std::string out;
  std::istringstream in(fn.provenance.dump(2));
  for (std::string line; std::getline(in, line);) out += std::string(prefix) + line + "\n";
  return out;
}

}  // namespace

std::string emit_cpp_header(const DecisionFunction& fn) {
  std::ostringstream o;
  o << "// Generated by `evodispatch distill` from heuristic.json (schema " << kSchemaVersion
    << "). Do not edit: distill again.\n"
    << "// A decode-attention dispatch heuristic as plain C++17 (standard library only).\n"
    << "// Method: " << fn.method << "; fallback: " << name(fn.fallback) << ".\n"
    << "// Provenance:\n"
    << provenance_comment(fn, "//   ") << "//\n"
    << "// Inputs (all plain ints):\n"
    << "//   Shape: batch (requests), seqlen_q (new tokens per request, 1..16), seqlen_k (KV length),\n"
    << "//          h_q, h_kv (query / KV heads; h_q a multiple of h_kv), head_dim, dtype (0 bf16,\n"
    << "//          1 fp16, 2 fp8), page_size (0 = contiguous KV cache), causal (0/1)\n"
    << "//   DeviceInfo: num_sms, cc (compute capability major*10+minor, e.g. 90)\n"
    << "// Output: num_splits (1..256 KV splits), pack_gqa (0/1: all query heads of one KV head in\n"
    << "//   one CTA), sm_margin (SMs to leave free).\n"
    << "// Derived features, as evodispatch defines them: qpk = h_q / h_kv; nblk = ceil(seqlen_k /\n"
    << "//   block_n) with block_n = 128 for head_dim <= 128, else 64; ctas = batch * h_kv;\n"
    << "//   waves_pct = ctas * 100 / num_sms; kv_kib = 2 * seqlen_k * head_dim * bytes / 1024\n"
    << "//   (bytes 1 for fp8, else 2); every division rounds down.\n"
    << "#pragma once\n#include <algorithm>\n#include <cmath>\n#include <cstdint>\n\n"
    << "namespace evodispatch {\nnamespace distilled {\n\n"
    << "struct Shape {\n  int batch = 1;\n  int seqlen_q = 1;\n  int seqlen_k = 1;\n  int h_q = 1;\n  int h_kv = 1;\n"
    << "  int head_dim = 128;\n  int dtype = 0;\n  int page_size = 0;\n  int causal = 1;\n};\n\n"
    << "struct DeviceInfo {\n  int num_sms = 132;\n  int cc = 90;\n};\n\n"
    << "struct Decision {\n  int num_splits = 1;\n  int pack_gqa = 0;\n  int sm_margin = 0;\n};\n";
  if (fn.fallback != Fallback::none) o << kCppFa3;
  if (fn.fallback == Fallback::fa3_kvcache) o << kCppFa3Kvcache;
  if (fn.model) o << emit_model_cpp(*fn.model);
  o << "\nnamespace detail {\n"
    << "inline std::int64_t floor_div(std::int64_t a, std::int64_t b) {\n"
    << "  std::int64_t q = a / b;\n  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;\n  return q;\n}\n"
    << "}  // namespace detail\n\n"
    << "inline Decision dispatch(const Shape& s, const DeviceInfo& hw) noexcept {\n"
    << "  using detail::floor_div;\n"
    << "  const std::int64_t batch = s.batch, seqlen_q = s.seqlen_q, seqlen_k = s.seqlen_k, h_q = s.h_q, h_kv = s.h_kv;\n"
    << "  const std::int64_t head_dim = s.head_dim, page_size = s.page_size, dtype = s.dtype, causal = s.causal;\n"
    << "  const std::int64_t qpk = h_kv > 0 ? h_q / h_kv : 0;\n"
    << "  const std::int64_t block_n = head_dim <= 128 ? 128 : 64;\n"
    << "  const std::int64_t nblk = (seqlen_k + block_n - 1) / block_n;\n"
    << "  const std::int64_t ctas = batch * h_kv;\n"
    << "  const std::int64_t num_sms = hw.num_sms, cc = hw.cc;\n"
    << "  const std::int64_t waves_pct = num_sms > 0 ? ctas * 100 / num_sms : 0;\n"
    << "  const std::int64_t kv_kib = 2 * seqlen_k * head_dim * (dtype == 2 ? 1 : 2) / 1024;\n"
    << "  (void)batch; (void)seqlen_q; (void)seqlen_k; (void)h_q; (void)head_dim; (void)page_size; (void)dtype;\n"
    << "  (void)causal; (void)nblk; (void)ctas; (void)num_sms; (void)cc; (void)waves_pct; (void)kv_kib;\n"
    << "  const int pack_default = qpk > 1 ? 1 : 0;\n  (void)pack_default;\n";
  for (std::size_t i = 0; i < fn.rules.size(); ++i) {
    const Rule& r = fn.rules[i];
    const std::string pack = r.pack_gqa ? (*r.pack_gqa ? "1" : "0") : "pack_default";
    o << "  if (" << conditions(r, " && ", false) << ") {  // rule " << i + 1 << "\n"
      << "    Decision d;\n    d.num_splits = " << split_expr(r.num_splits, false) << ";\n"
      << "    d.pack_gqa = " << pack << ";\n    d.sm_margin = " << r.sm_margin << ";\n    return d;\n  }\n";
  }
  const std::string base = fn.fallback == Fallback::fa3_kvcache ? "detail::fa3_kvcache_dispatch(s, hw)"
                                                                 : "detail::fa3_dispatch(s, hw)";
  if (fn.model) o << "  return detail::model_dispatch(s, hw, " << base << ");\n";
  else if (fn.fallback != Fallback::none) o << "  return " << base << ";\n";
  else o << "  return Decision{1, pack_default, 0};  // not reached: the last rule always holds\n";
  o << "}\n\n}  // namespace distilled\n}  // namespace evodispatch\n";
  return o.str();
}

std::string emit_python(const DecisionFunction& fn) {
  std::ostringstream o;
  o << "\"\"\"Generated by `evodispatch distill` from heuristic.json (schema " << kSchemaVersion
    << "). Do not edit: distill again.\n\n"
    << "A decode-attention dispatch heuristic in plain Python 3 (no third-party imports), the\n"
    << "same function as heuristic.hpp. Method: " << fn.method
    << "; fallback: " << name(fn.fallback) << ".\n\n"
    << "dispatch(shape, hw) takes dicts of ints:\n"
    << "  shape: batch, seqlen_q, seqlen_k, h_q, h_kv, head_dim, dtype (0 bf16, 1 fp16, 2 fp8),\n"
    << "         page_size (0 = contiguous), causal (0/1)\n"
    << "  hw: num_sms, cc\n"
    << "and returns {\"num_splits\": int, \"pack_gqa\": 0/1, \"sm_margin\": int}.\n\n"
    << "Provenance:\n"
    << provenance_comment(fn, "  ") << "\"\"\"\n\n"
    << "import json as _json\nimport math as _math\nimport struct as _struct\nimport sys as _sys\n\n"
    << "PROVENANCE = _json.loads(" << nlohmann::json(fn.provenance.dump()).dump() << ")\n";
  if (fn.fallback != Fallback::none) o << kPyFa3;
  if (fn.fallback == Fallback::fa3_kvcache) o << kPyFa3Kvcache;
  if (fn.model) o << emit_model_python(*fn.model);
  o << "\n\ndef dispatch(shape, hw):\n"
    << "    batch = shape[\"batch\"]\n    seqlen_q = shape[\"seqlen_q\"]\n    seqlen_k = shape[\"seqlen_k\"]\n"
    << "    h_q = shape[\"h_q\"]\n    h_kv = shape[\"h_kv\"]\n    head_dim = shape[\"head_dim\"]\n"
    << "    dtype = shape[\"dtype\"]\n    page_size = shape[\"page_size\"]\n    causal = shape[\"causal\"]\n"
    << "    qpk = h_q // h_kv\n    block_n = 128 if head_dim <= 128 else 64\n"
    << "    nblk = (seqlen_k + block_n - 1) // block_n\n    ctas = batch * h_kv\n"
    << "    num_sms = hw[\"num_sms\"]\n    cc = hw[\"cc\"]\n"
    << "    waves_pct = ctas * 100 // num_sms if num_sms > 0 else 0\n"
    << "    kv_kib = 2 * seqlen_k * head_dim * (1 if dtype == 2 else 2) // 1024\n"
    << "    pack_default = 1 if qpk > 1 else 0\n";
  for (std::size_t i = 0; i < fn.rules.size(); ++i) {
    const Rule& r = fn.rules[i];
    const std::string pack = r.pack_gqa ? (*r.pack_gqa ? "1" : "0") : "pack_default";
    o << "    if " << conditions(r, " and ", true) << ":  # rule " << i + 1 << "\n"
      << "        return {\"num_splits\": " << split_expr(r.num_splits, true) << ", \"pack_gqa\": " << pack
      << ", \"sm_margin\": " << r.sm_margin << "}\n";
  }
  const std::string py_base = fn.fallback == Fallback::fa3_kvcache ? "_fa3_kvcache_dispatch(shape, hw)"
                                                                    : "_fa3_dispatch(shape, hw)";
  if (fn.model) o << "    return _model_dispatch(shape, hw, " << py_base << ")\n";
  else if (fn.fallback != Fallback::none) o << "    return " << py_base << "\n";
  else o << "    return {\"num_splits\": 1, \"pack_gqa\": pack_default, \"sm_margin\": 0}  # not reached\n";
  o << R"PY(

_FIELDS = ("batch", "seqlen_q", "seqlen_k", "h_q", "h_kv", "head_dim", "dtype", "page_size", "causal")


def _check(path):
    """Compares dispatch() with rows of [9 shape ints, num_sms, cc, num_splits, pack_gqa, sm_margin]."""
    with open(path) as f:
        rows = _json.load(f)
    bad = 0
    for row in rows:
        shape = dict(zip(_FIELDS, row[:9]))
        hw = {"num_sms": row[9], "cc": row[10]}
        want = {"num_splits": row[11], "pack_gqa": row[12], "sm_margin": row[13]}
        got = dispatch(shape, hw)
        if got != want:
            bad += 1
            if bad <= 10:
                print("differs: %s %s: want %s, got %s" % (shape, hw, want, got))
    print("%d rows, %d differ" % (len(rows), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    if len(_sys.argv) == 3 and _sys.argv[1] == "--check":
        _sys.exit(_check(_sys.argv[2]))
    print(__doc__)
)PY";
  return o.str();
}

Fa3Body emit_fa3_body(const DecisionFunction& fn) {
  Fa3Body out;
  // FA3's num_splits_heuristic(total_mblocks, num_SMs, num_n_blocks, num_m_blocks,
  // size_one_kv_head, is_causal_or_local, max_splits) carries exactly one of our
  // features: num_sms. total_mblocks equals ctas only for seqlen_q * qpk <= kBlockM, and
  // num_n_blocks counts FA3's own kBlockN tiles (176 for D = 128 non-causal, 128 paged,
  // ...), not nblk's 128-row tiles, so neither maps exactly.
  if (fn.fallback == Fallback::fa3_kvcache) {
    out.refusal = "the fallback is fa3-kvcache, whose dynamic per-request split runs on the GPU after "
                  "num_splits_heuristic; fa3.patch (distill --fa3-source) exports this program";
    return out;
  }
  for (Feature f : features_used(fn))
    if (f != Feature::num_sms) {
      out.refusal = "the program reads '" + std::string(name(f)) +
                    "', which FA3's num_splits_heuristic(total_mblocks, num_SMs, num_n_blocks, num_m_blocks, "
                    "size_one_kv_head, is_causal_or_local, max_splits) does not carry exactly (only num_sms maps "
                    "onto its arguments: total_mblocks is not ctas once seqlen_q * qpk exceeds kBlockM, and "
                    "num_n_blocks counts FA3's kBlockN tiles, e.g. 176 rows at D=128, not nblk's 128)";
      return out;
    }
  for (std::size_t i = 0; i < fn.rules.size(); ++i) {
    const Rule& r = fn.rules[i];
    if (r.sm_margin != 0) {
      out.refusal = "rule " + std::to_string(i + 1) + " sets sm_margin " + std::to_string(r.sm_margin) +
                    ", which num_splits_heuristic cannot return";
      return out;
    }
    if (r.pack_gqa && !*r.pack_gqa) {
      out.refusal = "rule " + std::to_string(i + 1) +
                    " sets pack_gqa = false; FA3 chooses pack_gqa itself (always packed when it splits)";
      return out;
    }
  }
  std::ostringstream o;
  o << "// Drop-in body for FlashAttention-3's hopper/heuristics.h num_splits_heuristic, generated by\n"
    << "// `evodispatch distill` (schema " << kSchemaVersion << "). Method: " << fn.method << ".\n"
    << "// num_splits is exactly the distilled program's; pack_gqa and sm_margin stay FA3's own\n"
    << "// choice (get_pack_gqa packs whenever num_splits > 1).\n"
    << provenance_comment(fn, "//   ")
    << "inline int num_splits_heuristic(int total_mblocks, int num_SMs, int num_n_blocks, int num_m_blocks,\n"
    << "                                int size_one_kv_head, bool is_causal_or_local, int max_splits) {\n"
    << "    const long long num_sms = num_SMs;\n";
  for (std::size_t i = 0; i < fn.rules.size(); ++i) {
    const Rule& r = fn.rules[i];
    std::string cond = conditions(r, " && ", false);
    std::string expr = split_expr(r.num_splits, false);
    // Only num_sms appears; rewrite the helpers the header defines into plain C++.
    auto replace_all = [](std::string& s, const std::string& a, const std::string& b) {
      for (std::size_t p = s.find(a); p != std::string::npos; p = s.find(a, p + b.size())) s.replace(p, a.size(), b);
    };
    replace_all(expr, "std::int64_t", "long long");
    replace_all(expr, "floor_div(", "evodispatch_floor_div(");
    replace_all(cond, "INT64_C(", "(long long)(");
    o << "    if (" << cond << ") {  // rule " << i + 1 << "\n"
      << "        auto evodispatch_floor_div = [](long long a, long long b) { long long q = a / b; "
         "return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; };\n"
      << "        (void)evodispatch_floor_div;\n"
      << "        return " << expr << ";\n    }\n";
  }
  if (fn.fallback == Fallback::fa3) {
    o << "    // FA3's stock heuristic (the program's fallback), unchanged:\n"
      << "    if (total_mblocks >= 0.8f * num_SMs) {\n"
      << "        int const size_l2 = 50 * 1024 * 1024;\n"
      << "        if (size_one_kv_head > size_l2 && num_m_blocks >= num_SMs * 2 && !is_causal_or_local) {\n"
      << "            return std::min((size_one_kv_head + size_l2 - 1) / size_l2, max_splits);\n"
      << "        } else {\n            return 1;\n        }\n    }\n"
      << "    if (num_n_blocks <= 4) { return 1; }\n"
      << "    max_splits = std::min({max_splits, num_SMs, num_n_blocks});\n"
      << "    float max_efficiency = 0.f;\n    std::vector<float> efficiency;\n"
      << "    efficiency.reserve(max_splits);\n"
      << "    for (int num_splits = 1; num_splits <= max_splits; num_splits++) {\n"
      << "        float n_waves = float(total_mblocks * num_splits) / num_SMs;\n"
      << "        float eff = n_waves / ceil(n_waves);\n"
      << "        if (eff > max_efficiency) { max_efficiency = eff; }\n"
      << "        efficiency.push_back(eff);\n    }\n"
      << "    for (int num_splits = 1; num_splits <= max_splits; num_splits++) {\n"
      << "        if (efficiency[num_splits - 1] >= 0.85 * max_efficiency) { return num_splits; }\n    }\n"
      << "    return 1;\n";
  } else {
    o << "    return 1;  // not reached: the last rule always holds\n";
  }
  o << "}\n";
  out.body = o.str();
  return out;
}

Fa3Body write_exports(const DecisionFunction& fn, const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& file, const std::string& text) {
    std::ofstream f(dir / file, std::ios::binary | std::ios::trunc);
    f << text;
    if (!f) throw InputError("cannot write " + (dir / file).string());
  };
  write("heuristic.json", to_json(fn).dump(2) + "\n");
  write("heuristic.hpp", emit_cpp_header(fn));
  write("heuristic.py", emit_python(fn));
  Fa3Body fa3 = emit_fa3_body(fn);
  std::error_code ec;
  std::filesystem::remove(dir / "fa3_num_splits_heuristic.inc", ec);
  std::filesystem::remove(dir / "fa3_refused.txt", ec);
  if (fa3.body) write("fa3_num_splits_heuristic.inc", *fa3.body);
  else write("fa3_refused.txt", fa3.refusal + "\n");
  return fa3;
}

}  // namespace evodispatch::distill

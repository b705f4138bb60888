#include "distill_model_emit.hpp"

#include <sstream>

namespace evodispatch::distill {

namespace {

template <class T>
std::string joined(const std::vector<T>& v, const char* yes = "1", const char* no = "0") {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += ", ";
    if constexpr (std::is_same_v<T, bool>) out += v[i] ? yes : no;
    else out += std::to_string(v[i]);
  }
  return out;
}

}  // namespace

std::string emit_model_cpp(const LatencyModel& m) {
  std::ostringstream o;
  o << "\nnamespace detail {\n// The latency model (evodispatch heuristics/latency_model.hpp), in integer picoseconds.\n";
  for (const auto& p : latency_parameters()) o << "constexpr std::int64_t model_" << p.name << " = " << m.*p.field << ";\n";
  o << "// The combine kernel's shape: rows per CTA times head_dim, splits per load, CTAs per SM.\n"
    << "constexpr std::int64_t model_combine_rows_at_d1 = " << kModelCombineRowsAtD1 << ";\n"
    << "constexpr std::int64_t model_combine_splits_per_load = " << kModelCombineSplitsPerLoad << ";\n"
    << "constexpr std::int64_t model_combine_ctas_per_sm = " << kModelCombineCtasPerSm << ";\n";
  o << "constexpr int model_splits[] = {" << joined(m.splits) << "};\n"
    << "constexpr int model_pack[] = {" << joined(m.pack_gqa) << "};\n"
    << "constexpr int model_margins[] = {" << joined(m.sm_margins) << "};\n";
  o << "// Where the model answers (it was fitted there): head_dim, seqlen_q, page_size, qpk, ctas, seqlen_k, qpk * seqlen_q.\n"
    << "constexpr std::int64_t model_box[][2] = {";
  for (int q = 0; q < kModelBoxQuantities; ++q) o << (q ? ", " : "") << "{" << m.box[q].lo << ", " << m.box[q].hi << "}";
  o << "};\n";
  o << R"CPP(constexpr std::int64_t model_cap = std::int64_t{1} << 60;
inline std::int64_t model_mul(std::int64_t a, std::int64_t b) { return a != 0 && b > model_cap / a ? model_cap : a * b; }
inline std::int64_t model_ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
struct ModelCandidate {
  std::int64_t rows, sms, tiles, kib, splits, loading, readers;
};
inline std::int64_t model_wave_ps(const ModelCandidate& c, std::int64_t active) {
  const std::int64_t compute = model_mul(c.tiles, model_tile_ps + c.rows * model_row_ps);
  const std::int64_t dram_ps = model_dram_ps_per_kib + (c.readers - 1) * model_l2_ps_per_kib;
  const std::int64_t sm_ps = model_sm_ps_per_kib + (c.readers - 1) * model_sm_l2_ps_per_kib;
  const std::int64_t dram = model_mul(model_mul(c.kib, model_ceil_div(active * c.loading, c.splits)), dram_ps) / c.readers;
  const std::int64_t sm = model_mul(model_mul(c.kib, model_ceil_div(active, c.sms)), sm_ps) / c.readers;
  return model_cta_ps + std::max(compute, std::max(dram, sm));
}
inline std::int64_t model_combine_ps_of(const Shape& s, std::int64_t sms, std::int64_t k) {
  const std::int64_t rows = std::int64_t{s.batch} * s.h_q * s.seqlen_q;
  const std::int64_t max_lanes = model_combine_rows_at_d1 / s.head_dim;
  std::int64_t lanes = 1;
  while (lanes < max_lanes && lanes * model_combine_splits_per_load < k) lanes *= 2;
  const std::int64_t rows_per_cta = std::max<std::int64_t>(1, max_lanes / lanes);
  const std::int64_t waves = model_ceil_div(model_ceil_div(rows, rows_per_cta), sms * model_combine_ctas_per_sm);
  return model_mul(waves, model_combine_ps + model_mul(k * std::min(rows_per_cta, rows), model_combine_row_ps));
}
inline std::int64_t model_slots(const Shape& s, std::int64_t sms, int margin, std::int64_t items) {
  if (margin > 0) return sms;
  const std::int64_t slots = sms * std::max<std::int64_t>(1, model_ctas_per_sm * 128 / s.head_dim);
  const std::int64_t dense = sms * std::max<std::int64_t>(1, model_dense_ctas_per_sm * 128 / s.head_dim);
  return items > sms && items <= dense ? std::max(slots, items) : slots;
}
inline std::int64_t model_predict_ps(const Shape& s, const DeviceInfo& hw, int k, int pack, int margin) {
  const std::int64_t qpk = s.h_q / s.h_kv, block_n = s.head_dim <= 128 ? 128 : 64;
  const std::int64_t nblk = (std::int64_t{s.seqlen_k} + block_n - 1) / block_n;
  ModelCandidate c;
  c.rows = pack ? qpk * s.seqlen_q : s.seqlen_q;
  const std::int64_t items = std::int64_t{s.batch} * (pack ? s.h_kv : s.h_q) * k;
  c.sms = hw.num_sms - margin;
  const std::int64_t slots = model_slots(s, c.sms, margin, items);
  c.tiles = model_ceil_div(nblk, k);
  c.splits = k;
  c.loading = model_ceil_div(nblk, c.tiles);
  c.readers = pack ? 1 : qpk;
  const std::int64_t keys = std::min<std::int64_t>(s.seqlen_k, c.tiles * block_n);
  c.kib = model_ceil_div(keys * s.head_dim * 2 * (s.dtype == 2 ? 1 : 2), 1024);
  std::int64_t t = model_mul(items / slots, model_wave_ps(c, slots));
  if (items % slots > 0) t += model_wave_ps(c, items % slots);
  if (k > 1) t += model_combine_ps_of(s, c.sms, k);
  return t;
}
// The argmin of the predictions, unless it beats the baseline's decision by too little.
inline Decision model_dispatch(const Shape& s, const DeviceInfo& hw, const Decision& baseline) {
  const std::int64_t boxed[] = {s.head_dim, s.seqlen_q, s.page_size, s.h_q / s.h_kv, std::int64_t{s.batch} * s.h_kv,
                                s.seqlen_k, std::int64_t{s.h_q / s.h_kv} * s.seqlen_q};
  for (int i = 0; i < 7; ++i)
    if (boxed[i] < model_box[i][0] || boxed[i] > model_box[i][1]) return baseline;
  bool found = false;
  std::int64_t best = 0;
  Decision d;
  for (int margin : model_margins) {
    if (margin >= hw.num_sms) continue;
    for (int pack : model_pack)
      for (int k : model_splits) {
        const std::int64_t t = model_predict_ps(s, hw, k, pack, margin);
        if (!found || t < best) {
          found = true;
          best = t;
          d = Decision{k, pack, margin};
        }
      }
  }
  const std::int64_t base = model_predict_ps(s, hw, baseline.num_splits, baseline.pack_gqa, baseline.sm_margin);
  if (!found || model_mul(best, 1000) >= model_mul(base, 1000 - model_min_gain_permille)) return baseline;
  return d;
}
}  // namespace detail
)CPP";
  return o.str();
}

std::string emit_model_python(const LatencyModel& m) {
  std::ostringstream o;
  o << "\n\n# The latency model (evodispatch heuristics/latency_model.hpp), in integer picoseconds.\n";
  for (const auto& p : latency_parameters()) o << "_MODEL_" << p.name << " = " << m.*p.field << "\n";
  o << "# The combine kernel's shape: rows per CTA times head_dim, splits per load, CTAs per SM.\n"
    << "_MODEL_COMBINE_ROWS_AT_D1 = " << kModelCombineRowsAtD1 << "\n"
    << "_MODEL_COMBINE_SPLITS_PER_LOAD = " << kModelCombineSplitsPerLoad << "\n"
    << "_MODEL_COMBINE_CTAS_PER_SM = " << kModelCombineCtasPerSm << "\n";
  o << "_MODEL_SPLITS = (" << joined(m.splits) << ",)\n"
    << "_MODEL_PACK = (" << joined(m.pack_gqa) << ",)\n"
    << "_MODEL_MARGINS = (" << joined(m.sm_margins) << ",)\n";
  o << "# Where the model answers (it was fitted there): head_dim, seqlen_q, page_size, qpk, ctas, seqlen_k, qpk * seqlen_q.\n"
    << "_MODEL_BOX = (";
  for (int q = 0; q < kModelBoxQuantities; ++q) o << (q ? ", " : "") << "(" << m.box[q].lo << ", " << m.box[q].hi << ")";
  o << ")\n";
  o << R"PY(_MODEL_CAP = 1 << 60


def _model_mul(a, b):
    return _MODEL_CAP if a != 0 and b > _MODEL_CAP // a else a * b


def _model_ceil_div(a, b):
    return (a + b - 1) // b


def _model_wave_ps(c, active):
    compute = _model_mul(c["tiles"], _MODEL_tile_ps + c["rows"] * _MODEL_row_ps)
    readers = c["readers"]
    dram_ps = _MODEL_dram_ps_per_kib + (readers - 1) * _MODEL_l2_ps_per_kib
    sm_ps = _MODEL_sm_ps_per_kib + (readers - 1) * _MODEL_sm_l2_ps_per_kib
    dram = _model_mul(_model_mul(c["kib"], _model_ceil_div(active * c["loading"], c["splits"])), dram_ps) // readers
    sm = _model_mul(_model_mul(c["kib"], _model_ceil_div(active, c["sms"])), sm_ps) // readers
    return _MODEL_cta_ps + max(compute, dram, sm)


def _model_combine_ps(s, sms, k):
    rows = s["batch"] * s["h_q"] * s["seqlen_q"]
    max_lanes = _MODEL_COMBINE_ROWS_AT_D1 // s["head_dim"]
    lanes = 1
    while lanes < max_lanes and lanes * _MODEL_COMBINE_SPLITS_PER_LOAD < k:
        lanes *= 2
    rows_per_cta = max(1, max_lanes // lanes)
    waves = _model_ceil_div(_model_ceil_div(rows, rows_per_cta), sms * _MODEL_COMBINE_CTAS_PER_SM)
    return _model_mul(waves, _MODEL_combine_ps + _model_mul(k * min(rows_per_cta, rows), _MODEL_combine_row_ps))


def _model_slots(s, sms, margin, items):
    if margin > 0:
        return sms
    slots = sms * max(1, _MODEL_ctas_per_sm * 128 // s["head_dim"])
    dense = sms * max(1, _MODEL_dense_ctas_per_sm * 128 // s["head_dim"])
    return max(slots, items) if sms < items <= dense else slots


def _model_predict_ps(s, hw, k, pack, margin):
    qpk = s["h_q"] // s["h_kv"]
    block_n = 128 if s["head_dim"] <= 128 else 64
    nblk = (s["seqlen_k"] + block_n - 1) // block_n
    items = s["batch"] * (s["h_kv"] if pack else s["h_q"]) * k
    sms = hw["num_sms"] - margin
    slots = _model_slots(s, sms, margin, items)
    tiles = _model_ceil_div(nblk, k)
    c = {"rows": qpk * s["seqlen_q"] if pack else s["seqlen_q"], "sms": sms, "tiles": tiles, "splits": k,
         "loading": _model_ceil_div(nblk, tiles), "readers": 1 if pack else qpk,
         "kib": _model_ceil_div(min(s["seqlen_k"], tiles * block_n) * s["head_dim"] * 2 * (1 if s["dtype"] == 2 else 2),
                                1024)}
    t = _model_mul(items // slots, _model_wave_ps(c, slots))
    if items % slots > 0:
        t += _model_wave_ps(c, items % slots)
    if k > 1:
        t += _model_combine_ps(s, sms, k)
    return t


def _model_dispatch(shape, hw, baseline):
    qpk = shape["h_q"] // shape["h_kv"]
    boxed = (shape["head_dim"], shape["seqlen_q"], shape["page_size"], qpk, shape["batch"] * shape["h_kv"],
             shape["seqlen_k"], qpk * shape["seqlen_q"])
    if any(v < lo or v > hi for v, (lo, hi) in zip(boxed, _MODEL_BOX)):
        return baseline
    best, d = None, None
    for margin in _MODEL_MARGINS:
        if margin >= hw["num_sms"]:
            continue
        for pack in _MODEL_PACK:
            for k in _MODEL_SPLITS:
                t = _model_predict_ps(shape, hw, k, pack, margin)
                if best is None or t < best:
                    best, d = t, {"num_splits": k, "pack_gqa": pack, "sm_margin": margin}
    base = _model_predict_ps(shape, hw, baseline["num_splits"], baseline["pack_gqa"], baseline["sm_margin"])
    if best is None or _model_mul(best, 1000) >= _model_mul(base, 1000 - _MODEL_min_gain_permille):
        return baseline
    return d
)PY";
  return o.str();
}

}  // namespace evodispatch::distill

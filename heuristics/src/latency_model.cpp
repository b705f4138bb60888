#include <evodispatch/heuristics/latency_model.hpp>

#include <algorithm>
#include <sstream>

#include <nlohmann/json.hpp>

#include <evodispatch/heuristics/json_reader.hpp>

namespace evodispatch {

namespace {

// Products saturate here, so no shape the contract accepts can overflow; every
// rendering of the model saturates the same way.
constexpr std::int64_t kCap = std::int64_t{1} << 60;

std::int64_t mul(std::int64_t a, std::int64_t b) { return a != 0 && b > kCap / a ? kCap : a * b; }
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

struct Candidate {
  std::int64_t rows, sms, tiles, kib;
  std::int64_t splits, loading;  // splits per (request, head) and those with keys to read
  std::int64_t readers;          // CTAs reading the same KV at once: the first from DRAM, the rest from L2
};

// The kernel family holds more CTAs per SM when that makes its items one wave
// (kernel_spec.cpp's dense variants); a margin runs one per SM.
std::int64_t slots_of(const LatencyModel& m, const Shape& s, std::int64_t sms, int margin, std::int64_t items) {
  if (margin > 0) return sms;
  const std::int64_t slots = sms * std::max<std::int64_t>(1, m.ctas_per_sm * 128 / s.head_dim);
  const std::int64_t dense = sms * std::max<std::int64_t>(1, m.dense_ctas_per_sm * 128 / s.head_dim);
  return items > sms && items <= dense ? std::max(slots, items) : slots;
}

std::int64_t wave_ps(const LatencyModel& m, const Candidate& c, std::int64_t active) {
  const std::int64_t compute = mul(c.tiles, m.tile_ps + c.rows * m.row_ps);
  const std::int64_t dram_ps = m.dram_ps_per_kib + (c.readers - 1) * m.l2_ps_per_kib;
  const std::int64_t sm_ps = m.sm_ps_per_kib + (c.readers - 1) * m.sm_l2_ps_per_kib;
  const std::int64_t dram = mul(mul(c.kib, ceil_div(active * c.loading, c.splits)), dram_ps) / c.readers;
  const std::int64_t sm = mul(mul(c.kib, ceil_div(active, c.sms)), sm_ps) / c.readers;
  return m.cta_ps + std::max({compute, dram, sm});
}

std::int64_t combine_ps(const LatencyModel& m, const Shape& s, std::int64_t sms, std::int64_t k) {
  const std::int64_t rows = std::int64_t{s.batch} * s.h_q * s.seqlen_q;
  const std::int64_t rows_per_cta = model_combine_rows_per_cta(k, s.head_dim);
  const std::int64_t waves = ceil_div(ceil_div(rows, rows_per_cta), sms * kModelCombineCtasPerSm);
  return mul(waves, m.combine_ps + mul(k * std::min(rows_per_cta, rows), m.combine_row_ps));
}

std::string int_list(const std::vector<int>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out;
}

}  // namespace

std::int64_t model_combine_rows_per_cta(std::int64_t num_splits, std::int64_t head_dim) {
  const std::int64_t max_lanes = kModelCombineRowsAtD1 / head_dim;
  std::int64_t lanes = 1;
  while (lanes < max_lanes && lanes * kModelCombineSplitsPerLoad < num_splits) lanes *= 2;
  return std::max<std::int64_t>(1, max_lanes / lanes);
}

std::array<std::int64_t, kModelBoxQuantities> model_box_values(const Shape& s) {
  const std::int64_t qpk = s.h_q / std::max(s.h_kv, 1);
  return {s.head_dim, s.seqlen_q, s.page_size, qpk, std::int64_t{s.batch} * s.h_kv, s.seqlen_k, qpk * s.seqlen_q};
}

ModelBox model_box_of(const std::vector<Shape>& shapes) {
  ModelBox box{};
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const auto v = model_box_values(shapes[i]);
    for (int q = 0; q < kModelBoxQuantities; ++q) {
      box[q].lo = i ? std::min(box[q].lo, v[q]) : v[q];
      box[q].hi = i ? std::max(box[q].hi, v[q]) : v[q];
    }
  }
  return box;
}

namespace {
bool inside(const ModelBox& box, const Shape& s) {
  const auto v = model_box_values(s);
  for (int q = 0; q < kModelBoxQuantities; ++q)
    if (v[q] < box[q].lo || v[q] > box[q].hi) return false;
  return true;
}
}  // namespace

const std::vector<LatencyParameter>& latency_parameters() {
  static const std::vector<LatencyParameter> params = {
      {"ctas_per_sm", &LatencyModel::ctas_per_sm, 1, 64},
      {"dense_ctas_per_sm", &LatencyModel::dense_ctas_per_sm, 1, 64},
      {"cta_ps", &LatencyModel::cta_ps, 0, 100'000'000},
      {"tile_ps", &LatencyModel::tile_ps, 0, 100'000'000},
      {"row_ps", &LatencyModel::row_ps, 0, 100'000'000},
      {"dram_ps_per_kib", &LatencyModel::dram_ps_per_kib, 0, 100'000'000},
      {"sm_ps_per_kib", &LatencyModel::sm_ps_per_kib, 0, 100'000'000},
      {"combine_ps", &LatencyModel::combine_ps, 0, 100'000'000},
      {"combine_row_ps", &LatencyModel::combine_row_ps, 0, 100'000'000},
      {"l2_ps_per_kib", &LatencyModel::l2_ps_per_kib, 0, 100'000'000},
      {"sm_l2_ps_per_kib", &LatencyModel::sm_l2_ps_per_kib, 0, 100'000'000},
      {"min_gain_permille", &LatencyModel::min_gain_permille, 0, 999},
  };
  return params;
}

void validate(const LatencyModel& m, std::string_view where) {
  auto fail = [&](const std::string& what) { throw InputError(std::string(where) + ": " + what); };
  if (m.splits.empty()) fail("splits must not be empty");
  for (int k : m.splits)
    if (k < 1 || k > kMaxSplits) fail("splits: " + std::to_string(k) + " is not in [1, " + std::to_string(kMaxSplits) + "]");
  if (m.pack_gqa.empty()) fail("pack_gqa must not be empty");
  if (m.sm_margins.empty()) fail("sm_margins must not be empty");
  for (int g : m.sm_margins)
    if (g < 0) fail("sm_margins: " + std::to_string(g) + " is negative");
  for (int q = 0; q < kModelBoxQuantities; ++q)
    if (m.box[q].lo < 0 || m.box[q].lo > m.box[q].hi || m.box[q].hi > ModelRange{}.hi)
      fail(std::string("box.") + kModelBoxNames[q] + " = [" + std::to_string(m.box[q].lo) + ", " +
           std::to_string(m.box[q].hi) + "] is not a range in [0, 2^40]");
  for (const auto& p : latency_parameters())
    if (m.*p.field < p.lo || m.*p.field > p.hi)
      fail(std::string(p.name) + " = " + std::to_string(m.*p.field) + " is not in [" + std::to_string(p.lo) + ", " +
           std::to_string(p.hi) + "]");
}

std::int64_t predict_ps(const LatencyModel& m, const Shape& s, const DeviceInfo& hw, int k, bool pack, int margin) {
  const Features f = features(s);
  Candidate c;
  c.rows = pack ? std::int64_t{f.qpk} * s.seqlen_q : s.seqlen_q;
  const std::int64_t items = std::int64_t{s.batch} * (pack ? s.h_kv : s.h_q) * k;
  c.sms = hw.num_sms - margin;
  const std::int64_t slots = slots_of(m, s, c.sms, margin, items);
  c.tiles = ceil_div(f.nblk, k);
  c.splits = k;
  c.loading = ceil_div(f.nblk, c.tiles);
  c.readers = pack ? 1 : f.qpk;
  const std::int64_t keys = std::min<std::int64_t>(s.seqlen_k, c.tiles * f.block_n);
  c.kib = ceil_div(keys * s.head_dim * 2 * dtype_bytes(s.dtype), 1024);
  std::int64_t t = mul(items / slots, wave_ps(m, c, slots));
  if (items % slots > 0) t += wave_ps(m, c, items % slots);
  if (k > 1) t += combine_ps(m, s, c.sms, k);
  return t;
}

Decision model_decision(const LatencyModel& m, const Shape& s, const DeviceInfo& hw, const Decision& baseline) {
  if (!inside(m.box, s)) return resolve(baseline, s);
  std::optional<std::int64_t> best;
  Decision d;
  for (int margin : m.sm_margins) {
    if (margin >= hw.num_sms) continue;
    for (bool pack : m.pack_gqa)
      for (int k : m.splits) {
        const std::int64_t t = predict_ps(m, s, hw, k, pack, margin);
        if (!best || t < *best) {
          best = t;
          d = Decision{k, pack, margin};
        }
      }
  }
  const Decision b = resolve(baseline, s);
  const std::int64_t base_t = predict_ps(m, s, hw, b.num_splits, *b.pack_gqa, b.sm_margin);
  if (!best || mul(*best, 1000) >= mul(base_t, 1000 - m.min_gain_permille)) return b;
  return resolve(d, s);
}

namespace {
constexpr std::string_view kBaselineOpen = "local baseline_dispatch\ndo\n";
constexpr std::string_view kBaselineClose = "baseline_dispatch = dispatch\nend\n";
}  // namespace

std::string render_lua(const LatencyModel& m, std::string_view baseline_source) {
  std::ostringstream o;
  o << "local M = {";
  const auto& params = latency_parameters();
  for (std::size_t i = 0; i < params.size(); ++i) o << (i ? ", " : "") << params[i].name << " = " << m.*params[i].field;
  o << "}\n";
  o << "local SPLITS = {" << int_list(m.splits) << "}\n";
  o << "local PACK = {";
  for (std::size_t i = 0; i < m.pack_gqa.size(); ++i) o << (i ? ", " : "") << (m.pack_gqa[i] ? "true" : "false");
  o << "}\n";
  o << "local MARGINS = {" << int_list(m.sm_margins) << "}\n";
  o << "local BOX = {";
  for (int q = 0; q < kModelBoxQuantities; ++q) o << (q ? ", " : "") << m.box[q].lo << ", " << m.box[q].hi;
  o << "}\n";
  o << kBaselineOpen << baseline_source;
  if (!baseline_source.empty() && !baseline_source.ends_with('\n')) o << "\n";
  o << kBaselineClose;
  o << "local COMBINE_ROWS_AT_D1, COMBINE_SPLITS_PER_LOAD, COMBINE_CTAS_PER_SM = " << kModelCombineRowsAtD1 << ", "
    << kModelCombineSplitsPerLoad << ", " << kModelCombineCtasPerSm << "\n";
  o << R"LUA(local CAP = 1 << 60
local function mul(a, b) if a ~= 0 and b > CAP // a then return CAP end return a * b end
local function ceil_div(a, b) return (a + b - 1) // b end
local function wave_ps(c, active)
  local compute = mul(c.tiles, M.tile_ps + c.rows * M.row_ps)
  local dram_ps = M.dram_ps_per_kib + (c.readers - 1) * M.l2_ps_per_kib
  local sm_ps = M.sm_ps_per_kib + (c.readers - 1) * M.sm_l2_ps_per_kib
  local dram = mul(mul(c.kib, ceil_div(active * c.loading, c.splits)), dram_ps) // c.readers
  local sm = mul(mul(c.kib, ceil_div(active, c.sms)), sm_ps) // c.readers
  return M.cta_ps + math.max(compute, dram, sm)
end
local function combine_ps(s, sms, k)
  local rows = s.batch * s.h_q * s.seqlen_q
  local max_lanes = COMBINE_ROWS_AT_D1 // s.head_dim
  local lanes = 1
  while lanes < max_lanes and lanes * COMBINE_SPLITS_PER_LOAD < k do lanes = lanes * 2 end
  local rows_per_cta = math.max(1, max_lanes // lanes)
  local waves = ceil_div(ceil_div(rows, rows_per_cta), sms * COMBINE_CTAS_PER_SM)
  return mul(waves, M.combine_ps + mul(k * math.min(rows_per_cta, rows), M.combine_row_ps))
end
local function slots_of(s, sms, margin, items)
  if margin > 0 then return sms end
  local slots = sms * math.max(1, M.ctas_per_sm * 128 // s.head_dim)
  local dense = sms * math.max(1, M.dense_ctas_per_sm * 128 // s.head_dim)
  if items > sms and items <= dense then return math.max(slots, items) end
  return slots
end
local function predict_ps(s, hw, k, pack, margin)
  local c = {}
  c.rows = pack and s.qpk * s.seqlen_q or s.seqlen_q
  local items = s.batch * (pack and s.h_kv or s.h_q) * k
  c.sms = hw.num_sms - margin
  local slots = slots_of(s, c.sms, margin, items)
  c.tiles = ceil_div(s.nblk, k)
  c.splits = k
  c.loading = ceil_div(s.nblk, c.tiles)
  c.readers = pack and 1 or s.qpk
  local keys = math.min(s.seqlen_k, c.tiles * s.block_n)
  c.kib = ceil_div(keys * s.head_dim * 2 * (s.dtype == "fp8" and 1 or 2), 1024)
  local t = mul(items // slots, wave_ps(c, slots))
  if items % slots > 0 then t = t + wave_ps(c, items % slots) end
  if k > 1 then t = t + combine_ps(s, c.sms, k) end
  return t
end
function dispatch(s, hw)
  local v = {s.head_dim, s.seqlen_q, s.page_size, s.qpk, s.batch * s.h_kv, s.seqlen_k, s.qpk * s.seqlen_q}
  for i = 1, #v do
    if v[i] < BOX[2 * i - 1] or v[i] > BOX[2 * i] then return baseline_dispatch(s, hw) end
  end
  local best, d = nil, nil
  for _, margin in ipairs(MARGINS) do
    if margin < hw.num_sms then
      for _, pack in ipairs(PACK) do
        for _, k in ipairs(SPLITS) do
          local t = predict_ps(s, hw, k, pack, margin)
          if best == nil or t < best then
            best = t
            d = {num_splits = k, pack_gqa = pack, sm_margin = margin}
          end
        end
      end
    end
  end
  local b = baseline_dispatch(s, hw)
  local b_pack = b.pack_gqa
  if b_pack == nil then b_pack = s.qpk > 1 end
  local b_t = predict_ps(s, hw, b.num_splits, b_pack, b.sm_margin or 0)
  if best == nil or mul(best, 1000) >= mul(b_t, 1000 - M.min_gain_permille) then return b end
  return d
end
)LUA";
  return o.str();
}

namespace {

// "{a, b, c}" after `prefix` on the line, as raw items; nullopt when the line differs.
std::optional<std::vector<std::string>> braced_items(std::string_view line, std::string_view prefix) {
  if (!line.starts_with(prefix) || !line.ends_with("}")) return std::nullopt;
  std::string_view body = line.substr(prefix.size(), line.size() - prefix.size() - 1);
  std::vector<std::string> items;
  while (!body.empty()) {
    const std::size_t comma = body.find(", ");
    items.emplace_back(body.substr(0, comma));
    if (comma == std::string_view::npos) break;
    body.remove_prefix(comma + 2);
  }
  return items;
}

std::optional<std::int64_t> integer_of(const std::string& text) {
  if (text.empty() || text.size() > 18 || !std::all_of(text.begin(), text.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
    return std::nullopt;
  return std::stoll(text);
}

}  // namespace

std::optional<ModelScript> latency_model_of(std::string_view src) {
  std::vector<std::string_view> lines;
  std::size_t at = 0;
  while (at < src.size() && lines.size() < 5) {
    const std::size_t nl = src.find('\n', at);
    if (nl == std::string_view::npos) return std::nullopt;
    lines.push_back(src.substr(at, nl - at));
    at = nl + 1;
  }
  if (lines.size() < 5 || src.substr(at, kBaselineOpen.size()) != kBaselineOpen) return std::nullopt;
  const std::size_t close = src.rfind(kBaselineClose);
  if (close == std::string_view::npos || close < at + kBaselineOpen.size()) return std::nullopt;
  const auto params = braced_items(lines[0], "local M = {");
  const auto splits = braced_items(lines[1], "local SPLITS = {");
  const auto packs = braced_items(lines[2], "local PACK = {");
  const auto margins = braced_items(lines[3], "local MARGINS = {");
  const auto box = braced_items(lines[4], "local BOX = {");
  if (!params || !splits || !packs || !margins || !box || params->size() != latency_parameters().size() ||
      box->size() != 2 * kModelBoxQuantities)
    return std::nullopt;
  ModelScript out;
  LatencyModel& m = out.model;
  for (std::size_t i = 0; i < params->size(); ++i) {
    const std::string prefix = std::string(latency_parameters()[i].name) + " = ";
    if (!(*params)[i].starts_with(prefix)) return std::nullopt;
    const auto v = integer_of((*params)[i].substr(prefix.size()));
    if (!v) return std::nullopt;
    m.*latency_parameters()[i].field = *v;
  }
  m.splits.clear();
  m.pack_gqa.clear();
  m.sm_margins.clear();
  for (const auto& s : *splits) {
    const auto v = integer_of(s);
    if (!v || *v > kMaxSplits) return std::nullopt;
    m.splits.push_back(static_cast<int>(*v));
  }
  for (const auto& p : *packs) {
    if (p != "true" && p != "false") return std::nullopt;
    m.pack_gqa.push_back(p == "true");
  }
  for (const auto& s : *margins) {
    const auto v = integer_of(s);
    if (!v || *v > 65536) return std::nullopt;
    m.sm_margins.push_back(static_cast<int>(*v));
  }
  for (int q = 0; q < kModelBoxQuantities; ++q) {
    const auto lo = integer_of((*box)[2 * q]), hi = integer_of((*box)[2 * q + 1]);
    if (!lo || !hi) return std::nullopt;
    m.box[q] = {*lo, *hi};
  }
  try {
    validate(m);
  } catch (const InputError&) {
    return std::nullopt;
  }
  const std::size_t begin = at + kBaselineOpen.size();
  out.baseline_source = std::string(src.substr(begin, close - begin));
  if (render_lua(m, out.baseline_source) != src) return std::nullopt;
  return out;
}

nlohmann::json to_json(const LatencyModel& m) {
  nlohmann::json params = nlohmann::json::object();
  for (const auto& p : latency_parameters()) params[p.name] = m.*p.field;
  nlohmann::json box = nlohmann::json::object();
  for (int q = 0; q < kModelBoxQuantities; ++q) box[kModelBoxNames[q]] = {m.box[q].lo, m.box[q].hi};
  return {{"splits", m.splits}, {"pack_gqa", m.pack_gqa}, {"sm_margins", m.sm_margins}, {"parameters", params},
          {"box", box}};
}

LatencyModel latency_model_from_json(const nlohmann::json& j, const std::string& path) {
  JsonReader r(j, path);
  r.allow_only({"splits", "pack_gqa", "sm_margins", "parameters", "box"});
  LatencyModel m;
  auto ints = [&](const char* field) {
    const auto* v = r.member(field);
    if (!v || !v->is_array()) throw InputError(r.path_of(field) + ": expected an array of integers");
    std::vector<int> out;
    for (std::size_t i = 0; i < v->size(); ++i)
      out.push_back(static_cast<int>(json_integer((*v)[i], r.path_of(field) + "[" + std::to_string(i) + "]")));
    return out;
  };
  m.splits = ints("splits");
  m.sm_margins = ints("sm_margins");
  const auto* packs = r.member("pack_gqa");
  if (!packs || !packs->is_array()) throw InputError(r.path_of("pack_gqa") + ": expected an array of booleans");
  m.pack_gqa.clear();
  for (std::size_t i = 0; i < packs->size(); ++i) {
    if (!(*packs)[i].is_boolean())
      throw InputError(r.path_of("pack_gqa") + "[" + std::to_string(i) + "]: expected a boolean, got " + json_kind((*packs)[i]));
    m.pack_gqa.push_back((*packs)[i].get<bool>());
  }
  const auto* params = r.member("parameters");
  if (!params) throw InputError(r.path_of("parameters") + ": missing");
  JsonReader pr(*params, r.path_of("parameters"));
  for (const auto& p : latency_parameters()) {
    // The model's form grew parameters (L2 re-reads, dense variants): an older file's
    // numbers would mean something else in today's formula.
    if (!pr.member(p.name))
      throw InputError(pr.path_of(p.name) + ": missing; a model written before this parameter existed cannot be "
                       "read as today's (distill the program again)");
    m.*p.field = pr.required_integer(p.name);
  }
  pr.finish();
  if (const auto* box = r.member("box")) {  // absent (written before boxes): unbounded
    JsonReader br(*box, r.path_of("box"));
    for (int q = 0; q < kModelBoxQuantities; ++q) {
      const std::string at = br.path_of(kModelBoxNames[q]);
      const auto* range = br.member(kModelBoxNames[q]);
      if (!range) continue;
      if (!range->is_array() || range->size() != 2) throw InputError(at + ": expected [lo, hi]");
      m.box[q] = {json_integer((*range)[0], at + "[0]"), json_integer((*range)[1], at + "[1]")};
    }
    br.finish();
  }
  r.finish();
  validate(m, path);
  return m;
}

}  // namespace evodispatch

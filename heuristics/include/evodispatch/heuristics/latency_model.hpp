#pragma once
// The model-based program family (DESIGN.md §5): a small latency model of the split decode
// kernel, evaluated for every candidate decision; the dispatch is the argmin. Where a rule
// list can only repeat what it saw, the model carries to shapes no search measured: it
// reasons in waves of CTAs over SM slots, per-tile cost, KV bytes and the combine kernel.
//
// For a candidate (k splits, pack, margin) on shape s (all integers, picoseconds):
//   rows    = pack ? qpk * seqlen_q : seqlen_q            query rows of one CTA
//   items   = batch * (pack ? h_kv : h_q) * k             CTAs of the decode kernel
//   sms     = num_sms - margin
//   slots   = margin > 0 ? sms : sms * max(1, ctas_per_sm * 128 / head_dim), or items when
//             sms < items <= sms * max(1, dense_ctas_per_sm * 128 / head_dim) (one denser wave)
//   tiles   = ceil(nblk / k); loading = ceil(nblk / tiles)  splits with keys to read
//   readers = pack ? 1 : qpk                              CTAs reading one KV head at once
//   kib     = ceil(min(seqlen_k, tiles * block_n) * head_dim * 2 * bytes / 1024)
//   wave(a) = cta_ps + max(tiles * (tile_ps + rows * row_ps),                the CTA's own work
//               kib * ceil(a * loading / k) * (dram_ps_per_kib + (readers - 1) * l2_ps_per_kib) / readers,
//               kib * ceil(a / sms) * (sm_ps_per_kib + (readers - 1) * sm_l2_ps_per_kib) / readers)
//             (a CTAs sharing DRAM, then one SM; an unpacked group's re-reads hit in L2)
//   main    = (items / slots) * wave(slots) + wave(items % slots)  (the last if non-empty)
//   combine = waves * (combine_ps + k * min(rows_per_cta, batch * h_q * seqlen_q) * combine_row_ps)
//             with lanes the smallest power of two <= 1024 / head_dim such that 8 * lanes >= k,
//             rows_per_cta = max(1, 1024 / head_dim / lanes) and
//             waves = ceil(ceil(batch * h_q * seqlen_q / rows_per_cta) / (sms * 8))
//   total   = main + (k > 1 ? combine : 0)
// Candidates are tried margins-major, then pack_gqa, then splits, in list order; the first
// strict minimum wins. The baseline policy's own decision stands unless the winner is
// predicted faster by more than min_gain_permille / 1000 of the baseline's predicted time:
// where the model is unsure, the program is the baseline. So it is outside the model's box:
// the ranges of head_dim, seqlen_q, page_size, qpk, ctas (batch * h_kv), seqlen_k and rows it was
// fitted on, so that it never answers for a head dim or a load it never saw measured.
// Integer arithmetic keeps the Lua
// program, this C++ twin and every emitted export in exact agreement.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include <evodispatch/heuristics/contract.hpp>

namespace evodispatch {

// The combine kernel's shape: one CTA merges 1024 / head_dim rows and a lane loads 8 splits
// per round trip (kernels/decode_params.hpp; a test holds the two to it), and the
// simulator's H100 profile runs 8 of its CTAs per SM.
inline constexpr std::int64_t kModelCombineRowsAtD1 = 1024;
inline constexpr std::int64_t kModelCombineSplitsPerLoad = 8;
inline constexpr std::int64_t kModelCombineCtasPerSm = 8;
// The query rows one combine CTA merges: 1024 / head_dim, or fewer rows of several split
// lanes when one lane would need more than one round trip of loads.
std::int64_t model_combine_rows_per_cta(std::int64_t num_splits, std::int64_t head_dim);

// The shape quantities a model's box bounds, in this order.
inline constexpr int kModelBoxQuantities = 7;
// "rows" is qpk * seqlen_q, a packed CTA's query rows: the kernels tile more than 16 by
// rules the model does not follow, so a box of qpk and seqlen_q apart would take in those.
inline constexpr std::array<const char*, kModelBoxQuantities> kModelBoxNames = {
    "head_dim", "seqlen_q", "page_size", "qpk", "ctas", "seqlen_k", "rows"};
std::array<std::int64_t, kModelBoxQuantities> model_box_values(const Shape&);
struct ModelRange {
  std::int64_t lo = 0;
  std::int64_t hi = std::int64_t{1} << 40;  // no bound
  bool operator==(const ModelRange&) const = default;
};
using ModelBox = std::array<ModelRange, kModelBoxQuantities>;
// The smallest box holding every shape (the unbounded box when there is none).
ModelBox model_box_of(const std::vector<Shape>&);

struct LatencyModel {
  std::vector<int> splits = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64};  // candidate counts
  std::vector<bool> pack_gqa = {true, false};                            // tried in this order
  std::vector<int> sm_margins = {0};
  std::int64_t ctas_per_sm = 2;        // CTA slots per SM at margin 0 and head dim 128 (a margin runs one per SM)
  std::int64_t dense_ctas_per_sm = 3;  // at head dim 128, the most CTAs per SM a variant holds to make one wave
  std::int64_t cta_ps = 2000;          // a CTA's fixed cost (start, epilogue)
  std::int64_t tile_ps = 600;          // one KV tile's compute
  std::int64_t row_ps = 10;            // one more query row over one tile
  std::int64_t dram_ps_per_kib = 350;  // one KiB of KV through the whole GPU's DRAM bandwidth
  std::int64_t sm_ps_per_kib = 25000;  // one KiB of KV into one SM
  std::int64_t combine_ps = 1500000;   // one wave of combine CTAs: its launch and fixed cost
  std::int64_t combine_row_ps = 15000; // one (query row, split) merged by one combine CTA
  std::int64_t l2_ps_per_kib = 100;    // one KiB re-read from L2 through the whole GPU
  std::int64_t sm_l2_ps_per_kib = 1600; // one KiB re-read from L2 into one SM
  std::int64_t min_gain_permille = 10; // the predicted gain that overrides the baseline
  ModelBox box{};                      // where the model answers; elsewhere the baseline
  bool operator==(const LatencyModel&) const = default;
};

// The parameters as data, declared once: JSON, Lua, the emitters and the fitter walk this.
struct LatencyParameter {
  const char* name;
  std::int64_t LatencyModel::*field;
  std::int64_t lo;  // inclusive bounds: every product of the model stays far from overflow
  std::int64_t hi;
};
const std::vector<LatencyParameter>& latency_parameters();

// A model whose lists or parameters are out of range: an InputError naming `where`.
void validate(const LatencyModel&, std::string_view where = "latency model");

// The predicted latency of one candidate.
std::int64_t predict_ps(const LatencyModel&, const Shape&, const DeviceInfo&, int num_splits, bool pack_gqa,
                        int sm_margin);
// The argmin over the candidates (margins not below num_sms are skipped), or `baseline`
// (the baseline policy's decision) unless the argmin beats it by min_gain_permille. Resolved.
Decision model_decision(const LatencyModel&, const Shape&, const DeviceInfo&, const Decision& baseline);

// A complete dispatch script computing model_decision, with the baseline policy's source
// embedded (it must define a global dispatch; the caller passes it canonical, comment-free,
// so that the whole script is).
std::string render_lua(const LatencyModel&, std::string_view baseline_source);
// The model and baseline a script is the rendering of (exactly render_lua's text), or nullopt.
struct ModelScript {
  LatencyModel model;
  std::string baseline_source;
};
std::optional<ModelScript> latency_model_of(std::string_view lua_source);

// {"splits", "pack_gqa", "sm_margins", "parameters": {name: int}}; the reader is strict and
// names the JSON path of what it refuses.
nlohmann::json to_json(const LatencyModel&);
LatencyModel latency_model_from_json(const nlohmann::json&, const std::string& path = "$");

}  // namespace evodispatch

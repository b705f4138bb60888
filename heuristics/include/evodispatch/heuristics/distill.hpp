#pragma once
// Distillation (DESIGN.md §6): a dispatch heuristic as plain data — a "decision function"
// of ordered rules with integer interval conditions over named features, in front of a
// fallback — its emitters (standalone C++ header, torch-free Python module, a drop-in
// body for FlashAttention-3's num_splits_heuristic, a patch for FA3's get_num_splits /
// get_pack_gqa, heuristic.json), a decision-tree
// fitter that turns any Lua script into such rules over a dense grid, and the checker
// that compiles the emitted header with the system compiler, loads it and holds it to
// the script on a dense grid and on random shapes.
//
// This folder knows nothing about search programs or storage: search/ adapts its rule
// lists into a DecisionFunction (search/distill_adapter.hpp), the CLI stores results.
#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <evodispatch/heuristics/contract.hpp>
#include <evodispatch/heuristics/dispatch_script.hpp>
#include <evodispatch/heuristics/latency_model.hpp>

namespace evodispatch::distill {

// The schema version of heuristic.json.
inline constexpr int kSchemaVersion = 1;

// Features a distilled function may read. The first eleven carry the names (and the
// meaning) of the search's features; dtype is 0 bf16, 1 fp16, 2 fp8; causal is 0 or 1.
enum class Feature : std::uint8_t {
  batch, seqlen_q, seqlen_k, h_q, h_kv, qpk, head_dim, nblk, page_size, ctas, num_sms, dtype, causal, cc,
  waves_pct, kv_kib,  // contract.hpp's
};
inline constexpr int kNumFeatures = 16;
std::string_view name(Feature);
std::optional<Feature> parse_feature(std::string_view);
using Values = std::array<std::int64_t, kNumFeatures>;
Values feature_values(const Shape&, const DeviceInfo&);

// lo <= feature <= hi (inclusive; the int64 limits mean "unbounded").
struct Bound {
  Feature feature = Feature::batch;
  std::int64_t lo = INT64_MIN;
  std::int64_t hi = INT64_MAX;
  bool operator==(const Bound&) const = default;
};

// num_splits = clamp(min(num // (den * div), ceil(of / k)), lo, hi), either term optional;
// both absent: the constant. The same expression as search's SplitExpr.
struct Quotient {
  Feature num = Feature::num_sms;
  Feature den = Feature::ctas;  // a feature that is never 0
  int div = 1;
  bool operator==(const Quotient&) const = default;
};
struct CeilDiv {
  Feature of = Feature::nblk;
  int k = 1;
  bool operator==(const CeilDiv&) const = default;
};
struct SplitExpr {
  int constant = 1;
  std::optional<Quotient> quotient;
  std::optional<CeilDiv> ceil_div;
  int lo = 1;
  int hi = kMaxSplits;
  bool is_constant() const { return !quotient && !ceil_div; }
  bool operator==(const SplitExpr&) const = default;
};

struct Rule {
  std::vector<Bound> when;       // a conjunction; empty: always
  SplitExpr num_splits;
  std::optional<bool> pack_gqa;  // unset: the contract's default (qpk > 1)
  int sm_margin = 0;
  bool operator==(const Rule&) const = default;
};

// What answers when no rule holds: FlashAttention-3's own dispatch (the exact twin of
// fa3_reference), FA3 on its serving path (of fa3_kvcache_reference), or nothing (the
// rules cover every shape: the last one is unconditional).
enum class Fallback { none, fa3, fa3_kvcache };
std::string_view name(Fallback);  // "none", "fa3", "fa3-kvcache": heuristic.json's words

struct DecisionFunction {
  std::vector<Rule> rules;
  Fallback fallback = Fallback::none;
  std::string method;  // "rules" (exact translation), "tree" (fitted), "rules+tree"
  nlohmann::json provenance = nlohmann::json::object();
  // The model-based family: when no rule holds, the latency model decides, with the
  // fallback's decision as its baseline (so it needs fallback fa3).
  std::optional<LatencyModel> model;
  bool operator==(const DecisionFunction&) const = default;
};

// The resolved decision (pack_gqa set) of the function for a shape: the interpreter that
// every emitter is held to.
Decision evaluate(const DecisionFunction&, const Shape&, const DeviceInfo&);

// Every feature the function reads (conditions, expressions; the fa3 fallback reads
// its own inputs and is reported separately).
std::vector<Feature> features_used(const DecisionFunction&);

// heuristic.json: {"schema": 1, "method", "fallback", "rules": [...], "model" (when set), "provenance"}.
// The reader is strict: unknown fields, features and bad values are InputErrors naming
// the JSON path.
nlohmann::json to_json(const DecisionFunction&);
DecisionFunction decision_function_from_json(const nlohmann::json&, const std::string& path = "$");

// ---- emitters ---------------------------------------------------------------------

// A header that compiles on its own (C++17, standard library only):
//   namespace evodispatch::distilled { struct Shape; struct DeviceInfo; struct Decision;
//     Decision dispatch(const Shape&, const DeviceInfo&) noexcept; }
std::string emit_cpp_header(const DecisionFunction&);
// A Python 3 module (no third-party imports) with dispatch(shape: dict, hw: dict) -> dict,
// and `python3 heuristic.py --check FILE` that compares it with rows FILE holds.
std::string emit_python(const DecisionFunction&);
// A drop-in body for FA3's hopper/heuristics.h num_splits_heuristic, or the reason it
// cannot be exact (a feature the signature does not carry, a rule setting sm_margin,...).
struct Fa3Body {
  std::optional<std::string> body;
  std::string refusal;
};
Fa3Body emit_fa3_body(const DecisionFunction&);
// A patch for every function, unlike the body above: a unified diff (`git apply`) against
// FA3's sources `fa3_files` (path -> text: "hopper/flash_api.cpp", optionally
// "hopper/flash_api_stable.cpp") at `fa3_commit`. It adds hopper/evodispatch_heuristic.h
// (emit_cpp_header's function plus an adapter from Flash_fwd_params) and rewrites the
// bodies of get_num_splits and get_pack_gqa (found by signature and matching brace) to
// return its decision, FA3's forced-pack cases kept. The lines before the first
// "diff --git" say what it changes. InputError naming the file and function when one of
// the two is missing, or when the file is already patched.
std::string emit_fa3_patch(const DecisionFunction&, const std::map<std::string, std::string>& fa3_files,
                           const std::string& fa3_commit);
// The FA3 sources of a checkout: DIR/hopper/flash_api.cpp (required) and
// flash_api_stable.cpp (when present); the commit is DIR's HEAD when DIR is a git
// checkout's top, else `commit_option` (--fa3-commit), which must then be given and must
// agree with HEAD when both are known. InputErrors name the file or the option.
struct Fa3Source {
  std::map<std::string, std::string> files;
  std::string commit;
};
Fa3Source read_fa3_source(const std::filesystem::path& dir, const std::string& commit_option);
// Writes DIR/fa3.patch through a temporary file and a rename (never half-written).
void write_fa3_patch(const DecisionFunction&, const Fa3Source&, const std::filesystem::path& dir);

// ---- shapes -----------------------------------------------------------------------

// The region a distilled function is checked on: grid values per field; random shapes
// draw batch, seqlen_k (log-uniform) and seqlen_q from [min, max] of these lists and the
// other fields from the lists.
struct Domain {
  std::vector<int> batch, seqlen_k, seqlen_q, h_kv, qpk, head_dim, page_size;
  std::vector<Dtype> dtype;
  std::vector<bool> causal;
  static Domain dense();  // the default of `distill`
  static Domain small();  // for tests
  nlohmann::json to_json() const;
};
std::vector<Shape> grid_shapes(const Domain&);
std::vector<Shape> random_shapes(const Domain&, std::size_t n, std::uint64_t seed);

// ---- fitting ----------------------------------------------------------------------

// Fits a decision tree (splits `feature <= t` over the grid, grown until every leaf
// holds one decision) to the script's decisions on `shapes`, flattened into interval
// rules (fallback none). A threshold sits at the smallest grid value on its right, except
// on batch and seqlen_k, where it is moved to the script's own threshold by bisection on
// a shape of the node (so `s.seqlen_k > 3000` is learnt exactly from a grid with 2049
// and 3072). Throws InputError when
// the script fails on a shape, or when two shapes with equal features get different
// decisions (the script reads something the features do not carry).
DecisionFunction fit_tree(DispatchScript&, const DeviceInfo&, const std::vector<Shape>& shapes);

// ---- compile, load, check ---------------------------------------------------------

// The emitted header compiled with a tiny extern "C" shim into a shared object and loaded.
class CompiledHeuristic {
 public:
  // Writes DIR/heuristic_shim.cpp, runs the system compiler ($CXX, else c++) with
  // -std=c++17 -O2 -shared -fPIC into DIR/libheuristic.so, and loads it. Throws
  // InputError with the compiler's output when it fails. `header` is DIR/heuristic.hpp.
  static std::unique_ptr<CompiledHeuristic> build(const std::filesystem::path& dir);
  // Loads DIR/libheuristic.so as built before.
  static std::unique_ptr<CompiledHeuristic> load(const std::filesystem::path& so_path);
  ~CompiledHeuristic();
  CompiledHeuristic(const CompiledHeuristic&) = delete;
  CompiledHeuristic& operator=(const CompiledHeuristic&) = delete;
  Decision decide(const Shape&, const DeviceInfo&) const;  // resolved

 private:
  CompiledHeuristic() = default;
  void* handle_ = nullptr;
  void (*fn_)(const int*, int*) = nullptr;
};

struct Mismatch {
  Shape shape;
  std::string expected;  // the script's decision (or its error)
  std::string got;       // the compiled function's
};
struct CheckReport {
  std::size_t grid = 0, random = 0, mismatches = 0;
  std::vector<Mismatch> first;  // the first ones, up to 10
  bool ok() const { return mismatches == 0; }
};
// Compares `candidate` with the script on every shape of `grid` and of `random`.
CheckReport check(DispatchScript& script, const std::function<Decision(const Shape&)>& candidate,
                  const DeviceInfo& hw, const std::vector<Shape>& grid, const std::vector<Shape>& random);

// Writes heuristic.json, heuristic.hpp, heuristic.py and fa3_num_splits_heuristic.inc
// (or fa3_refused.txt) into `dir` (created). Returns the FA3 outcome.
Fa3Body write_exports(const DecisionFunction&, const std::filesystem::path& dir);

}  // namespace evodispatch::distill

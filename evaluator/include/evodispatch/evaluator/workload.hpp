#pragma once
// Workloads: named sets of decode shapes (DESIGN.md §7), read from JSON: listed shapes,
// cartesian products, or a deployment domain that a seeded sampler draws shapes from.
//
// Format (every field optional unless said; unknown fields are refused):
//
//   {
//     "name": "paper-safety-160",          // default: the file name without ".json"
//     "description": "what it is for",
//     "shapes": [ {"batch": 1, "seqlen_k": 512, "h_q": 64, "h_kv": 1, "head_dim": 128}, ... ],
//     "products": [
//       { "batch": [1, 2, 4, 8],
//         "h_kv": [1, 2, 4, 8, 32],
//         "seqlen_k": {"from": 128, "to": 8192, "times": 2},
//         "h_q": {"max_with_h_kv": 64},
//         "head_dim": 128, "dtype": "bf16" }
//     ],
//     "sweep": {"num_splits": {"from": 1, "to": 64}},
//     "domain": {
//       "models": [ {"name": "Llama-3.1-8B", "h_q": 32, "h_kv": 8, "head_dim": 128,
//                    "source": "meta-llama/Llama-3.1-8B config.json: num_attention_heads 32, ..."} ],
//       "tensor_parallel": [1, 2, 4, 8],
//       "batch": {"from": 1, "to": 256},
//       "seqlen_k": {"from": 64, "to": 131072, "distribution": "log-uniform"},
//       "seqlen_q": 1, "dtype": "bf16", "page_size": [0, 16],
//       "samples": 240, "seed": 1 }
//   }
//
// * "shapes" lists shapes one by one, with the fields and defaults of DESIGN.md §2
//   (batch 1, seqlen_q 1, h_kv = h_q, head_dim 128, dtype "bf16", page_size 0, causal true;
//   seqlen_k and h_q are required).
// * Each entry of "products" is a cartesian product: every shape field holds one value
//   (it applies to all shapes of the product) or a list of values. A list is written
//   as an array or as a range: {"from": A, "to": B} (inclusive, step 1),
//   {"from": A, "to": B, "step": S} or {"from": A, "to": B, "times": F} (A, A*F, A*F^2, ...
//   up to B). h_q may also follow h_kv: {"max_with_h_kv": N} is max(h_kv, N) (the
//   paper's "Hq = max(Hkv, 64)") and {"qpk": N} is N * h_kv.
//   Expansion order: batch varies slowest, then h_kv, h_q, seqlen_q, seqlen_k,
//   head_dim, dtype, page_size, causal fastest.
// * Shapes from "shapes" come first, then each product in order; a shape that appears
//   again is dropped (the first occurrence keeps its place).
// * "sweep" names decision values to sweep for every shape (for now "num_splits", each in
//   [1, 256]): the U-curve workloads carry it.
// * "domain" describes where a heuristic will be deployed instead of listing shapes:
//   - "models" (required): whole-model attention, as the model's config.json gives it;
//     "source" says which fields of which file the numbers come from.
//   - "tensor_parallel" (default [1]): a degree t applies to a model when t divides h_q and
//     h_kv % t == 0 or t % h_kv == 0. One GPU then holds h_q / t query heads and
//     max(1, h_kv / t) KV heads (KV heads replicated when t > h_kv, as vLLM does).
//   - "batch", "seqlen_k" (required) and "seqlen_q" (default 1): one integer, an array of
//     values (drawn uniformly), or {"from": A, "to": B} drawn from A..B inclusive,
//     "distribution" "log-uniform" (the default: every factor of 2 equally likely) or "uniform".
//   - "dtype" (default "bf16") and "page_size" (default 0, contiguous): a value or an array.
//   - "samples" (default 240) distinct shapes are drawn with "seed" (default 1) by
//     sample_domain(); the shapes are causal.
//   A file may hold a domain beside "shapes"/"products": the listed shapes come first, then
//   "samples" drawn shapes distinct from them.
//
// Every error is an InputError naming the file and the JSON path, e.g.
//   "my.json: $.products[0].h_kv[2]: expected an integer, got a string".
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <evodispatch/heuristics/contract.hpp>

namespace evodispatch {

// One model's attention, for the whole model (before tensor parallelism).
struct DomainModel {
  std::string name;
  int h_q = 0;
  int h_kv = 0;
  int head_dim = 0;
  std::string source;  // which config.json fields the numbers come from
  bool operator==(const DomainModel&) const = default;
};

// The values one integer shape field takes in a domain, and how they are drawn.
struct DomainAxis {
  enum class Draw { log_uniform, uniform, values };
  Draw draw = Draw::values;
  int lo = 1, hi = 1;       // inclusive bounds (for values: their min and max)
  std::vector<int> values;  // Draw::values only: distinct, in file order
  std::int64_t count() const;  // how many distinct values it can give
  bool contains(int v) const;
  bool operator==(const DomainAxis&) const = default;
};

struct Domain {
  std::vector<DomainModel> models;
  std::vector<int> tensor_parallel{1};
  DomainAxis batch, seqlen_k, seqlen_q;
  std::vector<Dtype> dtypes{Dtype::bf16};
  std::vector<Dtype> q_dtypes{Dtype::bf16};  // the queries of an fp8 cache ("q_dtype")
  std::vector<int> page_sizes{0};
  std::size_t samples = 240;
  std::uint64_t seed = 1;
  bool operator==(const Domain&) const = default;
};

// A shape with the heads one GPU holds when `model` runs at tensor-parallel degree `tp`
// (only h_q, h_kv and head_dim set), or nullopt when `tp` does not apply to it.
std::optional<Shape> heads_per_gpu(const DomainModel& model, int tp);

// Whether the domain can give this shape (some model at some applicable degree, every
// field within its axis, causal).
bool domain_contains(const Domain&, const Shape&);

// How many distinct shapes the domain holds.
std::int64_t domain_size(const Domain&);

// `n` distinct shapes of the domain, none in `exclude`, drawn with `seed`: the same on
// every machine and standard library. Each draw picks a (model, applicable degree) pair
// uniformly, then dtype, page size, batch, seqlen_q and seqlen_k. Throws InputError when
// the domain cannot give `n` such shapes.
std::vector<Shape> sample_domain(const Domain&, std::size_t n, std::uint64_t seed,
                                 const std::vector<Shape>& exclude = {});

// Reads the "domain" object at `path` (errors name the JSON path below it).
Domain domain_from_json(const nlohmann::json&, const std::string& path);

struct Workload {
  std::string name;
  std::string description;
  std::string source;  // "workloads/NAME.json" (shipped, its place in the repository) or the path read
  std::vector<Shape> shapes;
  std::vector<int> split_sweep;  // empty unless the file has "sweep": {"num_splits": ...}
  std::optional<Domain> domain;  // set when the file has "domain" (its sample is in `shapes`)
};

// The workload with its domain's sample redrawn at `samples` shapes (same seed, after
// the listed shapes): a search that trains on more shapes than the file draws. Throws
// InputError when the workload has no domain or the domain cannot give that many.
Workload resample_domain(Workload, std::size_t samples);

// A shipped name (see workload_names()), else a path to a JSON file. An unknown name
// that is no readable file is an error listing the shipped names.
Workload load_workload(std::string_view name_or_path);

// Reads a workload from JSON text; `source` prefixes every error, `default_name` is used
// when the text has no "name".
Workload parse_workload(std::string_view text, const std::string& source, const std::string& default_name);

// The shipped workloads (domains included), sorted.
std::vector<std::string> workload_names();

// Parses JSON text, turning a syntax error into an InputError "SOURCE: line L, column C: ...".
// Shared by workloads and simulator profiles.
nlohmann::json parse_json_text(std::string_view text, const std::string& source);

// The whole file, or an InputError naming it.
std::string read_text_file(const std::string& path);

}  // namespace evodispatch

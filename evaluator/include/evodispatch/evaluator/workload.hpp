#pragma once
// Workloads: named sets of decode shapes (DESIGN.md §7), read from JSON.
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
//     "sweep": {"num_splits": {"from": 1, "to": 64}}
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
//
// Every error is an InputError naming the file and the JSON path, e.g.
//   "my.json: $.products[0].h_kv[2]: expected an integer, got a string".
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <evodispatch/heuristics/contract.hpp>

namespace evodispatch {

struct Workload {
  std::string name;
  std::string description;
  std::string source;  // "workloads/NAME.json" (shipped, its place in the repository) or the path read
  std::vector<Shape> shapes;
  std::vector<int> split_sweep;  // empty unless the file has "sweep": {"num_splits": ...}
};

// A shipped name (see workload_names()), else a path to a JSON file. An unknown name
// that is no readable file is an error listing the shipped names.
Workload load_workload(std::string_view name_or_path);

// Reads a workload from JSON text; `source` prefixes every error, `default_name` is used
// when the text has no "name".
Workload parse_workload(std::string_view text, const std::string& source, const std::string& default_name);

// The shipped workloads, sorted.
std::vector<std::string> workload_names();

// Parses JSON text, turning a syntax error into an InputError "SOURCE: line L, column C: ...".
// Shared by workloads and simulator profiles.
nlohmann::json parse_json_text(std::string_view text, const std::string& source);

// The whole file, or an InputError naming it.
std::string read_text_file(const std::string& path);

}  // namespace evodispatch

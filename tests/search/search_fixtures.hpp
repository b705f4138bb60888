#pragma once
// What the search tests share: a scratch directory, a small workload that keeps a whole
// search within a few seconds, and a config for it.
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include <evodispatch/search/config.hpp>

#include "../support/scratch.hpp"

namespace evodispatch::search::testing {

using evodispatch::test::ScratchDir;

// 36 shapes: B in {1, 2, 4}, Hkv in {1, 4, 8}, Lk in {256, 512, 2048, 8192}, Hq = 64.
inline std::string mini_workload_json() {
  return R"({"name": "mini", "products": [{"batch": [1, 2, 4], "h_kv": [1, 4, 8],
             "h_q": {"max_with_h_kv": 64}, "seqlen_k": [256, 512, 2048, 8192]}]})";
}

// A search on the mini workload that finishes in a second or two on the simulator.
// Three models (GQA 8, MQA at D = 64, D = 256) at TP 1 and 2, B 1..batch_to and Lk
// 128..seqlen_k_to log-uniform: 60 shapes sampled with `seed`.
inline std::string mini_domain_json(const std::string& name, int batch_to, int seqlen_k_to, int seed) {
  return R"({"name": ")" + name + R"(", "domain": {
    "models": [{"name": "gqa8", "h_q": 64, "h_kv": 8, "head_dim": 128, "source": "test"},
               {"name": "mqa", "h_q": 32, "h_kv": 1, "head_dim": 64, "source": "test"},
               {"name": "d256", "h_q": 16, "h_kv": 8, "head_dim": 256, "source": "test"}],
    "tensor_parallel": [1, 2],
    "batch": {"from": 1, "to": )" + std::to_string(batch_to) + R"(}, "seqlen_k": {"from": 128, "to": )" +
         std::to_string(seqlen_k_to) + R"(},
    "samples": 60, "seed": )" + std::to_string(seed) + "}}";
}

inline nlohmann::json mini_config_json(const std::string& workload_path, int max_evaluations = 300) {
  return {{"name", "mini"},
          {"workload", workload_path},
          {"baseline", "fa3"},
          {"islands", {{"count", 2}, {"batch", 8}, {"migration_interval", 3}}},
          {"oracle", {{"max_splits", 16}}},
          {"decisions", {{"max_splits", 16}}},
          {"final", {{"candidates", 4}, {"confirm_top", 2}}},
          {"stop", {{"max_evaluations", max_evaluations}}}};
}

inline SearchConfig mini_config(const std::string& workload_path, int max_evaluations = 300) {
  return parse_search_config(mini_config_json(workload_path, max_evaluations), "mini");
}

inline std::string source_dir() { return EVO_SOURCE_DIR; }
inline std::string mutator_script() { return source_dir() + "/tests/search/mutator.sh"; }

}  // namespace evodispatch::search::testing

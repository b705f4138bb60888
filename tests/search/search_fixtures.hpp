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

#pragma once
// Pieces of the workload reader that the shape lists and the domains share (workload.cpp,
// workload_domain.cpp); not part of the evaluator's interface.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace evodispatch::workload_json {

// "PATH[i]"
std::string index_path(const std::string& path, std::size_t i);

// A list of integers written as one number, an array or a range {"from", "to"[, "step" | "times"]}.
std::vector<std::int64_t> integer_list(const nlohmann::json& j, const std::string& path);

// A dtype name ("bf16", "fp16", "fp8"), else an InputError at `path`.
std::string checked_dtype(const nlohmann::json& v, const std::string& path);

}  // namespace evodispatch::workload_json

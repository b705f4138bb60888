#pragma once
// Parsing of the compact argument forms the verbs share.
#include <string>
#include <vector>

#include <evodispatch/evaluator/measurement.hpp>
#include <evodispatch/heuristics/contract.hpp>

namespace evodispatch::cli {

// "1..64", "1..64:2" (step), "1,2,4,8", or a mix "1..8,16,32". Throws UsageError naming
// `option` when the text is not such a list, and InputError when a value is outside
// [lo, hi] (exit 1, which tests/cli/test_cli.cpp holds for `sweep --splits 0..3`).
std::vector<int> parse_int_list(const std::string& text, const std::string& option, int lo, int hi);

// "batch=1,seqlen_k=512,h_q=64,h_kv=1" with the shape fields of the contract (numbers,
// true/false, dtype names). Throws UsageError naming `option` when a part is not
// name=value, and InputError naming the field when the contract refuses it (exit 1, which
// tests/cli/test_cli.cpp holds for an unknown field).
Shape parse_shape(const std::string& text, const std::string& option);

// "cold" | "hot" -> the L2 mode; anything else is a UsageError naming `option`.
L2Mode parse_l2_option(const std::string& text, const std::string& option);

// "on" | "off" | "both" | "auto" -> the pack_gqa values to try (auto: the default only);
// anything else is a UsageError.
std::vector<bool> parse_pack_choice(const std::string& text, const std::string& option, const Shape& shape);

}  // namespace evodispatch::cli

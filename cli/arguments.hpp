#pragma once
// Parsing of the compact argument forms the verbs share.
#include <string>
#include <vector>

#include <evodispatch/heuristics/contract.hpp>

namespace evodispatch::cli {

// "1..64", "1..64:2" (step), "1,2,4,8", or a mix "1..8,16,32". Throws InputError
// naming `option` when the text is not such a list or a value is outside [lo, hi].
std::vector<int> parse_int_list(const std::string& text, const std::string& option, int lo, int hi);

// "batch=1,seqlen_k=512,h_q=64,h_kv=1" with the shape fields of the contract (numbers,
// true/false, dtype names). Throws InputError naming `option` and the field.
Shape parse_shape(const std::string& text, const std::string& option);

// "on" | "off" | "both" | "auto" -> the pack_gqa values to try (auto: the default only).
std::vector<bool> parse_pack_choice(const std::string& text, const std::string& option, const Shape& shape);

}  // namespace evodispatch::cli

#pragma once
// Content hashes for programs: 32 hex digits from two independent 64-bit hashes, so
// that two different normalised programs of one run collide with negligible odds.
#include <cstdint>
#include <string>
#include <string_view>

namespace evodispatch::search {

std::uint64_t fnv1a64(std::string_view text, std::uint64_t basis = 0xcbf29ce484222325ULL);
std::string content_hash(std::string_view text);

}  // namespace evodispatch::search

#include <evodispatch/search/hash.hpp>

#include <cstdio>

#include <evodispatch/search/rng.hpp>

namespace evodispatch::search {

std::uint64_t fnv1a64(std::string_view text, std::uint64_t basis) {
  std::uint64_t h = basis;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

namespace {
// A second, unrelated hash: 8-byte little-endian words (the same on every host)
// folded through splitmix64's mixer.
std::uint64_t mix64(std::string_view text) {
  std::uint64_t h = 0x51ed270b27a5f1c3ULL ^ text.size();
  for (std::size_t i = 0; i < text.size(); i += 8) {
    std::uint64_t w = 0;
    for (std::size_t b = 0; b < 8 && i + b < text.size(); ++b)
      w |= static_cast<std::uint64_t>(static_cast<unsigned char>(text[i + b])) << (8 * b);
    h ^= w;
    h = splitmix64(h);
  }
  return splitmix64(h);
}
}  // namespace

std::string content_hash(std::string_view text) {
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(fnv1a64(text)),
                static_cast<unsigned long long>(mix64(text)));
  return hex;
}

}  // namespace evodispatch::search

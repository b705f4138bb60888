#include <evodispatch/search/rng.hpp>

#include <cstdio>

#include <nlohmann/json.hpp>

#include <evodispatch/heuristics/contract.hpp>

namespace evodispatch::search {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

namespace {
std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Rng::Rng(std::uint64_t seed) {
  for (auto& w : s_) w = splitmix64(seed);
}

std::uint64_t Rng::next() {
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

std::uint64_t Rng::below(std::uint64_t n) {
  if (n <= 1) return 0;
  // Values at or above `limit` would make the low residues more likely.
  const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % n);
  std::uint64_t x;
  do x = next();
  while (x >= limit);
  return x % n;
}

std::int64_t Rng::between(std::int64_t lo, std::int64_t hi) {
  if (hi <= lo) return lo;
  return lo + static_cast<std::int64_t>(below(static_cast<std::uint64_t>(hi - lo) + 1));
}

double Rng::real() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

Rng Rng::fork(std::uint64_t salt) const {
  std::uint64_t seed = s_[0] ^ rotl(s_[1], 13) ^ rotl(s_[2], 29) ^ rotl(s_[3], 41);
  seed ^= splitmix64(salt);
  return Rng(seed);
}

nlohmann::json to_json(const Rng& r) {
  nlohmann::json a = nlohmann::json::array();
  for (std::uint64_t w : r.state()) {
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(w));
    a.push_back(hex);
  }
  return a;
}

Rng rng_from_json(const nlohmann::json& j, const std::string& path) {
  if (!j.is_array() || j.size() != 4) throw InputError(path + ": expected an array of 4 hex strings");
  std::array<std::uint64_t, 4> s{};
  for (std::size_t i = 0; i < 4; ++i) {
    const std::string where = path + "[" + std::to_string(i) + "]";
    if (!j[i].is_string()) throw InputError(where + ": expected a hex string");
    const std::string text = j[i].get<std::string>();
    if (text.size() != 16 || text.find_first_not_of("0123456789abcdef") != std::string::npos)
      throw InputError(where + ": expected 16 lowercase hex digits, got \"" + text + "\"");
    s[i] = std::stoull(text, nullptr, 16);
  }
  if (s[0] == 0 && s[1] == 0 && s[2] == 0 && s[3] == 0) throw InputError(path + ": the all-zero state is not valid");
  return Rng::from_state(s);
}

}  // namespace evodispatch::search

#pragma once
// The search's random numbers: xoshiro256** seeded through splitmix64, with its own
// integer and real draws. std::uniform_*_distribution is implementation-defined, so a
// run resumed by another build (or another standard library) would diverge; this one
// gives the same sequence everywhere, and its whole state is four words that the run
// state stores.
#include <array>
#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace evodispatch::search {

// One step of splitmix64: advances `state` and returns the next output.
std::uint64_t splitmix64(std::uint64_t& state);

class Rng {
 public:
  explicit Rng(std::uint64_t seed = 0);

  std::uint64_t next();
  // Uniform in [0, n); n > 0. Unbiased (rejection of the short last interval).
  std::uint64_t below(std::uint64_t n);
  // Uniform integer in [lo, hi]; lo <= hi.
  std::int64_t between(std::int64_t lo, std::int64_t hi);
  // Uniform in [0, 1) with 53 random bits.
  double real();
  bool chance(double p) { return real() < p; }
  // An index drawn with probability proportional to weights[i] (all >= 0, sum > 0).
  template <class Weights>
  std::size_t weighted(const Weights& weights) {
    double total = 0;
    for (double w : weights) total += w;
    double x = real() * total;
    std::size_t last = 0;
    for (std::size_t i = 0; i < std::size(weights); ++i) {
      if (weights[i] <= 0) continue;
      last = i;
      if (x < weights[i]) return i;
      x -= weights[i];
    }
    return last;  // rounding left x at the very end
  }

  // A new generator whose stream is independent of this one's (for a sub-task that
  // must not shift this stream: a shape split, a seed per island).
  Rng fork(std::uint64_t salt) const;

  const std::array<std::uint64_t, 4>& state() const { return s_; }
  static Rng from_state(const std::array<std::uint64_t, 4>& s) {
    Rng r;
    r.s_ = s;
    return r;
  }
  bool operator==(const Rng&) const = default;

 private:
  std::array<std::uint64_t, 4> s_{};
};

// The state as four 16-digit hex strings (JSON numbers lose precision past 2^53).
nlohmann::json to_json(const Rng&);
Rng rng_from_json(const nlohmann::json&, const std::string& path);

}  // namespace evodispatch::search

#pragma once
// The evaluate facade: measures what it is given and returns rows. It is pure in the
// sense of DESIGN.md §1: it never reads or writes the results database.
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include <evodispatch/evaluator/measurement.hpp>
#include <evodispatch/heuristics/contract.hpp>

namespace evodispatch {

// An interleaved A/B comparison of two decisions on one shape (DESIGN.md §4): ratio is
// the median over pairs of time(A) / time(B) (> 1: A is slower), [ratio_lo, ratio_hi] the
// p10..p90 of the pairwise ratios. a and b are the rows of the same run.
struct Comparison {
  bool ok = false;
  std::string error;
  Measurement a, b;
  double ratio = 0, ratio_lo = 0, ratio_hi = 0;
  int pairs = 0;  // pairwise ratios taken (0: two separate measurements were divided)
};
nlohmann::json to_json(const Comparison&);
Comparison comparison_from_json(const nlohmann::json&, const std::string& path = "$");

class Evaluator {
 public:
  virtual ~Evaluator() = default;
  virtual const std::string& spec() const = 0;  // "sim:h100-sxm", "cuda:0"
  virtual const DeviceInfo& device() const = 0;
  virtual const std::string& fingerprint() const = 0;
  virtual const std::string& kernel_build() const = 0;
  // The version of the procedure that turns a run into a row (measurement.hpp); part of
  // every key. Evaluators that follow the built-in procedure keep the default.
  virtual int measuring_protocol() const { return kMeasuringProtocol; }
  // The key a measurement of this (shape, decision) would carry; the decision is resolved.
  MeasurementKey key(const Shape&, const Decision&, const TimingOptions&) const;
  virtual Measurement measure(const Shape&, const Decision&, const TimingOptions&) = 0;

  // Times a against b. The default divides two measure() medians, which is exact for a
  // deterministic evaluator (the simulator); a GPU evaluator interleaves replays instead.
  virtual Comparison compare(const Shape&, const Decision& a, const Decision& b, const TimingOptions&,
                             int pairs = 30);

  // Why this evaluator can take no further measurement (a sticky CUDA error poisons the
  // whole process), or nullopt. The worker layer restarts the process when it is set.
  virtual std::optional<std::string> unusable() const { return std::nullopt; }
};

// "auto" (the first GPU, else sim:h100-sxm), "sim:PROFILE", "cuda:N" or "fa3:cuda:N".
// "cuda:N" measures in a worker process (worker.hpp) unless EVODISPATCH_IN_PROCESS=1;
// "fa3:cuda:N" measures FlashAttention-3's kernels on GPU N through its Python worker.
// Throws InputError naming the spec when it cannot be honoured.
std::unique_ptr<Evaluator> make_evaluator(std::string_view device_spec);

// As make_evaluator, but always in this process: what a worker process runs.
std::unique_ptr<Evaluator> make_local_evaluator(std::string_view device_spec);

// The DeviceInfo an evaluator for this spec would report, without starting a worker or
// a CUDA context (what `decide` needs). Same errors as make_evaluator.
DeviceInfo device_for_spec(std::string_view device_spec);

}  // namespace evodispatch

#pragma once
// The evaluate facade: measures what it is given and returns rows. It is pure in the
// sense of DESIGN.md §1: it never reads or writes the results database.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <evodispatch/evaluator/measurement.hpp>
#include <evodispatch/heuristics/contract.hpp>

namespace evodispatch {

class Evaluator {
 public:
  virtual ~Evaluator() = default;
  virtual const std::string& spec() const = 0;  // "sim:h100-sxm", "cuda:0"
  virtual const DeviceInfo& device() const = 0;
  virtual const std::string& fingerprint() const = 0;
  virtual const std::string& kernel_build() const = 0;
  // The key a measurement of this (shape, decision) would carry; the decision is resolved.
  MeasurementKey key(const Shape&, const Decision&, const TimingOptions&) const;
  virtual Measurement measure(const Shape&, const Decision&, const TimingOptions&) = 0;
};

// "auto" (the first GPU, else sim:h100-sxm), "sim:PROFILE" or "cuda:N".
// Throws InputError naming the spec when it cannot be honoured.
std::unique_ptr<Evaluator> make_evaluator(std::string_view device_spec);

}  // namespace evodispatch

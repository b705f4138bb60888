#pragma once
// The numeric check of DESIGN.md §4 on host data: the kernel's output (16-bit, as
// written, poisoned with NaN beforehand) against the float32 reference. Plain functions
// so that the rules are tested without a GPU.
#include <cstdint>
#include <span>
#include <string>

#include <evodispatch/heuristics/contract.hpp>

namespace evodispatch {

struct NumericCheck {
  bool ok = false;
  double rel_error = 0;            // ||out - ref|| / ||ref|| (||out - ref|| when ref is all zero)
  std::int64_t bad_elements = 0;   // NaN or infinite outputs: unwritten (still poisoned) or computed so
  std::int64_t first_bad = -1;     // index of the first of them
  std::int64_t lse_mismatches = 0; // LSE entries off by more than the LSE tolerance, or -inf where the reference is not
  double lse_max_error = 0;        // max |lse - ref| / max(1, |ref|) over finite entries
  std::string error;               // why it failed, when !ok
};

// `out_bits` holds 16-bit values of `dtype`; `lse`/`ref_lse` may be empty (no LSE check).
// Passes when there is no bad element, rel_error < tolerance and no LSE mismatch.
NumericCheck check_output(std::span<const std::uint16_t> out_bits, Dtype dtype, std::span<const float> ref,
                          std::span<const float> lse, std::span<const float> ref_lse, double tolerance);

// LSE tolerance, relative to max(1, |ref|): the LSE is computed in fp32 from the same
// fp32 scores in both kernels, so only the order of the sums differs.
inline constexpr double kLseTolerance = 2e-3;

}  // namespace evodispatch

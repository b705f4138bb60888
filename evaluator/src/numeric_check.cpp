#include <evodispatch/evaluator/numeric_check.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>

#include <evodispatch/kernels/dtype.hpp>

namespace evodispatch {

NumericCheck check_output(std::span<const std::uint16_t> out_bits, Dtype dtype, std::span<const float> ref,
                          std::span<const float> lse, std::span<const float> ref_lse, double tolerance) {
  NumericCheck c;
  if (out_bits.size() != ref.size()) {
    c.error = "output has " + std::to_string(out_bits.size()) + " elements, the reference " + std::to_string(ref.size());
    return c;
  }
  double diff2 = 0, ref2 = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double o = bits_to_float(dtype, out_bits[i]);
    if (!std::isfinite(o)) {
      if (c.bad_elements++ == 0) c.first_bad = static_cast<std::int64_t>(i);
      continue;
    }
    const double r = ref[i];
    diff2 += (o - r) * (o - r);
    ref2 += r * r;
  }
  c.rel_error = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  if (c.bad_elements) c.rel_error = std::nan("");

  if (!lse.empty() || !ref_lse.empty()) {
    if (lse.size() != ref_lse.size()) {
      c.error = "LSE has " + std::to_string(lse.size()) + " entries, the reference " + std::to_string(ref_lse.size());
      return c;
    }
    for (std::size_t i = 0; i < lse.size(); ++i) {
      const double r = ref_lse[i], o = lse[i];
      if (std::isinf(r) && r < 0) {
        if (!(std::isinf(o) && o < 0)) ++c.lse_mismatches;
        continue;
      }
      if (!std::isfinite(o)) {
        ++c.lse_mismatches;
        continue;
      }
      const double e = std::abs(o - r) / std::max(1.0, std::abs(r));
      c.lse_max_error = std::max(c.lse_max_error, e);
      if (e > kLseTolerance) ++c.lse_mismatches;
    }
  }

  std::ostringstream why;
  if (c.bad_elements)
    why << c.bad_elements << " of " << ref.size() << " output elements are NaN or infinite (unwritten or computed so; first at "
        << c.first_bad << ")";
  else if (!(c.rel_error < tolerance))
    why << "relative error " << c.rel_error << " >= tolerance " << tolerance;
  if (c.lse_mismatches) {
    if (why.tellp() > 0) why << "; ";
    why << c.lse_mismatches << " LSE entries differ from the reference (max relative error " << c.lse_max_error << ")";
  }
  c.error = why.str();
  c.ok = c.error.empty();
  return c;
}

}  // namespace evodispatch

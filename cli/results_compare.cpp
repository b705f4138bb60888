#include "results_compare.hpp"

#include <iomanip>
#include <sstream>

namespace evodispatch::cli {

results::Table compare_table(const CompareReport& r) {
  results::Table t;
  t.columns = {"shape", "A decision", "A us", "B decision", "B us", "A/B time"};
  const auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  for (const auto& row : r.rows)
    t.rows.push_back({describe(row.shape), row.a_decision, opt(row.a_us), row.b_decision, opt(row.b_us), opt(row.ratio)});
  return t;
}

std::string compare_summary(const CompareReport& r) {
  std::ostringstream o;
  o << "A = " << r.a << ", B = " << r.b << "\non " << r.device << ", kernel build " << r.kernel_build << ": "
    << r.rows.size() << " shapes";
  if (r.geomean_ratio)
    o << ", A's time over B's: geomean " << std::fixed << std::setprecision(4) << *r.geomean_ratio << " (A faster on "
      << r.a_faster << ", B faster on " << r.b_faster << ", within 0.5% on " << r.equal << ")";
  if (r.missing) o << "; " << r.missing << " shapes without a measurement of both decisions";
  return o.str();
}

}  // namespace evodispatch::cli

#pragma once
// How `results compare` prints a CompareReport.
#include <string>

#include <evodispatch/results/browse.hpp>
#include <evodispatch/search/compare.hpp>

namespace evodispatch::cli {

results::Table compare_table(const CompareReport&);
std::string compare_summary(const CompareReport&);

}  // namespace evodispatch::cli

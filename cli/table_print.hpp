#pragma once
// Human tables for `evodispatch results`: aligned columns, numbers to 4 significant digits,
// long text cut to a width so one row stays one line.
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <evodispatch/results/browse.hpp>

namespace evodispatch::cli {

std::string format_cell(const nlohmann::json& v, std::size_t max_width = 40);
void print_table(const results::Table&, std::ostream&, std::size_t max_width = 40);

}  // namespace evodispatch::cli

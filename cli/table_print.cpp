#include "table_print.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

namespace evodispatch::cli {

std::string format_cell(const nlohmann::json& v, std::size_t max_width) {
  std::string s;
  if (v.is_null()) {
    s = "-";
  } else if (v.is_number_float()) {
    std::ostringstream o;
    o << std::setprecision(4) << v.get<double>();
    s = o.str();
  } else if (v.is_string()) {
    s = v.get<std::string>();
    std::replace(s.begin(), s.end(), '\n', ' ');
  } else {
    s = v.dump();
  }
  if (s.size() > max_width) s = s.substr(0, max_width - 3) + "...";
  return s;
}

void print_table(const results::Table& t, std::ostream& out, std::size_t max_width) {
  std::vector<std::vector<std::string>> cells;
  std::vector<std::size_t> width;
  for (const auto& c : t.columns) width.push_back(c.size());
  for (const auto& row : t.rows) {
    auto& line = cells.emplace_back();
    for (std::size_t c = 0; c < row.size(); ++c) {
      line.push_back(format_cell(row[c], max_width));
      width[c] = std::max(width[c], line.back().size());
    }
  }
  const auto print_line = [&](const std::vector<std::string>& line, const results::Table& table) {
    for (std::size_t c = 0; c < line.size(); ++c) {
      // Numbers right-aligned, text left-aligned, as a reader scans them.
      const bool number = !table.rows.empty() && table.rows.front()[c].is_number();
      out << (c ? "  " : "") << (number ? std::right : std::left) << std::setw(static_cast<int>(width[c])) << line[c];
    }
    out << "\n";
  };
  print_line(t.columns, t);
  for (const auto& line : cells) print_line(line, t);
}

}  // namespace evodispatch::cli

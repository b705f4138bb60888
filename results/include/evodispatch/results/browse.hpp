#pragma once
// Read-only queries behind `evodispatch results` and its exports: rows of the readable
// views of schema version 4 (schema_v4.cpp says what each column holds), filtered by
// column values. Column names are checked against the view, so a misspelt filter is an
// InputError naming the view's columns, never SQL pasted into a query.
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <evodispatch/results/database.hpp>

namespace evodispatch::results {

enum class View { runs, measurements, oracle, search_progress, programs, run_shapes };
std::string_view sql_name(View);                  // "v_runs", ...
std::string_view to_string(View);                 // "runs", "measurements", "oracle", "progress", ...
std::optional<View> parse_view(std::string_view);  // the inverse of to_string
std::vector<View> all_views();

struct ViewQuery {
  std::vector<std::pair<std::string, nlohmann::json>> equals;  // column = value (null: IS NULL)
  std::vector<std::string> columns;  // the columns to return, in order; empty: all of them
  std::string order_by;              // a column; empty: the view's natural order
  bool descending = false;
  std::optional<std::int64_t> limit;
};

// A query's answer: values as SQLite returned them (integer, real, text or null).
struct Table {
  std::vector<std::string> columns;
  std::vector<std::vector<nlohmann::json>> rows;
  // The value of `column` in row `row` (null when the table lacks the column).
  const nlohmann::json& at(std::size_t row, std::string_view column) const;
};

std::vector<std::string> view_columns(Database&, View);
Table read_view(Database&, View, const ViewQuery& = {});

// Exports: RFC 4180 CSV with a header line; JSON as an array of objects.
void write_csv(const Table&, std::ostream&);
nlohmann::json to_json(const Table&);

}  // namespace evodispatch::results

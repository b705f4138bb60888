#include <evodispatch/results/browse.hpp>

#include <algorithm>
#include <array>

#include <evodispatch/heuristics/contract.hpp>

#include "access.hpp"

namespace evodispatch::results {

namespace {
struct ViewInfo {
  View view;
  std::string_view name, sql;
};
constexpr std::array<ViewInfo, 6> kViews = {{{View::runs, "runs", "v_runs"},
                                             {View::measurements, "measurements", "v_measurements"},
                                             {View::oracle, "oracle", "v_oracle"},
                                             {View::search_progress, "progress", "v_search_progress"},
                                             {View::programs, "programs", "v_programs"},
                                             {View::run_shapes, "shapes", "v_run_shapes"}}};

const ViewInfo& info(View v) {
  return *std::find_if(kViews.begin(), kViews.end(), [&](const ViewInfo& i) { return i.view == v; });
}

nlohmann::json column_value(const sql::Statement& st, int col) {
  switch (st.column_type(col)) {
    case SQLITE_NULL: return nullptr;
    case SQLITE_INTEGER: return st.column_int64(col);
    case SQLITE_FLOAT: return st.column_double(col);
    default: return st.column_text(col);
  }
}

// A column the caller named must be one of the view's: it is pasted into the SQL.
const std::string& checked(const std::vector<std::string>& known, const std::string& column, View v) {
  if (std::find(known.begin(), known.end(), column) != known.end()) return column;
  std::string list;
  for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
  throw InputError("view " + std::string(sql_name(v)) + " has no column \"" + column + "\" (it has: " + list + ")");
}

void bind_value(sql::Statement& st, const std::string& name, const nlohmann::json& v) {
  if (v.is_number_integer()) st.bind(name, v.get<std::int64_t>());
  else if (v.is_number()) st.bind(name, v.get<double>());
  else if (v.is_boolean()) st.bind(name, v.get<bool>());
  else if (v.is_string()) st.bind(name, v.get<std::string>());
  else throw InputError("a filter value must be a number or text, got " + v.dump());
}

std::string csv_field(const nlohmann::json& v) {
  if (v.is_null()) return "";
  if (!v.is_string()) return v.dump();
  const std::string s = v.get<std::string>();
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}
}  // namespace

std::string_view sql_name(View v) { return info(v).sql; }
std::string_view to_string(View v) { return info(v).name; }
std::optional<View> parse_view(std::string_view s) {
  for (const auto& i : kViews)
    if (i.name == s) return i.view;
  return std::nullopt;
}
std::vector<View> all_views() {
  std::vector<View> out;
  for (const auto& i : kViews) out.push_back(i.view);
  return out;
}

const nlohmann::json& Table::at(std::size_t row, std::string_view column) const {
  static const nlohmann::json kNull;
  const auto it = std::find(columns.begin(), columns.end(), column);
  if (it == columns.end()) return kNull;
  return rows.at(row).at(static_cast<std::size_t>(it - columns.begin()));
}

std::vector<std::string> view_columns(Database& db, View v) {
  sql::Statement st(detail::connection(db), "SELECT * FROM " + std::string(sql_name(v)) + " LIMIT 0");
  std::vector<std::string> out;
  for (int c = 0; c < st.column_count(); ++c) out.push_back(st.column_name(c));
  return out;
}

Table read_view(Database& db, View v, const ViewQuery& q) {
  const std::vector<std::string> known = view_columns(db, v);
  std::string select;
  for (const auto& c : q.columns) select += (select.empty() ? "" : ", ") + checked(known, c, v);
  std::string sql = "SELECT " + (select.empty() ? std::string("*") : select) + " FROM " + std::string(sql_name(v));
  for (std::size_t i = 0; i < q.equals.size(); ++i) {
    const auto& [column, value] = q.equals[i];
    sql += (i == 0 ? " WHERE " : " AND ") + checked(known, column, v) +
           (value.is_null() ? std::string(" IS NULL") : " = :p" + std::to_string(i));
  }
  if (!q.order_by.empty()) sql += " ORDER BY " + checked(known, q.order_by, v) + (q.descending ? " DESC" : "");
  if (q.limit) sql += " LIMIT " + std::to_string(std::max<std::int64_t>(*q.limit, 0));
  sql::Statement st(detail::connection(db), sql);
  for (std::size_t i = 0; i < q.equals.size(); ++i)
    if (!q.equals[i].second.is_null()) bind_value(st, ":p" + std::to_string(i), q.equals[i].second);
  Table t;
  for (int c = 0; c < st.column_count(); ++c) t.columns.push_back(st.column_name(c));
  while (st.step()) {
    std::vector<nlohmann::json> row;
    row.reserve(t.columns.size());
    for (int c = 0; c < st.column_count(); ++c) row.push_back(column_value(st, c));
    t.rows.push_back(std::move(row));
  }
  return t;
}

void write_csv(const Table& t, std::ostream& out) {
  for (std::size_t c = 0; c < t.columns.size(); ++c) out << (c ? "," : "") << csv_field(t.columns[c]);
  out << "\r\n";
  for (const auto& row : t.rows) {
    for (std::size_t c = 0; c < row.size(); ++c) out << (c ? "," : "") << csv_field(row[c]);
    out << "\r\n";
  }
}

nlohmann::json to_json(const Table& t) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& row : t.rows) {
    nlohmann::json o = nlohmann::json::object();
    for (std::size_t c = 0; c < row.size(); ++c) o[t.columns[c]] = row[c];
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace evodispatch::results

#include "sql.hpp"

#include <cctype>
#include <limits>
#include <utility>

namespace evodispatch::results::sql {

namespace {
bool only_blanks_or_comments(const char* p, const char* end) {
  while (p < end) {
    if (std::isspace(static_cast<unsigned char>(*p)) || *p == ';') {
      ++p;
    } else if (p + 1 < end && p[0] == '-' && p[1] == '-') {
      while (p < end && *p != '\n') ++p;
    } else {
      return false;
    }
  }
  return true;
}
}  // namespace

Statement::Statement(Connection& conn, std::string_view sql) : conn_(&conn), text_(sql) {
  stmt_ = conn.take_cached(text_);
  if (stmt_) return;
  const char* tail = nullptr;
  const int rc = sqlite3_prepare_v2(conn.handle(), sql.data(), static_cast<int>(sql.size()), &stmt_, &tail);
  if (rc != SQLITE_OK) conn.fail(rc, sql);
  if (!stmt_) throw DbError("empty SQL statement", std::string(sql));
  if (tail && !only_blanks_or_comments(tail, sql.data() + sql.size())) {
    sqlite3_finalize(stmt_);
    stmt_ = nullptr;
    throw DbError("more than one SQL statement where one was expected", std::string(sql));
  }
}

Statement::Statement(Statement&& o) noexcept
    : conn_(o.conn_), stmt_(std::exchange(o.stmt_, nullptr)), text_(std::move(o.text_)) {}

// Reset before reuse also ends the statement's read of the database, so a cached
// statement never pins an old WAL snapshot.
Statement::~Statement() {
  if (!stmt_) return;
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  conn_->give_back(std::move(text_), stmt_);
}

std::string Statement::sql() const {
  const char* s = stmt_ ? sqlite3_sql(stmt_) : nullptr;
  return s ? s : "";
}

int Statement::index_of(std::string_view name) const {
  const int i = sqlite3_bind_parameter_index(stmt_, std::string(name).c_str());
  if (i == 0) throw DbError("no SQL parameter named " + std::string(name), sql());
  return i;
}

void Statement::check_bind(int rc, int index) const {
  if (rc != SQLITE_OK) {
    throw DbError("cannot bind parameter " + std::to_string(index) + ": " + sqlite3_errstr(rc), sql(), rc);
  }
}

void Statement::bind_null(int index) { check_bind(sqlite3_bind_null(stmt_, index), index); }
void Statement::bind_int64(int index, std::int64_t v) { check_bind(sqlite3_bind_int64(stmt_, index, v), index); }
void Statement::bind_double(int index, double v) {
  if (v != v) return bind_null(index);  // NaN
  check_bind(sqlite3_bind_double(stmt_, index, v), index);
}
void Statement::bind_text(int index, std::string_view v) {
  check_bind(sqlite3_bind_text64(stmt_, index, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8), index);
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  // Read the message before reset, then reset so the statement can be run again.
  const std::string msg = sqlite3_errmsg(conn_->handle());
  const int code = sqlite3_extended_errcode(conn_->handle());
  sqlite3_reset(stmt_);
  throw DbError(msg, sql(), code);
}

void Statement::run() {
  while (step()) {
  }
}

void Statement::reset() { sqlite3_reset(stmt_); }  // its error was reported by step()
void Statement::clear_bindings() { sqlite3_clear_bindings(stmt_); }

int Statement::column_count() const { return sqlite3_column_count(stmt_); }
std::string Statement::column_name(int col) const { return sqlite3_column_name(stmt_, col); }
int Statement::column_type(int col) const { return sqlite3_column_type(stmt_, col); }
bool Statement::is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
std::int64_t Statement::column_int64(int col) const { return sqlite3_column_int64(stmt_, col); }

int Statement::column_int(int col) const {
  const std::int64_t v = column_int64(col);
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    throw DbError("column " + std::to_string(col) + " holds " + std::to_string(v) + ", out of range for int", sql());
  }
  return static_cast<int>(v);
}

double Statement::column_double(int col) const {
  return is_null(col) ? std::numeric_limits<double>::quiet_NaN() : sqlite3_column_double(stmt_, col);
}

std::string Statement::column_text(int col) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
  return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col))) : std::string();
}

std::optional<std::int64_t> Statement::column_optional_int64(int col) const {
  if (is_null(col)) return std::nullopt;
  return column_int64(col);
}

std::optional<double> Statement::column_optional_double(int col) const {
  if (is_null(col)) return std::nullopt;
  return sqlite3_column_double(stmt_, col);
}

std::optional<std::string> Statement::column_optional_text(int col) const {
  if (is_null(col)) return std::nullopt;
  return column_text(col);
}

std::string insert_into(std::string_view table, std::span<const std::string_view> columns) {
  std::string names, values;
  for (const std::string_view column : columns) {
    if (!names.empty()) {
      names += ", ";
      values += ", ";
    }
    names += column;
    values += ":";
    values += column;
  }
  return "INSERT INTO " + std::string(table) + " (" + names + ") VALUES (" + values + ")";
}

}  // namespace evodispatch::results::sql

#pragma once
// A thin RAII layer over the SQLite C API, private to results/. Every failure throws
// DbError carrying SQLite's message, its extended result code and the SQL.
#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <evodispatch/results/errors.hpp>

namespace evodispatch::results::sql {

class Connection {
 public:
  // Opens `path`, creating it when missing. SQLite opens lazily: a file that is not a
  // database is only detected by the first statement.
  explicit Connection(const std::string& path, bool read_only = false);
  Connection(Connection&&) noexcept;
  Connection& operator=(Connection&&) noexcept;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }

  // Runs one or more statements that return no rows.
  void execute(std::string_view sql);
  // The first column of the first row of a single statement (NULL or no row: 0).
  std::int64_t query_int(std::string_view sql);
  std::string query_text(std::string_view sql);

  void busy_timeout(int ms);
  bool autocommit() const { return sqlite3_get_autocommit(db_) != 0; }
  int changes() const { return sqlite3_changes(db_); }
  std::int64_t last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }

  // Throws DbError with this connection's last error message.
  [[noreturn]] void fail(int rc, std::string_view sql) const;

 private:
  friend class Statement;
  // Prepared statements kept for reuse, by SQL text. Preparing the measurement lookup
  // costs about ten times more than running it, and the repositories run the same few
  // statements over and over. A statement in use is out of the cache, so nested use of
  // one SQL text simply prepares a second copy.
  sqlite3_stmt* take_cached(const std::string& sql);
  void give_back(std::string sql, sqlite3_stmt*);
  void drop_cache();

  sqlite3* db_ = nullptr;
  std::string path_;
  std::unordered_map<std::string, std::vector<sqlite3_stmt*>> cache_;
  std::size_t cached_ = 0;
};

template <class T>
inline constexpr bool is_optional_v = false;
template <class T>
inline constexpr bool is_optional_v<std::optional<T>> = true;

class Statement {
 public:
  // Prepares exactly one statement (or reuses the connection's cached copy); trailing
  // SQL after it is an error, so a script cannot slip through where one statement was
  // expected. The statement must not outlive its connection.
  Statement(Connection&, std::string_view sql);
  Statement(Statement&&) noexcept;
  Statement& operator=(Statement&&) = delete;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  // Parameters are bound by name, prefix included (":run_id"); a name the statement
  // lacks is a DbError, so a misspelt one fails instead of leaving its parameter NULL.
  // Integers and bool bind as INTEGER, floating point as REAL (NaN as NULL, which SQLite
  // would store anyway), text is copied, an empty optional or nullopt binds NULL.
  template <class T>
  Statement& bind(std::string_view name, const T& value) {
    bind_at(index_of(name), value);
    return *this;
  }
  int index_of(std::string_view name) const;

  // true: a row is ready for the column getters; false: the statement is done.
  bool step();
  // Steps to completion, for statements whose rows (if any) do not matter.
  void run();
  // Makes the statement runnable again; bindings are kept until clear_bindings().
  void reset();
  void clear_bindings();

  // Columns are 0-based. NULL reads as 0, "" or NaN; use is_null / optional getters
  // where NULL means something.
  int column_count() const;
  std::string column_name(int col) const;
  int column_type(int col) const;  // SQLITE_INTEGER, SQLITE_FLOAT, SQLITE_TEXT, SQLITE_BLOB, SQLITE_NULL
  bool is_null(int col) const;
  std::int64_t column_int64(int col) const;
  int column_int(int col) const;
  bool column_bool(int col) const { return column_int64(col) != 0; }
  double column_double(int col) const;
  std::string column_text(int col) const;
  std::optional<std::int64_t> column_optional_int64(int col) const;
  std::optional<double> column_optional_double(int col) const;
  std::optional<std::string> column_optional_text(int col) const;

  std::string sql() const;

 private:
  template <class T>
  void bind_at(int index, const T& value) {
    if constexpr (std::is_same_v<T, std::nullopt_t>) {
      bind_null(index);
    } else if constexpr (is_optional_v<T>) {
      if (value) bind_at(index, *value);
      else bind_null(index);
    } else if constexpr (std::is_same_v<T, bool>) {
      bind_int64(index, value ? 1 : 0);
    } else if constexpr (std::is_integral_v<T>) {
      bind_int64(index, static_cast<std::int64_t>(value));
    } else if constexpr (std::is_floating_point_v<T>) {
      bind_double(index, static_cast<double>(value));
    } else {
      static_assert(std::is_convertible_v<const T&, std::string_view>, "bind: unsupported type");
      bind_text(index, std::string_view(value));
    }
  }
  void bind_null(int index);
  void bind_int64(int index, std::int64_t);
  void bind_double(int index, double);
  void bind_text(int index, std::string_view);
  void check_bind(int rc, int index) const;

  Connection* conn_;
  sqlite3_stmt* stmt_ = nullptr;
  std::string text_;  // the SQL as given: the cache key
};

// "INSERT INTO table (a, b) VALUES (:a, :b)": each value is the parameter named after
// its column, so a row is bound column by column (":a"), never by position.
std::string insert_into(std::string_view table, std::span<const std::string_view> columns);

enum class Mode { deferred, immediate };

// BEGIN ... COMMIT, rolled back by the destructor unless committed. Opened while
// another transaction is active on the connection, it is a SAVEPOINT instead, so
// repositories can be atomic on their own and still join a caller's transaction.
class Transaction {
 public:
  explicit Transaction(Connection&, Mode = Mode::immediate);
  Transaction(Transaction&&) noexcept;
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  void commit();
  void rollback();
  bool active() const { return conn_ != nullptr; }
  bool nested() const { return nested_; }

 private:
  Connection* conn_;
  bool nested_;
};

}  // namespace evodispatch::results::sql

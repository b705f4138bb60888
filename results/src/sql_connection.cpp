#include "sql.hpp"

#include <utility>

namespace evodispatch::results::sql {

Connection::Connection(const std::string& path, bool read_only) : path_(path) {
  // FULLMUTEX is SQLite's default; NOFOLLOW is not used so symlinked databases work.
  const int flags = read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    const int code = db ? sqlite3_extended_errcode(db) : rc;
    sqlite3_close(db);
    throw DbError("cannot open " + path + ": " + msg, {}, code);
  }
  db_ = db;
  sqlite3_extended_result_codes(db_, 1);
}

Connection::Connection(Connection&& o) noexcept
    : db_(std::exchange(o.db_, nullptr)),
      path_(std::move(o.path_)),
      cache_(std::move(o.cache_)),
      cached_(std::exchange(o.cached_, 0)) {}

Connection& Connection::operator=(Connection&& o) noexcept {
  if (this != &o) {
    drop_cache();
    if (db_) sqlite3_close_v2(db_);
    db_ = std::exchange(o.db_, nullptr);
    path_ = std::move(o.path_);
    cache_ = std::move(o.cache_);
    cached_ = std::exchange(o.cached_, 0);
  }
  return *this;
}

// close_v2 defers the close until the last statement is finalized, so destruction
// order between a connection and a stray statement cannot leak or crash.
Connection::~Connection() {
  drop_cache();
  if (db_) sqlite3_close_v2(db_);
}

namespace {
// Enough for every fixed statement of the repositories and the common filter
// combinations; past it, statements are finalized instead of kept.
constexpr std::size_t kMaxCached = 128;
}  // namespace

sqlite3_stmt* Connection::take_cached(const std::string& sql) {
  auto it = cache_.find(sql);
  if (it == cache_.end() || it->second.empty()) return nullptr;
  sqlite3_stmt* st = it->second.back();
  it->second.pop_back();
  --cached_;
  return st;
}

void Connection::give_back(std::string sql, sqlite3_stmt* st) {
  if (!db_ || cached_ >= kMaxCached) {
    sqlite3_finalize(st);
    return;
  }
  cache_[std::move(sql)].push_back(st);
  ++cached_;
}

void Connection::drop_cache() {
  for (auto& [sql, list] : cache_) {
    for (sqlite3_stmt* st : list) sqlite3_finalize(st);
  }
  cache_.clear();
  cached_ = 0;
}

void Connection::fail(int rc, std::string_view sql) const {
  const int code = db_ ? sqlite3_extended_errcode(db_) : rc;
  const std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  throw DbError(msg, std::string(sql), code ? code : rc);
}

void Connection::execute(std::string_view sql) {
  const std::string text(sql);  // sqlite3_exec needs a terminated string
  char* err = nullptr;
  const int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    throw DbError(msg, text, sqlite3_extended_errcode(db_));
  }
}

std::int64_t Connection::query_int(std::string_view sql) {
  Statement st(*this, sql);
  return st.step() ? st.column_int64(0) : 0;
}

std::string Connection::query_text(std::string_view sql) {
  Statement st(*this, sql);
  return st.step() ? st.column_text(0) : std::string();
}

void Connection::busy_timeout(int ms) {
  const int rc = sqlite3_busy_timeout(db_, ms);
  if (rc != SQLITE_OK) fail(rc, "busy_timeout");
}

}  // namespace evodispatch::results::sql

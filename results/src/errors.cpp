#include <evodispatch/results/errors.hpp>

#include <utility>

namespace evodispatch::results {

namespace {
// Long scripts (migrations) would drown the message; the start names the statement.
std::string shorten(const std::string& sql) {
  constexpr std::size_t kMax = 300;
  return sql.size() <= kMax ? sql : sql.substr(0, kMax) + "...";
}
}  // namespace

DbError::DbError(const std::string& message, std::string sql, int code)
    : std::runtime_error(sql.empty() ? message : message + " [SQL: " + shorten(sql) + "]"),
      sql_(std::move(sql)),
      code_(code) {}

}  // namespace evodispatch::results

#pragma once
// The one exception type of the results store for SQL failures. Problems with the
// file itself (not a database, a schema newer than this build, cannot be opened) are
// InputError instead, because the user chose the file and can fix them.
#include <stdexcept>
#include <string>

namespace evodispatch::results {

class DbError : public std::runtime_error {
 public:
  // `sql` is the statement that failed (shortened in what()); `code` is SQLite's
  // extended result code, 0 when the error did not come from SQLite.
  DbError(const std::string& message, std::string sql = {}, int code = 0);

  const std::string& sql() const { return sql_; }
  int code() const { return code_; }

 private:
  std::string sql_;
  int code_;
};

}  // namespace evodispatch::results

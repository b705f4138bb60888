#pragma once
// How the repositories reach the connection behind a Database without SQLite types in
// the public header.
#include <evodispatch/results/database.hpp>

#include "sql.hpp"

namespace evodispatch::results::detail {

struct DatabaseAccess {
  static sql::Connection& connection(Database&);
};

inline sql::Connection& connection(Database& db) { return DatabaseAccess::connection(db); }

}  // namespace evodispatch::results::detail

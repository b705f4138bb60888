#pragma once
// The ordered migrations: migrations()[i] brings schema version i to i + 1.
#include <span>
#include <string_view>

namespace evodispatch::results {

struct Migration {
  int version;               // the user_version after it
  std::string_view summary;
  std::string_view sql;      // no BEGIN/COMMIT: the runner wraps it in a transaction
  // It drops and rebuilds a table that others reference: the runner turns foreign keys
  // off around its transaction (they cannot change inside one) and checks them all
  // before it commits.
  bool rebuilds_referenced_table = false;
};

std::span<const Migration> migrations();

// The SQL of each migration, one file per version.
std::string_view schema_v1();
std::string_view schema_v2();
std::string_view schema_v3();
std::string_view schema_v4();
std::string_view schema_v5();

// PRAGMA application_id of an evodispatch database ("EVOD"), so a file of another
// application that happens to be SQLite is recognised.
inline constexpr int kApplicationId = 0x45564F44;

}  // namespace evodispatch::results

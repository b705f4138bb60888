#include <evodispatch/heuristics/contract.hpp>
#include <evodispatch/results/database.hpp>

#include <sstream>
#include <utility>

#include "access.hpp"
#include "schema.hpp"
#include "sql.hpp"

namespace evodispatch::results {

struct Database::Impl {
  Impl(const std::string& path, bool read_only) : conn(path, read_only) {}
  sql::Connection conn;
};

sql::Connection& detail::DatabaseAccess::connection(Database& db) {
  if (!db.impl_) throw DbError("use of a moved-from Database");
  return db.impl_->conn;
}

namespace {

bool in_memory(const std::string& path) { return path.empty() || path == ":memory:"; }

// SQLite reports a foreign file or an unreachable path only when it first reads; turn
// those into messages about the file, which is what the user can act on.
[[noreturn]] void rethrow_as_file_error(const DbError& e, const std::string& path) {
  switch (e.code() & 0xff) {
    case SQLITE_NOTADB:
      throw InputError(path + " is not an SQLite database (" + e.what() + ")");
    case SQLITE_CANTOPEN:
      throw InputError("cannot open database file " + path + " (" + e.what() + ")");
    case SQLITE_CORRUPT:
      throw InputError(path + " is a damaged SQLite database (" + e.what() + ")");
    default:
      throw e;
  }
}

int user_version(sql::Connection& c) { return static_cast<int>(c.query_int("PRAGMA user_version")); }

void configure(sql::Connection& c, const std::string& path, const OpenOptions& opt) {
  c.busy_timeout(opt.busy_timeout_ms);
  try {
    user_version(c);  // the first read: fails here on a file that is not a database
    if (opt.read_only) return;
    if (!in_memory(path) && c.query_text("PRAGMA journal_mode") != "wal") {
      // WAL lets readers (the report, a second search) run while a search writes.
      c.query_text("PRAGMA journal_mode = WAL");
    }
  } catch (const DbError& e) {
    rethrow_as_file_error(e, path);
  }
  // NORMAL in WAL mode: a killed process loses nothing that was committed, and a
  // power cut can lose only the last transactions, never consistency (DESIGN.md §5
  // asks for the first); FULL would add an fsync to every commit of a search.
  c.execute("PRAGMA synchronous = NORMAL");
  c.execute("PRAGMA foreign_keys = ON");
}

void check_application(sql::Connection& c, const std::string& path) {
  const auto app = c.query_int("PRAGMA application_id");
  if (app != 0 && app != kApplicationId) {
    std::ostringstream o;
    o << path << " is an SQLite database of another application (application_id 0x" << std::hex << app
      << "), not an evodispatch results database";
    throw InputError(o.str());
  }
}

// A reader cannot migrate, and the views it reads exist only at the newest version.
void check_readable(sql::Connection& c, const std::string& path, int version) {
  if (version == 0 && c.query_int("SELECT count(*) FROM sqlite_schema") == 0)
    throw InputError(path + " is empty: not an evodispatch results database");
  if (version < Database::latest_schema_version())
    throw InputError(path + " has schema version " + std::to_string(version) + ", older than this evodispatch's " +
                     std::to_string(Database::latest_schema_version()) +
                     "; any writing verb migrates it (e.g. evodispatch results migrate --db " + path + ")");
}

[[noreturn]] void refuse_newer(const std::string& path, int version) {
  throw InputError(path + " has schema version " + std::to_string(version) + " but this evodispatch understands up to " +
                   std::to_string(Database::latest_schema_version()) + "; upgrade evodispatch");
}

// Foreign keys off for a migration that rebuilds a referenced table (see Migration), and
// on again however it ends.
class ForeignKeysOff {
 public:
  ForeignKeysOff(sql::Connection& c, bool off) : c_(off ? &c : nullptr) {
    if (c_) c_->execute("PRAGMA foreign_keys = OFF");
  }
  ~ForeignKeysOff() {
    try {
      if (c_) c_->execute("PRAGMA foreign_keys = ON");
    } catch (const DbError&) {  // a destructor must not throw; the connection is failing anyway
    }
  }
  ForeignKeysOff(const ForeignKeysOff&) = delete;
  ForeignKeysOff& operator=(const ForeignKeysOff&) = delete;

 private:
  sql::Connection* c_;
};

// Each migration runs in its own IMMEDIATE transaction together with its user_version
// bump, so a crash or an error mid-way leaves the previous version intact. The version
// is read again under the write lock because another process may have migrated the
// file while this one waited for it.
void migrate(sql::Connection& c, const std::string& path, int from, int target) {
  for (const Migration& m : migrations()) {
    if (m.version <= from) continue;
    if (m.version > target) break;
    const ForeignKeysOff fk(c, m.rebuilds_referenced_table);
    sql::Transaction t(c, sql::Mode::immediate);
    const int now = user_version(c);
    if (now > Database::latest_schema_version()) refuse_newer(path, now);
    if (now >= m.version) {
      t.commit();
      continue;
    }
    try {
      c.execute(m.sql);
      if (m.rebuilds_referenced_table && c.query_int("SELECT count(*) FROM pragma_foreign_key_check") != 0)
        throw DbError("a row references one that the rebuilt table lost", "PRAGMA foreign_key_check");
      c.execute("PRAGMA user_version = " + std::to_string(m.version));
      t.commit();
    } catch (const DbError& e) {
      throw DbError("cannot migrate " + path + " from schema version " + std::to_string(m.version - 1) + " to " +
                        std::to_string(m.version) + ": " + e.what(),
                    e.sql(), e.code());
    }
  }
}

}  // namespace

int Database::latest_schema_version() { return migrations().empty() ? 0 : migrations().back().version; }

Database Database::open(const std::string& path, const OpenOptions& opt) {
  const int target = opt.schema_version.value_or(latest_schema_version());
  if (target < 0 || target > latest_schema_version()) {
    throw std::invalid_argument("OpenOptions::schema_version " + std::to_string(target) + " is not in [0, " +
                                std::to_string(latest_schema_version()) + "]");
  }
  std::unique_ptr<Impl> impl;
  try {
    impl = std::make_unique<Impl>(path, opt.read_only);
  } catch (const DbError& e) {
    rethrow_as_file_error(e, path);
  }
  sql::Connection& c = impl->conn;
  configure(c, path, opt);
  check_application(c, path);
  const int version = user_version(c);
  if (version > latest_schema_version()) refuse_newer(path, version);
  if (opt.read_only) check_readable(c, path, version);
  else if (version < target) migrate(c, path, version, target);
  return Database(std::move(impl));
}

Database::Database(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Database::Database(Database&&) noexcept = default;
Database& Database::operator=(Database&&) noexcept = default;
Database::~Database() = default;

const std::string& Database::path() const { return impl_->conn.path(); }
int Database::schema_version() const { return user_version(impl_->conn); }
std::string Database::journal_mode() const { return impl_->conn.query_text("PRAGMA journal_mode"); }
void Database::execute(const std::string& sql) { impl_->conn.execute(sql); }
bool Database::transaction_open() const { return !impl_->conn.autocommit(); }

// The public transaction is the private one behind an opaque pointer.
class Transaction::Impl {
 public:
  Impl(sql::Connection& c, TransactionMode mode)
      : t(c, mode == TransactionMode::immediate ? sql::Mode::immediate : sql::Mode::deferred) {}
  sql::Transaction t;
};

Transaction::Transaction(Database& db, TransactionMode mode)
    : impl_(std::make_unique<Impl>(detail::connection(db), mode)) {}
Transaction::Transaction(Transaction&&) noexcept = default;
Transaction::~Transaction() = default;  // sql::Transaction rolls back unless committed

void Transaction::commit() {
  if (!impl_) throw DbError("commit of a moved-from Transaction");
  impl_->t.commit();
}
void Transaction::rollback() {
  if (impl_) impl_->t.rollback();
}
bool Transaction::active() const { return impl_ && impl_->t.active(); }

}  // namespace evodispatch::results

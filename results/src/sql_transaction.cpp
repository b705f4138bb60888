#include "sql.hpp"

#include <utility>

namespace evodispatch::results::sql {

// Savepoints nest by name as a stack (RELEASE and ROLLBACK TO act on the innermost
// one of that name), so one fixed name serves every depth under RAII's LIFO order.
namespace {
constexpr const char* kSavepoint = "evodispatch_nested";
}

Transaction::Transaction(Connection& conn, Mode mode) : conn_(&conn), nested_(!conn.autocommit()) {
  if (nested_) {
    conn.execute(std::string("SAVEPOINT ") + kSavepoint);
  } else {
    conn.execute(mode == Mode::immediate ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED");
  }
}

Transaction::Transaction(Transaction&& o) noexcept : conn_(std::exchange(o.conn_, nullptr)), nested_(o.nested_) {}

Transaction::~Transaction() {
  if (!conn_) return;
  try {
    rollback();
  } catch (...) {
    // SQLite may already have rolled back on its own (e.g. after SQLITE_FULL); the
    // destructor's only job is to not leave a transaction open, which is then true.
  }
}

void Transaction::commit() {
  if (!conn_) throw DbError("commit of a transaction that is no longer active");
  conn_->execute(nested_ ? std::string("RELEASE ") + kSavepoint : std::string("COMMIT"));
  conn_ = nullptr;
}

void Transaction::rollback() {
  if (!conn_) return;
  Connection* c = std::exchange(conn_, nullptr);
  if (nested_) {
    // ROLLBACK TO keeps the savepoint open; RELEASE then removes it.
    c->execute(std::string("ROLLBACK TO ") + kSavepoint + "; RELEASE " + kSavepoint);
  } else if (!c->autocommit()) {
    c->execute("ROLLBACK");
  }
}

}  // namespace evodispatch::results::sql

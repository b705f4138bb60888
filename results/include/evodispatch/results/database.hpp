#pragma once
// The results database (DESIGN.md §1, §5, §8): one SQLite file holding devices, kernel
// builds, shapes, measurements, runs, programs and evaluations.
//
// One Database is one SQLite connection: use it from one thread at a time and give
// every thread or process its own. Files are opened in WAL mode, so readers never
// block the writer and see the last committed snapshot; a writer waits up to
// busy_timeout for another writer instead of failing at once.
//
// SQLite types never appear here: evo_results links SQLite privately.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include <evodispatch/heuristics/contract.hpp>  // InputError
#include <evodispatch/results/errors.hpp>

namespace evodispatch::results {

namespace detail {
struct DatabaseAccess;
}

struct OpenOptions {
  // Migrate up to this schema version instead of the newest one. For tests of
  // migrations; a normal caller leaves it unset.
  std::optional<int> schema_version;
  // How long a writer waits for another writer's lock before DbError (SQLITE_BUSY).
  int busy_timeout_ms = 10'000;
  // Opens an existing file without writing to it: no migration, no journal change, and
  // any write is an error. A reader beside a running search (WAL: it never blocks it).
  // InputError when the file is missing, is not an evodispatch database, or has a schema
  // other than the newest this build knows.
  bool read_only = false;
};

// deferred: the snapshot and the locks are taken by the first statement (use for
// consistent reads). immediate: the write lock is taken at once, so the transaction
// cannot fail half-way with SQLITE_BUSY (the default for writes).
enum class TransactionMode { deferred, immediate };

// The outcome of an insert into a table with a natural key: the row's id and whether
// this call created it (false: an equal row was there already and is unchanged).
struct InsertResult {
  std::int64_t id = 0;
  bool inserted = false;
};

class Database;

// RAII transaction: rolls back in its destructor unless commit() was called, so an
// exception between the writes leaves nothing behind. Inside another open transaction
// on the same Database it becomes a savepoint: its rollback undoes only its own
// writes, and its commit becomes durable with the outer commit.
class Transaction {
 public:
  explicit Transaction(Database&, TransactionMode = TransactionMode::immediate);
  Transaction(Transaction&&) noexcept;
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  void commit();
  void rollback();
  bool active() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

class Database {
 public:
  // Opens or creates the database at `path` (":memory:" for a private in-memory one),
  // applies the pending migrations and returns it ready to use. Throws InputError when
  // the file is not an SQLite database, cannot be opened, or has a schema newer than
  // this build understands; DbError for any other SQLite failure.
  static Database open(const std::string& path, const OpenOptions& = {});

  Database(Database&&) noexcept;
  Database& operator=(Database&&) noexcept;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database();

  const std::string& path() const;
  int schema_version() const;           // PRAGMA user_version of the open file
  static int latest_schema_version();   // the newest version this build can migrate to
  std::string journal_mode() const;     // "wal" for files, "memory" for ":memory:"

  // Runs SQL that returns no rows (one or more statements). For maintenance and tests;
  // the repositories are the normal way in.
  void execute(const std::string& sql);

  Transaction transaction(TransactionMode mode = TransactionMode::immediate) { return Transaction(*this, mode); }

  // Runs f() inside one transaction and commits when it returns; an exception rolls
  // everything back and propagates. Groups several repository writes into one atomic
  // state change (a search step: program + evaluation + run state).
  template <class F>
  auto in_transaction(F&& f, TransactionMode mode = TransactionMode::immediate) {
    Transaction t(*this, mode);
    if constexpr (std::is_void_v<std::invoke_result_t<F&>>) {
      f();
      t.commit();
    } else {
      auto result = f();
      t.commit();
      return result;
    }
  }

  // True while a transaction is open on this connection.
  bool transaction_open() const;

 private:
  struct Impl;
  explicit Database(std::unique_ptr<Impl>);
  std::unique_ptr<Impl> impl_;
  friend struct detail::DatabaseAccess;
};

}  // namespace evodispatch::results

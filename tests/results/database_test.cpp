// Opening, migrating and refusing files; transactions.
#include <fstream>
#include <stdexcept>

#include "support.hpp"

namespace evodispatch::results {
namespace {

using test::TempDir;

TEST(Database, MemoryDatabaseIsMigratedToTheLatestVersion) {
  Database db = Database::open(":memory:");
  EXPECT_EQ(db.schema_version(), Database::latest_schema_version());
  EXPECT_GE(Database::latest_schema_version(), 1);
  EXPECT_EQ(db.journal_mode(), "memory");
  EXPECT_NO_THROW(db.execute("SELECT count(*) FROM measurements"));
}

TEST(Database, FileDatabaseUsesWal) {
  TempDir dir;
  Database db = Database::open(dir.file("evodispatch.db"));
  EXPECT_EQ(db.journal_mode(), "wal");
  EXPECT_EQ(db.path(), dir.file("evodispatch.db"));
}

// A version 1 database (programs stored whole) opens at the latest version with its
// programs unchanged, and new programs share their base.
TEST(Database, MigratesVersionOneProgramsAsTheyWere) {
  TempDir dir;
  const std::string path = dir.file("v1.db");
  std::int64_t run = 0;
  {
    Database db = Database::open(path, test::at_version(1));
    ASSERT_EQ(db.schema_version(), 1);
    run = Runs(db).create(test::run("search"));
    db.execute("INSERT INTO programs (run_id, hash, source) VALUES (" + std::to_string(run) +
               ", 'old', 'function dispatch(s, hw) return { num_splits = 2 } end')");
  }
  Database db = Database::open(path);
  EXPECT_EQ(db.schema_version(), Database::latest_schema_version());
  const auto old = Programs(db).find_by_hash(run, "old");
  ASSERT_TRUE(old);
  EXPECT_EQ(old->source, "function dispatch(s, hw) return { num_splits = 2 } end");
  EXPECT_FALSE(old->base.has_value());
  ProgramRecord p;
  p.run_id = run;
  p.hash = "new";
  p.source = "-- rules";
  p.base = "function dispatch(s, hw) return { num_splits = 1 } end";
  Programs(db).insert(p);
  EXPECT_EQ(Programs(db).find_by_hash(run, "new")->base, p.base);
}

TEST(Database, MigratesFromVersionZero) {
  TempDir dir;
  const std::string path = dir.file("old.db");
  {
    Database db = Database::open(path, test::at_version(0));
    EXPECT_EQ(db.schema_version(), 0);
    EXPECT_THROW(db.execute("SELECT 1 FROM runs"), DbError);
  }
  Database db = Database::open(path);
  EXPECT_EQ(db.schema_version(), Database::latest_schema_version());
  for (const char* table : {"devices", "kernel_builds", "workloads", "shapes", "measurements", "runs", "programs",
                            "evaluations", "comparisons"}) {
    EXPECT_NO_THROW(db.execute(std::string("SELECT count(*) FROM ") + table)) << table;
  }
}

TEST(Database, ReopeningKeepsData) {
  TempDir dir;
  const std::string path = dir.file("evodispatch.db");
  std::int64_t run_id = 0;
  {
    Database db = Database::open(path);
    RunRecord r = test::run("bench");
    r.config = {{"policy", "fa3"}};
    r.seed = 7;
    run_id = Runs(db).create(r);
    Measurements(db).put(test::sample_measurement());
  }
  Database db = Database::open(path);
  auto run = Runs(db).get(run_id);
  ASSERT_TRUE(run);
  EXPECT_EQ(run->kind, "bench");
  EXPECT_EQ(run->config["policy"], "fa3");
  EXPECT_TRUE(Measurements(db).find(test::sample_measurement().key));
}

TEST(Database, NewerSchemaIsRefusedNamingTheFileAndBothVersions) {
  TempDir dir;
  const std::string path = dir.file("evodispatch.db");
  Database::open(path).execute("PRAGMA user_version = 7");
  try {
    Database::open(path);
    FAIL() << "a newer schema was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), path + " has schema version 7 but this evodispatch understands up to " +
                                         std::to_string(Database::latest_schema_version()) + "; upgrade evodispatch");
  }
}

TEST(Database, FileThatIsNotSqliteIsRefused) {
  TempDir dir;
  const std::string path = dir.file("notes.txt");
  std::ofstream(path) << "this is a text file, not a database, and it is long enough to have a header\n";
  try {
    Database::open(path);
    FAIL() << "a text file was opened as a database";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(path + " is not an SQLite database"), std::string::npos) << e.what();
  }
}

TEST(Database, UnreachablePathIsRefusedNamingIt) {
  TempDir dir;
  const std::string path = dir.file("no-such-dir/evodispatch.db");
  try {
    Database::open(path);
    FAIL() << "opened a file in a missing directory";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(Database, DatabaseOfAnotherApplicationIsRefused) {
  TempDir dir;
  const std::string path = dir.file("other.db");
  Database::open(path, test::at_version(0)).execute("PRAGMA application_id = 42; CREATE TABLE t (x)");
  try {
    Database::open(path);
    FAIL() << "opened another application's database";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("another application"), std::string::npos) << e.what();
  }
}

// A migration that fails half-way (here: its last table already exists) must leave the
// file at the old version with none of the migration's tables, as a crash would.
TEST(Database, FailedMigrationLeavesTheOldVersion) {
  TempDir dir;
  const std::string path = dir.file("evodispatch.db");
  Database::open(path, test::at_version(0)).execute("CREATE TABLE comparisons (x)");
  try {
    Database::open(path);
    FAIL() << "the migration should have failed";
  } catch (const DbError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot migrate " + path + " from schema version 0 to 1"), std::string::npos)
        << e.what();
  }
  Database db = Database::open(path, test::at_version(0));
  EXPECT_EQ(db.schema_version(), 0);
  EXPECT_THROW(db.execute("SELECT 1 FROM devices"), DbError);
}

TEST(Database, BadSchemaVersionOptionIsRejected) {
  EXPECT_THROW(Database::open(":memory:", test::at_version(99)), std::invalid_argument);
}

TEST(Database, MovedDatabaseKeepsWorking) {
  Database a = Database::open(":memory:");
  Runs(a).create(test::run("bench"));
  Database b = std::move(a);
  EXPECT_EQ(Runs(b).list().size(), 1u);
}

TEST(Database, ExecuteReportsTheSql) {
  Database db = Database::open(":memory:");
  try {
    db.execute("SELECT * FROM no_such_table");
    FAIL();
  } catch (const DbError& e) {
    EXPECT_NE(std::string(e.what()).find("no such table"), std::string::npos) << e.what();
    EXPECT_EQ(e.sql(), "SELECT * FROM no_such_table");
  }
}

TEST(Transaction, ExceptionRollsEverythingBack) {
  Database db = Database::open(":memory:");
  EXPECT_THROW(db.in_transaction([&] {
    Runs(db).create(test::run("search"));
    Measurements(db).put(test::sample_measurement());
    throw std::runtime_error("killed half-way");
  }),
               std::runtime_error);
  EXPECT_FALSE(db.transaction_open());
  EXPECT_TRUE(Runs(db).list().empty());
  EXPECT_EQ(Measurements(db).count(), 0);
  EXPECT_TRUE(Devices(db).list().empty());
}

TEST(Transaction, CommitKeepsAllWritesAndReturnsTheValue) {
  Database db = Database::open(":memory:");
  const std::int64_t id = db.in_transaction([&] {
    Measurements(db).put(test::sample_measurement(1));
    Measurements(db).put(test::sample_measurement(2));
    return Runs(db).create(test::run("search"));
  });
  EXPECT_TRUE(Runs(db).get(id));
  EXPECT_EQ(Measurements(db).count(), 2);
}

TEST(Transaction, DestructorRollsBackUnlessCommitted) {
  Database db = Database::open(":memory:");
  {
    Transaction t = db.transaction();
    EXPECT_TRUE(t.active());
    EXPECT_TRUE(db.transaction_open());
    Runs(db).create(test::run("bench"));
  }
  EXPECT_FALSE(db.transaction_open());
  EXPECT_TRUE(Runs(db).list().empty());
  {
    Transaction t = db.transaction();
    Runs(db).create(test::run("bench"));
    t.commit();
    EXPECT_FALSE(t.active());
  }
  EXPECT_EQ(Runs(db).list().size(), 1u);
}

TEST(Transaction, NestedTransactionRollsBackOnlyItsOwnWrites) {
  Database db = Database::open(":memory:");
  Transaction outer = db.transaction();
  Runs(db).create(test::run("outer"));
  {
    Transaction inner(db);
    Runs(db).create(test::run("inner"));
    inner.rollback();
  }
  {
    Transaction inner(db);
    Runs(db).create(test::run("inner-kept"));
    inner.commit();
  }
  EXPECT_TRUE(db.transaction_open());
  outer.commit();
  const auto runs = Runs(db).list();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].kind, "inner-kept");  // newest first
  EXPECT_EQ(runs[1].kind, "outer");
}

TEST(Transaction, CommitAfterCommitIsAnError) {
  Database db = Database::open(":memory:");
  Transaction t = db.transaction();
  t.commit();
  EXPECT_THROW(t.commit(), DbError);
}

}  // namespace
}  // namespace evodispatch::results

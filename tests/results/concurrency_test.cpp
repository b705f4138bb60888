// Two connections to one file: WAL readers are not blocked by a writer, and a second
// writer waits for the first instead of failing.
#include <chrono>
#include <thread>

#include "support.hpp"

namespace evodispatch::results {
namespace {

using Clock = std::chrono::steady_clock;
using test::TempDir;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

TEST(Concurrency, ReaderSeesTheLastCommitWhileAWriterHoldsATransaction) {
  TempDir dir;
  const std::string path = dir.file("evodispatch.db");
  Database writer = Database::open(path);
  Runs(writer).create(test::run("committed"));
  Measurements(writer).put(test::sample_measurement(1));

  Transaction t = writer.transaction();
  Runs(writer).create(test::run("uncommitted"));
  Measurements(writer).put(test::sample_measurement(2));

  // Opened while the write lock is held: opening must not need it either.
  const auto t0 = Clock::now();
  Database reader = Database::open(path);
  const auto runs = Runs(reader).list();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].kind, "committed");
  EXPECT_EQ(Measurements(reader).count(), 1);
  EXPECT_FALSE(Measurements(reader).find(test::sample_measurement(2).key));
  EXPECT_LT(seconds_since(t0), 1.0) << "the reader waited for the writer";

  t.commit();
  EXPECT_EQ(Runs(reader).list().size(), 2u);
  EXPECT_TRUE(Measurements(reader).find(test::sample_measurement(2).key));
}

TEST(Concurrency, SecondWriterWaitsForTheFirstToCommit) {
  TempDir dir;
  const std::string path = dir.file("evodispatch.db");
  Database first = Database::open(path);
  Database second = Database::open(path);

  Transaction t = first.transaction();
  Runs(first).create(test::run("first"));

  std::thread committer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    t.commit();
  });
  const auto t0 = Clock::now();
  Runs(second).create(test::run("second"));  // blocks on the lock, then succeeds
  const double waited = seconds_since(t0);
  committer.join();

  EXPECT_GE(waited, 0.2);
  EXPECT_EQ(Runs(first).list().size(), 2u);
}

TEST(Concurrency, WriterGivesUpAfterTheBusyTimeout) {
  TempDir dir;
  const std::string path = dir.file("evodispatch.db");
  Database first = Database::open(path);
  Database second = Database::open(path, test::with<OpenOptions>([](auto& o) { o.busy_timeout_ms = 100; }));
  Transaction t = first.transaction();
  Runs(first).create(test::run("first"));
  try {
    Runs(second).create(test::run("second"));
    FAIL() << "the second writer did not wait for the lock";
  } catch (const DbError& e) {
    EXPECT_EQ(e.code() & 0xff, 5) << e.what();  // SQLITE_BUSY
  }
  t.commit();
  EXPECT_EQ(Runs(second).list().size(), 1u);
}

}  // namespace
}  // namespace evodispatch::results

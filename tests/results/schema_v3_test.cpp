// Migration to schema version 3 of a database an older evodispatch wrote: comparison
// rows learn their baseline side from their run's kind, measurements the measuring
// protocol they were taken by.
#include "support.hpp"

namespace evodispatch::results {
namespace {

using test::sample_measurement;
using test::TempDir;

struct V2Rows {
  std::int64_t search = 0, regress = 0;  // run ids
};

// What version 2 held, written as version 2 wrote it: a search's confirmation came from
// compare(baseline, candidate), a regression row from compare(candidate, baseline); both
// stored speedup = baseline / candidate. One measurement, keyed without a protocol.
V2Rows fill_v2(Database& db) {
  V2Rows v;
  v.search = Runs(db).create(test::run("search"));
  v.regress = Runs(db).create(test::run("regress"));
  const Measurement m = sample_measurement();
  test::insert_shape_before_v5(db, 1, m.key.shape);
  const std::string shape = "1";
  DeviceRecord device;
  device.fingerprint = m.key.device;
  const std::string device_id = std::to_string(Devices(db).upsert(device));
  KernelBuildRecord build;
  build.hash = m.key.kernel_build;
  const std::string build_id = std::to_string(KernelBuilds(db).upsert(build));
  const std::string ids = shape + ", " + device_id + ", " + build_id;
  for (const auto& [run, speedup] : {std::pair{v.search, "1.25"}, std::pair{v.regress, "0.9"}}) {
    db.execute(
        "INSERT INTO comparisons (run_id, shape_id, device_id, kernel_build_id, l2_mode, cand_num_splits, "
        "cand_pack_gqa, cand_sm_margin, base_num_splits, base_pack_gqa, base_sm_margin, ok, candidate_us, "
        "baseline_us, speedup, speedup_lo, speedup_hi, pairs) VALUES (" +
        std::to_string(run) + ", " + ids + ", 'cold', 3, 1, 0, 1, 1, 0, 1, 80, 100, " + speedup + ", " + speedup +
        ", " + speedup + ", 30)");
  }
  db.execute(
      "INSERT INTO measurements (device_id, kernel_build_id, shape_id, num_splits, pack_gqa, sm_margin, l2_mode, ok, "
      "median_us, p10_us, p90_us, samples, run_id) VALUES (" +
      device_id + ", " + build_id + ", " + shape + ", 3, 1, 0, 'cold', 1, 10.25, 10.0, 10.75, 30, " +
      std::to_string(v.search) + ")");
  return v;
}

// Opens a version 2 database written by fill_v2 at the latest version.
Database migrated(const TempDir& dir, V2Rows* rows) {
  const std::string path = dir.file("v2.db");
  {
    Database db = Database::open(path, test::at_version(2));
    *rows = fill_v2(db);
  }
  Database db = Database::open(path);
  EXPECT_EQ(db.schema_version(), Database::latest_schema_version());
  EXPECT_GE(db.schema_version(), 3);
  return db;
}

TEST(SchemaV3, ComparisonsTakeTheirBaselineSideFromTheirRunsKind) {
  TempDir dir;
  V2Rows v;
  Database db = migrated(dir, &v);
  const auto confirmations = Comparisons(db).list_by_run(v.search);
  ASSERT_EQ(confirmations.size(), 1u);
  EXPECT_EQ(confirmations[0].baseline_side, BaselineSide::a);
  EXPECT_EQ(confirmations[0].speedup, 1.25);  // the stored figures stay as they were
  const auto regression = Comparisons(db).list_by_run(v.regress);
  ASSERT_EQ(regression.size(), 1u);
  EXPECT_EQ(regression[0].baseline_side, BaselineSide::b);
  EXPECT_EQ(regression[0].speedup, 0.9);
  EXPECT_EQ(regression[0].candidate_us, 80);
  EXPECT_EQ(regression[0].baseline_us, 100);
}

TEST(SchemaV3, OldMeasurementsAreProtocolOneAndStayUsable) {
  TempDir dir;
  V2Rows v;
  Database db = migrated(dir, &v);
  Measurements store(db);
  const auto rows = store.list();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].measurement.key.measuring_protocol, 1);
  EXPECT_EQ(rows[0].run_id, std::optional<std::int64_t>(v.search));

  Measurement m = sample_measurement();
  m.key.measuring_protocol = 1;
  const auto found = store.find(m.key);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->median_us, 10.25);
  EXPECT_FALSE(store.put(m));  // the key, protocol included, is still unique

  m.key.measuring_protocol = 2;
  EXPECT_FALSE(store.find(m.key));
  m.median_us = 9.5;
  EXPECT_TRUE(store.put(m));  // the same measurement by another protocol is a row of its own
  EXPECT_EQ(store.find(m.key)->median_us, 9.5);
  m.key.measuring_protocol = 1;
  EXPECT_EQ(store.find(m.key)->median_us, 10.25);
  EXPECT_EQ(store.count(), 2);
}

TEST(SchemaV3, TheSchemaRefusesAProtocolBelowOne) {
  Database db = Database::open(":memory:");
  Measurements(db).put(sample_measurement());
  EXPECT_THROW(db.execute("UPDATE measurements SET measuring_protocol = 0"), DbError);
}

}  // namespace
}  // namespace evodispatch::results

// Schema version 4: per-shape run results, the readable views, read-only opening and the
// browse queries behind `evodispatch results`.
#include <sstream>

#include <evodispatch/results/browse.hpp>

#include "support.hpp"

namespace evodispatch::results {
namespace {

using test::sample_measurement;
using test::TempDir;

Measurement measured(int splits, double us) {
  Measurement m = sample_measurement(4, splits);
  m.median_us = m.p10_us = m.p90_us = us;
  return m;
}

TEST(SchemaV4, MigrationFillsARunsKernelBuildFromItsMeasurements) {
  TempDir dir;
  const std::string path = dir.file("v3.db");
  std::int64_t run = 0;
  {
    Database db = Database::open(path, test::at_version(3));
    run = Runs(db).create(test::run("bench"));
    const Measurement m = measured(2, 20.0);
    DeviceRecord device;
    device.fingerprint = m.key.device;
    KernelBuildRecord build;
    build.hash = m.key.kernel_build;
    test::insert_shape_before_v5(db, 1, m.key.shape);
    db.execute("INSERT INTO measurements (device_id, kernel_build_id, measuring_protocol, shape_id, num_splits, "
               "pack_gqa, sm_margin, l2_mode, ok, median_us, run_id) VALUES (" +
               std::to_string(Devices(db).upsert(device)) + ", " + std::to_string(KernelBuilds(db).upsert(build)) +
               ", 1, 1, 2, 1, 0, 'cold', 1, 20.0, " + std::to_string(run) + ")");
  }
  Database db = Database::open(path);
  EXPECT_EQ(db.schema_version(), Database::latest_schema_version());
  EXPECT_EQ(Runs(db).get(run)->kernel_build, sample_measurement().key.kernel_build);
}

TEST(SchemaV4, MeasurementsViewDecodesShapesDecisionsAndBandwidth) {
  Database db = Database::open(":memory:");
  DeviceRecord d;
  d.fingerprint = sample_measurement().key.device;
  d.info.name = "H100";
  d.info.mem_bw_bytes_per_s = 3.35e12;
  Devices(db).upsert(d);
  Measurements(db).put(measured(3, 10.0));
  const Table t = read_view(db, View::measurements);
  ASSERT_EQ(t.rows.size(), 1u);
  const Shape s = test::sample_shape(4);
  const double bytes = static_cast<double>(kv_bytes(s));
  EXPECT_EQ(bytes, 2.0 * 4 * 512 * 8 * 128 * 2);
  EXPECT_EQ(t.at(0, "kv_bytes"), kv_bytes(s));
  EXPECT_EQ(t.at(0, "batch"), 4);
  EXPECT_EQ(t.at(0, "num_splits"), 3);
  EXPECT_EQ(t.at(0, "device"), "H100");
  EXPECT_NEAR(t.at(0, "tb_per_s").get<double>(), bytes / 10e-6 / 1e12, 1e-9);
  EXPECT_NEAR(t.at(0, "bw_fraction").get<double>(), bytes / 10e-6 / 3.35e12, 1e-9);
}

TEST(SchemaV4, OracleViewTakesTheFastestDecisionPerShape) {
  Database db = Database::open(":memory:");
  Measurements(db).put(measured(1, 30.0));
  Measurements(db).put(measured(4, 12.0));
  Measurements(db).put(measured(8, 15.0));
  Measurement failed = measured(16, 1.0);
  failed.ok = false;
  Measurements(db).put(failed);
  const Table t = read_view(db, View::oracle);
  ASSERT_EQ(t.rows.size(), 1u);
  EXPECT_EQ(t.at(0, "num_splits"), 4);
  EXPECT_EQ(t.at(0, "median_us"), 12.0);
  EXPECT_EQ(t.at(0, "decisions_measured"), 3);
}

TEST(SchemaV4, ProgressAndProgramViewsFollowTheSteps) {
  Database db = Database::open(":memory:");
  const std::int64_t run = Runs(db).create(test::run("search"));
  const double fitness[] = {1.02, 1.01, 1.05};
  for (int step = 0; step < 3; ++step) {
    ProgramRecord p;
    p.run_id = run;
    p.hash = "p" + std::to_string(step);
    p.source = "-- rules";
    p.rules = {{"base", "fa3"}, {"rules", nlohmann::json::array({1, 2})}};
    p.step = step;
    const std::int64_t id = Programs(db).insert(p).id;
    EvaluationRecord e;
    e.program_id = id;
    e.ok = true;
    e.fitness = fitness[step];
    Evaluations(db).insert(e);
  }
  const Table progress = read_view(db, View::search_progress);
  ASSERT_EQ(progress.rows.size(), 3u);
  EXPECT_EQ(progress.at(1, "step_best_train"), 1.01);
  EXPECT_EQ(progress.at(1, "best_train"), 1.02);  // the best so far, not the step's
  EXPECT_EQ(progress.at(2, "best_train"), 1.05);
  ViewQuery q;
  q.order_by = "train_fitness";
  q.descending = true;
  const Table programs = read_view(db, View::programs, q);
  EXPECT_EQ(programs.at(0, "train_fitness"), 1.05);
  EXPECT_EQ(programs.at(0, "rules"), 2);
  EXPECT_EQ(programs.at(0, "step"), 2);
}

TEST(SchemaV4, RunShapesRoundTripAndReplace) {
  Database db = Database::open(":memory:");
  const std::int64_t run = Runs(db).create(test::run("search"));
  RunShapeRecord a;
  a.split = ShapeSplit::validation;
  a.shape = test::sample_shape(2);
  a.candidate = Decision{4, true, 0};
  a.baseline = Decision{1, false, 0};
  a.candidate_us = 8.0;
  a.baseline_us = 10.0;
  a.speedup = 1.25;
  RunShapeRecord b = a;
  b.split = ShapeSplit::train;
  b.candidate.reset();
  b.candidate_us.reset();
  b.speedup.reset();
  b.error = "the winner failed here";
  RunShapes(db).put(run, std::vector{a, b});
  a.speedup = 1.3;  // the same (split, shape) again replaces the row
  RunShapes(db).put(run, std::vector{a});
  const auto rows = RunShapes(db).list(run);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].split, ShapeSplit::train);  // train before validation
  EXPECT_FALSE(rows[0].candidate);
  EXPECT_EQ(rows[0].error, "the winner failed here");
  EXPECT_EQ(rows[1].candidate, (Decision{4, true, 0}));
  EXPECT_EQ(rows[1].speedup, 1.3);
  EXPECT_EQ(rows[1].shape, test::sample_shape(2));
  const Table view = read_view(db, View::run_shapes);
  EXPECT_EQ(view.rows.size(), 2u);
  EXPECT_EQ(view.at(1, "cand_num_splits"), 4);
}

TEST(SchemaV4, ReadOnlyOpenReadsAndNeverWrites) {
  TempDir dir;
  const std::string path = dir.file("r.db");
  {
    Database db = Database::open(path);
    Runs(db).create(test::run("bench"));
  }
  OpenOptions ro;
  ro.read_only = true;
  Database db = Database::open(path, ro);
  EXPECT_EQ(read_view(db, View::runs).rows.size(), 1u);
  EXPECT_THROW(Runs(db).create(test::run("bench")), DbError);
}

TEST(SchemaV4, ReadOnlyOpenRefusesWhatItCannotRead) {
  TempDir dir;
  OpenOptions ro;
  ro.read_only = true;
  EXPECT_THROW(Database::open(dir.file("missing.db"), ro), InputError);
  const std::string old = dir.file("v3.db");
  Database::open(old, test::at_version(3));
  try {
    Database::open(old, ro);
    FAIL() << "a version 3 file opened read-only";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("results migrate"), std::string::npos) << e.what();
  }
  const std::string newer = dir.file("v99.db");
  Database::open(newer).execute("PRAGMA user_version = 99");
  EXPECT_THROW(Database::open(newer, ro), InputError);
  const std::string empty = dir.write("empty.db", "");
  EXPECT_THROW(Database::open(empty, ro), InputError);
}

TEST(Browse, FiltersAreCheckedAgainstTheViewsColumns) {
  Database db = Database::open(":memory:");
  Measurements(db).put(measured(3, 10.0));
  Measurements(db).put(measured(5, 11.0));
  ViewQuery q;
  q.equals = {{"num_splits", 5}};
  q.columns = {"num_splits", "median_us"};
  const Table t = read_view(db, View::measurements, q);
  ASSERT_EQ(t.rows.size(), 1u);
  EXPECT_EQ(t.columns, (std::vector<std::string>{"num_splits", "median_us"}));
  ViewQuery bad;
  bad.equals = {{"splits; DROP TABLE runs", 1}};
  try {
    read_view(db, View::measurements, bad);
    FAIL() << "an unknown column was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("num_splits"), std::string::npos) << "it lists the columns: " << e.what();
  }
}

TEST(Browse, CsvQuotesWhatNeedsQuotingAndJsonKeepsTypes) {
  Table t;
  t.columns = {"a", "b"};
  t.rows = {{"x,y", nullptr}, {"say \"hi\"", 1.5}};
  std::ostringstream csv;
  write_csv(t, csv);
  EXPECT_EQ(csv.str(), "a,b\r\n\"x,y\",\r\n\"say \"\"hi\"\"\",1.5\r\n");
  const nlohmann::json j = to_json(t);
  EXPECT_TRUE(j[0]["b"].is_null());
  EXPECT_EQ(j[1]["b"], 1.5);
}

}  // namespace
}  // namespace evodispatch::results

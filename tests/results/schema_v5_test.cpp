// Schema version 5: an fp8 KV cache's query dtype is part of a shape. The migration keeps
// every shape's id (and so every row that references one), and afterwards the same cache
// under fp16 and bf16 queries are two shapes whose measurements never stand in for each
// other.
#include <evodispatch/results/browse.hpp>

#include "support.hpp"

namespace evodispatch::results {
namespace {

using test::sample_measurement;
using test::TempDir;

Measurement fp8_measurement(Dtype queries, double us) {
  Measurement m = sample_measurement(4, 2);
  m.key.shape.dtype = Dtype::fp8;
  m.key.shape.q_dtype = queries;
  m.median_us = m.p10_us = m.p90_us = us;
  return m;
}

// A version-4 file with one fp8 shape (id 7) and a measurement and a run row on it,
// written with version 4's columns.
void write_v4_file(const std::string& path) {
  Database db = Database::open(path, test::at_version(4));
  db.execute("INSERT INTO devices (id, fingerprint) VALUES (1, '" + sample_measurement().key.device + "')");
  db.execute("INSERT INTO kernel_builds (id, hash) VALUES (1, '" + sample_measurement().key.kernel_build + "')");
  test::insert_shape_before_v5(db, 7, fp8_measurement(Dtype::bf16, 0).key.shape);
  db.execute(
      "INSERT INTO measurements (device_id, kernel_build_id, measuring_protocol, shape_id, num_splits, pack_gqa, "
      "sm_margin, l2_mode, ok, median_us) VALUES (1, 1, " + std::to_string(kMeasuringProtocol) +
      ", 7, 2, 1, 0, 'cold', 1, 30.0)");
  db.execute("INSERT INTO runs (id, kind) VALUES (1, 'bench')");
  db.execute("INSERT INTO run_shapes (run_id, split, shape_id, candidate_us) VALUES (1, 'workload', 7, 30.0)");
}

TEST(SchemaV5, MigrationKeepsEveryShapeIdAndTakesOldRowsAsBf16Queries) {
  TempDir dir;
  const std::string path = dir.file("v4.db");
  write_v4_file(path);
  Database db = Database::open(path);
  ASSERT_EQ(db.schema_version(), 5);
  const Shape bf16_queries = fp8_measurement(Dtype::bf16, 0).key.shape;
  EXPECT_EQ(Shapes(db).find(bf16_queries), 7);
  const auto old = Measurements(db).find(fp8_measurement(Dtype::bf16, 0).key);
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->median_us, 30.0);
  EXPECT_FALSE(Measurements(db).find(fp8_measurement(Dtype::fp16, 0).key).has_value());
  const Table shapes = read_view(db, View::run_shapes);
  ASSERT_EQ(shapes.rows.size(), 1u);
  EXPECT_EQ(shapes.at(0, "q_dtype"), "bf16");
  EXPECT_EQ(shapes.at(0, "shape_id"), 7);
}

TEST(SchemaV5, ForeignKeysAreEnforcedAgainAfterTheRebuild) {
  TempDir dir;
  const std::string path = dir.file("v4.db");
  write_v4_file(path);
  Database db = Database::open(path);
  EXPECT_THROW(db.execute("INSERT INTO measurements (device_id, kernel_build_id, measuring_protocol, shape_id, "
                          "num_splits, pack_gqa, sm_margin, l2_mode, ok) VALUES (1, 1, 1, 99, 1, 1, 0, 'cold', 1)"),
               DbError);
  EXPECT_THROW(db.execute("DELETE FROM shapes WHERE id = 7"), DbError);
}

TEST(SchemaV5, AnFp8CacheUnderFp16AndBf16QueriesIsTwoShapes) {
  Database db = Database::open(":memory:");
  Measurements(db).put(fp8_measurement(Dtype::bf16, 52.0));
  Measurements(db).put(fp8_measurement(Dtype::fp16, 51.0));
  EXPECT_EQ(Measurements(db).find(fp8_measurement(Dtype::bf16, 0).key)->median_us, 52.0);
  EXPECT_EQ(Measurements(db).find(fp8_measurement(Dtype::fp16, 0).key)->median_us, 51.0);
  const auto rows = Measurements(db).list({});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].measurement.key.shape.q_dtype, Dtype::fp16);
  const Table oracle = read_view(db, View::oracle);
  EXPECT_EQ(oracle.rows.size(), 2u);
}

TEST(SchemaV5, A16BitShapeCannotCarryAQueryDtype) {
  Database db = Database::open(":memory:");
  EXPECT_THROW(db.execute("INSERT INTO shapes (batch, seqlen_q, seqlen_k, h_q, h_kv, head_dim, dtype, page_size, "
                          "causal, q_dtype) VALUES (1, 1, 512, 8, 8, 128, 'bf16', 0, 1, 'fp16')"),
               DbError);
}

}  // namespace
}  // namespace evodispatch::results

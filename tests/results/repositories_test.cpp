// Devices, kernel builds, shapes and workloads.
#include "support.hpp"

namespace evodispatch::results {
namespace {

DeviceRecord h100() {
  DeviceRecord d;
  d.fingerprint = "h100-sxm-80gb/132sm/driver-580";
  d.info = DeviceInfo{"NVIDIA H100 80GB HBM3", 132, 50 * 1024 * 1024, 3.35e12, 90};
  d.driver = "580.65.06 / CUDA 13.0";
  d.extra = {{"sm_clock_mhz", 1980}, {"memory_bytes", 85899345920LL}};
  return d;
}

TEST(Devices, UpsertFindGetAndList) {
  Database db = Database::open(":memory:");
  Devices devices(db);
  const DeviceRecord d = h100();
  const std::int64_t id = devices.upsert(d);
  const auto found = devices.find(d.fingerprint);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->id, id);
  EXPECT_EQ(found->info, d.info);
  EXPECT_EQ(found->driver, d.driver);
  EXPECT_EQ(found->extra, d.extra);
  EXPECT_FALSE(found->created_at.empty());
  EXPECT_EQ(devices.get(id)->fingerprint, d.fingerprint);
  EXPECT_FALSE(devices.find("nope"));
  EXPECT_FALSE(devices.get(id + 1));

  DeviceRecord changed = d;
  changed.driver = "590";
  EXPECT_EQ(devices.upsert(changed), id);
  EXPECT_EQ(devices.find(d.fingerprint)->driver, "590");
  EXPECT_EQ(devices.list().size(), 1u);
}

TEST(Devices, BareRowFromAMeasurementGetsItsDetailsLater) {
  Database db = Database::open(":memory:");
  Measurement m = test::sample_measurement();
  m.key.device = h100().fingerprint;
  Measurements(db).put(m);
  const auto bare = Devices(db).find(m.key.device);
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->info.num_sms, 0);
  EXPECT_EQ(Devices(db).upsert(h100()), bare->id);
  EXPECT_EQ(Devices(db).find(m.key.device)->info.num_sms, 132);
  EXPECT_TRUE(Measurements(db).find(m.key));
}

TEST(Devices, EmptyFingerprintIsRefused) {
  Database db = Database::open(":memory:");
  EXPECT_THROW(Devices(db).upsert(DeviceRecord{}), std::invalid_argument);
}

TEST(KernelBuilds, UpsertKeepsTheCompilerReport) {
  Database db = Database::open(":memory:");
  KernelBuilds builds(db);
  KernelBuildRecord b;
  b.hash = "sha256:0123";
  b.description = "decode-splitkv sm_90a nvrtc 13.0";
  b.ok = false;
  b.compiler_log = "kernel.cuh(12): error: expected a \";\"\n";
  b.resources = {{"decode_d128_bf16", {{"registers", 128}, {"spill_stores", 0}, {"shared_bytes", 49152}}}};
  const std::int64_t id = builds.upsert(b);
  auto found = builds.find(b.hash);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->id, id);
  EXPECT_EQ(found->description, b.description);
  EXPECT_FALSE(found->ok);
  EXPECT_EQ(found->compiler_log, b.compiler_log);
  EXPECT_EQ(found->resources, b.resources);

  b.ok = true;
  b.compiler_log.clear();
  EXPECT_EQ(builds.upsert(b), id);
  EXPECT_TRUE(builds.find(b.hash)->ok);
  EXPECT_EQ(builds.list().size(), 1u);
  EXPECT_FALSE(builds.find("other"));
}

TEST(Shapes, UpsertIsIdempotentAndGetRoundTrips) {
  Database db = Database::open(":memory:");
  Shapes shapes(db);
  const Shape s{.batch = 13, .seqlen_q = 16, .seqlen_k = 97, .h_q = 71, .h_kv = 1, .head_dim = 64,
                .dtype = Dtype::fp16, .page_size = 3, .causal = false};
  const std::int64_t id = shapes.upsert(s);
  EXPECT_EQ(shapes.upsert(s), id);
  EXPECT_EQ(shapes.find(s), std::optional<std::int64_t>(id));
  EXPECT_EQ(shapes.get(id), std::optional<Shape>(s));
  Shape other = s;
  other.causal = true;
  EXPECT_FALSE(shapes.find(other));
  EXPECT_NE(shapes.upsert(other), id);
  EXPECT_FALSE(shapes.get(id + 100));
}

TEST(Workloads, SameSpecSameRowEditedSpecNewRow) {
  Database db = Database::open(":memory:");
  Workloads workloads(db);
  const nlohmann::json spec = {{"shapes", {{{"batch", 1}, {"seqlen_k", 512}, {"h_q", 64}, {"h_kv", 1}}}}};
  const std::int64_t id = workloads.upsert("paper-table1", spec);
  EXPECT_EQ(workloads.upsert("paper-table1", nlohmann::json::parse(spec.dump(2))), id);
  nlohmann::json edited = spec;
  edited["shapes"][0]["batch"] = 2;
  EXPECT_NE(workloads.upsert("paper-table1", edited), id);
  const auto w = workloads.get(id);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->name, "paper-table1");
  EXPECT_EQ(w->spec, spec);
  EXPECT_EQ(workloads.list().size(), 2u);
}

}  // namespace
}  // namespace evodispatch::results

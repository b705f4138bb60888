// The measurement cache: round trip, key uniqueness, batch lookup, filters.
#include <cmath>

#include "support.hpp"

namespace evodispatch::results {
namespace {

using test::sample_measurement;
using test::sample_shape;

void expect_same(const Measurement& a, const Measurement& b) {
  EXPECT_EQ(a.key.device, b.key.device);
  EXPECT_EQ(a.key.kernel_build, b.key.kernel_build);
  EXPECT_EQ(a.key.shape, b.key.shape);
  EXPECT_EQ(a.key.decision, b.key.decision);
  EXPECT_EQ(a.key.l2, b.key.l2);
  EXPECT_EQ(a.ok, b.ok);
  EXPECT_EQ(a.error, b.error);
  EXPECT_EQ(a.median_us, b.median_us);
  EXPECT_EQ(a.p10_us, b.p10_us);
  EXPECT_EQ(a.p90_us, b.p90_us);
  EXPECT_EQ(a.samples, b.samples);
  EXPECT_EQ(a.rel_error, b.rel_error);
  EXPECT_EQ(a.plan, b.plan);
}

TEST(Measurements, RoundTripKeepsEveryField) {
  Database db = Database::open(":memory:");
  Measurements store(db);
  Measurement m = sample_measurement();
  m.key.shape = Shape{.batch = 3, .seqlen_q = 4, .seqlen_k = 4099, .h_q = 28, .h_kv = 4, .head_dim = 256,
                      .dtype = Dtype::fp16, .page_size = 16, .causal = false};
  m.key.decision = Decision{17, false, 12};
  m.key.l2 = L2Mode::hot;
  m.median_us = 123.456789012345;
  m.p10_us = 120.0000001;
  m.p90_us = 130.5;
  m.samples = 31;
  m.rel_error = 4.25e-3;
  m.plan = {{"grid", {17, 4, 3}}, {"combine", {{"grid", {4, 3}}, {"block", 256}}}, {"note", "ünïcode ✓"}};
  EXPECT_TRUE(store.put(m));

  const auto found = store.find(m.key);
  ASSERT_TRUE(found);
  expect_same(*found, m);
}

TEST(Measurements, FailedRowWithoutTimesOrErrorRoundTrips) {
  Database db = Database::open(":memory:");
  Measurements store(db);
  Measurement m = sample_measurement();
  m.ok = false;
  m.error = "NVRTC: error: identifier \"foo\" is undefined\n  at line 12";
  m.median_us = std::nan("");
  m.p10_us = 0;
  m.p90_us = 0;
  m.samples = 0;
  m.rel_error.reset();
  m.plan = nullptr;
  store.put(m);
  const auto found = store.find(m.key);
  ASSERT_TRUE(found);
  EXPECT_FALSE(found->ok);
  EXPECT_EQ(found->error, m.error);
  EXPECT_TRUE(std::isnan(found->median_us));
  EXPECT_EQ(found->p10_us, 0);
  EXPECT_FALSE(found->rel_error.has_value());
  EXPECT_TRUE(found->plan.is_null());
}

TEST(Measurements, SecondPutKeepsTheFirstRowUnlessReplaceIsAsked) {
  Database db = Database::open(":memory:");
  Measurements store(db);
  Measurement first = sample_measurement();
  Measurement second = first;
  second.median_us = 99;
  second.rel_error.reset();
  second.plan = {{"grid", {1}}};

  EXPECT_TRUE(store.put(first));
  EXPECT_FALSE(store.put(second));
  expect_same(*store.find(first.key), first);

  EXPECT_TRUE(store.put(second, /*replace=*/true));
  expect_same(*store.find(first.key), second);
  EXPECT_EQ(store.count(), 1);
}

TEST(Measurements, EveryPartOfTheKeyMakesADifferentRow) {
  Database db = Database::open(":memory:");
  Measurements store(db);
  const Measurement base = sample_measurement();
  std::vector<Measurement> variants(1, base);
  auto vary = [&](auto change) {
    Measurement m = base;
    change(m.key);
    variants.push_back(m);
  };
  vary([](MeasurementKey& k) { k.device = "sim:h100-sxm@abc"; });
  vary([](MeasurementKey& k) { k.kernel_build = "build-other"; });
  vary([](MeasurementKey& k) { k.shape.batch = 2; });
  vary([](MeasurementKey& k) { k.shape.seqlen_q = 2; });
  vary([](MeasurementKey& k) { k.shape.seqlen_k = 513; });
  vary([](MeasurementKey& k) { k.shape.h_q = 32; });
  vary([](MeasurementKey& k) { k.shape.h_kv = 4; });
  vary([](MeasurementKey& k) { k.shape.head_dim = 64; });
  vary([](MeasurementKey& k) { k.shape.dtype = Dtype::fp16; });
  vary([](MeasurementKey& k) { k.shape.page_size = 1; });
  vary([](MeasurementKey& k) { k.shape.causal = false; });
  vary([](MeasurementKey& k) { k.decision.num_splits = 4; });
  vary([](MeasurementKey& k) { k.decision.pack_gqa = false; });
  vary([](MeasurementKey& k) { k.decision.sm_margin = 8; });
  vary([](MeasurementKey& k) { k.l2 = L2Mode::hot; });
  for (const auto& m : variants) EXPECT_TRUE(store.put(m)) << describe(m.key.shape) << " " << describe(m.key.decision);
  EXPECT_EQ(store.count(), static_cast<std::int64_t>(variants.size()));
  for (const auto& m : variants) EXPECT_TRUE(store.find(m.key));
}

// A change of how measurements are timed must not hand back rows timed the old way.
TEST(Measurements, AnotherMeasuringProtocolIsAMiss) {
  Database db = Database::open(":memory:");
  Measurements store(db);
  Measurement m = sample_measurement();
  EXPECT_EQ(m.key.measuring_protocol, kMeasuringProtocol);
  m.key.measuring_protocol = 7;
  ASSERT_TRUE(store.put(m));
  ASSERT_TRUE(store.find(m.key));
  EXPECT_EQ(store.find(m.key)->key.measuring_protocol, 7);

  MeasurementKey other = m.key;
  other.measuring_protocol = 8;
  EXPECT_FALSE(store.find(other));
  const auto many = store.find_many(std::vector<MeasurementKey>{other, m.key});
  EXPECT_FALSE(many[0]);
  EXPECT_TRUE(many[1]);

  Measurement retimed = m;
  retimed.key = other;
  retimed.median_us = 11;
  EXPECT_TRUE(store.put(retimed));  // beside the old row, not over it
  EXPECT_EQ(store.find(m.key)->median_us, m.median_us);
  EXPECT_EQ(store.find(other)->median_us, 11);
  const auto of_protocol = store.list(test::with<MeasurementFilter>([](auto& f) { f.measuring_protocol = 8; }));
  ASSERT_EQ(of_protocol.size(), 1u);
  EXPECT_EQ(of_protocol[0].measurement.median_us, 11);
  EXPECT_EQ(store.count(test::with<MeasurementFilter>([](auto& f) { f.measuring_protocol = 7; })), 1);
}

TEST(Measurements, KeysAreComparedWithTheDecisionResolved) {
  Database db = Database::open(":memory:");
  Measurements store(db);
  Measurement m = sample_measurement();  // h_q 64 / h_kv 8: pack_gqa defaults to true
  m.key.decision.pack_gqa.reset();
  store.put(m);

  MeasurementKey explicit_true = m.key;
  explicit_true.decision.pack_gqa = true;
  MeasurementKey explicit_false = m.key;
  explicit_false.decision.pack_gqa = false;
  const auto found = store.find(explicit_true);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->key.decision.pack_gqa, std::optional<bool>(true));
  EXPECT_TRUE(store.find(m.key));
  EXPECT_FALSE(store.find(explicit_false));
}

TEST(Measurements, FindManyAnswersInOrderWithGaps) {
  Database db = Database::open(":memory:");
  Measurements store(db);
  for (int b : {1, 3, 5}) store.put(sample_measurement(b));
  std::vector<MeasurementKey> keys;
  for (int b = 1; b <= 6; ++b) keys.push_back(sample_measurement(b).key);
  const auto found = store.find_many(keys);
  ASSERT_EQ(found.size(), keys.size());
  for (int b = 1; b <= 6; ++b) {
    const auto& f = found[static_cast<std::size_t>(b - 1)];
    EXPECT_EQ(f.has_value(), b % 2 == 1) << "batch " << b;
    if (f) {
      EXPECT_EQ(f->key.shape.batch, b);
    }
  }
  EXPECT_TRUE(store.find_many({}).empty());
}

TEST(Measurements, ListFiltersByDeviceRunShapeModeAndOutcome) {
  Database db = Database::open(":memory:");
  Measurements store(db);
  const std::int64_t run = Runs(db).create(test::run("bench"));
  Measurement a = sample_measurement(1);
  Measurement b = sample_measurement(2);
  b.key.device = "sim:a100@1";
  Measurement c = sample_measurement(3);
  c.ok = false;
  c.error = "numeric mismatch";
  c.key.l2 = L2Mode::hot;
  Measurement d = sample_measurement(4);
  d.key.kernel_build = "build-other";
  store.put(a, false, run);
  store.put(b);
  EXPECT_EQ(store.put_many(std::vector<Measurement>{c, d, a}, false, run), 2u);

  auto batches = [](const std::vector<MeasurementRow>& rows) {
    std::vector<int> out;
    for (const auto& r : rows) out.push_back(r.measurement.key.shape.batch);
    return out;
  };
  using F = MeasurementFilter;
  auto where = [&](auto set) { return batches(store.list(test::with<F>(set))); };
  EXPECT_EQ(batches(store.list()), (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(where([](F& f) { f.device = "sim:a100@1"; }), (std::vector<int>{2}));
  EXPECT_EQ(where([](F& f) { f.kernel_build = "build-other"; }), (std::vector<int>{4}));
  EXPECT_EQ(where([&](F& f) { f.run_id = run; }), (std::vector<int>{1, 3, 4}));
  EXPECT_EQ(where([](F& f) { f.shape = sample_shape(3); }), (std::vector<int>{3}));
  EXPECT_EQ(where([](F& f) { f.l2 = L2Mode::hot; }), (std::vector<int>{3}));
  EXPECT_EQ(where([](F& f) { f.ok = false; }), (std::vector<int>{3}));
  EXPECT_EQ(where([&](F& f) {
              f.device = a.key.device;
              f.run_id = run;
              f.ok = true;
            }),
            (std::vector<int>{1, 4}));
  EXPECT_EQ(where([](F& f) { f.limit = 2; }), (std::vector<int>{1, 2}));

  const F of_run = test::with<F>([&](F& f) { f.run_id = run; });
  EXPECT_EQ(store.count(of_run), 3);
  const auto rows = store.list(of_run);
  EXPECT_EQ(rows[0].run_id, std::optional<std::int64_t>(run));
  EXPECT_FALSE(rows[0].created_at.empty());
  EXPECT_GT(rows[0].id, 0);
}

TEST(Measurements, UnknownRunIsRefused) {
  Database db = Database::open(":memory:");
  EXPECT_THROW(Measurements(db).put(sample_measurement(), false, 12345), DbError);
  EXPECT_EQ(Measurements(db).count(), 0);
}

// Statements are cached per connection; one that failed must be usable again.
TEST(Measurements, AFailedWriteLeavesTheStoreUsable) {
  Database db = Database::open(":memory:");
  Measurements store(db);
  const std::int64_t run = Runs(db).create(test::run("bench"));
  for (int i = 0; i < 3; ++i) {
    EXPECT_THROW(store.put(sample_measurement(10 + i), false, run + 100), DbError);
    EXPECT_TRUE(store.put(sample_measurement(i + 1), false, run));
  }
  EXPECT_EQ(store.count(), 3);
  EXPECT_FALSE(db.transaction_open());
}

TEST(Measurements, EmptyDeviceOrBuildIsRefused) {
  Database db = Database::open(":memory:");
  Measurement m = sample_measurement();
  m.key.device.clear();
  EXPECT_THROW(Measurements(db).put(m), std::invalid_argument);
  m = sample_measurement();
  m.key.kernel_build.clear();
  EXPECT_THROW(Measurements(db).put(m), std::invalid_argument);
}

TEST(Measurements, PutJoinsTheCallersTransaction) {
  Database db = Database::open(":memory:");
  {
    Transaction t = db.transaction();
    Measurements(db).put(sample_measurement(1));
    Measurements(db).put(sample_measurement(2));
  }  // not committed
  EXPECT_EQ(Measurements(db).count(), 0);
}

}  // namespace
}  // namespace evodispatch::results

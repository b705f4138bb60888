#include <gtest/gtest.h>

#include <evodispatch/evaluator/simulator.hpp>
#include <evodispatch/results/devices.hpp>
#include <evodispatch/results/measurements.hpp>
#include <evodispatch/search/replay_evaluator.hpp>

#include "../support/scratch.hpp"

using namespace evodispatch;

namespace {

Shape shape(int batch, int seqlen_k) {
  Shape s;
  s.batch = batch;
  s.seqlen_k = seqlen_k;
  s.h_q = 64;
  s.h_kv = 8;
  return s;
}

constexpr const char* kGpu = "NVIDIA H100 80GB HBM3/132sm/cc90/81079MiB/driver13.0";

Measurement row(const std::string& device, const Shape& s, int splits, double us) {
  Measurement m;
  m.key = MeasurementKey{device, "build-a", s, resolve(Decision{splits, true, 0}, s), L2Mode::cold};
  m.ok = true;
  m.median_us = m.p10_us = m.p90_us = us;
  m.samples = 10;
  return m;
}

// A database as a GPU search leaves it: the GPU's rows, and more rows of the simulator's
// estimate beside them, which a replay must not take for the GPU's.
std::string gpu_database() {
  const std::string path = test::scratch_path("gpu.db").string();
  auto db = results::Database::open(path);
  results::DeviceRecord gpu;
  gpu.fingerprint = kGpu;
  gpu.info = DeviceInfo{"NVIDIA H100 80GB HBM3", 132, 50 << 20, 3.35e12, 90};
  results::Devices(db).upsert(gpu);
  results::Measurements m(db);
  m.put(row(kGpu, shape(1, 512), 1, 12.5));
  m.put(row(kGpu, shape(1, 512), 4, 10.0));
  for (int k = 1; k <= 8; ++k) m.put(row("sim:h100-sxm#1", shape(1, 512), k, 9.0 + k));
  return path;
}

}  // namespace

TEST(ReplayEvaluator, AnswersWithTheGpusStoredRowsUnderAReplayFingerprint) {
  const auto replay = search::make_any_evaluator("replay:" + gpu_database());
  EXPECT_EQ(replay->fingerprint(), std::string("replay:") + kGpu);
  EXPECT_EQ(replay->kernel_build(), "build-a");
  EXPECT_EQ(replay->device().num_sms, 132);
  EXPECT_EQ(replay->device().name, "NVIDIA H100 80GB HBM3");

  const Measurement four = replay->measure(shape(1, 512), Decision{4, std::nullopt, 0}, TimingOptions{});
  ASSERT_TRUE(four.ok) << four.error;
  EXPECT_EQ(four.median_us, 10.0);
  EXPECT_EQ(four.key.device, replay->fingerprint());  // never stored as the GPU's own row
  EXPECT_EQ(four.key.decision.pack_gqa, true);

  // A decision the GPU never measured is a failed row that says so, not a guess.
  const Measurement two = replay->measure(shape(1, 512), Decision{2, true, 0}, TimingOptions{});
  EXPECT_FALSE(two.ok);
  EXPECT_NE(two.error.find("not measured in replay:"), std::string::npos) << two.error;

  // A comparison divides the two stored medians.
  const Comparison c = replay->compare(shape(1, 512), Decision{1, true, 0}, Decision{4, true, 0}, TimingOptions{});
  ASSERT_TRUE(c.ok) << c.error;
  EXPECT_DOUBLE_EQ(c.ratio, 1.25);
  EXPECT_EQ(c.pairs, 0);
}

TEST(ReplayEvaluator, AFileWithNothingToReplayIsRefusedByName) {
  EXPECT_THROW(search::make_any_evaluator("replay:"), InputError);
  const std::string missing = test::scratch_path("missing.db").string();
  try {
    search::make_replay_evaluator(missing);
    FAIL() << "a missing file was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("missing.db"), std::string::npos) << e.what();
  }
  const std::string empty = test::scratch_path("empty.db").string();
  results::Database::open(empty);
  try {
    search::make_replay_evaluator(empty);
    FAIL() << "a database without measurements was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no successful measurement"), std::string::npos) << e.what();
  }
}

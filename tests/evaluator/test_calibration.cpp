// The calibration fit: it recovers a wave model from latencies that model produced, and
// its error report is the arithmetic it claims.
#include <gtest/gtest.h>

#include <cmath>

#include <evodispatch/evaluator/calibration.hpp>
#include <evodispatch/evaluator/workload.hpp>

namespace evodispatch {
namespace {

// Points "measured" by `truth`: every shape of paper-safety-160 at a spread of decisions.
std::vector<CalibrationPoint> points_from(const SimProfile& truth) {
  std::vector<CalibrationPoint> pts;
  for (const Shape& s : load_workload("paper-safety-160").shapes)
    for (int splits : {1, 2, 4, 8, 16})
      for (bool pack : {false, true}) {
        if (!pack && s.h_q == s.h_kv) continue;
        const Decision d = resolve(Decision{splits, pack, 0}, s);
        pts.push_back({s, d, L2Mode::cold, predict_us(truth, sim_plan(truth, s, d))});
      }
  return pts;
}

TEST(Calibration, RecoversTheModelThatProducedTheMeasurements) {
  const SimProfile truth = load_sim_profile("h100-sxm");
  SimProfile start = truth;
  start.model.launch_first_us *= 2.5;
  start.model.cta_start_us *= 0.4;
  start.model.dram_efficiency *= 0.7;
  start.model.combine_cta_us *= 3;
  const auto pts = points_from(truth);

  const CalibrationResult r = calibrate_profile(start, pts);
  EXPECT_GT(r.before.median_abs, 0.05);  // the perturbation is visible
  EXPECT_LT(r.after.median_abs, 0.01);   // and fitted away
  EXPECT_LT(r.after.mean_abs_log, r.before.mean_abs_log / 5);
  // Constant costs alias (a launch and a CTA start both add to every call), so the test
  // holds the fit to what it predicts, on shapes it never saw, and to the bandwidth.
  EXPECT_NEAR(r.profile.model.dram_efficiency, truth.model.dram_efficiency, 0.05);
  for (const Shape& s : load_workload("cliff-8k").shapes) {
    const Decision d = resolve(Decision{2, true, 0}, s);
    const double want = predict_us(truth, sim_plan(truth, s, d));
    EXPECT_NEAR(predict_us(r.profile, sim_plan(r.profile, s, d)), want, 0.05 * want) << describe(s);
  }
  // The device and the integer knobs are kept.
  EXPECT_EQ(r.profile.device, truth.device);
  EXPECT_EQ(r.profile.model.combine_ctas_per_sm, truth.model.combine_ctas_per_sm);
  EXPECT_EQ(r.profile.model.max_ctas_per_sm, truth.model.max_ctas_per_sm);
  // Deterministic.
  EXPECT_EQ(calibrate_profile(start, pts).profile.model, r.profile.model);
}

TEST(Calibration, ErrorIsTheRelativeDistanceToTheMeasurement) {
  const SimProfile p = load_sim_profile("h100-sxm");
  const Shape s = load_workload("paper-table1").shapes.front();
  const Decision d = resolve(Decision{1, std::nullopt, 0}, s);
  const double pred = predict_us(p, sim_plan(p, s, d));
  // Measured 25% above, 100% above and exactly the prediction.
  const std::vector<CalibrationPoint> pts = {{s, d, L2Mode::cold, pred / 1.25},
                                             {s, d, L2Mode::cold, pred / 2.0},
                                             {s, d, L2Mode::cold, pred}};
  const CalibrationError e = calibration_error(p, pts);
  EXPECT_EQ(e.points, 3);
  EXPECT_NEAR(e.median_abs, 0.25, 1e-9);
  EXPECT_NEAR(e.max_abs, 1.0, 1e-9);
  EXPECT_NEAR(e.mean_abs, (0.25 + 1.0) / 3, 1e-9);
  EXPECT_NEAR(e.mean_abs_log, (std::log(1.25) + std::log(2.0)) / 3, 1e-9);
}

TEST(Calibration, RefusesNoPointsAndBadMeasurements) {
  const SimProfile p = load_sim_profile("h100-sxm");
  EXPECT_THROW(calibrate_profile(p, std::vector<CalibrationPoint>{}), InputError);
  const Shape s = load_workload("paper-table1").shapes.front();
  const std::vector<CalibrationPoint> bad = {{s, resolve(Decision{1, std::nullopt, 0}, s), L2Mode::cold, 0.0}};
  try {
    calibration_error(p, bad);
    FAIL() << "a zero latency was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("point 0"), std::string::npos) << e.what();
  }
}

TEST(Calibration, ShippedH100ProfileCarriesItsCalibration) {
  const SimProfile p = load_sim_profile("h100-sxm");
  ASSERT_TRUE(p.calibration.is_object());
  const double median = p.calibration.at("paper-safety-160").at("median_abs_rel_error").get<double>();
  EXPECT_LE(median, 0.15);  // the target, as measured when the profile was fitted
  EXPECT_GT(p.calibration.at("fit").at("points").get<int>(), 1000);
}

}  // namespace
}  // namespace evodispatch

#pragma once
// Fitting a simulator profile to measured latencies (the `calibrate` verb).
//
// The fit keeps the profile's device (SMs, L2, nominal bandwidth) and the kernel's plan,
// and moves the wave model's continuous parameters (SimModel) to minimise the mean
// absolute log error |log(predicted / measured)| over the points: every point weighs
// the same whatever its latency, and a 2x over-prediction costs as much as a 2x
// under-prediction. The optimiser is a derivative-free pattern search in log space
// (each parameter scaled up and down by a step that halves when no move helps), which
// is deterministic: the same points and start give the same profile.
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include <evodispatch/evaluator/measurement.hpp>
#include <evodispatch/evaluator/simulator.hpp>

namespace evodispatch {

struct CalibrationPoint {
  Shape shape;
  Decision decision;  // resolved
  L2Mode l2 = L2Mode::cold;
  double measured_us = 0;
};

// Relative errors (predicted - measured) / measured, as absolute values, over the points.
struct CalibrationError {
  int points = 0;
  double median_abs = 0;
  double mean_abs = 0;
  double p90_abs = 0;
  double max_abs = 0;
  double mean_abs_log = 0;  // the objective
};
nlohmann::json to_json(const CalibrationError&);

CalibrationError calibration_error(const SimProfile&, std::span<const CalibrationPoint>);

struct CalibrationOptions {
  int max_rounds = 60;         // sweeps over every parameter
  double initial_step = 0.5;   // first multiplicative step: x1.5 and /1.5
  double final_step = 0.005;   // stop once the step is below this
};

struct CalibrationResult {
  SimProfile profile;  // the start profile with the fitted model
  CalibrationError before, after;
  int evaluations = 0;  // objective evaluations
};

// Throws InputError when there are no points, or a point's shape or decision is invalid.
CalibrationResult calibrate_profile(const SimProfile& start, std::span<const CalibrationPoint>,
                                    const CalibrationOptions& = {});

}  // namespace evodispatch

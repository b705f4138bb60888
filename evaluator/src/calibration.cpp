// The calibration fit (calibration.hpp).
#include <evodispatch/evaluator/calibration.hpp>

#include <algorithm>
#include <cmath>
#include <functional>

#include <nlohmann/json.hpp>

namespace evodispatch {

namespace {

// A fitted parameter: a reference into the model and its allowed range.
struct Knob {
  const char* name;
  std::function<double&(SimModel&)> ref;
  double lo, hi;
};

std::vector<Knob> knobs() {
  return {
      {"launch_first_us", [](SimModel& m) -> double& { return m.launch_first_us; }, 0.05, 50},
      {"launch_extra_us", [](SimModel& m) -> double& { return m.launch_extra_us; }, 0.01, 50},
      {"dram_efficiency", [](SimModel& m) -> double& { return m.dram_efficiency; }, 0.2, 1.0},
      {"l2_bw_bytes_per_s", [](SimModel& m) -> double& { return m.l2_bw_bytes_per_s; }, 5e11, 5e13},
      {"sm_dram_bw_bytes_per_s", [](SimModel& m) -> double& { return m.sm_dram_bw_bytes_per_s; }, 1e9, 1e12},
      {"sm_l2_bw_bytes_per_s", [](SimModel& m) -> double& { return m.sm_l2_bw_bytes_per_s; }, 1e9, 1e12},
      {"cta_start_us", [](SimModel& m) -> double& { return m.cta_start_us; }, 0.01, 50},
      {"tile_us", [](SimModel& m) -> double& { return m.tile_us; }, 0.005, 20},
      {"fp8_stream_fraction", [](SimModel& m) -> double& { return m.fp8_stream_fraction; }, 0.2, 1.0},
      {"combine_cta_us", [](SimModel& m) -> double& { return m.combine_cta_us; }, 0.01, 50},
      {"combine_split_row_us", [](SimModel& m) -> double& { return m.combine_split_row_us; }, 1e-5, 1},
  };
}

// The plans do not depend on the fitted parameters (only on the device and max_ctas_per_sm,
// which the fit keeps), so they are made once.
struct Planned {
  Plan plan;
  L2Mode l2;
  double measured_us;
};

std::vector<Planned> plan_points(const SimProfile& prof, std::span<const CalibrationPoint> points) {
  if (points.empty()) throw InputError("calibrate: no measurements to fit");
  std::vector<Planned> out;
  out.reserve(points.size());
  for (std::size_t i = 0; i < points.size(); ++i) {
    const auto& p = points[i];
    if (!(p.measured_us > 0) || !std::isfinite(p.measured_us))
      throw InputError("calibrate: point " + std::to_string(i) + " (" + describe(p.shape) + "): measured_us must be > 0");
    try {
      out.push_back({sim_plan(prof, p.shape, p.decision), p.l2, p.measured_us});
    } catch (const InputError& e) {
      throw InputError("calibrate: point " + std::to_string(i) + " (" + describe(p.shape) + ", " + describe(p.decision) +
                       "): " + e.what());
    }
  }
  return out;
}

CalibrationError error_of(const SimProfile& prof, const std::vector<Planned>& pts) {
  CalibrationError e;
  e.points = static_cast<int>(pts.size());
  std::vector<double> rel;
  rel.reserve(pts.size());
  double log_sum = 0;
  for (const auto& p : pts) {
    const double pred = predict_us(prof, p.plan, p.l2);
    rel.push_back(std::abs(pred - p.measured_us) / p.measured_us);
    log_sum += std::abs(std::log(pred / p.measured_us));
  }
  e.mean_abs_log = log_sum / static_cast<double>(pts.size());
  double sum = 0;
  for (double r : rel) sum += r;
  e.mean_abs = sum / static_cast<double>(rel.size());
  std::sort(rel.begin(), rel.end());
  auto at = [&](double q) { return rel[std::min(rel.size() - 1, static_cast<std::size_t>(q * (rel.size() - 1) + 0.5))]; };
  e.median_abs = rel.size() % 2 ? rel[rel.size() / 2] : 0.5 * (rel[rel.size() / 2 - 1] + rel[rel.size() / 2]);
  e.p90_abs = at(0.9);
  e.max_abs = rel.back();
  return e;
}

}  // namespace

nlohmann::json to_json(const CalibrationError& e) {
  return {{"points", e.points},           {"median_abs_rel_error", e.median_abs}, {"mean_abs_rel_error", e.mean_abs},
          {"p90_abs_rel_error", e.p90_abs}, {"max_abs_rel_error", e.max_abs},     {"mean_abs_log_error", e.mean_abs_log}};
}

CalibrationError calibration_error(const SimProfile& prof, std::span<const CalibrationPoint> points) {
  return error_of(prof, plan_points(prof, points));
}

CalibrationResult calibrate_profile(const SimProfile& start, std::span<const CalibrationPoint> points,
                                    const CalibrationOptions& opt) {
  const std::vector<Planned> pts = plan_points(start, points);
  CalibrationResult r;
  r.profile = start;
  r.before = error_of(start, pts);
  double best = r.before.mean_abs_log;
  const auto ks = knobs();
  // Parameters start inside their ranges (a hand-set profile may sit outside one).
  for (const auto& k : ks) k.ref(r.profile.model) = std::clamp(k.ref(r.profile.model), k.lo, k.hi);
  best = error_of(r.profile, pts).mean_abs_log;
  r.evaluations = 2;

  double step = opt.initial_step;
  for (int round = 0; round < opt.max_rounds && step >= opt.final_step; ++round) {
    bool moved = false;
    for (const auto& k : ks) {
      // Keep moving this parameter in a direction while it helps.
      for (const double factor : {1.0 + step, 1.0 / (1.0 + step)}) {
        bool direction_helped = false;
        for (;;) {
          SimModel trial = r.profile.model;
          double& v = k.ref(trial);
          const double next = std::clamp(v * factor, k.lo, k.hi);
          if (next == v) break;
          v = next;
          SimProfile candidate = r.profile;
          candidate.model = trial;
          const double e = error_of(candidate, pts).mean_abs_log;
          ++r.evaluations;
          if (!(e < best - 1e-12)) break;
          best = e;
          r.profile.model = trial;
          moved = direction_helped = true;
        }
        if (direction_helped) break;
      }
    }
    if (!moved) step /= 2;
  }
  r.after = error_of(r.profile, pts);
  return r;
}

}  // namespace evodispatch

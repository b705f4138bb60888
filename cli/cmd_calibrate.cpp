// evodispatch calibrate: fit a simulator profile to the measurements stored for one GPU,
// report the simulator's error before and after (on held-out measurements too), and
// write the fitted profile.
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include <evodispatch/evaluator/calibration.hpp>
#include <evodispatch/evaluator/simulator.hpp>
#include <evodispatch/evaluator/workload.hpp>
#include <evodispatch/results/measurements.hpp>

#include "app.hpp"

namespace evodispatch::cli {

namespace {
struct CalibrateOptions : CommonOptions {
  std::string profile = "h100-sxm";
  std::string fingerprint;
  std::string workload;
  std::string report_workload = "paper-safety-160";
  std::string out;
  double holdout = 0.2;
  bool no_fit = false;
};

// Deterministic hold-out: a point is held out by a hash of its shape, so every decision
// of a held-out shape is unseen by the fit (a shape, not a row, is what must generalise).
bool held_out(const Shape& s, double fraction) {
  const std::string text = to_json(s).dump();
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ull;
  return static_cast<double>(h % 10000) < fraction * 10000.0;
}

// The device fingerprint to fit: the one asked for, else the only GPU in the database.
std::string pick_fingerprint(const std::vector<results::MeasurementRow>& rows, const std::string& asked) {
  std::map<std::string, int> counts;
  for (const auto& r : rows)
    if (r.measurement.key.device.rfind("sim:", 0) != 0) ++counts[r.measurement.key.device];
  if (!asked.empty()) {
    if (!counts.count(asked)) throw InputError("--fingerprint: no successful GPU measurement of \"" + asked + "\" in the database");
    return asked;
  }
  if (counts.empty()) throw InputError("the database has no successful GPU measurement to calibrate on");
  if (counts.size() > 1) {
    std::string list;
    for (const auto& [fp, n] : counts) list += "\n  " + fp + " (" + std::to_string(n) + " rows)";
    throw InputError("the database holds several GPUs; choose one with --fingerprint:" + list);
  }
  return counts.begin()->first;
}

std::string pct(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", 100 * x);
  return b;
}

void print_error_line(const std::string& what, const CalibrationError& e) {
  std::cout << std::left << std::setw(34) << what << std::right << std::setw(7) << e.points << std::setw(10)
            << pct(e.median_abs) << std::setw(10) << pct(e.mean_abs) << std::setw(10) << pct(e.p90_abs) << std::setw(10)
            << pct(e.max_abs) << "\n";
}

int run_calibrate(const CalibrateOptions& o) {
  if (!(o.holdout >= 0 && o.holdout < 1)) throw UsageError("--holdout: must be in [0, 1)");
  if (o.out.empty() && !o.no_fit) throw UsageError("--out: required (where the fitted profile is written), or --no-fit");
  const SimProfile start = load_sim_profile(o.profile);
  if (!std::filesystem::exists(o.db)) throw InputError("--db: " + o.db + ": no such database");
  results::Database db = results::Database::open(o.db);
  results::Measurements store(db);
  results::MeasurementFilter f;
  f.ok = true;
  const auto all = store.list(f);
  const std::string fingerprint = pick_fingerprint(all, o.fingerprint);

  std::set<std::string> fit_shapes, report_shapes;
  if (!o.workload.empty())
    for (const auto& s : load_workload(o.workload).shapes) fit_shapes.insert(to_json(s).dump());
  if (!o.report_workload.empty())
    for (const auto& s : load_workload(o.report_workload).shapes) report_shapes.insert(to_json(s).dump());

  std::vector<CalibrationPoint> train, test, report;
  std::set<std::string> builds;
  for (const auto& row : all) {
    const Measurement& m = row.measurement;
    if (m.key.device != fingerprint || !(m.median_us > 0)) continue;
    builds.insert(m.key.kernel_build);
    const CalibrationPoint p{m.key.shape, m.key.decision, m.key.l2, m.median_us};
    const std::string id = to_json(m.key.shape).dump();
    if (report_shapes.count(id)) report.push_back(p);
    if (!fit_shapes.empty() && !fit_shapes.count(id)) continue;
    (held_out(m.key.shape, o.holdout) ? test : train).push_back(p);
  }
  if (builds.size() > 1)
    std::cerr << "calibrate: note: " << builds.size() << " kernel builds measured on this GPU; all rows are used\n";
  if (train.empty()) throw InputError("no measurement of " + fingerprint + " to fit" +
                                      (o.workload.empty() ? "" : " on the shapes of " + o.workload));

  CalibrationResult r;
  if (o.no_fit) {
    r.profile = start;
    r.before = r.after = calibration_error(start, train);
  } else {
    r = calibrate_profile(start, train);
  }
  const CalibrationError test_before = test.empty() ? CalibrationError{} : calibration_error(start, test);
  const CalibrationError test_after = test.empty() ? CalibrationError{} : calibration_error(r.profile, test);
  const CalibrationError rep_before = report.empty() ? CalibrationError{} : calibration_error(start, report);
  const CalibrationError rep_after = report.empty() ? CalibrationError{} : calibration_error(r.profile, report);

  nlohmann::json provenance = {{"device_fingerprint", fingerprint},
                               {"kernel_builds", builds},
                               {"database", std::filesystem::path(o.db).filename().string()},
                               {"start_profile", start.name},
                               {"holdout_fraction", o.holdout},
                               {"fit", to_json(r.after)},
                               {"fit_before", to_json(r.before)},
                               {"evaluations", r.evaluations}};
  if (!test.empty()) provenance["held_out"] = to_json(test_after);
  if (!report.empty()) provenance[o.report_workload] = to_json(rep_after);
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  provenance["date"] = date;
  r.profile.calibration = provenance;

  if (o.json) {
    nlohmann::json j = {{"profile", to_json(r.profile)}, {"before", to_json(r.before)}, {"after", to_json(r.after)}};
    if (!test.empty()) j["held_out"] = {{"before", to_json(test_before)}, {"after", to_json(test_after)}};
    if (!report.empty()) j[o.report_workload] = {{"before", to_json(rep_before)}, {"after", to_json(rep_after)}};
    std::cout << j.dump(1) << "\n";
  } else {
    std::cout << "calibrating " << start.name << " on " << fingerprint << "\n"
              << std::left << std::setw(34) << "absolute relative error" << std::right << std::setw(7) << "points"
              << std::setw(10) << "median" << std::setw(10) << "mean" << std::setw(10) << "p90" << std::setw(10) << "max"
              << "\n";
    print_error_line("fit points, " + start.name + " as is", r.before);
    if (!o.no_fit) print_error_line("fit points, fitted", r.after);
    if (!test.empty()) {
      print_error_line("held-out shapes, " + start.name + " as is", test_before);
      if (!o.no_fit) print_error_line("held-out shapes, fitted", test_after);
    }
    if (!report.empty()) {
      print_error_line(o.report_workload + ", " + start.name + " as is", rep_before);
      if (!o.no_fit) print_error_line(o.report_workload + ", fitted", rep_after);
    }
  }
  if (!o.no_fit) {
    write_atomically(o.out, to_json(r.profile).dump(2) + "\n");
    std::cerr << "calibrate: wrote " << o.out << "\n";
  }
  return kOk;
}
}  // namespace

void add_calibrate(CLI::App& app, Action& action) {
  auto opts = std::make_shared<CalibrateOptions>();
  auto* verb = app.add_subcommand("calibrate", "fit a simulator profile to the GPU measurements in the database");
  add_db_option(*verb, *opts);
  add_json_option(*verb, *opts);
  verb->add_option("--profile", opts->profile, "the profile to start from (shipped name or JSON file); its device is kept")
      ->capture_default_str();
  verb->add_option("--fingerprint", opts->fingerprint, "the GPU whose rows to fit (default: the only one in the database)");
  verb->add_option("--workload", opts->workload, "fit only the measurements of this workload's shapes (default: all)");
  verb->add_option("--report-workload", opts->report_workload, "also report the error on this workload's shapes ('' for none)")
      ->capture_default_str();
  verb->add_option("--holdout", opts->holdout, "fraction of shapes kept out of the fit and reported apart")->capture_default_str();
  verb->add_option("--out", opts->out, "where to write the fitted profile (JSON)");
  verb->add_flag("--no-fit", opts->no_fit, "only report the profile's error on the measurements");
  verb->callback([opts, &action] { action = [opts] { return run_calibrate(*opts); }; });
}

}  // namespace evodispatch::cli

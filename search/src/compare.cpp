#include <evodispatch/search/compare.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>

#include <evodispatch/evaluator/workload.hpp>
#include <evodispatch/heuristics/distill.hpp>
#include <evodispatch/heuristics/policy.hpp>
#include <evodispatch/results/devices.hpp>
#include <evodispatch/results/measurements.hpp>
#include <evodispatch/results/run_shapes.hpp>
#include <evodispatch/results/runs.hpp>
#include <evodispatch/search/fitness.hpp>
#include <evodispatch/search/regress.hpp>

namespace evodispatch {

namespace {
namespace fs = std::filesystem;

struct Decided {
  std::optional<Decision> decision;
  std::optional<double> us;  // a run's own time for it
};

// One side: what decides, and (for a run) the shapes, device and build it measured on.
class Side {
 public:
  Side(results::Database& db, const std::string& spec) : spec_(spec) {
    if (!spec.empty() && std::all_of(spec.begin(), spec.end(), [](unsigned char c) { return std::isdigit(c); })) {
      load_run(db, std::stoll(spec));
    } else if (spec.ends_with(".json") || fs::is_directory(spec)) {
      const std::string path = fs::is_directory(spec) ? (fs::path(spec) / "heuristic.json").string() : spec;
      heuristic_ = read_heuristic(path);
      label_ = "heuristic " + path;
    } else {
      policy_ = make_policy(spec);
      label_ = "policy " + spec;
    }
  }
  bool is_run() const { return run_.has_value(); }
  const results::RunRecord& run() const { return *run_; }
  const std::vector<Shape>& shapes() const { return shapes_; }
  const std::string& label() const { return label_; }

  Decided decide(const Shape& s, const DeviceInfo& hw) const {
    if (run_) {
      auto it = by_shape_.find(describe(s));
      if (it == by_shape_.end()) return {};
      return {it->second.candidate, it->second.candidate_us};
    }
    if (heuristic_) return {resolve(distill::evaluate(*heuristic_, s, hw), s), std::nullopt};
    const DispatchOutcome out = policy_->decide(s, hw);
    if (!out.ok()) return {};
    return {resolve(out.decision, s), std::nullopt};
  }

 private:
  void load_run(results::Database& db, std::int64_t id) {
    run_ = results::Runs(db).get(id);
    if (!run_) throw InputError(db.path() + " has no run " + std::to_string(id));
    for (auto& r : results::RunShapes(db).list(id)) {
      if (!r.candidate) continue;
      const std::string key = describe(r.shape);
      if (by_shape_.emplace(key, r).second) shapes_.push_back(r.shape);
    }
    if (shapes_.empty()) throw InputError("run " + std::to_string(id) + " stored no per-shape results to compare");
    label_ = "run " + std::to_string(id) + " (" + run_->kind + ")";
  }

  std::string spec_, label_;
  std::optional<results::RunRecord> run_;
  std::vector<Shape> shapes_;
  std::map<std::string, results::RunShapeRecord> by_shape_;
  std::optional<distill::DecisionFunction> heuristic_;
  std::unique_ptr<Policy> policy_;
};

// The device and kernel build whose measurements a deciding side is read from.
std::pair<std::string, std::string> measured_on(results::Database& db, const Side& a, const Side& b,
                                                const CompareRequest& r) {
  if (a.is_run()) return {a.run().device, a.run().kernel_build};
  if (b.is_run()) return {b.run().device, b.run().kernel_build};
  std::string device = r.device;
  if (!device.empty() && !results::Devices(db).find(device)) {
    for (const auto& d : results::Devices(db).list())
      if (d.info.name == device) device = d.fingerprint;
  }
  std::string build = r.kernel_build;
  if (device.empty() || build.empty()) {
    // The one (device, build) the runs measured on, when there is one.
    std::set<std::pair<std::string, std::string>> pairs;
    for (const auto& run : results::Runs(db).list())
      if (!run.device.empty() && !run.kernel_build.empty() && (device.empty() || run.device == device) &&
          (build.empty() || run.kernel_build == build))
        pairs.emplace(run.device, run.kernel_build);
    if (pairs.size() != 1)
      throw InputError(std::to_string(pairs.size()) + " (device, kernel build) pairs in " + db.path() +
                       " match: name one with --device and --kernel-build");
    std::tie(device, build) = *pairs.begin();
  }
  return {device, build};
}

std::optional<double> measured_us(results::Database& db, const std::string& device, const std::string& build,
                                  const Shape& s, const Decision& d) {
  results::MeasurementFilter f;
  f.device = device;
  f.kernel_build = build;
  f.shape = s;
  f.ok = true;
  std::optional<double> best;
  for (const auto& row : results::Measurements(db).list(f))
    if (row.measurement.key.decision == d && (!best || row.measurement.key.l2 == L2Mode::cold))
      best = row.measurement.median_us;
  return best;
}
}  // namespace

CompareReport compare_sources(results::Database& db, const CompareRequest& r) {
  const Side a(db, r.a), b(db, r.b);
  CompareReport report;
  report.a = a.label();
  report.b = b.label();
  std::tie(report.device, report.kernel_build) = measured_on(db, a, b, r);
  const auto device = results::Devices(db).find(report.device);
  if (!device) throw InputError(db.path() + " has no device " + report.device);
  std::vector<Shape> shapes;
  if (a.is_run()) shapes = a.shapes();
  else if (b.is_run()) shapes = b.shapes();
  else if (!r.workload.empty()) shapes = load_workload(r.workload).shapes;
  else throw InputError("neither side is a run: name the shapes with --workload");

  std::vector<double> ratios;
  for (const Shape& s : shapes) {
    CompareRow row;
    row.shape = s;
    const auto fill = [&](const Side& side, std::string& label, std::optional<double>& us) {
      const Decided d = side.decide(s, device->info);
      if (!d.decision) return;
      label = describe(*d.decision);
      us = d.us ? d.us : measured_us(db, report.device, report.kernel_build, s, *d.decision);
    };
    fill(a, row.a_decision, row.a_us);
    fill(b, row.b_decision, row.b_us);
    if (row.a_us && row.b_us && *row.b_us > 0) {
      row.ratio = *row.a_us / *row.b_us;
      ratios.push_back(*row.ratio);
      if (*row.ratio < 0.995) ++report.a_faster;
      else if (*row.ratio > 1.005) ++report.b_faster;
      else ++report.equal;
    } else {
      ++report.missing;
    }
    report.rows.push_back(std::move(row));
  }
  if (!ratios.empty()) report.geomean_ratio = search::geomean(ratios);
  return report;
}

}  // namespace evodispatch

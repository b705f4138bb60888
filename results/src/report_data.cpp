// load_report: the plain data of a run's report, read from the database. The figures
// are the ones the run stored (its summary, run_shapes, evaluations); nothing is
// recomputed here but labels and the search's running best.
#include <algorithm>
#include <map>

#include <evodispatch/results/browse.hpp>
#include <evodispatch/results/devices.hpp>
#include <evodispatch/results/report.hpp>
#include <evodispatch/results/run_shapes.hpp>
#include <evodispatch/results/runs.hpp>
#include <evodispatch/results/shapes.hpp>

#include "access.hpp"
#include "codec.hpp"

namespace evodispatch::results {

namespace {

std::string decision_label(const std::optional<Decision>& d) {
  if (!d) return "";
  std::string s = std::to_string(d->num_splits) + (d->num_splits == 1 ? " split" : " splits");
  s += d->pack_gqa.value_or(false) ? ", packed" : ", unpacked";
  if (d->sm_margin) s += ", margin " + std::to_string(d->sm_margin);
  return s;
}

std::string text_or_empty(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : ""; }

// The headline figures v_runs decodes, those the run has.
nlohmann::json headline(const Table& run) {
  nlohmann::json h = nlohmann::json::object();
  for (const char* c : {"shapes", "geomean_speedup", "worst_speedup", "oracle_fraction", "test_geomean", "evaluations",
                        "winner_program"})
    if (!run.rows.empty() && !run.at(0, c).is_null()) h[c] = run.at(0, c);
  return h;
}

ReportProvenance provenance(Database& db, const RunRecord& run, const std::string& version) {
  ReportProvenance p;
  p.run_id = run.id;
  p.kind = run.kind;
  p.status = std::string(to_string(run.status));
  p.started_at = run.started_at;
  p.finished_at = run.finished_at.value_or("");
  p.config = run.config;
  p.evodispatch_version = version;
  ViewQuery by_id;
  by_id.equals = {{"id", run.id}};
  const Table row = read_view(db, View::runs, by_id);
  if (!row.rows.empty()) {
    p.workload = text_or_empty(row.at(0, "workload"));
    p.candidate = text_or_empty(row.at(0, "candidate"));
    p.baseline = text_or_empty(row.at(0, "baseline"));
    if (row.at(0, "duration_s").is_number()) p.duration_s = row.at(0, "duration_s").get<double>();
  }
  p.headline = headline(row);
  if (auto d = Devices(db).find(run.device)) {
    p.device_fingerprint = d->fingerprint;
    p.device_name = d->info.name;
    p.num_sms = d->info.num_sms;
    p.mem_bw = d->info.mem_bw_bytes_per_s;
    p.driver = d->driver;
  }
  p.kernel_build = run.kernel_build;
  if (auto k = KernelBuilds(db).find(run.kernel_build)) p.kernel_build_description = k->description;
  return p;
}

// The running best of the training evaluations (in the order they were stored) per
// island, each finalist's validation score, and where programs failed.
SearchProgress search_progress(Database& db, const RunRecord& run) {
  sql::Statement st(detail::connection(db),
                    "SELECT p.island, e.split, e.stage, e.ok, e.fitness FROM evaluations e "
                    "JOIN programs p ON p.id = e.program_id WHERE e.run_id = :run ORDER BY e.id");
  st.bind(":run", run.id);
  SearchProgress out;
  std::map<int, IslandProgress> islands;
  std::int64_t n = 0;
  while (st.step()) {
    const int island = st.column_int(0);
    const std::string split = st.column_text(1);
    const bool ok = st.column_bool(3);
    const auto fitness = st.column_optional_double(4);
    if (split == "validation") {
      if (ok && fitness && st.column_text(2) == "measured") out.validation.push_back({n, *fitness});
      continue;
    }
    ++n;
    // A program under the floor still has a fitness: infeasible, not failed.
    if (!ok && !fitness) out.failures.push_back(n);
    auto& isl = islands[island];
    isl.island = island;
    if (ok && fitness && (isl.train.empty() || *fitness > isl.train.back().best)) isl.train.push_back({n, *fitness});
  }
  for (auto& [id, isl] : islands) {
    if (!isl.train.empty()) isl.train.push_back({n, isl.train.back().best});  // the line runs to the end
    out.islands.push_back(std::move(isl));
  }
  out.evaluations = run.summary.value("evaluations", n);
  out.duplicates = run.summary.value("duplicates", std::int64_t{0});
  return out;
}

// The run's shapes with the candidate's measured spread (p10, p90), looked up on the
// run's device and kernel build. The unary + keeps SQLite on the shape's index: the
// unique key's (device, build) prefix would scan every measurement of the run.
std::vector<ReportShape> report_shapes(Database& db, const RunRecord& run) {
  sql::Statement spread(detail::connection(db),
                        "SELECT m.p10_us, m.p90_us FROM measurements m JOIN runs r ON r.id = :run "
                        "WHERE m.shape_id = :shape AND +m.device_id = r.device_id "
                        "AND +m.kernel_build_id = r.kernel_build_id AND m.num_splits = :num_splits "
                        "AND m.pack_gqa = :pack_gqa AND m.sm_margin = :sm_margin AND m.ok = 1 "
                        "ORDER BY m.l2_mode = 'cold' DESC, m.id DESC LIMIT 1");
  std::vector<ReportShape> out;
  for (const RunShapeRecord& r : RunShapes(db).list(run.id)) {
    ReportShape s;
    s.shape = r.shape;
    s.split = std::string(to_string(r.split));
    s.candidate_decision = decision_label(r.candidate);
    s.baseline_decision = decision_label(r.baseline);
    s.oracle_decision = decision_label(r.oracle);
    s.candidate_us = r.candidate_us;
    s.baseline_us = r.baseline_us;
    s.oracle_us = r.oracle_us;
    s.speedup = r.speedup;
    s.oracle_speedup = r.oracle_speedup;
    s.kv_bytes = static_cast<double>(kv_bytes(r.shape));
    const auto shape_id = detail::find_shape(detail::connection(db), r.shape);
    if (r.candidate && shape_id) {
      spread.reset();
      spread.bind(":run", run.id).bind(":shape", *shape_id);
      detail::bind_decision(spread, "", *r.candidate);
      if (spread.step()) {
        s.p10_us = spread.column_optional_double(0);
        s.p90_us = spread.column_optional_double(1);
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

// sweep splits stores its curves in the summary (to_json(SplitCurve)).
std::vector<SplitCurve> split_curves(const RunRecord& run) {
  std::vector<SplitCurve> out;
  const auto curves = run.summary.find("curves");
  if (curves == run.summary.end() || !curves->is_array()) return out;
  for (std::size_t i = 0; i < curves->size(); ++i) {
    const auto& c = (*curves)[i];
    const std::string where = "run " + std::to_string(run.id) + " summary.curves[" + std::to_string(i) + "]";
    SplitCurve curve;
    curve.shape = shape_from_json(c.at("shape"), where + ".shape");
    for (const auto& p : c.value("points", nlohmann::json::array())) {
      CurvePoint point;
      point.num_splits = p.value("num_splits", 0);
      point.pack_gqa = p.value("pack_gqa", false);
      if (p.contains("median_us")) {
        point.us = p.at("median_us").get<double>();
        point.p10_us = p.value("p10_us", *point.us);
        point.p90_us = p.value("p90_us", *point.us);
      }
      curve.points.push_back(point);
    }
    out.push_back(std::move(curve));
  }
  return out;
}

// sweep batch: its shapes are the curve, the candidate being the swept policy.
std::vector<BatchCurve> batch_curves(const RunRecord& run, const std::vector<ReportShape>& shapes) {
  if (run.kind != "sweep-batch" || shapes.empty()) return {};
  BatchCurve curve;
  curve.family = shapes.front().shape;
  curve.policy = run.config.value("policy", std::string());
  for (const ReportShape& s : shapes)
    curve.points.push_back({s.shape.batch, s.candidate_decision, s.candidate_us, s.p10_us, s.p90_us});
  std::sort(curve.points.begin(), curve.points.end(),
            [](const BatchPoint& a, const BatchPoint& b) { return a.batch < b.batch; });
  return {curve};
}

}  // namespace

ReportData load_report(Database& db, std::int64_t run_id, const std::string& evodispatch_version,
                       bool with_progress) {
  const auto run = Runs(db).get(run_id);
  if (!run) throw InputError(db.path() + " has no run " + std::to_string(run_id) + " (`evodispatch results runs` lists them)");
  ReportData d;
  d.provenance = provenance(db, *run, evodispatch_version);
  if (with_progress && run->kind == "search") d.progress = search_progress(db, *run);
  d.shapes = report_shapes(db, *run);
  d.split_curves = split_curves(*run);
  d.batch_curves = batch_curves(*run, d.shapes);
  return d;
}

}  // namespace evodispatch::results

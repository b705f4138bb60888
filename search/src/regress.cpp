#include <evodispatch/search/regress.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include <unistd.h>

#include <evodispatch/results/programs.hpp>
#include <evodispatch/search/fitness.hpp>

namespace evodispatch {

namespace {
namespace fs = std::filesystem;

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot read (" + std::strerror(errno) + ")");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ": not JSON: " + e.what());
  }
}

// The compiled function beside heuristic.json: DIR/libheuristic.so when distill built
// one, else compiled now from the header emitted from the function (in a scratch
// directory, so that DIR, perhaps read-only, stays as distill left it).
std::unique_ptr<distill::CompiledHeuristic> load_compiled(const fs::path& json_path,
                                                          const distill::DecisionFunction& fn) {
  const fs::path dir = json_path.parent_path().empty() ? fs::path(".") : json_path.parent_path();
  if (fs::exists(dir / "libheuristic.so")) return distill::CompiledHeuristic::load(dir / "libheuristic.so");
  const fs::path scratch = fs::temp_directory_path() / ("evodispatch-regress-" + std::to_string(::getpid()));
  // A loaded library stays mapped, and a failed build's log is in its error: nothing in
  // the scratch directory outlives this call.
  struct RemoveScratch {
    fs::path dir;
    ~RemoveScratch() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } remove_scratch{scratch};
  fs::create_directories(scratch);
  std::ofstream(scratch / "heuristic.hpp") << distill::emit_cpp_header(fn);
  return distill::CompiledHeuristic::build(scratch);
}

// The program the heuristic was distilled from, when its provenance names one that this
// database holds: a row can only reference a program of its own database.
std::optional<std::int64_t> stored_program(const nlohmann::json& provenance, results::Database& db) {
  const auto it = provenance.find("program");
  if (it == provenance.end() || !it->is_number_integer()) return std::nullopt;
  const auto id = it->get<std::int64_t>();
  if (!results::Programs(db).get(id)) return std::nullopt;
  return id;
}

std::string fixed3(double x) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(3) << x;
  return o.str();
}

// One matrix being run: what every shape's comparisons share.
class Matrix {
 public:
  Matrix(const DistilledHeuristic& heuristic, Policy& baseline, const RegressOptions& options, Evaluator& evaluator,
         results::Database& db, std::int64_t run_id)
      : heuristic_(heuristic), baseline_(baseline), options_(options), evaluator_(evaluator), db_(db),
        run_id_(run_id), program_id_(stored_program(heuristic.function.provenance, db)) {
    timing_.l2 = options.l2;
  }

  RegressRow run_shape(const Shape& s) {
    const DeviceInfo& hw = evaluator_.device();
    RegressRow row;
    row.shape = s;
    row.heuristic = resolve(heuristic_.compiled->decide(s, hw), s);
    const DispatchOutcome base = baseline_.decide(s, hw);
    if (!base.ok()) {
      row.error = "baseline: " + base.error;
      return row;
    }
    row.baseline = resolve(base.decision, s);
    row.first = compare(s, row.heuristic, *row.baseline, 1);
    if (!row.first->ok) return row;
    if (!(row.first->speedup < options_.floor)) {
      row.verdict = Verdict::ok;
      return row;
    }
    // The baseline's own decision launches the baseline's kernels: under the floor, the
    // comparison measured its noise (on FA3, 3 such shapes of 280 were confirmed at 0.98x).
    if (row.heuristic == *row.baseline) {
      row.verdict = Verdict::same;
      return row;
    }
    // Under the floor once: a second comparison decides whether it is real.
    row.second = compare(s, row.heuristic, *row.baseline, 2);
    const bool confirmed = row.second->ok && row.second->speedup < options_.floor;
    row.verdict = confirmed ? Verdict::regression : Verdict::below_once;
    return row;
  }

 private:
  // Compares and stores the row at once, so an interrupted matrix keeps what it took.
  results::ComparisonRecord compare(const Shape& s, const Decision& heuristic, const Decision& baseline,
                                    int attempt) {
    results::ComparisonRecord r;
    r.run_id = run_id_;
    r.program_id = program_id_;
    r.shape = s;
    r.device = evaluator_.fingerprint();
    r.kernel_build = evaluator_.kernel_build();
    r.l2 = options_.l2;
    r.candidate = heuristic;
    r.baseline = baseline;
    r.attempt = attempt;
    // The heuristic replays as side a, the baseline as side b.
    const Comparison measured = evaluator_.compare(s, heuristic, baseline, timing_, options_.pairs);
    results::set_measured(r, measured, results::BaselineSide::b);
    r.id = db_.in_transaction([&] { return results::Comparisons(db_).insert(r); });
    return r;
  }

  const DistilledHeuristic& heuristic_;
  Policy& baseline_;
  const RegressOptions& options_;
  Evaluator& evaluator_;
  results::Database& db_;
  std::int64_t run_id_;
  std::optional<std::int64_t> program_id_;
  TimingOptions timing_;
};
}  // namespace

distill::DecisionFunction read_heuristic(const std::string& heuristic_json) {
  return distill::decision_function_from_json(read_json_file(heuristic_json), heuristic_json);
}

DistilledHeuristic load_distilled(const std::string& heuristic_json) {
  DistilledHeuristic h;
  h.path = heuristic_json;
  h.function = read_heuristic(heuristic_json);
  h.compiled = load_compiled(heuristic_json, h.function);
  return h;
}

Workload regression_matrix(const Workload& grid, const Workload* domain, std::size_t samples, std::uint64_t seed) {
  if (!domain) return grid;
  if (!domain->domain) throw InputError("--domain: " + domain->name + " is not a domain (it lists its shapes)");
  Workload w = grid;
  const auto fresh = sample_domain(*domain->domain, samples, seed, grid.shapes);
  w.shapes.insert(w.shapes.end(), fresh.begin(), fresh.end());
  w.name = grid.name + " + " + std::to_string(fresh.size()) + " fresh shapes of " + domain->name + " (seed " +
           std::to_string(seed) + ")";
  return w;
}

std::string invalid_regress_options(const RegressOptions& o) {
  if (!(o.floor > 0)) return "floor: must be > 0";
  if (o.pairs < 1) return "pairs: must be >= 1";
  return "";
}

std::string verdict_text(const RegressRow& r) {
  switch (r.verdict) {
    case Verdict::ok:
      return "ok";
    case Verdict::below_once:
      return "below floor once, not confirmed";
    case Verdict::regression:
      return "REGRESSION (confirmed " + fixed3(r.second->speedup) + ")";
    case Verdict::same:
      return "below floor, but the baseline's own decision (noise)";
    case Verdict::failed:
      break;
  }
  return "error: " + (r.first ? r.first->error : r.error);
}

RegressReport run_regress(const DistilledHeuristic& heuristic, Policy& baseline, const Workload& workload,
                          const RegressOptions& options, Evaluator& evaluator, results::Database& db,
                          std::int64_t run_id,
                          const std::function<void(const RegressRow&, std::size_t, std::size_t)>& progress,
                          const std::function<bool()>& stop) {
  if (const std::string why = invalid_regress_options(options); !why.empty()) throw InputError(why);
  RegressReport report;
  report.run_id = run_id;
  report.device = evaluator.spec();
  report.device_fingerprint = evaluator.fingerprint();
  report.kernel_build = evaluator.kernel_build();
  report.heuristic = heuristic.path;
  report.baseline = baseline.name();
  report.workload = workload.name;
  report.floor = options.floor;
  report.provenance = heuristic.function.provenance;
  Matrix matrix(heuristic, baseline, options, evaluator, db, run_id);
  for (const Shape& s : workload.shapes) {
    if (stop && stop()) throw StoredEvaluator::Stopped();
    report.rows.push_back(matrix.run_shape(s));
    if (progress) progress(report.rows.back(), report.rows.size(), workload.shapes.size());
  }
  summarise(report);
  return report;
}

void summarise(RegressReport& report) {
  RegressSummary& s = report.summary;
  s = RegressSummary{};
  s.shapes = static_cast<int>(report.rows.size());
  std::vector<double> speedups;
  for (const RegressRow& row : report.rows) {
    if (row.verdict == Verdict::failed) ++s.failed;
    if (row.verdict == Verdict::below_once || row.verdict == Verdict::regression) ++s.below_floor_first;
    if (row.verdict == Verdict::regression) ++s.confirmed_regressions;
    if (row.first && row.first->ok) speedups.push_back(row.first->speedup);
  }
  s.geomean_speedup = search::geomean(speedups);  // 0 when nothing was measured
  s.worst_speedup = speedups.empty() ? 0 : std::ranges::min(speedups);
}

nlohmann::json to_json(const RegressRow& r) {
  nlohmann::json j = {{"shape", to_json(r.shape)}, {"heuristic", to_json(r.heuristic)}};
  if (!r.baseline || !r.first) {
    j["error"] = r.error;
    return j;
  }
  const results::ComparisonRecord& m = *r.first;
  j["baseline"] = to_json(*r.baseline);
  j["heuristic_us"] = m.candidate_us;
  j["baseline_us"] = m.baseline_us;
  j["speedup"] = m.speedup;
  j["speedup_lo"] = m.speedup_lo;
  j["speedup_hi"] = m.speedup_hi;
  j["pairs"] = m.pairs;
  j["verdict"] = verdict_text(r);
  if (r.second)
    j["second"] = {{"speedup", r.second->speedup},
                   {"speedup_lo", r.second->speedup_lo},
                   {"speedup_hi", r.second->speedup_hi}};
  return j;
}

nlohmann::json to_json(const RegressReport& r) {
  const RegressSummary& s = r.summary;
  nlohmann::json j = {{"run_id", r.run_id},
                      {"device", r.device},
                      {"device_fingerprint", r.device_fingerprint},
                      {"kernel_build", r.kernel_build},
                      {"heuristic", r.heuristic},
                      {"baseline", r.baseline},
                      {"workload", r.workload},
                      {"floor", r.floor},
                      {"shapes", s.shapes},
                      {"geomean_speedup", s.geomean_speedup},
                      {"worst_speedup", s.worst_speedup},
                      {"below_floor_first", s.below_floor_first},
                      {"confirmed_regressions", s.confirmed_regressions},
                      {"failed", s.failed},
                      {"passed", s.passed()},
                      {"provenance", r.provenance},
                      {"rows", nlohmann::json::array()}};
  for (const RegressRow& row : r.rows) j["rows"].push_back(to_json(row));
  return j;
}

}  // namespace evodispatch

// The engine's frame: creating and resuming runs, the setup that every session repeats
// (workload, split, baseline, oracle: all answered from the store after the first
// session), the run state, and the loop.
#include <algorithm>
#include <cmath>
#include <limits>

#include <evodispatch/evaluator/simulator.hpp>
#include <evodispatch/heuristics/json_reader.hpp>
#include <evodispatch/heuristics/policy.hpp>
#include <evodispatch/results/results.hpp>
#include <evodispatch/search/hash.hpp>
#include <evodispatch/search/lua_text.hpp>

#include "engine_impl.hpp"

namespace evodispatch::search {

namespace {

constexpr int kStateVersion = 1;
constexpr std::int64_t kMaxEmptySteps = 50;

// The source of a policy spec: a built-in (or fixed:N), else a Lua file.
std::string policy_source(const std::string& spec) {
  if (auto s = builtin_policy_source(spec)) return *s;
  return read_text_file(spec);
}

// The simulator profile standing in for a GPU model, for the estimate stage.
std::optional<std::string> profile_for(const DeviceInfo& hw) {
  const std::string& n = hw.name;
  if (n.find("H200") != std::string::npos) return "h200";
  if (n.find("H100") != std::string::npos) return n.find("PCIe") != std::string::npos ? "h100-pcie" : "h100-sxm";
  if (n.find("A100") != std::string::npos) return "a100";
  return std::nullopt;
}

std::vector<int> all_shapes(std::size_t n) {
  std::vector<int> all(n);
  for (std::size_t i = 0; i < n; ++i) all[i] = static_cast<int>(i);
  return all;
}

bool is_simulator(const Evaluator& e) { return e.spec().starts_with("sim:") || e.fingerprint().starts_with("sim:"); }

}  // namespace

// --- construction -----------------------------------------------------------------

SearchEngine::SearchEngine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SearchEngine::~SearchEngine() = default;

std::unique_ptr<SearchEngine> SearchEngine::start(results::Database& db, SearchConfig config, EngineOptions options,
                                                  std::optional<std::uint64_t> seed) {
  if (options.evaluators.empty()) throw InputError("search: no device to measure on");
  auto impl = std::make_unique<Impl>();
  impl->db = &db;
  if (seed) config.seed = *seed;
  impl->config = std::move(config);
  impl->options = std::move(options);
  const SearchConfig& c = impl->config;
  Evaluator& ev = *impl->options.evaluators.front();

  Workload workload = load_workload(c.workload);
  if (c.domain_samples > 0) workload = resample_domain(std::move(workload), static_cast<std::size_t>(c.domain_samples));
  const std::string seed_spec = c.seed_policy.empty() ? c.baseline : c.seed_policy;
  // The sources are stored with the run, so a resumed run never rereads a file that
  // may have changed since.
  nlohmann::json run_config = {{"search", to_json(c)},
                               {"device", impl->options.device_spec},
                               {"workers", impl->options.evaluators.size()},
                               {"baseline_source", policy_source(c.baseline)},
                               {"seed_source", policy_source(seed_spec)},
                               {"test", draw_test_split(c, workload)}};
  nlohmann::json spec = {{"name", workload.name}, {"shapes", nlohmann::json::array()}};
  for (const auto& s : workload.shapes) spec["shapes"].push_back(to_json(s));

  results::RunRecord run;
  run.kind = "search";
  run.config = run_config;
  run.seed = static_cast<std::int64_t>(c.seed);
  run.device = ev.fingerprint();
  run.kernel_build = ev.kernel_build();
  impl->run_id = db.in_transaction([&] {
    results::Devices(db).upsert({0, ev.fingerprint(), ev.device(), "", {}, ""});
    run.workload_id = results::Workloads(db).upsert(workload.name, spec);
    return results::Runs(db).create(run);
  });
  impl->prepare();
  impl->seed_run();
  return std::unique_ptr<SearchEngine>(new SearchEngine(std::move(impl)));
}

std::unique_ptr<SearchEngine> SearchEngine::resume(results::Database& db, std::int64_t run_id, EngineOptions options) {
  if (options.evaluators.empty()) throw InputError("search: no device to measure on");
  const auto run = results::Runs(db).get(run_id);
  if (!run || run->kind != "search") throw InputError("--resume " + std::to_string(run_id) + ": no search run with this id");
  if (run->status == results::RunStatus::finished || run->status == results::RunStatus::failed)
    throw InputError("--resume " + std::to_string(run_id) + ": the run is " + std::string(to_string(run->status)) +
                     "; start a new search instead");
  auto impl = std::make_unique<Impl>();
  impl->db = &db;
  impl->run_id = run_id;
  impl->options = std::move(options);
  if (!run->config.contains("search")) throw InputError("run " + std::to_string(run_id) + ": no search config stored");
  impl->config = parse_search_config(run->config["search"], "run " + std::to_string(run_id) + " config");
  if (run->seed) impl->config.seed = static_cast<std::uint64_t>(*run->seed);
  const Evaluator& ev = *impl->options.evaluators.front();
  if (ev.fingerprint() != run->device)
    throw InputError("--resume " + std::to_string(run_id) + ": the run measured " + run->device + ", but " + ev.spec() +
                     " is " + ev.fingerprint() + "; resume it with the same --device");
  results::Runs(db).set_status(run_id, results::RunStatus::running);
  impl->prepare();
  if (run->state.empty() || !run->state.contains("version")) {
    impl->seed_run();  // killed before its first step was committed
  } else {
    impl->load_state(run->state);
    impl->load_records();
  }
  return std::unique_ptr<SearchEngine>(new SearchEngine(std::move(impl)));
}

std::optional<std::int64_t> SearchEngine::newest_resumable(results::Database& db) {
  std::optional<std::int64_t> best;
  for (auto status : {results::RunStatus::running, results::RunStatus::interrupted}) {
    results::RunFilter f;
    f.kind = "search";
    f.status = status;
    f.limit = 1;
    const auto runs = results::Runs(db).list(f);
    if (!runs.empty() && (!best || runs.front().id > *best)) best = runs.front().id;
  }
  return best;
}

std::optional<std::int64_t> SearchEngine::run_to_resume(results::Database& db) {
  if (auto id = newest_resumable(db)) return id;
  results::RunFilter f;
  f.kind = "search";
  f.status = results::RunStatus::finished;
  f.limit = 1;
  const auto runs = results::Runs(db).list(f);
  if (runs.empty()) return std::nullopt;
  return runs.front().id;
}

std::optional<nlohmann::json> SearchEngine::finished_summary(results::Database& db, std::int64_t run_id) {
  const auto run = results::Runs(db).get(run_id);
  if (!run || run->kind != "search" || run->status != results::RunStatus::finished) return std::nullopt;
  return run->summary;
}

std::int64_t SearchEngine::run_id() const { return impl_->run_id; }
const SearchConfig& SearchEngine::config() const { return impl_->config; }
SearchStatus SearchEngine::status() const { return impl_->status(impl_->phase); }
bool SearchEngine::step() { return impl_->step(); }
nlohmann::json SearchEngine::finish() { return impl_->finish(); }

nlohmann::json SearchEngine::run() {
  while (impl_->phase == "search" && impl_->step()) {
  }
  return impl_->finish();
}

// --- setup ------------------------------------------------------------------------

void set_program(results::ProgramRecord& row, const Program& p) {
  auto [source, base] = split_source(p);
  row.source = std::move(source);
  row.base = std::move(base);
  row.rules = to_json(p);
}

void SearchEngine::Impl::prepare() {
  const auto setup_start = std::chrono::steady_clock::now();
  const auto run = results::Runs(*db).get(run_id);
  baseline_name = config.baseline;
  baseline_source = run->config.value("baseline_source", std::string());
  if (baseline_source.empty()) baseline_source = policy_source(baseline_name);
  load_workload();
  load_test_split(run->config.value("test", nlohmann::json()));
  split = split_shapes(workload.shapes, config.split.validation_fraction, config.split.seed);

  Evaluator& ev = *options.evaluators.front();
  const DeviceInfo& hw = ev.device();
  features.clear();
  for (const auto& s : workload.shapes) features.push_back(feature_values(s, hw));
  cells = std::make_unique<CellSpace>(config.archive.rule_buckets, config.archive.regions);
  train_regions.clear();
  for (int i : split.train) train_regions.push_back(cells->region_of_shape(features[i]));
  make_checkers(hw);

  TimingOptions timing;
  timing.l2 = *parse_l2_mode(config.l2);
  measurer = std::make_unique<Measurer>(*db, options.evaluators, timing, workload.shapes, run_id);
  report("setup", "reading stored measurements");
  measurer->load();
  measure_baseline();
  auto oracle_table = measure_oracle(hw);
  make_estimator(ev);
  prepare_operators(std::move(oracle_table));

  // The budget (stop.minutes) is search time: setup, which a later session answers
  // from the store, is counted apart.
  session_start = std::chrono::steady_clock::now();
  session_setup_s = std::chrono::duration<double>(session_start - setup_start).count();
  report("setup", "done in " + std::to_string(static_cast<long long>(session_setup_s + 0.5)) + " s, " +
                      std::to_string(measurer->stats().measured) + " measurements taken; the search's clock starts now");
}

// The shapes as stored with the run (the workload file may have changed since).
void SearchEngine::Impl::load_workload() {
  const auto run = results::Runs(*db).get(run_id);
  workload = Workload{};
  workload.name = config.workload;
  if (run->workload_id) {
    if (const auto w = results::Workloads(*db).get(*run->workload_id)) {
      const auto& shapes = w->spec.at("shapes");
      for (std::size_t i = 0; i < shapes.size(); ++i)
        workload.shapes.push_back(shape_from_json(shapes[i], "$.shapes[" + std::to_string(i) + "]"));
    }
  }
  if (workload.shapes.empty()) workload = evodispatch::load_workload(config.workload);
  if (workload.shapes.size() < 2) throw InputError("workload " + workload.name + ": a search needs at least 2 shapes");
}

void SearchEngine::Impl::make_checkers(const DeviceInfo& hw) {
  SandboxLimits limits;
  limits.max_instructions = config.sandbox.max_instructions;
  limits.max_memory_bytes = config.sandbox.max_memory_bytes;
  std::vector<Shape> train_shapes;
  for (int i : split.train) train_shapes.push_back(workload.shapes[static_cast<std::size_t>(i)]);
  checker = std::make_unique<Checker>(train_shapes, hw, limits, config.cascade.threads);
  full_checker = std::make_unique<Checker>(workload.shapes, hw, limits, config.cascade.threads);
}

// The baseline, on every shape.
void SearchEngine::Impl::measure_baseline() {
  const CheckResult base = full_checker->check_full("baseline " + baseline_name, baseline_source);
  if (!base.ok) throw InputError("the baseline policy " + baseline_name + " fails: " + base.error);
  baseline_decisions = base.decisions;
  report("setup", "measuring the baseline");
  baseline_us = latencies(baseline_decisions, all_shapes(workload.shapes.size()), *measurer);
  for (std::size_t i = 0; i < workload.shapes.size(); ++i)
    if (!std::isfinite(baseline_us[i]))
      throw InputError("the baseline policy " + baseline_name + " cannot be measured on " + describe(workload.shapes[i]));
}

// The oracle: the best decision of a bounded space, per shape, measured like any other.
// Its space always holds the baseline's own decision, so it never loses to it.
std::vector<std::unordered_map<std::uint64_t, double>> SearchEngine::Impl::measure_oracle(const DeviceInfo& hw) {
  oracle_us.clear();
  oracle_decisions.clear();
  if (!config.oracle.enabled) return {};
  const auto& shapes = workload.shapes;
  const std::vector<LatencyRequest> requests = oracle_requests(shapes, hw);
  const std::string what = "measuring the oracle's decision space";
  report("setup", what, 0, requests.size());
  const auto us = measure(*measurer, requests, [&](std::size_t d, std::size_t t) { report("setup", what, d, t); });
  oracle_us = baseline_us;
  oracle_decisions = baseline_decisions;
  std::vector<std::unordered_map<std::uint64_t, double>> table(shapes.size());
  for (std::size_t i = 0; i < shapes.size(); ++i) table[i][decision_code(baseline_decisions[i])] = baseline_us[i];
  for (std::size_t j = 0; j < requests.size(); ++j) {
    const auto i = static_cast<std::size_t>(requests[j].shape);
    if (!std::isfinite(us[j])) continue;
    table[i][decision_code(requests[j].decision)] = us[j];
    if (us[j] < oracle_us[i]) {
      oracle_us[i] = us[j];
      oracle_decisions[i] = requests[j].decision;
    }
  }
  return table;
}

std::vector<LatencyRequest> SearchEngine::Impl::oracle_requests(const std::vector<Shape>& shapes,
                                                                const DeviceInfo& hw) const {
  std::vector<LatencyRequest> requests;
  const std::vector<int> splits = config.oracle.split_values();
  for (std::size_t i = 0; i < shapes.size(); ++i)
    for (int k : splits)
      for (bool pack : config.oracle.pack_gqa)
        for (int margin : config.oracle.sm_margins)
          if (margin < hw.num_sms) requests.push_back({static_cast<int>(i), resolve(Decision{k, pack, margin}, shapes[i])});
  return requests;
}

// The estimate stage, in front of a real device.
void SearchEngine::Impl::make_estimator(const Evaluator& ev) {
  estimator.reset();
  estimate_evaluator.reset();
  std::optional<std::string> profile;
  if (config.cascade.estimate.starts_with("sim:")) profile = config.cascade.estimate.substr(4);
  // The simulator models the built-in kernels: another library's (FA3's) gets no estimate.
  else if (config.cascade.estimate == "auto" && !is_simulator(ev) && !ev.kernel_build().starts_with("fa3:"))
    profile = profile_for(ev.device());
  if (!profile) return;
  estimate_evaluator = std::make_unique<SimulatorEvaluator>(load_sim_profile(*profile), "sim:" + *profile);
  estimator = std::make_unique<Measurer>(*db, std::vector<Evaluator*>{estimate_evaluator.get()}, measurer->timing(),
                                         workload.shapes, run_id);
  estimator->load();
  // The estimate compares like with like: decisions are measured on the estimator's
  // device exactly as the program decided them for the real one.
  estimate_baseline_us = latencies(baseline_decisions, all_shapes(workload.shapes.size()), *estimator);
}

void SearchEngine::Impl::prepare_operators(std::vector<std::unordered_map<std::uint64_t, double>> oracle_table) {
  operators = OperatorContext{};
  operators.max_rules = config.decisions.max_rules;
  operators.max_splits = config.decisions.max_splits;
  operators.sm_margins = config.decisions.sm_margins;
  operators.allowed = config.features;
  operators.device = options.evaluators.front()->device();
  operators.floor = config.fitness.floor;
  for (int i : split.train) {
    const auto k = static_cast<std::size_t>(i);
    operators.train.push_back(features[k]);
    if (oracle_decisions.empty()) continue;
    operators.train_oracle.push_back(oracle_decisions[k]);
    operators.train_baseline_us.push_back(baseline_us[k]);
    operators.train_oracle_us.push_back(oracle_us[k]);
    operators.train_table.push_back(std::move(oracle_table[k]));
  }
  operators.prepare();
}

std::vector<double> SearchEngine::Impl::measure(Measurer& m, std::span<const LatencyRequest> requests,
                                                const std::function<void(std::size_t, std::size_t)>& progress) {
  try {
    return m.latencies(requests, options.stop, progress);
  } catch (const MeasurementStopped&) {
    interrupt();
  }
}

std::vector<double> SearchEngine::Impl::latencies(const std::vector<Decision>& decisions, const std::vector<int>& shapes,
                                                  Measurer& m) {
  std::vector<LatencyRequest> requests;
  requests.reserve(shapes.size());
  for (int i : shapes) requests.push_back({i, decisions[static_cast<std::size_t>(i)]});
  return measure(m, requests);
}

std::vector<LatencyRequest> SearchEngine::Impl::train_requests(const std::vector<Decision>& train_decisions) const {
  std::vector<LatencyRequest> requests;
  requests.reserve(split.train.size());
  for (std::size_t k = 0; k < split.train.size(); ++k) requests.push_back({split.train[k], train_decisions[k]});
  return requests;
}

std::vector<double> SearchEngine::Impl::at(const std::vector<double>& per_shape, const std::vector<int>& shapes) {
  std::vector<double> out;
  if (per_shape.empty()) return out;
  out.reserve(shapes.size());
  for (int s : shapes) out.push_back(per_shape[static_cast<std::size_t>(s)]);
  return out;
}

const Shape& SearchEngine::Impl::shape_at(const std::vector<int>& split_shapes, int position) const {
  return workload.shapes[static_cast<std::size_t>(split_shapes[static_cast<std::size_t>(position)])];
}

// --- state ------------------------------------------------------------------------

nlohmann::json SearchEngine::Impl::state_json() const {
  nlohmann::json isl = nlohmann::json::array();
  for (const auto& i : islands) isl.push_back(to_json(i));
  return {{"version", kStateVersion},
          {"phase", phase},
          {"stop_reason", stop_reason},
          {"rng", to_json(rng)},
          {"step", counters.step},
          {"evaluations", counters.evaluations},
          {"duplicates", counters.duplicates},
          {"failures", counters.failures},
          {"best", counters.best},
          {"since_improvement", counters.since_improvement},
          {"empty_steps", counters.empty_steps},
          {"elapsed_s", counters.elapsed_s},
          {"setup_s", counters.setup_s},
          {"model_fit", model_fit},
          {"islands", isl}};
}

void SearchEngine::Impl::load_state(const nlohmann::json& j) {
  const std::string where = "run " + std::to_string(run_id) + " state";
  JsonReader r(j, where);
  const auto version = r.required_integer("version");
  if (version != kStateVersion)
    throw InputError(where + ": version " + std::to_string(version) + " is not one this build resumes");
  phase = r.required_string("phase");
  stop_reason = r.string("stop_reason").value_or("");
  const auto* g = r.member("rng");
  if (!g) throw InputError(r.path_of("rng") + ": missing");
  rng = rng_from_json(*g, r.path_of("rng"));
  counters.step = r.required_integer("step");
  counters.evaluations = r.required_integer("evaluations");
  counters.duplicates = r.required_integer("duplicates");
  counters.failures = r.required_integer("failures");
  counters.best = r.required_integer("best");
  counters.since_improvement = r.required_integer("since_improvement");
  counters.empty_steps = r.integer("empty_steps").value_or(0);
  counters.elapsed_s = r.number("elapsed_s").value_or(0);
  counters.setup_s = r.number("setup_s").value_or(0);
  const auto* fit = r.member("model_fit");
  model_fit = fit ? *fit : nlohmann::json(nullptr);
  elapsed_before = counters.elapsed_s;
  setup_before = counters.setup_s;
  session_start = std::chrono::steady_clock::now();
  const auto* isl = r.member("islands");
  if (!isl || !isl->is_array()) throw InputError(r.path_of("islands") + ": expected an array");
  islands.clear();
  for (std::size_t i = 0; i < isl->size(); ++i)
    islands.push_back(island_from_json((*isl)[i], r.path_of("islands") + "[" + std::to_string(i) + "]"));
  if (static_cast<int>(islands.size()) != config.islands.count)
    throw InputError(r.path_of("islands") + ": " + std::to_string(islands.size()) + " islands, the config says " +
                     std::to_string(config.islands.count));
  r.finish();
}

void SearchEngine::Impl::save_state() {
  counters.elapsed_s = elapsed();
  counters.setup_s = setup_seconds();
  results::Runs(*db).save_state(run_id, state_json());
}

void SearchEngine::Impl::load_records() {
  records.clear();
  hashes.clear();
  for (const auto& p : results::Programs(*db).list_by_run(run_id)) {
    Record r;
    r.id = p.id;
    r.hash = p.hash;
    r.origin = p.origin;
    r.island = p.island;
    r.generation = p.generation;
    if (!p.rules.is_null()) {
      const auto base = stored_base(p.source, p.base);
      if (!base) throw InputError("program " + std::to_string(p.id) + ": its source has no embedded base policy");
      const Program prog = program_from_json(p.rules, *base, "program " + std::to_string(p.id) + " rules");
      r.has_program = true;
      r.rules = prog.rules;
      r.base_name = prog.base_name;
      r.base_key = intern_base(prog.base_source);
    }
    hashes.insert(r.hash);
    records.emplace(r.id, std::move(r));
  }
  for (const auto& e : results::Evaluations(*db).list_by_run(run_id, results::Split::train)) {
    auto it = records.find(e.program_id);
    if (it == records.end()) continue;
    Record& r = it->second;
    const EvaluationDetails d = evaluation_details_from_json(e.details, "evaluation " + std::to_string(e.id) + " details");
    if (e.stage == "estimate") {
      if (d.score) r.estimate_score = d.score;
      continue;
    }
    if (e.stage != "measured" || !d.score) continue;
    r.scored = true;
    r.feasible = d.feasible.value_or(false);
    r.score = *d.score;
    r.geomean = e.fitness.value_or(0);
    r.worst = e.worst_speedup.value_or(0);
    r.oracle_fraction = e.oracle_fraction;
    r.speedups = d.speedups.value_or(std::vector<double>{});
    r.cell = d.cell.value_or(-1);
  }
}

std::string SearchEngine::Impl::intern_base(const std::string& source) {
  std::string key = content_hash(source);
  bases.try_emplace(key, source);
  return key;
}

std::string SearchEngine::Impl::base_key_for(const Program& child, const Record* parent) {
  if (parent && parent->has_program && bases.at(parent->base_key) == child.base_source) return parent->base_key;
  return content_hash(child.base_source);
}

Program SearchEngine::Impl::program_of(const Record& r) const {
  Program p;
  p.rules = r.rules;
  p.base_name = r.base_name;
  p.base_source = bases.at(r.base_key);
  return p;
}

bool SearchEngine::Impl::is_model(const Record& r) const {
  if (!r.has_program) return false;
  auto it = model_bases.find(r.base_key);
  if (it == model_bases.end()) it = model_bases.emplace(r.base_key, latency_model_of(bases.at(r.base_key)).has_value()).first;
  return it->second;
}

Program SearchEngine::Impl::verified(const Program& p) const {
  if (p.rules.empty()) return p;
  const auto features = config.decisions.verified_boxes ? box_features() : std::vector<Feature>{};
  // A rule's evidence is where it changes the base's decision: the base's decisions on the
  // training shapes come from the checker, which runs each base once.
  std::span<const Decision> base_decisions;
  if (config.decisions.evidence_only)
    if (const CheckResult& base = checker->base(p.base_name, p.base_source); base.ok) base_decisions = base.decisions;
  return verify_boxes(p, operators.train, features, config.decisions.max_splits, config.decisions.min_support,
                      base_decisions, config.decisions.reach_percent);
}

double SearchEngine::Impl::score_of(std::int64_t id) const {
  auto it = records.find(id);
  return it == records.end() ? kFailedScore : it->second.score;
}

const std::vector<double>& SearchEngine::Impl::losses_of(const Record& r) const {
  if (!r.losses.empty() || oracle_us.empty() || r.speedups.size() != split.train.size()) return r.losses;
  r.losses.resize(split.train.size());
  for (std::size_t k = 0; k < split.train.size(); ++k) {
    const auto i = static_cast<std::size_t>(split.train[k]);
    r.losses[k] = std::log(baseline_us[i] / oracle_us[i]) - std::log(r.speedups[k]);
  }
  return r.losses;
}

double SearchEngine::Impl::setup_seconds() const { return setup_before + session_setup_s; }

double SearchEngine::Impl::elapsed() const {
  return elapsed_before + std::chrono::duration<double>(std::chrono::steady_clock::now() - session_start).count();
}

std::optional<std::string> SearchEngine::Impl::stop_condition() const {
  const auto& s = config.stop;
  if (s.max_evaluations > 0 && counters.evaluations >= s.max_evaluations) return "max_evaluations";
  if (s.minutes > 0 && elapsed() >= s.minutes * 60) return "minutes";
  if (s.target_fitness > 0 && counters.best != 0 && records.at(counters.best).geomean >= s.target_fitness)
    return "target_fitness";
  if (s.stagnation_steps > 0 && counters.since_improvement >= s.stagnation_steps) return "stagnation";
  // Every candidate of many steps in a row was a program seen before: the operators
  // cannot reach anything new from here.
  if (counters.empty_steps >= kMaxEmptySteps) return "exhausted";
  return std::nullopt;
}

SearchStatus SearchEngine::Impl::status(const std::string& ph) const {
  SearchStatus s;
  s.phase = ph;
  s.run_id = run_id;
  s.step = counters.step;
  s.evaluations = counters.evaluations;
  s.max_evaluations = config.stop.max_evaluations;
  s.duplicates = counters.duplicates;
  s.failures = counters.failures;
  s.measured = measurer ? measurer->stats().measured : 0;
  s.elapsed_s = elapsed();
  s.minutes = config.stop.minutes;
  if (counters.best != 0) {
    const Record& b = records.at(counters.best);
    s.best_fitness = b.geomean;
    s.best_worst = b.worst;
    s.best_oracle_fraction = b.oracle_fraction;
  }
  return s;
}

void SearchEngine::Impl::report(const std::string& ph, const std::string& message, std::size_t done,
                                std::size_t total) const {
  if (!options.progress) return;
  SearchStatus s = status(ph);
  s.message = message;
  s.done = done;
  s.total = total;
  options.progress(s);
}

void SearchEngine::Impl::interrupt() {
  results::Runs(*db).set_status(run_id, results::RunStatus::interrupted);
  throw SearchInterrupted{run_id};
}

}  // namespace evodispatch::search

// One generation step: candidates from the stored state and the generator, then the
// cascade (sandbox, estimate, measurement), then one transaction with everything.
#include <algorithm>
#include <cmath>
#include <limits>
#include <ctime>
#include <cstdio>
#include <cstdlib>

#include <evodispatch/heuristics/policy.hpp>
#include <evodispatch/results/results.hpp>
#include <evodispatch/search/external_mutator.hpp>
#include <evodispatch/search/hash.hpp>

#include <evodispatch/search/lua_text.hpp>

#include "engine_impl.hpp"

namespace evodispatch::search {

namespace {

constexpr int kAttempts = 8;                   // tries for a new program per candidate slot
constexpr std::size_t kFailedOutputKept = 64 * 1024;  // of a failed mutator's stdout, in its row

nlohmann::json record_json(const Record& r, const std::string& source) {
  nlohmann::json j = {{"id", r.id}, {"source", source}, {"origin", r.origin}};
  if (r.scored) {
    j["fitness"] = r.geomean;
    j["worst_speedup"] = r.worst;
    if (r.oracle_fraction) j["oracle_fraction"] = *r.oracle_fraction;
  }
  return j;
}

}  // namespace

void SearchEngine::Impl::seed_run() {
  rng = Rng(config.seed);
  islands.assign(static_cast<std::size_t>(config.islands.count), Island{});
  counters = Counters{};
  records.clear();
  hashes.clear();
  const auto run = results::Runs(*db).get(run_id);
  const std::string spec = config.seed_policy.empty() ? config.baseline : config.seed_policy;
  const std::string source = run->config.value("seed_source", std::string());
  Candidate c;
  c.program = normalise(base_program(spec, source), config.decisions.max_splits);
  c.base_key = base_key_for(c.program, nullptr);
  c.hash = program_hash(c.program, c.base_key);
  c.origin = "seed";
  std::vector<Candidate> cands;
  cands.push_back(std::move(c));
  if (auto model = model_seed()) cands.push_back(std::move(*model));
  evaluate_and_commit(std::move(cands), Admission::seed);
  const bool seed_scored = std::any_of(records.begin(), records.end(),
                                       [](const auto& r) { return r.second.origin == "seed" && r.second.scored; });
  if (!seed_scored) throw InputError("the seed policy " + spec + " fails the sandbox check; see the run's evaluations");
}

// The model-based family's first program: the latency model fitted to the oracle's
// measurements of the training shapes, as the base of an empty rule list. Packed groups of
// more than 16 rows are left out of the fit, hence out of the model's box (qpk): the
// kernels tile them by 32 or 64 rows after the waves and the split length
// (kernels/src/kernel_spec.cpp), which the model does not see, and on the simulator a model
// fitted on them lost more than the floor on validation in every seed (docs/search.md).
std::optional<Candidate> SearchEngine::Impl::model_seed() {
  model_fit = nullptr;
  if (!config.model.enabled || operators.train_table.empty()) return std::nullopt;
  report("setup", "fitting the latency model to the oracle's measurements");
  LatencySamples samples;
  for (std::size_t k = 0; k < split.train.size(); ++k) {
    const Shape& shape = workload.shapes[static_cast<std::size_t>(split.train[k])];
    if (evodispatch::features(shape).qpk * shape.seqlen_q > 16) continue;
    samples.shapes.push_back(shape);
    samples.us.push_back(operators.train_table[k]);
    samples.baseline_us.push_back(operators.train_baseline_us[k]);
    samples.baseline.push_back(baseline_decisions[static_cast<std::size_t>(split.train[k])]);
    samples.oracle_us.push_back(operators.train_oracle_us[k]);
  }
  if (samples.shapes.empty()) return std::nullopt;
  const DeviceInfo& hw = options.evaluators.front()->device();
  const LatencyModel prior = prior_model(hw, config.oracle.split_values(), config.oracle.pack_gqa, config.oracle.sm_margins);
  const LatencyFit fit = fit_latency_model(samples, hw, prior, fitness_options(), config.seed, config.model.restarts);
  model_fit = to_json(fit);
  Candidate c;
  c.program = normalise(base_program("model", render_lua(fit.model, canonical_lua(baseline_source))),
                        config.decisions.max_splits);
  c.base_key = base_key_for(c.program, nullptr);
  c.hash = program_hash(c.program, c.base_key);
  c.origin = "model";
  return c;
}

bool SearchEngine::Impl::step() {
  if (phase != "search") return false;
  if (auto why = stop_condition()) {
    phase = "final";
    stop_reason = *why;
    db->in_transaction([&] { save_state(); });
    return false;
  }
  if (stop_requested()) interrupt();
  auto cands = generate();
  evaluate_and_commit(std::move(cands), Admission::step);
  report("search");
  return true;
}

std::vector<Candidate> SearchEngine::Impl::generate() {
  std::vector<Candidate> out;
  std::unordered_set<std::string> step_hashes;
  int sequence = 0;
  for (int island = 0; island < static_cast<int>(islands.size()); ++island) {
    for (int b = 0; b < config.islands.batch; ++b) {
      auto c = make_candidate(island, step_hashes, sequence++);
      if (!c) continue;
      step_hashes.insert(c->hash);
      out.push_back(std::move(*c));
    }
  }
  return out;
}

std::int64_t SearchEngine::Impl::select_parent(int island) {
  const Island& isl = islands[static_cast<std::size_t>(island)];
  const auto& sel = config.selection;
  const double u = rng.real() * (sel.elite + sel.exploitation + sel.exploration);
  auto random_elite = [&] {
    auto it = isl.archive.begin();
    std::advance(it, static_cast<long>(rng.below(isl.archive.size())));
    return it->second;
  };
  if (u < sel.elite && isl.best != 0) return isl.best;
  if (u < sel.elite + sel.exploitation && !isl.archive.empty()) {
    std::int64_t best = random_elite();
    for (int t = 1; t < sel.tournament; ++t) {
      const std::int64_t other = random_elite();
      if (score_of(other) > score_of(best) || (score_of(other) == score_of(best) && other < best)) best = other;
    }
    return best;
  }
  if (!isl.recent.empty()) return isl.recent[rng.below(isl.recent.size())];
  if (!isl.archive.empty()) return random_elite();
  return isl.best;
}

std::vector<std::int64_t> SearchEngine::Impl::inspirations(int island, std::int64_t parent) {
  std::vector<std::int64_t> pool;
  for (const auto& [cell, id] : islands[static_cast<std::size_t>(island)].archive)
    if (id != parent && std::find(pool.begin(), pool.end(), id) == pool.end()) pool.push_back(id);
  const std::size_t k = std::min(pool.size(), static_cast<std::size_t>(config.selection.inspirations));
  for (std::size_t i = 0; i < k; ++i) std::swap(pool[i], pool[i + rng.below(pool.size() - i)]);
  pool.resize(k);
  return pool;
}

std::optional<Candidate> SearchEngine::Impl::make_candidate(int island, const std::unordered_set<std::string>& step_hashes,
                                                            int sequence) {
  std::vector<double> weights = operator_weights(config.operators);
  if (config.external.command.empty()) weights[static_cast<int>(OperatorKind::external)] = 0;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    const std::int64_t parent_id = select_parent(island);
    if (parent_id == 0) return std::nullopt;
    const Record& parent = records.at(parent_id);
    if (!parent.has_program) return std::nullopt;
    const auto insp = inspirations(island, parent_id);
    const auto kind = static_cast<OperatorKind>(rng.weighted(weights));
    // A changed script base decides every shape the rules leave, boxed or not: no such
    // mutation when every decision must stay inside what was verified. A latency model
    // is the exception: it is a model of the hardware, fitted to every training shape.
    if (kind == OperatorKind::base_literal && config.decisions.verified_boxes && !is_model(parent)) continue;

    Candidate c;
    c.island = island;
    c.generation = parent.generation + 1;
    c.parents = {parent_id};
    c.origin = std::string(to_string(kind));
    if (kind == OperatorKind::external) {
      c = external_candidate(parent, insp, island, sequence);
      if (!c.failure.empty()) return c;  // a row of its own, never a duplicate
    } else {
      const Program parent_program = program_of(parent);
      std::vector<Program> others;
      std::int64_t other_id = 0;
      if (kind == OperatorKind::crossover && !insp.empty()) {
        other_id = insp[rng.below(insp.size())];
        others.push_back(program_of(records.at(other_id)));
        c.parents.push_back(other_id);
      }
      std::vector<const Program*> other_ptrs;
      for (const auto& o : others) other_ptrs.push_back(&o);
      const auto& losses = losses_of(parent);
      auto child = apply_operator(kind, parent_program, other_ptrs, losses, operators, rng);
      if (!child) continue;
      c.program = verified(*child);
    }
    c.base_key = base_key_for(c.program, &parent);
    c.hash = program_hash(c.program, c.base_key);
    if (hashes.count(c.hash) || step_hashes.count(c.hash)) {
      ++counters.duplicates;
      continue;
    }
    return c;
  }
  return std::nullopt;
}

Candidate SearchEngine::Impl::external_candidate(const Record& parent, const std::vector<std::int64_t>& insp, int island,
                                                 int sequence) {
  const Program parent_program = program_of(parent);
  nlohmann::json request = {
      {"contract", "Write one Lua dispatch script (DESIGN.md section 2) on stdout: function dispatch(s, hw) returning "
                   "{num_splits=, pack_gqa=, sm_margin=}."},
      {"device", to_json(checker->device())},
      {"baseline", baseline_name},
      {"parent", record_json(parent, render_lua(parent_program))},
  };
  request["parent"]["rules"] = to_json(parent_program);
  request["inspirations"] = nlohmann::json::array();
  for (std::int64_t id : insp) {
    const Record& r = records.at(id);
    request["inspirations"].push_back(record_json(r, render_lua(program_of(r))));
  }
  // Per training shape: where the parent stands and what the oracle reached.
  const auto losses = losses_of(parent);
  request["shapes"] = nlohmann::json::array();
  for (std::size_t k = 0; k < split.train.size(); ++k) {
    const auto i = static_cast<std::size_t>(split.train[k]);
    nlohmann::json row = {{"shape", to_json(workload.shapes[i])},
                          {"baseline_decision", to_json(baseline_decisions[i])},
                          {"baseline_us", baseline_us[i]}};
    if (k < parent.speedups.size()) row["speedup"] = parent.speedups[k];
    if (!oracle_us.empty()) {
      row["oracle_speedup"] = baseline_us[i] / oracle_us[i];
      row["oracle_decision"] = to_json(oracle_decisions[i]);
    }
    if (!losses.empty()) row["loss"] = losses[k];
    request["shapes"].push_back(row);
  }

  const auto timeout = std::chrono::milliseconds(static_cast<long long>(config.external.timeout_s * 1000));
  const ExternalResult res =
      run_external_mutator(config.external.command, request.dump() + "\n", timeout, config.external.max_output_bytes);
  Candidate c;
  c.island = island;
  c.generation = parent.generation + 1;
  c.parents = {parent.id};
  c.parents.insert(c.parents.end(), insp.begin(), insp.end());
  c.origin = "external";
  if (!res.ok) {
    c.failure = res.error;
    c.failed_source = "-- external mutator failed at step " + std::to_string(counters.step) + ", island " +
                      std::to_string(island) + ", candidate " + std::to_string(sequence) + ": " + res.error + "\n" +
                      res.output.substr(0, kFailedOutputKept);
    c.hash = content_hash(c.failed_source);
    return c;
  }
  c.program = normalise(base_program("external", res.output), config.decisions.max_splits);
  return c;
}

void SearchEngine::Impl::evaluate_and_commit(std::vector<Candidate> cands, Admission admission) {
  std::vector<Outcome> outcomes(cands.size());
  std::vector<std::size_t> alive = sandbox(cands, outcomes);
  if (estimator) alive = estimate(cands, outcomes, std::move(alive), admission);
  measure_training(outcomes, alive);

  // One transaction: programs, evaluations, islands, counters, generator state.
  db->in_transaction([&] {
    bool improved = false;
    std::int64_t added = 0;
    for (std::size_t i = 0; i < cands.size(); ++i) {
      const std::int64_t id = commit(cands[i], outcomes[i], admission);
      if (id == 0) continue;  // cannot happen: hashes are checked against the run's
      ++added;
      offer(id, cands[i].island, admission, improved);
    }
    if (admission == Admission::step) end_step(improved, added);
    save_state();
  });
}

// The sandbox, on every training shape (decisions come back in split.train order).
std::vector<std::size_t> SearchEngine::Impl::sandbox(const std::vector<Candidate>& cands, std::vector<Outcome>& outcomes) {
  std::vector<const Program*> to_check;
  std::vector<std::size_t> checked_index;
  for (std::size_t i = 0; i < cands.size(); ++i) {
    if (!cands[i].failure.empty()) {
      outcomes[i].stage = "sandbox";
      outcomes[i].error = "external mutator: " + cands[i].failure;
      continue;
    }
    to_check.push_back(&cands[i].program);
    checked_index.push_back(i);
  }
  const auto checks = checker->check(to_check);
  std::vector<std::size_t> alive;
  for (std::size_t k = 0; k < checks.size(); ++k) {
    Outcome& o = outcomes[checked_index[k]];
    if (!checks[k].ok) {
      o.stage = "sandbox";
      o.error = checks[k].error;
      continue;
    }
    o.decisions = checks[k].decisions;
    alive.push_back(checked_index[k]);
  }
  return alive;
}

// The estimate, when the device is a GPU: only candidates that look as good as the
// island's best go on to be measured there (the seed and repaired programs always do).
std::vector<std::size_t> SearchEngine::Impl::estimate(const std::vector<Candidate>& cands, std::vector<Outcome>& outcomes,
                                                      std::vector<std::size_t> alive, Admission admission) {
  const std::vector<double> base_us = at(estimate_baseline_us, split.train);
  std::vector<std::size_t> kept;
  for (std::size_t i : alive) {
    Outcome& o = outcomes[i];
    o.estimate = score_latencies(base_us, measure(*estimator, train_requests(o.decisions)), {}, fitness_options());
    const Island& isl = islands[static_cast<std::size_t>(cands[i].island)];
    std::optional<double> reference;
    if (isl.best != 0) reference = records.at(isl.best).estimate_score;
    if (admission == Admission::step && reference && o.estimate->score < *reference - config.cascade.estimate_slack) {
      o.stage = "estimate";
      o.error = "estimated score " + std::to_string(o.estimate->score) + " is below the island's best estimate " +
                std::to_string(*reference) + " by more than " + std::to_string(config.cascade.estimate_slack);
      continue;
    }
    kept.push_back(i);
  }
  return kept;
}

// Measurement on the training shapes (the store answers what it already has).
void SearchEngine::Impl::measure_training(std::vector<Outcome>& outcomes, const std::vector<std::size_t>& alive) {
  std::vector<LatencyRequest> requests;
  for (std::size_t i : alive) {
    const auto mine = train_requests(outcomes[i].decisions);
    requests.insert(requests.end(), mine.begin(), mine.end());
  }
  const std::vector<double> us = measure(*measurer, requests);
  const std::vector<double> base_train = at(baseline_us, split.train), oracle_train = at(oracle_us, split.train);
  const std::size_t n = split.train.size();
  for (std::size_t a = 0; a < alive.size(); ++a) {
    const std::span<const double> prog(us.data() + a * n, n);
    outcomes[alive[a]].fitness = score_latencies(base_train, prog, oracle_train, fitness_options());
  }
}

std::int64_t SearchEngine::Impl::commit(const Candidate& c, const Outcome& o, Admission admission) {
  const auto ins = results::Programs(*db).insert(program_row(c));
  if (!ins.inserted) return 0;
  Record rec = record_of(c, ins.id);
  results::Evaluations evaluations(*db);
  if (o.estimate) {
    rec.estimate_score = o.estimate->score;
    auto e = train_row(rec.id, "estimate");
    e.ok = o.stage != "estimate";
    e.error = o.stage == "estimate" ? o.error : o.estimate->error;
    set_figures(e, *o.estimate);
    EvaluationDetails d;
    d.score = o.estimate->score;
    d.device = estimate_evaluator->fingerprint();
    d.repair = admission == Admission::repair;
    e.details = to_json(d);
    evaluations.insert(e);
  }
  if (o.stage == "sandbox") {
    auto e = train_row(rec.id, "sandbox");
    e.error = o.error;
    evaluations.insert(e);
    ++counters.failures;
  } else if (o.fitness) {
    evaluations.insert(score(rec, *o.fitness, admission));
  }
  hashes.insert(rec.hash);
  records.emplace(rec.id, std::move(rec));
  ++counters.evaluations;
  return ins.id;
}

results::ProgramRecord SearchEngine::Impl::program_row(const Candidate& c) const {
  results::ProgramRecord pr;
  pr.run_id = run_id;
  pr.hash = c.hash;
  pr.parents = c.parents;
  pr.origin = c.origin;
  pr.island = c.island;
  pr.generation = c.generation;
  pr.step = counters.step;
  if (c.failure.empty()) {
    set_program(pr, c.program);
  } else {
    pr.source = c.failed_source;
    pr.rules = nullptr;
  }
  return pr;
}

Record SearchEngine::Impl::record_of(const Candidate& c, std::int64_t id) {
  Record rec;
  rec.id = id;
  rec.hash = c.hash;
  rec.origin = c.origin;
  rec.island = c.island;
  rec.generation = c.generation;
  if (c.failure.empty()) {
    rec.has_program = true;
    rec.rules = c.program.rules;
    rec.base_name = c.program.base_name;
    rec.base_key = c.base_key;
    bases.try_emplace(c.base_key, c.program.base_source);
  }
  return rec;
}

results::EvaluationRecord SearchEngine::Impl::train_row(std::int64_t program, const std::string& stage) const {
  results::EvaluationRecord e;
  e.program_id = program;
  e.split = results::Split::train;
  e.stage = stage;
  e.shapes = static_cast<int>(split.train.size());
  return e;
}

// The training score on the record, its MAP-Elites cell (a repaired program joins no
// archive), and the evaluation row that stores both.
results::EvaluationRecord SearchEngine::Impl::score(Record& rec, const Fitness& f, Admission admission) const {
  rec.scored = true;
  rec.feasible = f.feasible;
  rec.score = f.score;
  rec.geomean = f.geomean;
  rec.worst = f.worst;
  rec.oracle_fraction = f.oracle_fraction;
  rec.speedups = f.speedups;
  EvaluationDetails d = scored_details(f, split.train);
  if (admission != Admission::repair) {
    d.region = f.ok ? cells->region_of_program(f.speedups, train_regions) : cells->regions();
    if (f.ok) rec.cell = cells->cell(static_cast<int>(rec.rules.size()), *d.region);
  }
  d.cell = rec.cell;
  d.below_floor = f.below_floor;
  auto e = train_row(rec.id, "measured");
  e.ok = f.feasible;
  e.error = f.error;
  set_figures(e, f);
  e.details = to_json(d);
  return e;
}

EvaluationDetails SearchEngine::Impl::scored_details(const Fitness& f, const std::vector<int>& split_shapes) const {
  EvaluationDetails d;
  d.score = f.score;
  d.feasible = f.feasible;
  d.speedups = f.speedups;
  if (f.ok) d.worst_shape = shape_at(split_shapes, f.worst_index);
  return d;
}

void set_figures(results::EvaluationRecord& e, const Fitness& f) {
  if (!f.ok) return;
  e.fitness = f.geomean;
  e.worst_speedup = f.worst;
  e.oracle_fraction = f.oracle_fraction;
}

// A scored program with a cell enters its island's archive (the seed: every island's),
// and the run's best when it is feasible and better.
void SearchEngine::Impl::offer(std::int64_t id, int island, Admission admission, bool& improved) {
  const Record& r = records.at(id);
  if (!r.scored || r.cell < 0) return;
  const ScoreOf score = [this](std::int64_t p) { return score_of(p); };
  auto join = [&](Island& isl) {
    search::offer(isl, r.cell, id, score);
    remember(isl, id, config.islands.recent);
  };
  if (admission == Admission::seed) {
    for (std::size_t i = 0; i < islands.size(); ++i)
      if (seed_joins(r, i)) join(islands[i]);
  } else {
    join(islands[static_cast<std::size_t>(island)]);
  }
  if (r.feasible && (counters.best == 0 || score_of(id) > score_of(counters.best))) {
    counters.best = id;
    improved = true;
  }
}

// With both families seeded, the even islands start from the seed and the odd ones from
// the model, so neither crowds the other out of its archive before the search has begun.
bool SearchEngine::Impl::seed_joins(const Record& r, std::size_t island) const {
  if (model_fit.is_null() || islands.size() < 2) return true;
  return (island % 2 == 1) == (r.origin == "model");
}

void SearchEngine::Impl::end_step(bool improved, std::int64_t added) {
  ++counters.step;
  counters.since_improvement = improved ? 0 : counters.since_improvement + 1;
  counters.empty_steps = added == 0 ? counters.empty_steps + 1 : 0;
  const int every = config.islands.migration_interval;
  if (every > 0 && counters.step % every == 0)
    migrate(
        islands, config.islands.migration_count, [this](std::int64_t p) { return records.at(p).cell; },
        [this](std::int64_t p) { return score_of(p); });
}

}  // namespace evodispatch::search

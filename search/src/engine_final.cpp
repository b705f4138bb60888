// The final phase: the best training programs are checked end to end in the sandbox,
// scored on the validation split (which picks the winner, so the search cannot win by
// memorising its training shapes), and the top ones confirmed by interleaved
// re-measurement against the baseline before one is declared the winner. Every result
// is a stored row, so a killed final phase resumes where it stopped.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <evodispatch/results/results.hpp>
#include <evodispatch/search/hash.hpp>

#include "engine_impl.hpp"

namespace evodispatch::search {

namespace {

struct Finalist {
  std::int64_t id = 0;
  bool ok = false;  // checked end to end and measured on the validation shapes
  std::string error;
  double score = kFailedScore;  // on validation
  double geomean = 0, worst = 0;
  bool feasible = false;
  std::optional<double> oracle_fraction;
  nlohmann::json worst_shape;
  std::optional<bool> confirmed;  // unset: not confirmed (not in the top)
  double confirmed_geomean = 0, confirmed_worst = 0;
  nlohmann::json confirmed_worst_shape;
  int compared = 0;
  int changed = 0;  // workload shapes where it decides differently from the baseline
  std::vector<int> under_floor;  // shapes its confirmation measured under the floor
  std::optional<std::int64_t> refuted_by;  // skipped: a confirmed finalist failed its decision
};

nlohmann::json split_figures(double geomean, double worst, const nlohmann::json& worst_shape,
                             const std::optional<double>& oracle_fraction, std::size_t shapes) {
  nlohmann::json j = {{"geomean", geomean}, {"worst", worst}, {"worst_shape", worst_shape}, {"shapes", shapes}};
  j["oracle_fraction"] = oracle_fraction ? nlohmann::json(*oracle_fraction) : nlohmann::json(nullptr);
  return j;
}

}  // namespace

// The programs the validation split chooses among: the best `final.candidates` training
// programs, counting programs that decide alike on every training shape once (they are
// the same choice as far as the search could tell), and with `final.elites` every
// feasible elite of every island's MAP-Elites archive: the best program per (rule count,
// region) cell, the simpler ones among them being those whose rules generalise best to
// shapes the search never saw. Ordered by training score (then id): deterministic.
std::vector<std::int64_t> SearchEngine::Impl::finalists() const {
  auto usable = [&](std::int64_t id) {
    auto it = records.find(id);
    // Feasible, and no worse than the baseline on the training shapes: a program that
    // loses there has nothing the validation split could confirm.
    return it != records.end() && it->second.scored && it->second.feasible && it->second.has_program &&
           it->second.geomean >= 1.0 && it->second.origin != "repair";
  };
  auto by_score = [&](std::int64_t a, std::int64_t b) {
    const double sa = score_of(a), sb = score_of(b);
    return sa != sb ? sa > sb : a < b;
  };
  std::vector<std::int64_t> all;
  for (const auto& [id, r] : records)
    if (usable(id)) all.push_back(id);
  std::sort(all.begin(), all.end(), by_score);
  std::vector<std::int64_t> ids;
  std::set<std::vector<double>> seen;  // training speedups of the programs taken
  for (std::int64_t id : all) {
    if (static_cast<int>(ids.size()) >= config.final.candidates) break;
    if (seen.insert(records.at(id).speedups).second) ids.push_back(id);
  }
  if (config.final.elites) {
    std::set<std::int64_t> elites;
    for (const auto& isl : islands)
      for (const auto& [cell, id] : isl.archive)
        if (usable(id)) elites.insert(id);
    std::vector<std::int64_t> sorted(elites.begin(), elites.end());
    std::sort(sorted.begin(), sorted.end(), by_score);
    for (std::int64_t id : sorted)
      if (seen.insert(records.at(id).speedups).second) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end(), by_score);
  return ids;
}

nlohmann::json SearchEngine::Impl::finish() {
  if (phase == "done") {
    const auto run = results::Runs(*db).get(run_id);
    return run ? run->summary : nlohmann::json::object();
  }
  if (phase == "search") {
    phase = "final";
    if (stop_reason.empty()) stop_reason = "requested";
    db->in_transaction([&] { save_state(); });
  }
  results::Evaluations evaluations(*db);
  const auto& shapes = workload.shapes;

  // Validation: every finalist checked end to end, then scored on the held-out shapes.
  std::vector<double> base_val, oracle_val;
  for (int s : split.validation) {
    base_val.push_back(baseline_us[static_cast<std::size_t>(s)]);
    if (!oracle_us.empty()) oracle_val.push_back(oracle_us[static_cast<std::size_t>(s)]);
  }
  std::vector<Finalist> fins;
  std::unordered_map<std::int64_t, std::vector<Decision>> decisions_of;
  auto validate = [&](std::int64_t id) {
    Finalist f;
    f.id = id;
    const Program p = program_of(records.at(f.id));
    const CheckResult check = full_checker->check_one(p);
    decisions_of[f.id] = check.decisions;
    for (std::size_t s = 0; s < check.decisions.size() && s < baseline_decisions.size(); ++s)
      f.changed += check.decisions[s] == baseline_decisions[s] ? 0 : 1;
    if (auto e = evaluations.find(f.id, results::Split::validation, "measured")) {
      f.ok = e->fitness.has_value();
      f.error = e->error;
      f.feasible = e->ok;
      f.geomean = e->fitness.value_or(0);
      f.worst = e->worst_speedup.value_or(0);
      f.oracle_fraction = e->oracle_fraction;
      f.score = e->details.value("score", kFailedScore);
      f.worst_shape = e->details.value("worst_shape", nlohmann::json(nullptr));
      return f;
    }
    results::EvaluationRecord e;
    e.program_id = f.id;
    e.split = results::Split::validation;
    e.stage = "measured";
    e.shapes = static_cast<int>(split.validation.size());
    const CheckResult full = full_checker->check_full("program " + std::to_string(f.id), render_lua(p));
    if (!full.ok) {
      f.error = "full sandbox check: " + full.error;
    } else if (!check.ok || full.decisions != check.decisions) {
      f.error = "the full program decides differently from its checked rules";
    } else {
      const auto us = latencies(check.decisions, split.validation, *measurer);
      const Fitness fit = score_latencies(base_val, us, oracle_val, fitness_options());
      f.ok = fit.ok;
      f.error = fit.error;
      f.feasible = fit.feasible;
      f.score = fit.score;
      f.geomean = fit.geomean;
      f.worst = fit.worst;
      f.oracle_fraction = fit.oracle_fraction;
      if (fit.ok) {
        f.worst_shape = to_json(shapes[static_cast<std::size_t>(split.validation[fit.worst_index])]);
        e.fitness = fit.geomean;
        e.worst_speedup = fit.worst;
        e.oracle_fraction = fit.oracle_fraction;
      }
      e.details = {{"score", fit.score}, {"feasible", fit.feasible}, {"speedups", fit.speedups},
                   {"worst_shape", f.worst_shape}};
    }
    e.ok = f.ok && f.feasible;
    e.error = f.error;
    db->in_transaction([&] { evaluations.insert(e); });
    return f;
  };
  const auto ids = finalists();
  for (std::size_t k = 0; k < ids.size(); ++k) {
    if (stop_requested()) interrupt();
    report("validation", "", k, ids.size());
    fins.push_back(validate(ids[k]));
  }

  // Repair: the best training programs that put a validation shape under the floor lose
  // the rules that decided those shapes (a rule fitted to training points that reaches
  // an unseen shape it should not), until none is under the floor; what is left is a new
  // program, scored on the training shapes like any other (stored with origin "repair")
  // and validated. Deterministic, so a resumed final phase derives the same programs and
  // finds them stored. The validation split chose which rules to drop: the repaired
  // program's validation figures are a selection, like the choice among the finalists.
  const std::size_t validated = fins.size();
  int repairs = 0;
  for (std::size_t k = 0; k < validated && repairs < config.final.repair; ++k) {
    if (!fins[k].ok || fins[k].feasible) continue;
    ++repairs;
    if (stop_requested()) interrupt();
    report("validation", "repairing", static_cast<std::size_t>(repairs - 1), static_cast<std::size_t>(config.final.repair));
    const std::int64_t parent = fins[k].id;
    const auto repaired = repair(program_of(records.at(parent)));
    if (!repaired) continue;
    const std::int64_t id = store_repaired(*repaired, parent);
    if (id == 0) continue;
    const Record& r = records.at(id);
    if (!r.feasible || r.geomean < 1.0) continue;
    if (std::any_of(fins.begin(), fins.end(), [&](const Finalist& f) { return f.id == id; })) continue;
    fins.push_back(validate(id));
  }

  // Rank: feasible on validation first, then the validation score, then the program that
  // changes fewer shapes (less to go wrong on shapes nobody measured), then training.
  std::vector<std::size_t> order(fins.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const Finalist &x = fins[a], &y = fins[b];
    const bool fx = x.ok && x.feasible, fy = y.ok && y.feasible;
    if (fx != fy) return fx;
    if (x.score != y.score) return x.score > y.score;
    if (x.changed != y.changed) return x.changed < y.changed;
    return false;  // stable: the training order decides
  });

  // Confirmation: the best validated programs against the baseline, interleaved, on
  // every shape where they decide differently (elsewhere they run the same kernel),
  // through Evaluator::compare (interleaved replays on a GPU; on the simulator, whose
  // rows are exact, the ratio of two measurements).
  // A (shape, decision) that a confirmation measured under the floor refutes every later
  // finalist making that decision there: it is skipped, and the next one confirmed (the
  // top finalists are often one lineage sharing one weak decision).
  std::map<std::pair<int, std::uint64_t>, std::int64_t> refuted_by;
  auto refuter = [&](const Finalist& f) -> std::optional<std::int64_t> {
    const auto& decisions = decisions_of.at(f.id);
    for (std::size_t s = 0; s < shapes.size(); ++s) {
      if (decisions[s] == baseline_decisions[s]) continue;
      auto it = refuted_by.find({static_cast<int>(s), decision_code(decisions[s])});
      if (it != refuted_by.end()) return it->second;
    }
    return std::nullopt;
  };
  auto refute = [&](const Finalist& f) {
    for (int s : f.under_floor)
      refuted_by.emplace(std::pair{s, decision_code(decisions_of.at(f.id)[static_cast<std::size_t>(s)])}, f.id);
  };
  int confirmed_count = 0;
  for (std::size_t rank = 0; rank < order.size() && confirmed_count < config.final.confirm_top; ++rank) {
    Finalist& f = fins[order[rank]];
    if (!(f.ok && f.feasible)) break;
    if ((f.refuted_by = refuter(f))) continue;
    ++confirmed_count;
    if (stop_requested()) interrupt();
    report("confirmation", "", static_cast<std::size_t>(confirmed_count - 1),
           static_cast<std::size_t>(config.final.confirm_top));
    if (auto e = evaluations.find(f.id, results::Split::validation, "confirmed")) {
      f.confirmed = e->ok;
      f.confirmed_geomean = e->fitness.value_or(0);
      f.confirmed_worst = e->worst_speedup.value_or(0);
      f.confirmed_worst_shape = e->details.value("worst_shape", nlohmann::json(nullptr));
      f.compared = e->details.value("compared", 0);
      f.under_floor = e->details.value("under_floor", std::vector<int>{});
      refute(f);
      continue;
    }
    const auto& decisions = decisions_of.at(f.id);
    std::vector<double> speedup(shapes.size(), 1.0);
    std::vector<results::ComparisonRecord> rows;
    bool all_ok = true;
    for (std::size_t s = 0; s < shapes.size(); ++s) {
      if (decisions[s] == baseline_decisions[s]) continue;
      Evaluator& ev = *options.evaluators[rows.size() % options.evaluators.size()];
      // compare(a = baseline, b = candidate): its ratio time(a) / time(b) is the speedup.
      Comparison cmp;
      try {
        cmp = ev.compare(shapes[s], baseline_decisions[s], decisions[s], measurer->timing(), config.final.confirm_pairs);
      } catch (const std::exception& ex) {
        cmp.ok = false;
        cmp.error = std::string("the evaluator failed: ") + ex.what();
      }
      results::ComparisonRecord c;
      c.run_id = run_id;
      c.program_id = f.id;
      c.shape = shapes[s];
      c.device = ev.fingerprint();
      c.kernel_build = ev.kernel_build();
      c.l2 = measurer->timing().l2;
      c.candidate = decisions[s];
      c.baseline = baseline_decisions[s];
      c.ok = cmp.ok && cmp.ratio > 0;
      c.error = cmp.ok ? (cmp.ratio > 0 ? "" : "a ratio of 0") : cmp.error;
      c.pairs = cmp.pairs;
      if (c.ok) {
        c.baseline_us = cmp.a.median_us;
        c.candidate_us = cmp.b.median_us;
        c.speedup = cmp.ratio;
        c.speedup_lo = cmp.ratio_lo;
        c.speedup_hi = cmp.ratio_hi;
        speedup[s] = c.speedup;
      } else {
        all_ok = false;
        speedup[s] = 0;
      }
      const bool validation = std::binary_search(split.validation.begin(), split.validation.end(), static_cast<int>(s));
      c.details = {{"split", validation ? "validation" : "train"}};
      rows.push_back(std::move(c));
    }
    // The confirmed figures: validation shapes for the geomean, every shape for the floor.
    double log_sum = 0;
    f.confirmed_worst = 0;
    int worst_at = -1, below = 0;
    for (int s : split.validation) {
      const double v = speedup[static_cast<std::size_t>(s)];
      log_sum += v > 0 ? std::log(v) : -1e9;
      if (worst_at < 0 || v < f.confirmed_worst) {
        f.confirmed_worst = v;
        worst_at = s;
      }
    }
    f.under_floor.clear();
    for (std::size_t s = 0; s < shapes.size(); ++s) {
      if (speedup[s] >= config.fitness.floor) continue;
      ++below;  // a failed re-measurement (0) counts, but refutes no decision
      if (speedup[s] > 0) f.under_floor.push_back(static_cast<int>(s));
    }
    f.confirmed_geomean = std::exp(log_sum / static_cast<double>(split.validation.size()));
    f.confirmed_worst_shape = worst_at >= 0 ? to_json(shapes[static_cast<std::size_t>(worst_at)]) : nlohmann::json(nullptr);
    f.compared = static_cast<int>(rows.size());
    f.confirmed = all_ok && below == 0;
    results::EvaluationRecord e;
    e.program_id = f.id;
    e.split = results::Split::validation;
    e.stage = "confirmed";
    e.shapes = static_cast<int>(split.validation.size());
    e.ok = *f.confirmed;
    if (!all_ok) e.error = "a re-measurement failed";
    else if (below) e.error = std::to_string(below) + " shape(s) under the floor when re-measured";
    e.fitness = f.confirmed_geomean;
    e.worst_speedup = f.confirmed_worst;
    e.details = {{"compared", f.compared}, {"worst_shape", f.confirmed_worst_shape}, {"below_floor", below},
                 {"under_floor", f.under_floor}, {"pairs", config.final.confirm_pairs}};
    refute(f);
    db->in_transaction([&] {
      results::Comparisons comparisons(*db);
      for (const auto& row : rows) comparisons.insert(row);
      evaluations.insert(e);
    });
  }

  // The winner: the best confirmed program (by its confirmed validation speedup), or
  // without confirmation the best validated one.
  std::optional<std::size_t> winner;
  for (std::size_t rank = 0; rank < order.size(); ++rank) {
    const Finalist& f = fins[order[rank]];
    if (!(f.ok && f.feasible)) break;
    if (config.final.confirm_top == 0) {
      winner = order[rank];
      break;
    }
    if (!f.confirmed || !*f.confirmed) continue;
    if (!winner || f.confirmed_geomean > fins[*winner].confirmed_geomean) winner = order[rank];
  }

  nlohmann::json fin_json = nlohmann::json::array();
  for (std::size_t rank = 0; rank < order.size(); ++rank) {
    const Finalist& f = fins[order[rank]];
    const Record& r = records.at(f.id);
    nlohmann::json j = {{"program_id", f.id}, {"rules", static_cast<int>(r.rules.size())}, {"changed_shapes", f.changed},
                        {"train_geomean", r.geomean}, {"train_worst", r.worst}};
    if (f.ok) {
      j["validation_geomean"] = f.geomean;
      j["validation_worst"] = f.worst;
      j["validation_feasible"] = f.feasible;
    } else {
      j["error"] = f.error;
    }
    if (f.confirmed) {
      j["confirmed"] = *f.confirmed;
      j["confirmed_geomean"] = f.confirmed_geomean;
      j["confirmed_worst"] = f.confirmed_worst;
      if (!f.under_floor.empty()) {
        j["under_floor"] = nlohmann::json::array();
        for (int s : f.under_floor) j["under_floor"].push_back(to_json(shapes[static_cast<std::size_t>(s)]));
      }
    }
    if (f.refuted_by) j["refuted_by"] = *f.refuted_by;
    fin_json.push_back(j);
  }

  nlohmann::json result = summary(winner ? std::optional<std::int64_t>(fins[*winner].id) : std::nullopt, fin_json);
  if (winner) {
    const Finalist& f = fins[*winner];
    auto& w = result["winner"];
    w["validation"] = split_figures(f.geomean, f.worst, f.worst_shape, f.oracle_fraction, split.validation.size());
    if (f.confirmed)
      w["confirmed"] = {{"geomean", f.confirmed_geomean}, {"worst", f.confirmed_worst},
                        {"worst_shape", f.confirmed_worst_shape}, {"shapes_compared", f.compared},
                        {"pairs", config.final.confirm_pairs}};
  }
  phase = "done";
  db->in_transaction([&] {
    save_state();
    results::Runs(*db).finish(run_id, results::RunStatus::finished, result);
  });
  report("done");
  return result;
}

std::optional<Program> SearchEngine::Impl::repair(Program p) {
  const std::size_t rounds = p.rules.size();
  for (std::size_t round = 0; round <= rounds; ++round) {
    const CheckResult check = full_checker->check_one(p);
    if (!check.ok) return std::nullopt;
    const auto us = latencies(check.decisions, split.validation, *measurer);
    std::set<std::size_t> drop;
    for (std::size_t k = 0; k < split.validation.size(); ++k) {
      const auto s = static_cast<std::size_t>(split.validation[k]);
      if (baseline_us[s] / us[k] >= config.fitness.floor) continue;  // NaN: under
      std::size_t i = 0;
      while (i < p.rules.size() && !holds(p.rules[i], features[s])) ++i;
      if (i == p.rules.size()) return std::nullopt;  // the base decided it: no rule to drop
      drop.insert(i);
    }
    if (drop.empty()) return round == 0 ? std::nullopt : std::optional<Program>(p);
    for (auto it = drop.rbegin(); it != drop.rend(); ++it) p.rules.erase(p.rules.begin() + static_cast<long>(*it));
    p = normalise(p, config.decisions.max_splits);
  }
  return std::nullopt;
}

std::int64_t SearchEngine::Impl::store_repaired(const Program& p, std::int64_t parent_id) {
  const Record& parent = records.at(parent_id);
  const std::string key = base_key_for(p, &parent);
  const std::string hash = program_hash(p, key);
  if (hashes.count(hash)) {
    for (const auto& [id, r] : records)
      if (r.hash == hash) return r.scored ? id : 0;
    return 0;
  }
  const CheckResult check = checker->check_one(p);  // split.train order
  if (!check.ok) return 0;
  std::vector<LatencyRequest> requests;
  std::vector<double> base_train, oracle_train;
  for (std::size_t k = 0; k < split.train.size(); ++k) {
    const auto s = static_cast<std::size_t>(split.train[k]);
    requests.push_back({split.train[k], check.decisions[k]});
    base_train.push_back(baseline_us[s]);
    if (!oracle_us.empty()) oracle_train.push_back(oracle_us[s]);
  }
  std::vector<double> us;
  try {
    us = measurer->latencies(requests, options.stop);
  } catch (const Measurer::Stopped&) {
    interrupt();
  }
  const Fitness f = score_latencies(base_train, us, oracle_train, fitness_options());
  // With an estimate stage, its row too (a repaired program is measured whatever it
  // estimates: there are few of them), so every measured program has one.
  std::optional<Fitness> estimate;
  if (estimator) {
    std::vector<double> est_base;
    for (int s : split.train) est_base.push_back(estimate_baseline_us[static_cast<std::size_t>(s)]);
    std::vector<double> est_us;
    try {
      est_us = estimator->latencies(requests, options.stop);
    } catch (const Measurer::Stopped&) {
      interrupt();
    }
    estimate = score_latencies(est_base, est_us, {}, fitness_options());
  }

  Record rec;
  rec.hash = hash;
  rec.has_program = true;
  rec.rules = p.rules;
  rec.base_name = p.base_name;
  rec.base_key = key;
  rec.origin = "repair";
  rec.island = parent.island;
  rec.generation = parent.generation + 1;
  rec.scored = true;
  rec.feasible = f.feasible;
  rec.score = f.score;
  rec.geomean = f.geomean;
  rec.worst = f.worst;
  rec.oracle_fraction = f.oracle_fraction;
  rec.speedups = f.speedups;
  if (estimate) rec.estimate_score = estimate->score;
  db->in_transaction([&] {
    results::ProgramRecord pr;
    pr.run_id = run_id;
    pr.hash = hash;
    pr.parents = {parent_id};
    pr.origin = rec.origin;
    pr.island = rec.island;
    pr.generation = rec.generation;
    set_program(pr, p);
    rec.id = results::Programs(*db).insert(pr).id;
    results::EvaluationRecord e;
    e.program_id = rec.id;
    e.split = results::Split::train;
    e.stage = "measured";
    e.shapes = static_cast<int>(split.train.size());
    e.ok = f.feasible;
    e.error = f.error;
    if (f.ok) {
      e.fitness = f.geomean;
      e.worst_speedup = f.worst;
      e.oracle_fraction = f.oracle_fraction;
    }
    e.details = {{"score", f.score}, {"feasible", f.feasible}, {"cell", -1}, {"below_floor", f.below_floor},
                 {"speedups", f.speedups}};
    if (f.ok) e.details["worst_shape"] = to_json(workload.shapes[static_cast<std::size_t>(split.train[f.worst_index])]);
    results::Evaluations(*db).insert(e);
    if (estimate) {
      results::EvaluationRecord x;
      x.program_id = rec.id;
      x.split = results::Split::train;
      x.stage = "estimate";
      x.shapes = static_cast<int>(split.train.size());
      x.ok = true;
      x.error = estimate->error;
      if (estimate->ok) {
        x.fitness = estimate->geomean;
        x.worst_speedup = estimate->worst;
      }
      x.details = {{"score", estimate->score}, {"device", estimate_evaluator->fingerprint()}, {"repair", true}};
      results::Evaluations(*db).insert(x);
    }
    ++counters.evaluations;
    save_state();
  });
  bases.try_emplace(key, p.base_source);
  hashes.insert(hash);
  const std::int64_t id = rec.id;
  records.emplace(id, std::move(rec));
  return id;
}

nlohmann::json SearchEngine::Impl::summary(std::optional<std::int64_t> winner, const nlohmann::json& finalists_json) const {
  auto oracle_geomean = [&](const std::vector<int>& idx) -> nlohmann::json {
    if (oracle_us.empty()) return nullptr;
    std::vector<double> v;
    for (int i : idx) v.push_back(baseline_us[static_cast<std::size_t>(i)] / oracle_us[static_cast<std::size_t>(i)]);
    return geomean(v);
  };
  results::MeasurementFilter mf;
  mf.run_id = run_id;
  const auto run = results::Runs(*db).get(run_id);
  nlohmann::json j = {
      {"run_id", run_id},
      {"database", db->path()},
      {"device", options.device_spec},
      {"device_fingerprint", measurer->fingerprint()},
      {"workers", options.evaluators.size()},
      {"workload", workload.name},
      {"shapes", {{"train", split.train.size()}, {"validation", split.validation.size()}}},
      {"baseline", baseline_name},
      {"seed", config.seed},
      {"config", config.name},
      {"stop_reason", stop_reason},
      {"steps", counters.step},
      {"evaluations", counters.evaluations},
      {"duplicates", counters.duplicates},
      {"failures", counters.failures},
      {"measurements_taken", results::Measurements(*db).count(mf)},
      {"elapsed_s", elapsed()},
      {"floor", config.fitness.floor},
      {"oracle",
       {{"enabled", !oracle_us.empty()},
        {"train_geomean", oracle_geomean(split.train)},
        {"validation_geomean", oracle_geomean(split.validation)},
        {"space",
         {{"num_splits", config.oracle.split_values()},
          {"pack_gqa", config.oracle.pack_gqa},
          {"sm_margins", config.oracle.sm_margins}}}}},
      {"finalists", finalists_json},
      {"winner", nullptr},
  };
  if (winner) {
    const Record& r = records.at(*winner);
    const Program p = program_of(r);
    nlohmann::json worst_shape = nullptr;
    if (!r.speedups.empty()) {
      const auto it = std::min_element(r.speedups.begin(), r.speedups.end());
      worst_shape = to_json(workload.shapes[static_cast<std::size_t>(split.train[it - r.speedups.begin()])]);
    }
    j["winner"] = {{"program_id", r.id},
                   {"hash", r.hash},
                   {"origin", r.origin},
                   {"generation", r.generation},
                   {"island", r.island},
                   {"rules", static_cast<int>(r.rules.size())},
                   {"base", r.base_name},
                   {"rules_json", to_json(p)},
                   {"source", render_lua(p)},
                   {"train", split_figures(r.geomean, r.worst, worst_shape, r.oracle_fraction, split.train.size())}};
  }
  return j;
}

}  // namespace evodispatch::search

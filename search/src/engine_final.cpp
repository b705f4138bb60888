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
  std::optional<Shape> worst_shape;
  std::optional<bool> confirmed;  // unset: not confirmed (not in the top)
  double confirmed_geomean = 0, confirmed_worst = 0;
  std::optional<Shape> confirmed_worst_shape;
  int compared = 0;
  int changed = 0;  // workload shapes where it decides differently from the baseline
  std::vector<int> under_floor;  // shapes its confirmation measured under the floor
  std::optional<std::int64_t> refuted_by;  // skipped: a confirmed finalist failed its decision
  std::optional<std::int64_t> repaired_from;  // the finalist whose repair it is
  bool usable() const { return ok && feasible; }
};

nlohmann::json optional_shape(const std::optional<Shape>& s) { return s ? to_json(*s) : nlohmann::json(nullptr); }

nlohmann::json split_figures(double geomean, double worst, const std::optional<Shape>& worst_shape,
                             const std::optional<double>& oracle_fraction, std::size_t shapes) {
  nlohmann::json j = {{"geomean", geomean}, {"worst", worst}, {"worst_shape", optional_shape(worst_shape)}, {"shapes", shapes}};
  j["oracle_fraction"] = oracle_fraction ? nlohmann::json(*oracle_fraction) : nlohmann::json(nullptr);
  return j;
}

EvaluationDetails stored_details(const results::EvaluationRecord& e) {
  return evaluation_details_from_json(e.details, "evaluation " + std::to_string(e.id) + " details");
}

// The (shape, decision) pairs a confirmation measured under the floor, and who did: a
// later finalist making one of those decisions there is refuted without a measurement
// (the top finalists are often one lineage sharing one weak decision).
class Refutations {
 public:
  void add(const Finalist& f, const std::vector<Decision>& decisions) {
    for (int s : f.under_floor) by_.emplace(std::pair{s, decision_code(decisions[static_cast<std::size_t>(s)])}, f.id);
  }
  std::optional<std::int64_t> find(const std::vector<Decision>& decisions, const std::vector<Decision>& baseline) const {
    for (std::size_t s = 0; s < decisions.size(); ++s) {
      if (decisions[s] == baseline[s]) continue;
      auto it = by_.find({static_cast<int>(s), decision_code(decisions[s])});
      if (it != by_.end()) return it->second;
    }
    return std::nullopt;
  }

 private:
  std::map<std::pair<int, std::uint64_t>, std::int64_t> by_;
};

}  // namespace

results::RunShapeRecord shape_row(results::ShapeSplit split, const Shape& shape, const TimedDecision& baseline,
                                  const std::optional<TimedDecision>& candidate,
                                  const std::optional<TimedDecision>& oracle) {
  const auto time = [](double us) { return std::isfinite(us) ? std::optional(us) : std::nullopt; };
  const auto over_baseline = [&](const std::optional<double>& us) {
    return us && std::isfinite(baseline.us) ? std::optional(baseline.us / *us) : std::nullopt;
  };
  results::RunShapeRecord r;
  r.split = split;
  r.shape = shape;
  r.baseline = resolve(baseline.decision, shape);
  r.baseline_us = time(baseline.us);
  if (candidate) {
    r.candidate = resolve(candidate->decision, shape);
    r.candidate_us = time(candidate->us);
    r.speedup = over_baseline(r.candidate_us);
  }
  if (oracle) {
    r.oracle = resolve(oracle->decision, shape);
    r.oracle_us = time(oracle->us);
    r.oracle_speedup = over_baseline(r.oracle_us);
  }
  return r;
}

// One final phase over the engine's state; results go to the store as they come.
class FinalPhase {
 public:
  explicit FinalPhase(SearchEngine::Impl& e) : e_(e) {}
  nlohmann::json run();

 private:
  Finalist validate(std::int64_t id);
  Finalist measure_validation(Finalist f, const Program& p, const CheckResult& check);
  void repair_finalists();
  // The repair of finalist `parent`, stored and scored on the training shapes: its id, or 0
  // when there is none, it cannot be scored, loses on training or is a finalist already.
  std::int64_t store_repair(std::int64_t parent, const std::optional<Program>& repaired);
  std::vector<std::size_t> rank() const;
  void confirm(std::vector<std::size_t>& order);
  void confirm_one(Finalist& f);
  void score_confirmation(Finalist& f, const std::vector<double>& speedup, bool all_ok);
  results::ComparisonRecord compare_with_baseline(std::int64_t program, std::size_t shape, Evaluator& ev);
  std::optional<std::size_t> pick_winner(const std::vector<std::size_t>& order) const;
  nlohmann::json finalists_json(const std::vector<std::size_t>& order) const;
  nlohmann::json families_json(const std::vector<std::size_t>& order, std::optional<std::size_t> winner,
                               const nlohmann::json& winner_test);
  std::string family_name(std::int64_t id) const;
  // The baseline, the winner (when there is one) and the oracle on every workload shape.
  std::vector<results::RunShapeRecord> workload_rows(std::optional<std::size_t> winner);

  SearchEngine::Impl& e_;
  std::vector<Finalist> fins_;
  std::unordered_map<std::int64_t, std::vector<Decision>> decisions_of_;  // per workload shape
  Refutations refutations_;
};

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
  // Both program families reach the validation split: each one's best is a finalist.
  for (bool model : {false, true}) {
    auto best = std::find_if(all.begin(), all.end(), [&](std::int64_t id) { return is_model(records.at(id)) == model; });
    if (best != all.end() && std::find(ids.begin(), ids.end(), *best) == ids.end()) ids.push_back(*best);
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
  return FinalPhase(*this).run();
}

nlohmann::json FinalPhase::run() {
  const auto ids = e_.finalists();
  for (std::size_t k = 0; k < ids.size(); ++k) {
    if (e_.stop_requested()) e_.interrupt();
    e_.report("validation", "", k, ids.size());
    fins_.push_back(validate(ids[k]));
  }
  repair_finalists();
  auto order = rank();
  confirm(order);
  const auto winner = pick_winner(order);

  nlohmann::json result = e_.summary(winner ? std::optional(fins_[*winner].id) : std::nullopt, finalists_json(order));
  std::vector<results::RunShapeRecord> test_rows;
  result["test"] = e_.test_report(
      winner ? std::optional(e_.program_of(e_.records.at(fins_[*winner].id))) : std::nullopt, &test_rows);
  result["families"] = families_json(order, winner, result["test"]);
  if (winner) {
    const Finalist& f = fins_[*winner];
    auto& w = result["winner"];
    w["validation"] = split_figures(f.geomean, f.worst, f.worst_shape, f.oracle_fraction, e_.split.validation.size());
    if (f.confirmed)
      w["confirmed"] = {{"geomean", f.confirmed_geomean}, {"worst", f.confirmed_worst},
                        {"worst_shape", optional_shape(f.confirmed_worst_shape)}, {"shapes_compared", f.compared},
                        {"pairs", e_.config.final.confirm_pairs}};
  }
  std::vector<results::RunShapeRecord> rows = workload_rows(winner);
  rows.insert(rows.end(), test_rows.begin(), test_rows.end());
  e_.phase = "done";
  e_.db->in_transaction([&] {
    e_.save_state();
    results::RunShapes(*e_.db).put(e_.run_id, rows);
    results::Runs(*e_.db).finish(e_.run_id, results::RunStatus::finished, result);
  });
  e_.report("done");
  return result;
}

std::vector<results::RunShapeRecord> FinalPhase::workload_rows(std::optional<std::size_t> winner) {
  std::vector<int> shapes = e_.split.train;
  shapes.insert(shapes.end(), e_.split.validation.begin(), e_.split.validation.end());
  const std::vector<Decision>* mine = winner ? &decisions_of_.at(fins_[*winner].id) : nullptr;
  const std::vector<double> mine_us = mine ? e_.latencies(*mine, shapes, *e_.measurer) : std::vector<double>{};
  std::vector<results::RunShapeRecord> out;
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    const auto s = static_cast<std::size_t>(shapes[k]);
    std::optional<TimedDecision> candidate, oracle;
    if (mine) candidate = TimedDecision{(*mine)[s], mine_us[k]};
    if (!e_.oracle_us.empty()) oracle = TimedDecision{e_.oracle_decisions[s], e_.oracle_us[s]};
    out.push_back(shape_row(k < e_.split.train.size() ? results::ShapeSplit::train : results::ShapeSplit::validation,
                            e_.workload.shapes[s], {e_.baseline_decisions[s], e_.baseline_us[s]}, candidate, oracle));
  }
  return out;
}

// A finalist checked end to end, then scored on the held-out shapes (or its stored
// validation, when a killed final phase already took it).
Finalist FinalPhase::validate(std::int64_t id) {
  Finalist f;
  f.id = id;
  const Program p = e_.program_of(e_.records.at(id));
  const CheckResult check = e_.full_checker->check_one(p);
  decisions_of_[id] = check.decisions;
  for (std::size_t s = 0; s < check.decisions.size() && s < e_.baseline_decisions.size(); ++s)
    f.changed += check.decisions[s] == e_.baseline_decisions[s] ? 0 : 1;
  if (auto stored = results::Evaluations(*e_.db).find(id, results::Split::validation, "measured")) {
    const EvaluationDetails d = stored_details(*stored);
    f.ok = stored->fitness.has_value();
    f.error = stored->error;
    f.feasible = stored->ok;
    f.geomean = stored->fitness.value_or(0);
    f.worst = stored->worst_speedup.value_or(0);
    f.oracle_fraction = stored->oracle_fraction;
    f.score = d.score.value_or(kFailedScore);
    f.worst_shape = d.worst_shape;
    return f;
  }
  return measure_validation(std::move(f), p, check);
}

Finalist FinalPhase::measure_validation(Finalist f, const Program& p, const CheckResult& check) {
  const auto& validation = e_.split.validation;
  results::EvaluationRecord e;
  e.program_id = f.id;
  e.split = results::Split::validation;
  e.stage = "measured";
  e.shapes = static_cast<int>(validation.size());
  const CheckResult full = e_.full_checker->check_full("program " + std::to_string(f.id), render_lua(p));
  if (!full.ok) {
    f.error = "full sandbox check: " + full.error;
  } else if (!check.ok || full.decisions != check.decisions) {
    f.error = "the full program decides differently from its checked rules";
  } else {
    const auto us = e_.latencies(check.decisions, validation, *e_.measurer);
    const Fitness fit = score_latencies(SearchEngine::Impl::at(e_.baseline_us, validation), us,
                                        SearchEngine::Impl::at(e_.oracle_us, validation), e_.fitness_options());
    f.ok = fit.ok;
    f.error = fit.error;
    f.feasible = fit.feasible;
    f.score = fit.score;
    f.geomean = fit.geomean;
    f.worst = fit.worst;
    f.oracle_fraction = fit.oracle_fraction;
    const EvaluationDetails d = e_.scored_details(fit, validation);
    f.worst_shape = d.worst_shape;
    set_figures(e, fit);
    e.details = to_json(d);
  }
  e.ok = f.usable();
  e.error = f.error;
  e_.db->in_transaction([&] { results::Evaluations(*e_.db).insert(e); });
  return f;
}

// Repair: the best training programs that put a validation shape under the floor lose
// the rules that decided those shapes (a rule fitted to training points that reaches
// an unseen shape it should not), until none is under the floor; what is left is a new
// program, scored on the training shapes like any other (stored with origin "repair")
// and validated. Deterministic, so a resumed final phase derives the same programs and
// finds them stored. The validation split chose which rules to drop: the repaired
// program's validation figures are a selection, like the choice among the finalists.
void FinalPhase::repair_finalists() {
  const std::size_t validated = fins_.size();
  int repairs = 0;
  for (std::size_t k = 0; k < validated && repairs < e_.config.final.repair; ++k) {
    if (!fins_[k].ok || fins_[k].feasible) continue;
    ++repairs;
    if (e_.stop_requested()) e_.interrupt();
    e_.report("validation", "repairing", static_cast<std::size_t>(repairs - 1),
              static_cast<std::size_t>(e_.config.final.repair));
    const std::int64_t parent = fins_[k].id;
    const std::int64_t id = store_repair(parent, e_.repair(e_.program_of(e_.records.at(parent))));
    if (id == 0) continue;
    fins_.push_back(validate(id));
    fins_.back().repaired_from = parent;
  }
}

std::int64_t FinalPhase::store_repair(std::int64_t parent, const std::optional<Program>& repaired) {
  if (!repaired) return 0;
  const std::int64_t id = e_.store_repaired(*repaired, parent);
  if (id == 0) return 0;
  const Record& r = e_.records.at(id);
  if (!r.feasible || r.geomean < 1.0) return 0;
  if (std::any_of(fins_.begin(), fins_.end(), [&](const Finalist& f) { return f.id == id; })) return 0;
  return id;
}

// Feasible on validation first, then the validation score, then the program that
// changes fewer shapes (less to go wrong on shapes nobody measured), then training.
std::vector<std::size_t> FinalPhase::rank() const {
  std::vector<std::size_t> order(fins_.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const Finalist &x = fins_[a], &y = fins_[b];
    if (x.usable() != y.usable()) return x.usable();
    if (x.score != y.score) return x.score > y.score;
    if (x.changed != y.changed) return x.changed < y.changed;
    return false;  // stable: the training order decides
  });
  return order;
}

// Confirmation: the best validated programs against the baseline, interleaved, on
// every shape where they decide differently (elsewhere they run the same kernel),
// through Evaluator::compare (interleaved replays on a GPU; on the simulator, whose
// rows are exact, the ratio of two measurements).
//
// A finalist that a confirmation measures under the floor is repaired like one under it on
// validation (up to `final.repair` times), from the shapes the confirmation found: on a
// GPU the interleaved comparison sees losses the independent measurements hid. The repair
// is validated and confirmed next, outside the `confirm_top` count.
void FinalPhase::confirm(std::vector<std::size_t>& order) {
  const auto& cfg = e_.config.final;
  const std::size_t first_repair = fins_.size();
  int confirmed_count = 0, repairs = 0;
  for (std::size_t rank = 0; rank < order.size(); ++rank) {
    const bool is_repair = order[rank] >= first_repair;
    if (!is_repair && confirmed_count >= cfg.confirm_top) continue;
    Finalist& f = fins_[order[rank]];
    if (!f.usable()) break;
    if ((f.refuted_by = refutations_.find(decisions_of_.at(f.id), e_.baseline_decisions))) continue;
    if (!is_repair) ++confirmed_count;
    if (e_.stop_requested()) e_.interrupt();
    e_.report("confirmation", is_repair ? "repaired" : "", static_cast<std::size_t>(std::max(confirmed_count - 1, 0)),
              static_cast<std::size_t>(cfg.confirm_top));
    if (auto stored = results::Evaluations(*e_.db).find(f.id, results::Split::validation, "confirmed")) {
      const EvaluationDetails d = stored_details(*stored);
      f.confirmed = stored->ok;
      f.confirmed_geomean = stored->fitness.value_or(0);
      f.confirmed_worst = stored->worst_speedup.value_or(0);
      f.confirmed_worst_shape = d.worst_shape;
      f.compared = d.compared.value_or(0);
      f.under_floor = d.under_floor.value_or(std::vector<int>{});
    } else {
      confirm_one(f);
    }
    refutations_.add(f, decisions_of_.at(f.id));
    if (*f.confirmed || f.under_floor.empty() || repairs >= cfg.repair) continue;
    ++repairs;
    const std::int64_t parent = f.id;
    const std::int64_t id = store_repair(parent, e_.repair_at(e_.program_of(e_.records.at(parent)), f.under_floor, decisions_of_.at(parent)));
    if (id == 0) continue;
    Finalist repaired = validate(id);  // f is not used below: fins_ may grow
    if (!repaired.usable()) continue;
    repaired.repaired_from = parent;
    fins_.push_back(std::move(repaired));
    order.insert(order.begin() + static_cast<long>(rank) + 1, fins_.size() - 1);
  }
}

void FinalPhase::confirm_one(Finalist& f) {
  const auto& shapes = e_.workload.shapes;
  const auto& decisions = decisions_of_.at(f.id);
  std::vector<double> speedup(shapes.size(), 1.0);
  std::vector<results::ComparisonRecord> rows;
  bool all_ok = true;
  for (std::size_t s = 0; s < shapes.size(); ++s) {
    if (decisions[s] == e_.baseline_decisions[s]) continue;
    Evaluator& ev = *e_.options.evaluators[rows.size() % e_.options.evaluators.size()];
    rows.push_back(compare_with_baseline(f.id, s, ev));
    speedup[s] = rows.back().ok ? rows.back().speedup : 0;
    all_ok = all_ok && rows.back().ok;
  }
  f.compared = static_cast<int>(rows.size());
  score_confirmation(f, speedup, all_ok);

  results::EvaluationRecord e;
  e.program_id = f.id;
  e.split = results::Split::validation;
  e.stage = "confirmed";
  e.shapes = static_cast<int>(e_.split.validation.size());
  e.ok = *f.confirmed;
  const int below = static_cast<int>(std::count_if(speedup.begin(), speedup.end(),
                                                   [&](double v) { return v < e_.config.fitness.floor; }));
  if (!all_ok) e.error = "a re-measurement failed";
  else if (below) e.error = std::to_string(below) + " shape(s) under the floor when re-measured";
  e.fitness = f.confirmed_geomean;
  e.worst_speedup = f.confirmed_worst;
  EvaluationDetails d;
  d.compared = f.compared;
  d.worst_shape = f.confirmed_worst_shape;
  d.below_floor = below;
  d.under_floor = f.under_floor;
  d.pairs = e_.config.final.confirm_pairs;
  e.details = to_json(d);
  e_.db->in_transaction([&] {
    results::Comparisons comparisons(*e_.db);
    for (const auto& row : rows) comparisons.insert(row);
    results::Evaluations(*e_.db).insert(e);
  });
}

// The confirmed figures: validation shapes for the geomean, every shape for the floor.
// A failed re-measurement (speedup 0) is under the floor but refutes no decision.
void FinalPhase::score_confirmation(Finalist& f, const std::vector<double>& speedup, bool all_ok) {
  const auto& validation = e_.split.validation;
  std::vector<double> on_validation;
  int worst_at = -1;
  for (int s : validation) {
    const double v = speedup[static_cast<std::size_t>(s)];
    on_validation.push_back(v > 0 ? v : 0);
    if (worst_at < 0 || v < f.confirmed_worst) {
      f.confirmed_worst = v;
      worst_at = s;
    }
  }
  f.under_floor.clear();
  bool below = false;
  for (std::size_t s = 0; s < speedup.size(); ++s) {
    if (speedup[s] >= e_.config.fitness.floor) continue;
    below = true;
    if (speedup[s] > 0) f.under_floor.push_back(static_cast<int>(s));
  }
  f.confirmed_geomean = geomean(on_validation);
  f.confirmed_worst_shape = worst_at >= 0 ? std::optional(e_.workload.shapes[static_cast<std::size_t>(worst_at)]) : std::nullopt;
  f.confirmed = all_ok && !below;
}

// compare(a = baseline, b = candidate), interleaved; the row's speedup from set_measured.
results::ComparisonRecord FinalPhase::compare_with_baseline(std::int64_t program, std::size_t s, Evaluator& ev) {
  const Shape& shape = e_.workload.shapes[s];
  const Decision& base = e_.baseline_decisions[s];
  const Decision& cand = decisions_of_.at(program)[s];
  Comparison cmp;
  try {
    cmp = ev.compare(shape, base, cand, e_.measurer->timing(), e_.config.final.confirm_pairs);
  } catch (const std::exception& ex) {
    cmp.ok = false;
    cmp.error = std::string("the evaluator failed: ") + ex.what();
  }
  results::ComparisonRecord c;
  c.run_id = e_.run_id;
  c.program_id = program;
  c.shape = shape;
  c.device = ev.fingerprint();
  c.kernel_build = ev.kernel_build();
  c.l2 = e_.measurer->timing().l2;
  c.candidate = cand;
  c.baseline = base;
  results::set_measured(c, cmp, results::BaselineSide::a);
  const auto& validation = e_.split.validation;
  const bool held_out = std::binary_search(validation.begin(), validation.end(), static_cast<int>(s));
  c.details = {{"split", held_out ? "validation" : "train"}};
  return c;
}

// The best confirmed program (by its confirmed validation speedup), or without
// confirmation the best validated one.
std::optional<std::size_t> FinalPhase::pick_winner(const std::vector<std::size_t>& order) const {
  std::optional<std::size_t> winner;
  for (std::size_t i : order) {
    const Finalist& f = fins_[i];
    if (!f.usable()) break;
    if (e_.config.final.confirm_top == 0) return i;
    if (!f.confirmed || !*f.confirmed) continue;
    if (!winner || f.confirmed_geomean > fins_[*winner].confirmed_geomean) winner = i;
  }
  return winner;
}

// Each program family's best usable finalist (by validation) with its figures, the winner's
// family named, and on the test split the runner-up family measured too: the report says
// which family wins on shapes neither saw.
nlohmann::json FinalPhase::families_json(const std::vector<std::size_t>& order, std::optional<std::size_t> winner,
                                         const nlohmann::json& winner_test) {
  if (e_.model_fit.is_null()) return nullptr;
  nlohmann::json j = {{"model_fit", e_.model_fit}, {"winner", nullptr}};
  if (winner) j["winner"] = family_name(fins_[*winner].id);
  for (bool model : {false, true}) {
    const std::string name = model ? "model" : "rules";
    auto best = std::find_if(order.begin(), order.end(), [&](std::size_t i) {
      return fins_[i].usable() && e_.is_model(e_.records.at(fins_[i].id)) == model;
    });
    if (best == order.end()) {
      j[name] = nullptr;
      continue;
    }
    const Finalist& f = fins_[*best];
    nlohmann::json fam = {{"program_id", f.id}, {"rules", e_.records.at(f.id).rules.size()},
                          {"validation", split_figures(f.geomean, f.worst, f.worst_shape, f.oracle_fraction,
                                                       e_.split.validation.size())}};
    fam["test"] = winner && *best == *winner ? winner_test : e_.test_report(e_.program_of(e_.records.at(f.id)));
    j[name] = fam;
  }
  return j;
}

std::string FinalPhase::family_name(std::int64_t id) const { return e_.is_model(e_.records.at(id)) ? "model" : "rules"; }

nlohmann::json FinalPhase::finalists_json(const std::vector<std::size_t>& order) const {
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t i : order) {
    const Finalist& f = fins_[i];
    const Record& r = e_.records.at(f.id);
    nlohmann::json j = {{"program_id", f.id}, {"family", family_name(f.id)}, {"rules", static_cast<int>(r.rules.size())},
                        {"changed_shapes", f.changed},
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
        for (int s : f.under_floor) j["under_floor"].push_back(to_json(e_.workload.shapes[static_cast<std::size_t>(s)]));
      }
    }
    if (f.refuted_by) j["refuted_by"] = *f.refuted_by;
    if (f.repaired_from) j["repaired_from"] = *f.repaired_from;
    out.push_back(j);
  }
  return out;
}

// Rules that put a validation shape under the floor are dropped; when a latency-model base
// decided it, the model asks for twice the predicted gain before it overrides the baseline.
std::optional<Program> SearchEngine::Impl::repair(Program p) {
  const std::size_t rounds = p.rules.size() + 10;
  for (std::size_t round = 0; round <= rounds; ++round) {
    const CheckResult check = full_checker->check_one(p);
    if (!check.ok) return std::nullopt;
    const auto us = latencies(check.decisions, split.validation, *measurer);
    std::vector<int> under;
    for (std::size_t k = 0; k < split.validation.size(); ++k) {
      const auto s = static_cast<std::size_t>(split.validation[k]);
      if (!(baseline_us[s] / us[k] >= config.fitness.floor)) under.push_back(split.validation[k]);  // NaN: under
    }
    if (under.empty()) return round == 0 ? std::nullopt : std::optional<Program>(p);
    auto next = without_deciders(std::move(p), under);
    if (!next) return std::nullopt;
    p = std::move(*next);
  }
  return std::nullopt;
}

std::optional<Program> SearchEngine::Impl::repair_at(Program p, const std::vector<int>& shapes,
                                                     const std::vector<Decision>& decided) {
  for (std::size_t round = 0; round <= p.rules.size() + 10; ++round) {
    auto next = without_deciders(std::move(p), shapes);
    if (!next) return std::nullopt;
    p = std::move(*next);
    const CheckResult after = full_checker->check_one(p);
    if (!after.ok) return std::nullopt;
    if (std::all_of(shapes.begin(), shapes.end(), [&](int s) {
          return after.decisions[static_cast<std::size_t>(s)] != decided[static_cast<std::size_t>(s)];
        }))
      return p;
  }
  return std::nullopt;
}

std::optional<Program> SearchEngine::Impl::without_deciders(Program p, const std::vector<int>& shapes) const {
  std::set<std::size_t> drop;
  bool base_under = false;
  for (int s : shapes) {
    std::size_t i = 0;
    while (i < p.rules.size() && !holds(p.rules[i], features[static_cast<std::size_t>(s)])) ++i;
    if (i == p.rules.size()) base_under = true;
    else drop.insert(i);
  }
  if (drop.empty() && !base_under) return std::nullopt;
  for (auto it = drop.rbegin(); it != drop.rend(); ++it) p.rules.erase(p.rules.begin() + static_cast<long>(*it));
  if (drop.empty()) {  // no rule to drop: a model base asks for more gain
    auto calmer = more_cautious_model(p.base_source);
    if (!calmer) return std::nullopt;
    p.base_source = std::move(*calmer);
  }
  return normalise(p, config.decisions.max_splits);
}


// A repaired program goes through the step's cascade and commit like any candidate,
// admitted as a repair; a program already stored is found by its hash.
std::int64_t SearchEngine::Impl::store_repaired(const Program& p, std::int64_t parent_id) {
  const Record& parent = records.at(parent_id);
  Candidate c;
  c.program = verified(p);
  c.base_key = base_key_for(c.program, &parent);
  c.hash = program_hash(c.program, c.base_key);
  c.parents = {parent_id};
  c.origin = "repair";
  c.island = parent.island;
  c.generation = parent.generation + 1;
  if (!hashes.count(c.hash)) evaluate_and_commit({c}, Admission::repair);
  for (const auto& [id, r] : records)
    if (r.hash == c.hash) return r.scored ? id : 0;
  return 0;
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
  const double setup = setup_seconds(), search = elapsed();
  nlohmann::json j = {
      {"run_id", run_id},
      {"database", db->path()},
      {"device", options.device_spec},
      {"device_fingerprint", measurer->fingerprint()},
      {"workers", options.evaluators.size()},
      {"workload", workload.name},
      {"shapes", {{"train", split.train.size()}, {"validation", split.validation.size()}, {"test", test_shapes.size()}}},
      {"baseline", baseline_name},
      {"seed", config.seed},
      {"config", config.name},
      {"stop_reason", stop_reason},
      {"steps", counters.step},
      {"evaluations", counters.evaluations},
      {"duplicates", counters.duplicates},
      {"failures", counters.failures},
      {"measurements_taken", results::Measurements(*db).count(mf)},
      {"elapsed_s", setup + search},
      {"setup_s", setup},
      {"search_s", search},
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
  if (winner) j["winner"] = winner_json(records.at(*winner));
  return j;
}

nlohmann::json SearchEngine::Impl::winner_json(const Record& r) const {
  const Program p = program_of(r);
  std::optional<Shape> worst_shape;
  if (!r.speedups.empty()) {
    const auto it = std::min_element(r.speedups.begin(), r.speedups.end());
    worst_shape = shape_at(split.train, static_cast<int>(it - r.speedups.begin()));
  }
  return {{"program_id", r.id},
          {"hash", r.hash},
          {"family", is_model(r) ? "model" : "rules"},
          {"origin", r.origin},
          {"generation", r.generation},
          {"island", r.island},
          {"rules", static_cast<int>(r.rules.size())},
          {"base", r.base_name},
          {"rules_json", to_json(p)},
          {"rules_lua", render_rules_text(p)},
          {"source", render_lua(p)},
          {"train", split_figures(r.geomean, r.worst, worst_shape, r.oracle_fraction, split.train.size())}};
}

}  // namespace evodispatch::search

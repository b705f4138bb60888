#include <evodispatch/search/latency_fit.hpp>

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include <evodispatch/search/rng.hpp>

namespace evodispatch::search {

namespace {

// What a descent improves: the predictions alone, or the choices they make.
enum class Goal { predict, choose };

struct Evaluation {
  Fitness fitness;
  double log_error = 0;
  bool better_than(const Evaluation& o, Goal goal) const {
    if (goal == Goal::predict) return log_error < o.log_error;
    if (fitness.score != o.fitness.score) return fitness.score > o.fitness.score;
    return log_error < o.log_error;
  }
};

// The objective on fixed samples; counts its calls.
class Objective {
 public:
  Objective(const LatencySamples& s, const DeviceInfo& hw, const FitnessOptions& opts) : s_(s), hw_(hw), opts_(opts) {}

  Evaluation operator()(const LatencyModel& m) {
    ++calls;
    std::vector<double> chosen_us(s_.shapes.size());
    std::vector<std::pair<double, double>> pairs;  // (predicted us, measured us)
    for (std::size_t i = 0; i < s_.shapes.size(); ++i) chosen_us[i] = choose(m, i, pairs);
    Evaluation e;
    e.fitness = score_latencies(s_.baseline_us, chosen_us, s_.oracle_us, opts_);
    e.log_error = log_error(pairs);
    return e;
  }
  int calls = 0;

 private:
  // The measured latency of the model's decision on shape i: its argmin unless the
  // baseline's decision stands (then the baseline's latency); an argmin the oracle did not
  // measure counts as the shape's slowest measured decision: the fit must not count on a gap.
  double choose(const LatencyModel& m, std::size_t i, std::vector<std::pair<double, double>>& pairs) const {
    const Shape& shape = s_.shapes[i];
    const auto& table = s_.us[i];
    double slowest = 0;
    for (const auto& [code, us] : table) slowest = std::max(slowest, us);
    for (int margin : m.sm_margins) {
      if (margin >= hw_.num_sms) continue;
      for (bool pack : m.pack_gqa)
        for (int k : m.splits) {
          auto it = table.find(decision_code(resolve(Decision{k, pack, margin}, shape)));
          if (it != table.end())
            pairs.emplace_back(static_cast<double>(predict_ps(m, shape, hw_, k, pack, margin)) * 1e-6, it->second);
        }
    }
    const Decision d = model_decision(m, shape, hw_, s_.baseline[i]);
    if (d == resolve(s_.baseline[i], shape)) return s_.baseline_us[i];
    auto it = table.find(decision_code(d));
    return it != table.end() ? it->second : slowest;
  }

  // RMS of log((predicted + c) / measured), c the median gap: the launch and whatever
  // else every decision pays alike.
  static double log_error(std::vector<std::pair<double, double>>& pairs) {
    if (pairs.empty()) return 0;
    std::vector<double> gaps;
    gaps.reserve(pairs.size());
    for (const auto& [p, m] : pairs) gaps.push_back(m - p);
    std::nth_element(gaps.begin(), gaps.begin() + static_cast<long>(gaps.size() / 2), gaps.end());
    const double c = std::max(0.0, gaps[gaps.size() / 2]);
    double sum = 0;
    for (const auto& [p, m] : pairs) {
      const double e = std::log(std::max(p + c, 1e-3) / m);
      sum += e * e;
    }
    return std::sqrt(sum / static_cast<double>(pairs.size()));
  }

  const LatencySamples& s_;
  const DeviceInfo& hw_;
  FitnessOptions opts_;
};

std::int64_t clamp_to(const LatencyParameter& p, const DeviceInfo& hw, double v) {
  return std::clamp<std::int64_t>(std::llround(v), lowest_on(p, hw), p.hi);
}

// Coordinate descent: each parameter in turn takes the first step that improves. Predicting
// leaves min_gain_permille alone: it changes no prediction.
void descend(LatencyModel& m, Evaluation& best, Objective& objective, const DeviceInfo& hw, Goal goal) {
  static constexpr double kFactors[] = {2.0, 0.5, 1.25, 0.8, 1.06, 1 / 1.06};
  for (int round = 0; round < 40; ++round) {
    bool improved = false;
    for (const auto& p : latency_parameters()) {
      if (goal == Goal::predict && p.field == &LatencyModel::min_gain_permille) continue;
      std::vector<std::int64_t> values;
      const std::int64_t now = m.*p.field;
      if (p.hi <= 64) values = {now + 1, now - 1};
      else
        for (double f : kFactors) values.push_back(now == 0 ? (f > 1 ? 1 : 0) : clamp_to(p, hw, static_cast<double>(now) * f));
      for (std::int64_t v : values) {
        if (v == now || v < lowest_on(p, hw) || v > p.hi) continue;
        LatencyModel c = m;
        c.*p.field = v;
        const Evaluation e = objective(c);
        if (e.better_than(best, goal)) {
          m = c;
          best = e;
          improved = true;
          break;
        }
      }
    }
    if (!improved) return;
  }
}

}  // namespace

// Unbounded, the fit's choice stage settled on an H100 DRAM twice the real one and an SM
// rate that then decided everything: 48 CTAs counted as short of bandwidth, so fa3's 5
// splits stood where one split runs 10% faster (docs/search.md, sixteenth session).
std::int64_t lowest_on(const LatencyParameter& p, const DeviceInfo& hw) {
  if (p.field == &LatencyModel::dram_ps_per_kib && hw.mem_bw_bytes_per_s > 0)
    return std::max<std::int64_t>(p.lo, static_cast<std::int64_t>(std::ceil(1024.0 / hw.mem_bw_bytes_per_s * 1e12)));
  return p.lo;
}

nlohmann::json to_json(const LatencyFit& f) {
  nlohmann::json j = {{"model", to_json(f.model)}, {"score", f.score}, {"geomean", f.geomean},
                      {"log_error", f.log_error}, {"evaluations", f.evaluations}};
  j["oracle_fraction"] = f.oracle_fraction ? nlohmann::json(*f.oracle_fraction) : nlohmann::json(nullptr);
  return j;
}

LatencyModel prior_model(const DeviceInfo& hw, std::vector<int> splits, std::vector<bool> pack_gqa,
                         std::vector<int> sm_margins) {
  LatencyModel m;
  m.splits = std::move(splits);
  m.pack_gqa = std::move(pack_gqa);
  m.sm_margins = std::move(sm_margins);
  if (hw.mem_bw_bytes_per_s > 0 && hw.num_sms > 0) {
    // DRAM at 80% of its peak; one SM pulls about 2.5 times its fair share.
    m.dram_ps_per_kib = std::max<std::int64_t>(1, std::llround(1024.0 / (0.8 * hw.mem_bw_bytes_per_s) * 1e12));
    m.sm_ps_per_kib = std::max<std::int64_t>(1, std::llround(1024.0 * hw.num_sms / (2.5 * hw.mem_bw_bytes_per_s) * 1e12));
    // L2 serves about three times DRAM's bandwidth, and an SM reads L2 eight times faster.
    m.l2_ps_per_kib = std::max<std::int64_t>(1, m.dram_ps_per_kib / 3);
    m.sm_l2_ps_per_kib = std::max<std::int64_t>(1, m.sm_ps_per_kib / 8);
  }
  return m;
}

LatencyFit fit_latency_model(const LatencySamples& samples, const DeviceInfo& hw, const LatencyModel& prior,
                             const FitnessOptions& opts, std::uint64_t seed, int restarts) {
  validate(prior, "the latency model's prior");
  Objective objective(samples, hw, opts);
  // First the model that predicts the measurements best, then the choices from there: a
  // descent on the choices alone, from the prior, settles in a model that predicts badly
  // and is right by luck on the training shapes.
  LatencyModel best_model = prior;
  for (const auto& p : latency_parameters())
    best_model.*p.field = std::max(best_model.*p.field, lowest_on(p, hw));
  Evaluation best = objective(best_model);
  descend(best_model, best, objective, hw, Goal::predict);
  descend(best_model, best, objective, hw, Goal::choose);
  Rng rng(seed);
  for (int r = 0; r < restarts; ++r) {
    LatencyModel start = best_model;
    for (const auto& p : latency_parameters()) {
      const double f = std::exp((rng.real() * 2 - 1) * 1.0);  // within e^-1 .. e^1
      start.*p.field = p.hi <= 64 ? std::clamp<std::int64_t>(start.*p.field + static_cast<std::int64_t>(rng.below(3)) - 1, p.lo, p.hi)
                                  : clamp_to(p, hw, static_cast<double>(std::max<std::int64_t>(start.*p.field, 1)) * f);
    }
    Evaluation e = objective(start);
    descend(start, e, objective, hw, Goal::choose);
    if (e.better_than(best, Goal::choose)) {
      best = e;
      best_model = start;
    }
  }
  LatencyFit fit;
  fit.model = best_model;
  // It answers only where it was fitted: every sample lies inside, so its score stands.
  fit.model.box = model_box_of(samples.shapes);
  fit.score = best.fitness.score;
  fit.geomean = best.fitness.geomean;
  fit.oracle_fraction = best.fitness.oracle_fraction;
  fit.log_error = best.log_error;
  fit.evaluations = objective.calls;
  return fit;
}

std::optional<std::string> more_cautious_model(std::string_view source) {
  auto script = latency_model_of(source);
  if (!script || script->model.min_gain_permille >= 999) return std::nullopt;
  std::int64_t& g = script->model.min_gain_permille;
  g = std::min<std::int64_t>(999, std::max<std::int64_t>(10, g * 2));
  return render_lua(script->model, script->baseline_source);
}

}  // namespace evodispatch::search

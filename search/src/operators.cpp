#include <evodispatch/search/operators.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>

#include <evodispatch/heuristics/latency_model.hpp>
#include <evodispatch/search/latency_fit.hpp>
#include <evodispatch/search/lua_text.hpp>

namespace evodispatch::search {

namespace {

constexpr int kSplitLadder[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256};

template <class T>
const T& pick(const std::vector<T>& v, Rng& rng) {
  return v[rng.below(v.size())];
}

// The interval a normalised rule allows for a feature, or nullopt when unconstrained.
struct Range {
  std::int64_t lo;
  std::int64_t hi;
};
std::optional<Range> range_of(const Rule& r, Feature f) {
  std::optional<Range> out;
  for (const auto& c : r.when) {
    if (c.feature != f) continue;
    if (!out) out = Range{std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()};
    switch (c.op) {
      case Op::eq: out->lo = std::max(out->lo, c.value); out->hi = std::min(out->hi, c.value); break;
      case Op::le: out->hi = std::min(out->hi, c.value); break;
      case Op::lt: out->hi = std::min(out->hi, c.value - 1); break;
      case Op::ge: out->lo = std::max(out->lo, c.value); break;
      case Op::gt: out->lo = std::max(out->lo, c.value + 1); break;
    }
  }
  return out;
}

void add_range(std::vector<Condition>& when, Feature f, const Range& r) {
  if (r.lo == r.hi) {
    when.push_back({f, Op::eq, r.lo});
    return;
  }
  if (r.lo != std::numeric_limits<std::int64_t>::min()) when.push_back({f, Op::ge, r.lo});
  if (r.hi != std::numeric_limits<std::int64_t>::max()) when.push_back({f, Op::le, r.hi});
}

// The next distinct training value of a feature above or below v (v itself at the ends),
// or v +- 1 when the training shapes have no values for it.
std::int64_t neighbour(const OperatorContext& ctx, Feature f, std::int64_t v, bool up) {
  const auto& vals = ctx.distinct[static_cast<int>(f)];
  if (vals.empty()) return up ? v + 1 : v - 1;
  if (up) {
    auto it = std::upper_bound(vals.begin(), vals.end(), v);
    return it == vals.end() ? v + 1 : *it;
  }
  auto it = std::lower_bound(vals.begin(), vals.end(), v);
  return it == vals.begin() ? v - 1 : *(it - 1);
}

// A threshold for `f op v` (op <= or >=) that generalises: halfway, in log space, from
// the training value v to the next training value beyond it, so that a bound sits between
// the values the search saw rather than on one of them (v at the end of the range).
std::int64_t cut_beyond(const OperatorContext& ctx, Feature f, std::int64_t v, Op op) {
  const auto& vals = ctx.distinct[static_cast<int>(f)];
  const auto mid = [](std::int64_t a, std::int64_t b, bool up) {  // a < b
    if (a < 1) return a + (b - a + (up ? 1 : 0)) / 2;
    const double g = std::sqrt(static_cast<double>(a) * static_cast<double>(b));
    return static_cast<std::int64_t>(up ? std::ceil(g) : std::floor(g));
  };
  if (op == Op::le) {
    const auto it = std::upper_bound(vals.begin(), vals.end(), v);
    return it == vals.end() ? v : std::clamp(mid(v, *it, false), v, *it - 1);
  }
  const auto it = std::lower_bound(vals.begin(), vals.end(), v);
  return it == vals.begin() ? v : std::clamp(mid(*(it - 1), v, true), *(it - 1) + 1, v);
}

// A new condition at training value v: equality only on a categorical feature; on any
// other a range bound between training values.
Condition condition_at(const OperatorContext& ctx, Feature f, std::int64_t v, Op op) {
  if (op == Op::eq && !categorical(f)) op = v % 2 ? Op::le : Op::ge;  // deterministic, either side
  if (op != Op::eq) v = cut_beyond(ctx, f, v, op);
  return {f, op, v};
}

// The condition's bound moved to the next training value up or down, as a cut between
// values again (equality moves to the neighbouring value).
void shift_bound(Condition& c, const OperatorContext& ctx, bool up) {
  if (c.op == Op::eq) {
    c.value = neighbour(ctx, c.feature, c.value, up);
    return;
  }
  const auto& vals = ctx.distinct[static_cast<int>(c.feature)];
  if (vals.empty()) {
    c.value += up ? 1 : -1;
    return;
  }
  const bool upper = c.op == Op::le || c.op == Op::lt;
  // The training value at the edge of what the bound lets through.
  auto edge = upper ? std::upper_bound(vals.begin(), vals.end(), c.value) : std::lower_bound(vals.begin(), vals.end(), c.value);
  if (upper) {
    if (edge == vals.begin()) return;
    --edge;
  } else if (edge == vals.end()) {
    return;
  }
  if (up && edge + 1 != vals.end()) ++edge;
  else if (!up && edge != vals.begin()) --edge;
  c = {c.feature, upper ? Op::le : Op::ge, cut_beyond(ctx, c.feature, *edge, upper ? Op::le : Op::ge)};
}

int new_constant(int c, const OperatorContext& ctx, Rng& rng) {
  int v = c;
  switch (rng.below(6)) {
    case 0: v = c - 1; break;
    case 1: v = c + 1; break;
    case 2: v = c * 2; break;
    case 3: v = c / 2; break;
    case 4: {  // the next rung of the ladder of usual split counts, up or down
      const bool up = rng.chance(0.5);
      v = c;
      for (int x : kSplitLadder) {
        if (up && x > c) { v = x; break; }
        if (!up && x < c) v = x;
      }
      break;
    }
    default: v = static_cast<int>(rng.between(1, ctx.max_splits)); break;
  }
  v = std::clamp(v, 1, ctx.max_splits);
  if (v == c) v = c == 1 ? 2 : c - 1;
  return std::clamp(v, 1, ctx.max_splits);
}

std::optional<bool> new_pack(const std::optional<bool>& p, Rng& rng) {
  const int now = !p ? 0 : (*p ? 1 : 2);
  const int next = (now + 1 + static_cast<int>(rng.below(2))) % 3;
  if (next == 0) return std::nullopt;
  return next == 1;
}

// What a split count may be a ceiling quotient of: KV tiles (nblk), or KiB of KV per CTA,
// which means the same amount of work per split at every head dim and dtype.
std::vector<Feature> ceil_div_features(const OperatorContext& ctx) {
  std::vector<Feature> out;
  for (Feature f : {Feature::nblk, Feature::kv_kib})
    if (ctx.allowed.contains(f)) out.push_back(f);
  return out;
}

// An expression with the same value as constant c at the shape v.
SplitExpr expression_for(int c, const FeatureValues& v, const OperatorContext& ctx, Rng& rng) {
  SplitExpr e;
  e.lo = 1;
  e.hi = ctx.max_splits;
  const std::vector<Feature> spans = ceil_div_features(ctx);
  const bool has_span = !spans.empty();
  const bool has_fill = ctx.allowed.contains(Feature::num_sms) && !ctx.divisors.empty();
  const int form = has_span && has_fill ? static_cast<int>(rng.below(3)) : (has_fill ? 0 : (has_span ? 1 : -1));
  if (form < 0) {
    e.constant = c;
    e.lo = e.hi = c;
    return e;
  }
  if (form == 0 || form == 2) {
    Quotient q;
    q.num = Feature::num_sms;
    q.den = ctx.allowed.contains(Feature::ctas) && rng.chance(0.7) ? Feature::ctas : pick(ctx.divisors, rng);
    const double num = static_cast<double>(v[static_cast<int>(q.num)]);
    const double den = static_cast<double>(std::max<std::int64_t>(v[static_cast<int>(q.den)], 1));
    q.div = std::max(1, static_cast<int>(std::lround(num / (den * c))));
    e.quotient = q;
  }
  if (form == 1 || form == 2) {
    CeilDiv d;
    d.of = pick(spans, rng);
    d.k = std::max(1, static_cast<int>(std::lround(static_cast<double>(v[static_cast<int>(d.of)]) / c)));
    e.ceil_div = d;
  }
  return e;
}

// A training shape the rule matches (the first, from a random start), or any.
const FeatureValues& shape_for(const Rule& r, const OperatorContext& ctx, Rng& rng) {
  const std::size_t n = ctx.train.size();
  const std::size_t start = rng.below(n);
  for (std::size_t k = 0; k < n; ++k) {
    const auto& v = ctx.train[(start + k) % n];
    if (holds(r, v)) return v;
  }
  return ctx.train[start];
}

void perturb_condition(Rule& r, const OperatorContext& ctx, Rng& rng) {
  const double what = rng.real();
  if (what < 0.12 && !r.when.empty()) {  // generalise: one condition fewer
    r.when.erase(r.when.begin() + static_cast<long>(rng.below(r.when.size())));
    return;
  }
  if ((what < 0.24 || r.when.empty()) && !ctx.condition_features.empty()) {  // specialise
    const auto& v = shape_for(r, ctx, rng);
    const Feature f = pick(ctx.condition_features, rng);
    const Op ops[] = {Op::le, Op::eq, Op::ge};
    r.when.push_back(condition_at(ctx, f, v[static_cast<int>(f)], ops[rng.below(3)]));
    return;
  }
  if (r.when.empty()) return;
  Condition& c = r.when[rng.below(r.when.size())];
  if (rng.chance(0.15)) {  // another operator, at a neighbouring training value
    const Op ops[] = {Op::le, Op::eq, Op::ge};
    c = condition_at(ctx, c.feature, neighbour(ctx, c.feature, c.value, c.op == Op::ge), ops[rng.below(3)]);
    return;
  }
  shift_bound(c, ctx, rng.chance(0.5));
}

void perturb_expression(SplitExpr& e, const OperatorContext& ctx, Rng& rng) {
  switch (rng.below(7)) {
    case 0:
      if (e.quotient) e.quotient->div = std::max(1, e.quotient->div + (rng.chance(0.5) ? 1 : -1));
      else if (e.ceil_div) e.ceil_div->k = std::max(1, e.ceil_div->k + (rng.chance(0.5) ? 1 : -1));
      break;
    case 1:
      if (e.ceil_div) e.ceil_div->k = rng.chance(0.5) ? e.ceil_div->k * 2 : std::max(1, e.ceil_div->k / 2);
      else if (e.quotient) e.quotient->div = rng.chance(0.5) ? e.quotient->div * 2 : std::max(1, e.quotient->div / 2);
      break;
    case 2: e.lo = std::clamp(e.lo + (rng.chance(0.5) ? 1 : -1), 1, ctx.max_splits); break;
    case 3: e.hi = std::clamp(rng.chance(0.5) ? e.hi * 2 : e.hi / 2, 1, ctx.max_splits); break;
    case 4:  // drop one of two terms
      if (e.quotient && e.ceil_div) {
        if (rng.chance(0.5)) e.quotient.reset();
        else e.ceil_div.reset();
      }
      break;
    case 5:  // add the missing term
      if (!e.ceil_div && !ceil_div_features(ctx).empty())
        e.ceil_div = CeilDiv{pick(ceil_div_features(ctx), rng), 1 << rng.below(3)};
      else if (!e.quotient && ctx.allowed.contains(Feature::num_sms) && !ctx.divisors.empty())
        e.quotient = Quotient{Feature::num_sms, pick(ctx.divisors, rng), 1 + static_cast<int>(rng.below(2))};
      break;
    default:
      if (e.quotient && !ctx.divisors.empty()) e.quotient->den = pick(ctx.divisors, rng);
      break;
  }
}

std::optional<Program> perturb(const Program& parent, const OperatorContext& ctx, Rng& rng) {
  if (parent.rules.empty()) return std::nullopt;
  Program child = parent;
  Rule& r = child.rules[rng.below(child.rules.size())];
  const double what = rng.real();
  if (what < 0.45) {
    perturb_condition(r, ctx, rng);
  } else if (what < 0.85) {
    if (r.num_splits.is_constant()) {
      r.num_splits.constant = new_constant(r.num_splits.constant, ctx, rng);
      r.num_splits.lo = r.num_splits.hi = r.num_splits.constant;
    } else if (rng.chance(0.1)) {
      const int c = eval_split(r.num_splits, shape_for(r, ctx, rng));
      r.num_splits = SplitExpr{};
      r.num_splits.constant = r.num_splits.lo = r.num_splits.hi = c;
    } else {
      perturb_expression(r.num_splits, ctx, rng);
    }
  } else if (what < 0.97 || ctx.sm_margins.size() < 2) {
    r.pack_gqa = new_pack(r.pack_gqa, rng);
  } else {
    r.sm_margin = pick(ctx.sm_margins, rng);
  }
  return child;
}

// One rule around training shape v: 1 to 3 conditions at its values, and the oracle's
// decision there, an expression that gives it, or a ladder value.
Rule rule_at(const FeatureValues& v, const Decision* oracle, const OperatorContext& ctx, Rng& rng) {
  Rule r;
  if (!ctx.condition_features.empty()) {
    std::vector<Feature> fs = ctx.condition_features;
    const std::size_t k = std::min<std::size_t>(fs.size(), 1 + rng.below(3));
    for (std::size_t i = 0; i < k; ++i) {
      const std::size_t j = i + rng.below(fs.size() - i);
      std::swap(fs[i], fs[j]);
      const double u = rng.real();
      const Op op = u < 0.4 && categorical(fs[i]) ? Op::eq : (u < 0.7 ? Op::le : Op::ge);
      r.when.push_back(condition_at(ctx, fs[i], v[static_cast<int>(fs[i])], op));
    }
  }
  const double u = rng.real();
  if (oracle && u < 0.8) {
    r.num_splits.constant = std::clamp(oracle->num_splits, 1, ctx.max_splits);
    r.pack_gqa = oracle->pack_gqa;
    if (std::find(ctx.sm_margins.begin(), ctx.sm_margins.end(), oracle->sm_margin) != ctx.sm_margins.end())
      r.sm_margin = oracle->sm_margin;
    if (u < 0.25) r.num_splits = expression_for(r.num_splits.constant, v, ctx, rng);
  } else {
    r.num_splits.constant = std::clamp(kSplitLadder[rng.below(std::size(kSplitLadder))], 1, ctx.max_splits);
    if (rng.chance(0.5)) r.pack_gqa = rng.chance(0.5);
  }
  if (r.num_splits.is_constant()) r.num_splits.lo = r.num_splits.hi = r.num_splits.constant;
  return r;
}

std::optional<Program> add_rule(const Program& parent, std::span<const double> losses, const OperatorContext& ctx,
                                Rng& rng) {
  if (static_cast<int>(parent.rules.size()) >= ctx.max_rules || ctx.train.empty()) return std::nullopt;
  std::size_t target = rng.below(ctx.train.size());
  if (losses.size() == ctx.train.size()) {
    std::vector<double> w(losses.size());
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::max(losses[i], 0.0) + 1e-3;
    target = rng.weighted(w);
  }
  const FeatureValues& v = ctx.train[target];
  const Decision* oracle = ctx.train_oracle.empty() ? nullptr : &ctx.train_oracle[target];
  Program child = parent;

  const bool guided = losses.size() == ctx.train.size() && ctx.train_table.size() == ctx.train.size() &&
                      ctx.train_oracle_us.size() == ctx.train.size();
  if (!guided) {
    const Rule r = rule_at(v, oracle, ctx, rng);
    const std::size_t at = rng.chance(0.7) ? 0 : rng.below(child.rules.size() + 1);
    child.rules.insert(child.rules.begin() + static_cast<long>(at), r);
    return child;
  }
  // The parent's latency per shape: the oracle's times exp(loss).
  std::vector<double> parent_us(ctx.train.size());
  for (std::size_t k = 0; k < parent_us.size(); ++k) parent_us[k] = ctx.train_oracle_us[k] * std::exp(losses[k]);
  std::optional<Rule> best;
  double best_gain = 0;
  for (int t = 0; t < std::max(ctx.proposals, 1); ++t) {
    Rule r = rule_at(v, oracle, ctx, rng);
    const auto gain = front_rule_gain(r, parent_us, ctx);
    if (!gain) continue;
    if (!best || *gain > best_gain) {
      best = std::move(r);
      best_gain = *gain;
    }
  }
  if (!best) best = rule_at(v, oracle, ctx, rng);  // nothing the table can judge: as proposed
  // Simpler is better for shapes the search never sees: drop each condition whose
  // absence costs nothing on the training shapes.
  for (std::size_t i = 0; i < best->when.size();) {
    Rule wider = *best;
    wider.when.erase(wider.when.begin() + static_cast<long>(i));
    const auto gain = front_rule_gain(wider, parent_us, ctx);
    if (gain && *gain >= best_gain - 1e-12) {
      best = std::move(wider);
      best_gain = *gain;
    } else {
      ++i;
    }
  }
  child.rules.insert(child.rules.begin(), *best);
  return child;
}

std::optional<Program> drop_rule(const Program& parent, Rng& rng) {
  if (parent.rules.empty()) return std::nullopt;
  Program child = parent;
  child.rules.erase(child.rules.begin() + static_cast<long>(rng.below(child.rules.size())));
  return child;
}

std::optional<Program> swap_rules(const Program& parent, Rng& rng) {
  if (parent.rules.size() < 2) return std::nullopt;
  Program child = parent;
  const std::size_t i = rng.below(child.rules.size() - 1);
  std::swap(child.rules[i], child.rules[i + 1]);
  return child;
}

// Two adjacent rules become one over the hull of their conditions (a feature only one
// of them constrains becomes free), with the decision of either.
std::optional<Program> merge_rules(const Program& parent, Rng& rng) {
  if (parent.rules.size() < 2) return std::nullopt;
  Program child = parent;
  const std::size_t i = rng.below(child.rules.size() - 1);
  const Rule& a = child.rules[i];
  const Rule& b = child.rules[i + 1];
  Rule m = rng.chance(0.5) ? a : b;
  m.when.clear();
  for (int f = 0; f < kNumFeatures; ++f) {
    const auto ra = range_of(a, static_cast<Feature>(f));
    const auto rb = range_of(b, static_cast<Feature>(f));
    if (ra && rb) add_range(m.when, static_cast<Feature>(f), {std::min(ra->lo, rb->lo), std::max(ra->hi, rb->hi)});
  }
  child.rules[i] = m;
  child.rules.erase(child.rules.begin() + static_cast<long>(i) + 1);
  return child;
}

std::optional<Program> to_expression(const Program& parent, const OperatorContext& ctx, Rng& rng) {
  std::vector<std::size_t> constants;
  for (std::size_t i = 0; i < parent.rules.size(); ++i)
    if (parent.rules[i].num_splits.is_constant()) constants.push_back(i);
  if (constants.empty() || ctx.train.empty()) return std::nullopt;
  Program child = parent;
  Rule& r = child.rules[pick(constants, rng)];
  const SplitExpr e = expression_for(r.num_splits.constant, shape_for(r, ctx, rng), ctx, rng);
  if (e.is_constant()) return std::nullopt;
  r.num_splits = e;
  return child;
}

std::optional<Program> crossover(const Program& parent, std::span<const Program* const> inspirations,
                                 const OperatorContext& ctx, Rng& rng) {
  if (inspirations.empty()) return std::nullopt;
  const Program& other = *inspirations[rng.below(inspirations.size())];
  if (parent.rules.empty() && other.rules.empty()) return std::nullopt;
  Program child = parent;
  child.rules.clear();
  const std::size_t i = rng.below(parent.rules.size() + 1);
  const std::size_t j = rng.below(other.rules.size() + 1);
  child.rules.insert(child.rules.end(), parent.rules.begin(), parent.rules.begin() + static_cast<long>(i));
  child.rules.insert(child.rules.end(), other.rules.begin() + static_cast<long>(j), other.rules.end());
  if (static_cast<int>(child.rules.size()) > ctx.max_rules) child.rules.resize(static_cast<std::size_t>(ctx.max_rules));
  return child;
}

// A latency-model base evolves through its parameters (the model stays a model, so its
// exports keep it); any other base through one numeric literal of its source.
std::optional<std::string> perturb_latency_model(const std::string& source, const DeviceInfo& device, Rng& rng) {
  auto script = latency_model_of(source);
  if (!script) return std::nullopt;
  const auto& params = latency_parameters();
  const auto& p = params[rng.below(params.size())];
  std::int64_t& v = script->model.*p.field;
  const std::int64_t was = v;
  if (p.hi <= 64) v += rng.chance(0.5) ? 1 : -1;
  else v = std::llround(static_cast<double>(std::max<std::int64_t>(v, 1)) * (0.8 + 0.45 * rng.real()));
  v = std::clamp(v, lowest_on(p, device), p.hi);
  if (v == was) return std::nullopt;
  return render_lua(script->model, script->baseline_source);
}

std::optional<Program> base_literal(const Program& parent, const OperatorContext& ctx, Rng& rng) {
  auto source = latency_model_of(parent.base_source) ? perturb_latency_model(parent.base_source, ctx.device, rng)
                                                     : perturb_one_literal(parent.base_source, rng);
  if (!source) return std::nullopt;
  Program child = parent;
  child.base_source = canonical_lua(*source);
  if (!child.base_name.ends_with("~")) child.base_name += "~";
  return child;
}

// Rules may only use the run's features; an inspiration from elsewhere (or an edge case
// of an operator) that does not is cut down to what is allowed.
void restrict_features(Program& p, const OperatorContext& ctx) {
  for (auto& r : p.rules) {
    std::erase_if(r.when, [&](const Condition& c) { return !ctx.allowed.contains(c.feature); });
    auto& e = r.num_splits;
    if (e.quotient && (!ctx.allowed.contains(e.quotient->num) || !ctx.allowed.contains(e.quotient->den)))
      e.quotient.reset();
    if (e.ceil_div && !ctx.allowed.contains(e.ceil_div->of)) e.ceil_div.reset();
    if (e.is_constant()) e.constant = std::clamp(e.constant == 0 ? e.lo : e.constant, 1, ctx.max_splits);
  }
}

}  // namespace

std::optional<double> front_rule_gain(const Rule& rule, std::span<const double> parent_us, const OperatorContext& ctx) {
  if (ctx.train_table.size() != ctx.train.size() || parent_us.size() != ctx.train.size()) return std::nullopt;
  const double log_floor = std::log(ctx.floor);
  double gain = 0;
  bool any = false;
  for (std::size_t k = 0; k < ctx.train.size(); ++k) {
    const FeatureValues& v = ctx.train[k];
    if (!holds(rule, v)) continue;
    Decision d;
    d.num_splits = eval_split(rule.num_splits, v);
    // The contract's default, as resolve() fills it in.
    d.pack_gqa = rule.pack_gqa ? *rule.pack_gqa : v[static_cast<int>(Feature::qpk)] > 1;
    d.sm_margin = rule.sm_margin;
    const auto it = ctx.train_table[k].find(decision_code(d));
    if (it == ctx.train_table[k].end() || !(it->second > 0)) return std::nullopt;
    const double us = it->second;
    gain += std::log(parent_us[k] / us);
    const double vs_baseline = std::log(ctx.train_baseline_us[k] / us);
    if (vs_baseline < log_floor) gain -= 10 * (log_floor - vs_baseline);
    any = true;
  }
  if (!any) return std::nullopt;
  return gain;
}

std::string_view to_string(OperatorKind k) {
  switch (k) {
    case OperatorKind::perturb: return "perturb";
    case OperatorKind::add_rule: return "add_rule";
    case OperatorKind::drop_rule: return "drop_rule";
    case OperatorKind::swap_rules: return "swap_rules";
    case OperatorKind::merge_rules: return "merge_rules";
    case OperatorKind::to_expression: return "to_expression";
    case OperatorKind::crossover: return "crossover";
    case OperatorKind::base_literal: return "base_literal";
    case OperatorKind::external: return "external";
  }
  return "?";
}

std::vector<double> operator_weights(const OperatorWeights& w) {
  return {w.perturb, w.add_rule, w.drop_rule, w.swap_rules, w.merge_rules, w.to_expression, w.crossover,
          w.base_literal, w.external};
}

void OperatorContext::prepare() {
  distinct.assign(kNumFeatures, {});
  for (const auto& v : train)
    for (int f = 0; f < kNumFeatures; ++f) distinct[f].push_back(v[f]);
  for (auto& d : distinct) {
    std::sort(d.begin(), d.end());
    d.erase(std::unique(d.begin(), d.end()), d.end());
  }
  condition_features.clear();
  divisors.clear();
  for (Feature f : allowed.list()) {
    if (distinct[static_cast<int>(f)].size() >= 2) condition_features.push_back(f);
    if (positive(f) && f != Feature::num_sms) divisors.push_back(f);
  }
}

namespace {
std::optional<Program> apply_to_bare(OperatorKind kind, const Program& parent, std::span<const Program* const> inspirations,
                                     std::span<const double> losses, const OperatorContext& ctx, Rng& rng) {
  std::optional<Program> child;
  switch (kind) {
    case OperatorKind::perturb: child = perturb(parent, ctx, rng); break;
    case OperatorKind::add_rule: child = add_rule(parent, losses, ctx, rng); break;
    case OperatorKind::drop_rule: child = drop_rule(parent, rng); break;
    case OperatorKind::swap_rules: child = swap_rules(parent, rng); break;
    case OperatorKind::merge_rules: child = merge_rules(parent, rng); break;
    case OperatorKind::to_expression: child = to_expression(parent, ctx, rng); break;
    case OperatorKind::crossover: child = crossover(parent, inspirations, ctx, rng); break;
    case OperatorKind::base_literal: child = base_literal(parent, ctx, rng); break;
    case OperatorKind::external: return std::nullopt;  // the engine runs the command
  }
  if (!child) return std::nullopt;
  restrict_features(*child, ctx);
  Program out = normalise(*child, ctx.max_splits);
  if (static_cast<int>(out.rules.size()) > ctx.max_rules) out.rules.resize(static_cast<std::size_t>(ctx.max_rules));
  return out;
}
}  // namespace

std::optional<Program> apply_operator(OperatorKind kind, const Program& parent, std::span<const Program* const> inspirations,
                                      std::span<const double> losses, const OperatorContext& ctx, Rng& rng) {
  // The search changes rules; their boxes are what the engine verifies afterwards.
  const auto bare = [](const Program& p) {
    Program out = p;
    for (Rule& r : out.rules) r.box.clear(), r.reach.clear();
    return out;
  };
  const Program unboxed = bare(parent);
  std::vector<Program> others;
  for (const Program* p : inspirations) others.push_back(bare(*p));
  std::vector<const Program*> other_ptrs;
  for (const Program& p : others) other_ptrs.push_back(&p);
  return apply_to_bare(kind, unboxed, other_ptrs, losses, ctx, rng);
}

}  // namespace evodispatch::search

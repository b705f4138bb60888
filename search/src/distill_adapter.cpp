#include <evodispatch/search/distill_adapter.hpp>

#include <evodispatch/heuristics/latency_model.hpp>
#include <evodispatch/heuristics/policy.hpp>

namespace evodispatch::search {

namespace {
distill::Feature feature_of(Feature f) {
  const auto d = distill::parse_feature(name(f));
  if (!d) throw InputError("distill: feature '" + std::string(name(f)) + "' has no distilled counterpart");
  return *d;
}
}  // namespace

distill::Bound to_bound(const Condition& c) {
  distill::Bound b;
  b.feature = feature_of(c.feature);
  switch (c.op) {
    case Op::lt: b.hi = c.value - 1; break;
    case Op::le: b.hi = c.value; break;
    case Op::eq: b.lo = b.hi = c.value; break;
    case Op::ge: b.lo = c.value; break;
    case Op::gt: b.lo = c.value + 1; break;
  }
  return b;
}

distill::SplitExpr to_split_expr(const SplitExpr& e) {
  distill::SplitExpr out;
  // The search stores 0 as the constant of an expression; the distilled form keeps its
  // default there, so a function and its heuristic.json are equal.
  if (e.is_constant()) out.constant = e.constant;
  out.lo = e.lo;
  out.hi = e.hi;
  if (e.quotient) out.quotient = distill::Quotient{feature_of(e.quotient->num), feature_of(e.quotient->den), e.quotient->div};
  if (e.ceil_div) out.ceil_div = distill::CeilDiv{feature_of(e.ceil_div->of), e.ceil_div->k};
  return out;
}

namespace {
bool is_fa3_source(const std::string& canonical_source) {
  static const std::string fa3 = base_program("fa3", *builtin_policy_source("fa3")).base_source;
  return canonical_source == fa3;
}

bool is_fa3_kvcache_source(const std::string& canonical_source) {
  static const std::string kv = base_program("fa3-kvcache", *builtin_policy_source("fa3-kvcache")).base_source;
  return canonical_source == kv;
}
}  // namespace

bool base_is_fa3(const Program& p) { return is_fa3_source(p.base_source); }

distill::DecisionFunction to_decision_function(const Program& p, const DeviceInfo& hw,
                                               const std::vector<Shape>& shapes) {
  distill::DecisionFunction fn;
  for (const Rule& r : p.rules) {
    distill::Rule d;
    // The verified box is one more conjunction: exported with the rule, it keeps the rule
    // from firing on shapes the search never measured it on. A rule held near its evidence
    // becomes one rule per neighbourhood, in a row: the first that holds is the union.
    for (const Condition& c : r.when) d.when.push_back(to_bound(c));
    for (const Condition& c : r.box) d.when.push_back(to_bound(c));
    d.num_splits = to_split_expr(r.num_splits);
    d.pack_gqa = r.pack_gqa;
    d.sm_margin = r.sm_margin;
    if (r.reach.empty()) fn.rules.push_back(std::move(d));
    for (const auto& near : r.reach) {
      distill::Rule one = d;
      for (const Condition& c : near) one.when.push_back(to_bound(c));
      fn.rules.push_back(std::move(one));
    }
  }
  // FA3's own dispatch as the base (the fa3 policy, or fa3-kvcache on FA3's serving path)
  // has an exact C++ twin: the rules translate exactly in front of it.
  if (base_is_fa3(p) || is_fa3_kvcache_source(p.base_source)) {
    fn.fallback = base_is_fa3(p) ? distill::Fallback::fa3 : distill::Fallback::fa3_kvcache;
    fn.method = "rules";
    return fn;
  }
  // A latency model in front of FA3's own dispatch (either) is exported as the model itself:
  // exact on every shape, where a tree would only copy it on the grid.
  if (auto script = latency_model_of(p.base_source);
      script && (is_fa3_source(script->baseline_source) || is_fa3_kvcache_source(script->baseline_source))) {
    fn.model = script->model;
    fn.fallback = is_fa3_source(script->baseline_source) ? distill::Fallback::fa3 : distill::Fallback::fa3_kvcache;
    fn.method = p.rules.empty() ? "model" : "rules+model";
    return fn;
  }
  SandboxLimits limits;  // generous: fitting is about decisions, not the call budget
  limits.max_instructions = 50'000'000;
  auto base = DispatchScript::load("base:" + p.base_name, p.base_source, limits);
  distill::DecisionFunction tree = distill::fit_tree(*base, hw, shapes);
  for (auto& r : tree.rules) fn.rules.push_back(std::move(r));
  fn.fallback = distill::Fallback::none;
  fn.method = p.rules.empty() ? "tree" : "rules+tree";
  return fn;
}

}  // namespace evodispatch::search

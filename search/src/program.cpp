#include <evodispatch/search/program.hpp>

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <span>

#include <evodispatch/heuristics/json_reader.hpp>
#include <evodispatch/search/hash.hpp>
#include <evodispatch/search/lua_text.hpp>

namespace evodispatch::search {

namespace {

constexpr std::int64_t kNoUpper = std::numeric_limits<std::int64_t>::max();

struct Interval {
  std::int64_t lo;
  std::int64_t hi;
  bool operator==(const Interval&) const = default;
};
using Box = std::array<Interval, kNumFeatures>;

Box box_of(const std::vector<Condition>& when) {
  Box b;
  for (int f = 0; f < kNumFeatures; ++f) b[f] = {domain_min(static_cast<Feature>(f)), kNoUpper};
  for (const auto& c : when) {
    Interval& iv = b[static_cast<int>(c.feature)];
    // Far beyond any feature value, and far from overflowing when moved by one.
    const std::int64_t v = std::clamp<std::int64_t>(c.value, -(std::int64_t{1} << 40), std::int64_t{1} << 40);
    switch (c.op) {
      case Op::lt: iv.hi = std::min(iv.hi, v - 1); break;
      case Op::le: iv.hi = std::min(iv.hi, v); break;
      case Op::eq: iv.lo = std::max(iv.lo, v); iv.hi = std::min(iv.hi, v); break;
      case Op::ge: iv.lo = std::max(iv.lo, v); break;
      case Op::gt: iv.lo = std::max(iv.lo, v + 1); break;
    }
  }
  return b;
}

Box intersection(Box a, const Box& b) {
  for (int f = 0; f < kNumFeatures; ++f) a[f] = {std::max(a[f].lo, b[f].lo), std::min(a[f].hi, b[f].hi)};
  return a;
}

// Where both the rule's conditions and its verified box hold.
Box area_of(const Rule& r) { return intersection(box_of(r.when), box_of(r.box)); }

bool empty(const Box& b) {
  for (const auto& iv : b)
    if (iv.lo > iv.hi) return true;
  return false;
}

bool inside(const Box& inner, const Box& outer) {
  for (int f = 0; f < kNumFeatures; ++f)
    if (inner[f].lo < outer[f].lo || inner[f].hi > outer[f].hi) return false;
  return true;
}

// A rule tests a quantity by range, so a single value of one is written as two bounds;
// a box, which only records what was verified, writes it as equality.
enum class Points { as_range, as_equality };

std::vector<Condition> conditions_of(const Box& b, Points points) {
  std::vector<Condition> out;
  for (int f = 0; f < kNumFeatures; ++f) {
    const auto feature = static_cast<Feature>(f);
    const Interval& iv = b[f];
    if (iv.lo == iv.hi && (points == Points::as_equality || categorical(feature))) {
      out.push_back({feature, Op::eq, iv.lo});
      continue;
    }
    if (iv.lo > domain_min(feature)) out.push_back({feature, Op::ge, iv.lo});
    if (iv.hi != kNoUpper) out.push_back({feature, Op::le, iv.hi});
  }
  return out;
}

// A rule's neighbourhoods inside its area, sorted, none inside another, each written as the
// bounds it adds to the area.
std::vector<std::vector<Condition>> canonical_reach(std::vector<Box> near, const Box& area) {
  const auto key = [](const Box& b) {
    std::array<std::int64_t, 2 * kNumFeatures> k{};
    for (int f = 0; f < kNumFeatures; ++f) k[2 * f] = b[f].lo, k[2 * f + 1] = b[f].hi;
    return k;
  };
  std::sort(near.begin(), near.end(), [&](const Box& a, const Box& b) { return key(a) < key(b); });
  near.erase(std::unique(near.begin(), near.end()), near.end());
  std::vector<std::vector<Condition>> out;
  for (std::size_t i = 0; i < near.size(); ++i) {
    const auto within = [&](std::size_t j) { return j != i && inside(near[i], near[j]); };
    bool covered = false;
    for (std::size_t j = 0; j < near.size() && !covered; ++j) covered = within(j);
    if (covered) continue;
    std::vector<Condition> bounds;
    for (int f = 0; f < kNumFeatures; ++f) {
      const auto feature = static_cast<Feature>(f);
      const Interval& iv = near[i][f];
      if (iv.lo == area[f].lo && iv.hi == area[f].hi) continue;
      if (iv.lo == iv.hi) {
        bounds.push_back({feature, Op::eq, iv.lo});
        continue;
      }
      if (iv.lo > area[f].lo) bounds.push_back({feature, Op::ge, iv.lo});
      if (iv.hi < area[f].hi) bounds.push_back({feature, Op::le, iv.hi});
    }
    out.push_back(std::move(bounds));
  }
  return out;
}

SplitExpr normalise_expr(SplitExpr e, int max_splits) {
  auto clamp_splits = [&](int v) { return std::clamp(v, 1, max_splits); };
  if (e.quotient) {
    e.quotient->div = std::max(e.quotient->div, 1);
    // A divisor that can be 0 would make the rendered Lua raise; use the CTA count.
    if (!positive(e.quotient->den)) e.quotient->den = Feature::ctas;
  }
  if (e.ceil_div) e.ceil_div->k = std::max(e.ceil_div->k, 1);
  if (e.is_constant()) {
    SplitExpr c;
    c.constant = clamp_splits(e.constant);
    c.lo = c.hi = c.constant;
    return c;
  }
  e.lo = clamp_splits(e.lo);
  e.hi = clamp_splits(e.hi);
  if (e.lo > e.hi) std::swap(e.lo, e.hi);
  if (e.lo == e.hi) {
    SplitExpr c;
    c.constant = c.lo = c.hi = e.lo;
    return c;
  }
  e.constant = 0;  // unused by an expression; fixed so equal expressions compare equal
  return e;
}

std::string lua_feature(Feature f) { return std::string(lua_expression(f)); }

std::string render_condition(const Condition& c) {
  return lua_feature(c.feature) + " " + std::string(to_string(c.op)) + " " + std::to_string(c.value);
}

std::string render_split(const SplitExpr& e) {
  if (e.is_constant()) return std::to_string(e.constant);
  std::vector<std::string> terms;
  if (e.quotient) {
    std::string den = lua_feature(e.quotient->den);
    if (e.quotient->div > 1) den = "(" + den + " * " + std::to_string(e.quotient->div) + ")";
    terms.push_back(lua_feature(e.quotient->num) + " // " + den);
  }
  if (e.ceil_div) {
    const std::string of = lua_feature(e.ceil_div->of);
    const int k = e.ceil_div->k;
    terms.push_back(k == 1 ? of : "(" + of + " + " + std::to_string(k - 1) + ") // " + std::to_string(k));
  }
  const std::string inner = terms.size() == 1 ? terms[0] : "math.min(" + terms[0] + ", " + terms[1] + ")";
  return "clamp(" + inner + ", " + std::to_string(e.lo) + ", " + std::to_string(e.hi) + ")";
}

std::string render_rule(const Rule& r) {
  std::string cond;
  for (const auto& c : r.when) cond += (cond.empty() ? "" : " and ") + render_condition(c);
  std::string box;
  for (const auto& c : r.box) box += (box.empty() ? "" : " and ") + render_condition(c);
  // The box is marked so that a reader tells what the search chose from what it verified.
  if (!box.empty()) cond += (cond.empty() ? "" : " and ") + std::string("--[[verified on]] ") + box;
  if (!r.reach.empty()) {
    std::string near;
    for (const auto& n : r.reach) {
      std::string one;
      for (const auto& c : n) one += (one.empty() ? "" : " and ") + render_condition(c);
      near += (near.empty() ? "" : " or\n      ") + ("(" + one + ")");
    }
    cond += (cond.empty() ? "" : " and ") + std::string("--[[near its evidence]] (\n      ") + near + ")";
  }
  if (cond.empty()) cond = "true";
  std::string ret = "{ num_splits = " + render_split(r.num_splits);
  if (r.pack_gqa) ret += std::string(", pack_gqa = ") + (*r.pack_gqa ? "true" : "false");
  ret += ", sm_margin = " + std::to_string(r.sm_margin) + " }";
  return "  if " + cond + " then return " + ret + " end\n";
}

bool uses_clamp(const Program& p) {
  for (const auto& r : p.rules)
    if (!r.num_splits.is_constant()) return true;
  return false;
}

constexpr std::string_view kBaseOpen = "local base_dispatch\ndo\n";
constexpr std::string_view kBaseClose = "base_dispatch = dispatch\nend\n";

std::string header(const Program& p) {
  return "-- evodispatch search program: " + std::to_string(p.rules.size()) + " rule(s) in front of the base policy \"" +
         p.base_name + "\".\n-- Generated from the rule list stored with it (programs.rules); edit that, not this.\n";
}

std::string render_body(const Program& p) {
  std::string out;
  if (uses_clamp(p)) out += "local function clamp(x, lo, hi) return math.max(lo, math.min(hi, x)) end\n\n";
  out += "function dispatch(s, hw)\n";
  for (const auto& r : p.rules) out += render_rule(r);
  out += "  return base_dispatch(s, hw)\nend\n";
  return out;
}

std::optional<bool> optional_bool(JsonReader& r, const std::string& field) {
  const auto* v = r.member(field);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_boolean()) throw InputError(r.path_of(field) + ": expected true, false or null, got " + json_kind(*v));
  return v->get<bool>();
}

int int_in(std::int64_t v, std::int64_t lo, std::int64_t hi, const std::string& path) {
  if (v < lo || v > hi)
    throw InputError(path + ": must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                     std::to_string(v));
  return static_cast<int>(v);
}

}  // namespace

std::string_view to_string(Op op) {
  switch (op) {
    case Op::lt: return "<";
    case Op::le: return "<=";
    case Op::eq: return "==";
    case Op::ge: return ">=";
    case Op::gt: return ">";
  }
  return "?";
}

std::optional<Op> parse_op(std::string_view s) {
  for (Op op : {Op::lt, Op::le, Op::eq, Op::ge, Op::gt})
    if (to_string(op) == s) return op;
  return std::nullopt;
}

Program base_program(std::string name, std::string_view source) {
  Program p;
  p.base_name = std::move(name);
  p.base_source = canonical_lua(source);
  return p;
}

Program normalise(const Program& in, int max_splits) {
  max_splits = std::clamp(max_splits, 1, kMaxSplits);
  Program out;
  out.base_name = in.base_name;
  out.base_source = in.base_source;
  std::vector<Box> kept;  // what earlier rules take whole
  const auto taken = [&](const Box& b) {
    return empty(b) || std::any_of(kept.begin(), kept.end(), [&](const Box& k) { return inside(b, k); });
  };
  for (const auto& r : in.rules) {
    const Box b = area_of(r);
    if (taken(b)) continue;
    std::vector<Box> near;
    bool everywhere = r.reach.empty();
    for (const auto& n : r.reach) {
      const Box x = intersection(box_of(n), b);
      if (taken(x)) continue;
      everywhere = everywhere || x == b;
      near.push_back(x);
    }
    if (!everywhere && near.empty()) continue;
    Rule n;
    n.when = conditions_of(box_of(r.when), Points::as_range);
    n.box = conditions_of(box_of(r.box), Points::as_equality);
    if (!everywhere) n.reach = canonical_reach(near, b);
    if (everywhere) kept.push_back(b);
    for (const Box& x : near) kept.push_back(x);
    n.num_splits = normalise_expr(r.num_splits, max_splits);
    n.pack_gqa = r.pack_gqa;
    n.sm_margin = std::max(r.sm_margin, 0);
    out.rules.push_back(std::move(n));
  }
  return out;
}

std::string render_lua(const Program& p) {
  std::string out = header(p);
  out += kBaseOpen;
  out += p.base_source;
  if (!out.empty() && out.back() != '\n') out += '\n';
  out += kBaseClose;
  out += '\n';
  out += render_body(p);
  return out;
}

std::string render_rules_text(const Program& p) { return render_body(p); }

std::string render_rules_lua(const Program& p) {
  std::string out = "local function base_dispatch(s, hw) return { num_splits = " + std::to_string(kMaxSplits) +
         ", sm_margin = hw.num_sms - 1 } end\n\n";
  out += render_body(p);
  return out;
}

Decision fallthrough_decision(const DeviceInfo& hw) {
  Decision d;
  d.num_splits = kMaxSplits;
  d.sm_margin = std::max(hw.num_sms - 1, 0);
  return d;
}

std::optional<std::string> extract_base_source(std::string_view rendered) {
  const std::size_t open = rendered.find(kBaseOpen);
  // The engine's own closing marker is the last one: a base may itself be a rendered
  // program with markers of its own inside.
  const std::size_t close = rendered.rfind(kBaseClose);
  if (open == std::string_view::npos || close == std::string_view::npos || close < open + kBaseOpen.size())
    return std::nullopt;
  return std::string(rendered.substr(open + kBaseOpen.size(), close - open - kBaseOpen.size()));
}

SplitSource split_source(const Program& p) {
  Program skeleton = p;
  skeleton.base_source.clear();
  return {render_lua(skeleton), p.base_source};
}

std::string describe_stored_program(const nlohmann::json& rules, std::string_view source,
                                    const std::optional<std::string>& base, const std::string& where) {
  const auto base_source = stored_base(source, base);
  if (rules.is_null() || !base_source) return stored_source(source, base);
  const Program p = program_from_json(rules, *base_source, where);
  return "-- " + std::to_string(p.rules.size()) + " rule(s) in front of the base policy \"" + p.base_name + "\"\n" +
         render_rules_text(p);
}

std::optional<std::string> stored_base(std::string_view source, const std::optional<std::string>& base) {
  return base ? base : extract_base_source(source);
}

std::string stored_source(std::string_view source, const std::optional<std::string>& base) {
  const std::size_t open = source.find(kBaseOpen);
  if (!base || open == std::string_view::npos) return std::string(source);
  std::string out(source.substr(0, open + kBaseOpen.size()));
  out += *base;
  if (!base->empty() && base->back() != '\n') out += '\n';  // as render_lua closes the block
  out += source.substr(open + kBaseOpen.size());
  return out;
}

std::string program_hash(const Program& p) { return program_hash(p, content_hash(p.base_source)); }

std::string canonical_rules_text(const Program& p) {
  std::string out;
  out.reserve(64 * p.rules.size() + 8);
  const auto conditions = [&](const std::vector<Condition>& cs) {
    for (const auto& c : cs) {
      out += name(c.feature);
      out += to_string(c.op);
      out += std::to_string(c.value);
      out += '&';
    }
  };
  for (const auto& r : p.rules) {
    conditions(r.when);
    if (!r.box.empty()) {
      out += '|';
      conditions(r.box);
    }
    for (const auto& n : r.reach) {
      out += '~';
      conditions(n);
    }
    out += ':';
    const SplitExpr& e = r.num_splits;
    if (e.is_constant()) {
      out += std::to_string(e.constant);
    } else {
      if (e.quotient) {
        out += "q(";
        out += name(e.quotient->num);
        out += ',';
        out += name(e.quotient->den);
        out += ',' + std::to_string(e.quotient->div) + ')';
      }
      if (e.ceil_div) {
        out += "c(";
        out += name(e.ceil_div->of);
        out += ',' + std::to_string(e.ceil_div->k) + ')';
      }
      out += '[' + std::to_string(e.lo) + ',' + std::to_string(e.hi) + ']';
    }
    out += r.pack_gqa ? (*r.pack_gqa ? "/p1" : "/p0") : "/p-";
    out += "/m" + std::to_string(r.sm_margin) + '\n';
  }
  return out;
}

std::string program_hash(const Program& p, std::string_view base_hash) {
  return content_hash(canonical_rules_text(p) + "--\n" + std::string(base_hash));
}

nlohmann::json to_json(const SplitExpr& e) {
  if (e.is_constant()) return e.constant;
  nlohmann::json j = nlohmann::json::object();
  if (e.quotient)
    j["quotient"] = {std::string(name(e.quotient->num)), std::string(name(e.quotient->den)), e.quotient->div};
  if (e.ceil_div) j["ceil_div"] = {std::string(name(e.ceil_div->of)), e.ceil_div->k};
  j["lo"] = e.lo;
  j["hi"] = e.hi;
  return j;
}

namespace {
nlohmann::json conditions_json(const std::vector<Condition>& cs) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : cs) out.push_back({std::string(name(c.feature)), std::string(to_string(c.op)), c.value});
  return out;
}

std::vector<Condition> conditions_from_json(const nlohmann::json& j, const std::string& p) {
  if (!j.is_array()) throw InputError(p + ": expected an array of [feature, op, value]");
  std::vector<Condition> out;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const std::string at = p + "[" + std::to_string(i) + "]";
    const auto& c = j[i];
    if (!c.is_array() || c.size() != 3) throw InputError(at + ": expected [feature, op, value]");
    Condition cond;
    cond.feature = feature_at(c[0], at + "[0]");
    if (!c[1].is_string() || !parse_op(c[1].get<std::string>()))
      throw InputError(at + "[1]: expected one of <, <=, ==, >=, >, got " + json_kind(c[1]));
    cond.op = *parse_op(c[1].get<std::string>());
    cond.value = json_integer(c[2], at + "[2]");
    out.push_back(cond);
  }
  return out;
}
}  // namespace

nlohmann::json to_json(const Rule& r) {
  nlohmann::json j = {{"when", conditions_json(r.when)}, {"num_splits", to_json(r.num_splits)}};
  if (!r.box.empty()) j["box"] = conditions_json(r.box);
  if (!r.reach.empty()) {
    j["reach"] = nlohmann::json::array();
    for (const auto& n : r.reach) j["reach"].push_back(conditions_json(n));
  }
  j["pack_gqa"] = r.pack_gqa ? nlohmann::json(*r.pack_gqa) : nlohmann::json(nullptr);
  j["sm_margin"] = r.sm_margin;
  return j;
}

nlohmann::json to_json(const Program& p) {
  nlohmann::json rules = nlohmann::json::array();
  for (const auto& r : p.rules) rules.push_back(to_json(r));
  return {{"base", p.base_name}, {"rules", rules}};
}

SplitExpr split_expr_from_json(const nlohmann::json& j, const std::string& path) {
  SplitExpr e;
  if (j.is_number()) {
    e.constant = int_in(json_integer(j, path), 1, kMaxSplits, path);
    e.lo = e.hi = e.constant;
    return e;
  }
  JsonReader r(j, path);
  if (const auto* q = r.member("quotient")) {
    const std::string p = r.path_of("quotient");
    if (!q->is_array() || q->size() != 3)
      throw InputError(p + ": expected [numerator feature, denominator feature, divisor]");
    Quotient quot{feature_at((*q)[0], p + "[0]"), feature_at((*q)[1], p + "[1]"),
                  int_in(json_integer((*q)[2], p + "[2]"), 1, 1 << 20, p + "[2]")};
    if (!positive(quot.den)) throw InputError(p + "[1]: \"" + std::string(name(quot.den)) + "\" can be 0; not a divisor");
    e.quotient = quot;
  }
  if (const auto* c = r.member("ceil_div")) {
    const std::string p = r.path_of("ceil_div");
    if (!c->is_array() || c->size() != 2) throw InputError(p + ": expected [feature, k]");
    e.ceil_div = CeilDiv{feature_at((*c)[0], p + "[0]"), int_in(json_integer((*c)[1], p + "[1]"), 1, 1 << 20, p + "[1]")};
  }
  if (e.is_constant()) throw InputError(path + ": an expression needs \"quotient\" or \"ceil_div\" (or write a number)");
  e.constant = 0;
  e.lo = int_in(r.required_integer("lo"), 1, kMaxSplits, r.path_of("lo"));
  e.hi = int_in(r.required_integer("hi"), 1, kMaxSplits, r.path_of("hi"));
  if (e.lo > e.hi) throw InputError(r.path_of("lo") + ": must not exceed hi (" + std::to_string(e.hi) + ")");
  r.finish();
  return e;
}

Rule rule_from_json(const nlohmann::json& j, const std::string& path) {
  JsonReader r(j, path);
  Rule rule;
  if (const auto* when = r.member("when")) rule.when = conditions_from_json(*when, r.path_of("when"));
  if (const auto* box = r.member("box")) rule.box = conditions_from_json(*box, r.path_of("box"));
  if (const auto* reach = r.member("reach")) {
    const std::string at = r.path_of("reach");
    if (!reach->is_array() || reach->empty())
      throw InputError(at + ": expected a non-empty array of neighbourhoods, each an array of [feature, op, value]");
    for (std::size_t i = 0; i < reach->size(); ++i)
      rule.reach.push_back(conditions_from_json((*reach)[i], at + "[" + std::to_string(i) + "]"));
  }
  const auto* splits = r.member("num_splits");
  if (!splits) throw InputError(r.path_of("num_splits") + ": missing");
  rule.num_splits = split_expr_from_json(*splits, r.path_of("num_splits"));
  rule.pack_gqa = optional_bool(r, "pack_gqa");
  if (auto m = r.integer("sm_margin")) rule.sm_margin = int_in(*m, 0, 1 << 20, r.path_of("sm_margin"));
  r.finish();
  return rule;
}

Program program_from_json(const nlohmann::json& j, std::string base_source, const std::string& path) {
  JsonReader r(j, path);
  Program p;
  p.base_name = r.string("base").value_or("");
  p.base_source = std::move(base_source);
  if (const auto* rules = r.member("rules")) {
    if (!rules->is_array()) throw InputError(r.path_of("rules") + ": expected an array of rules");
    for (std::size_t i = 0; i < rules->size(); ++i)
      p.rules.push_back(rule_from_json((*rules)[i], r.path_of("rules") + "[" + std::to_string(i) + "]"));
  }
  r.finish();
  return p;
}

std::vector<Feature> box_features() { return FeatureSet().list(); }

namespace {
// For each shape of `on`, the first rule whose conditions alone hold (-1: none).
std::vector<int> takers(const std::vector<Rule>& rules, const std::vector<FeatureValues>& on) {
  std::vector<int> out(on.size(), -1);
  for (std::size_t k = 0; k < on.size(); ++k)
    for (std::size_t r = 0; r < rules.size() && out[k] < 0; ++r)
      if (holds(rules[r].when, on[k])) out[k] = static_cast<int>(r);
  return out;
}
}  // namespace

namespace {
// What rule r decides on v, resolved as the contract resolves it (pack_gqa: qpk > 1).
Decision resolved_at(const Rule& r, const FeatureValues& v, int max_splits) {
  Decision d{std::clamp(eval_split(r.num_splits, v), 1, std::max(max_splits, 1)), r.pack_gqa, r.sm_margin};
  if (!d.pack_gqa) d.pack_gqa = v[static_cast<int>(Feature::qpk)] > 1;
  return d;
}

// The smallest box, over `features`, holding every shape of `on` whose index is listed.
std::vector<Condition> box_over(const std::vector<FeatureValues>& on, const std::vector<int>& shapes,
                                const std::vector<Feature>& features) {
  std::vector<Condition> box;
  for (Feature f : features) {
    std::int64_t lo = std::numeric_limits<std::int64_t>::max(), hi = std::numeric_limits<std::int64_t>::min();
    for (int k : shapes) {
      lo = std::min(lo, on[static_cast<std::size_t>(k)][static_cast<int>(f)]);
      hi = std::max(hi, on[static_cast<std::size_t>(k)][static_cast<int>(f)]);
    }
    box.push_back({f, Op::ge, lo});
    box.push_back({f, Op::le, hi});
  }
  return box;
}

// The shapes within `percent` of v (200: from half to twice) in every quantity feature of
// `features`, and at v's value of every categorical one. The upper bound is at least the
// next integer: waves_pct is a truncated percentage, and its 0 holds one CTA as well as 1.
std::vector<Condition> neighbourhood(const FeatureValues& v, const std::vector<Feature>& features, int percent) {
  std::vector<Condition> out;
  for (Feature f : features) {
    const std::int64_t x = v[static_cast<int>(f)];
    if (categorical(f)) {
      out.push_back({f, Op::eq, x});
      continue;
    }
    out.push_back({f, Op::ge, (x * 100 + percent - 1) / percent});
    out.push_back({f, Op::le, std::max(x * percent / 100, x + 1)});
  }
  return out;
}

// Per rule, the shapes of `on` that count as its evidence: every shape it takes or, given
// the base's decisions, those on which it decides otherwise than what follows it (the
// later rules, boxed, then the base). Boxes the rules from the last to the first, since
// what follows a rule depends on the boxes of the rules after it.
std::vector<std::vector<int>> box_by_evidence(std::vector<Rule>& rules, const std::vector<FeatureValues>& on,
                                              const std::vector<int>& taker, const std::vector<Feature>& features,
                                              std::span<const Decision> base, int max_splits, int reach_percent) {
  std::vector<std::vector<int>> evidence(rules.size());
  for (std::size_t r = rules.size(); r-- > 0;) {
    for (std::size_t k = 0; k < on.size(); ++k) {
      if (taker[k] != static_cast<int>(r)) continue;
      if (!base.empty()) {
        std::optional<Decision> after;
        for (std::size_t later = r + 1; later < rules.size() && !after; ++later)
          if (holds(rules[later], on[k])) after = resolved_at(rules[later], on[k], max_splits);
        if (resolved_at(rules[r], on[k], max_splits) == after.value_or(base[k])) continue;
      }
      evidence[r].push_back(static_cast<int>(k));
    }
    if (evidence[r].empty()) continue;
    rules[r].box = box_over(on, evidence[r], features);
    if (reach_percent > 0)
      for (int k : evidence[r]) rules[r].reach.push_back(neighbourhood(on[static_cast<std::size_t>(k)], features, reach_percent));
  }
  return evidence;
}
}  // namespace

Program verify_boxes(const Program& p, const std::vector<FeatureValues>& verified_on,
                     const std::vector<Feature>& features, int max_splits, int min_support,
                     std::span<const Decision> base_decisions, int reach_percent) {
  if (!base_decisions.empty() && base_decisions.size() != verified_on.size())
    throw InputError("verify_boxes: " + std::to_string(base_decisions.size()) + " base decisions for " +
                     std::to_string(verified_on.size()) + " shapes");
  std::vector<Rule> rules = p.rules;
  // Dropping a rule hands its shapes to later rules, which may then be supported.
  for (;;) {
    for (Rule& r : rules) r.box.clear(), r.reach.clear();
    const std::vector<int> taker = takers(rules, verified_on);
    const auto evidence = box_by_evidence(rules, verified_on, taker, features, base_decisions, max_splits, reach_percent);
    std::vector<Rule> kept;
    for (std::size_t r = 0; r < rules.size(); ++r)
      if (static_cast<int>(evidence[r].size()) >= std::max(min_support, 1)) kept.push_back(rules[r]);
    if (kept.size() == rules.size()) break;
    rules = std::move(kept);
  }
  Program out = p;
  out.rules = std::move(rules);
  return normalise(out, max_splits);
}

bool holds(const Rule& r, const FeatureValues& v) {
  if (!holds(r.when, v) || !holds(r.box, v)) return false;
  return r.reach.empty() ||
         std::any_of(r.reach.begin(), r.reach.end(), [&](const std::vector<Condition>& n) { return holds(n, v); });
}

bool holds(const std::vector<Condition>& when, const FeatureValues& v) {
  for (const auto& c : when) {
    const std::int64_t x = v[static_cast<int>(c.feature)];
    bool ok = false;
    switch (c.op) {
      case Op::lt: ok = x < c.value; break;
      case Op::le: ok = x <= c.value; break;
      case Op::eq: ok = x == c.value; break;
      case Op::ge: ok = x >= c.value; break;
      case Op::gt: ok = x > c.value; break;
    }
    if (!ok) return false;
  }
  return true;
}

namespace {
// Lua's // on integers: floor division.
std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
}  // namespace

int eval_split(const SplitExpr& e, const FeatureValues& v) {
  if (e.is_constant()) return e.constant;
  std::int64_t x = std::numeric_limits<std::int64_t>::max();
  if (e.quotient)
    x = floor_div(v[static_cast<int>(e.quotient->num)], v[static_cast<int>(e.quotient->den)] * e.quotient->div);
  if (e.ceil_div) {
    const std::int64_t k = e.ceil_div->k;
    x = std::min(x, floor_div(v[static_cast<int>(e.ceil_div->of)] + k - 1, k));
  }
  return static_cast<int>(std::clamp<std::int64_t>(x, e.lo, e.hi));
}

std::optional<Decision> eval_rules(const Program& p, const FeatureValues& v) {
  for (const auto& r : p.rules) {
    if (!holds(r, v)) continue;
    Decision d;
    d.num_splits = eval_split(r.num_splits, v);
    d.pack_gqa = r.pack_gqa;
    d.sm_margin = r.sm_margin;
    return d;
  }
  return std::nullopt;
}

FeatureSet features_used(const Program& p) {
  std::vector<Feature> fs;
  for (const auto& r : p.rules) {
    for (const auto& c : r.when) fs.push_back(c.feature);
    if (r.num_splits.quotient) {
      fs.push_back(r.num_splits.quotient->num);
      fs.push_back(r.num_splits.quotient->den);
    }
    if (r.num_splits.ceil_div) fs.push_back(r.num_splits.ceil_div->of);
  }
  return FeatureSet(fs);
}

}  // namespace evodispatch::search

#pragma once
// Rule-list programs (DESIGN.md §5): guarded rules over shape features in front of a
// base policy, rendered to canonical Lua. The engine mutates this structure, never the
// text, and stores both: the Lua source (what runs, what is exported) and the rule list
// as JSON (programs.rules, what the next mutation starts from).
//
// Semantics, exactly as rendered: the first rule whose conditions all hold returns its
// decision; when none holds the base policy's dispatch answers. Every feature value and
// every threshold is an integer, so conditions and expressions are exact in Lua and C++.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <evodispatch/heuristics/contract.hpp>
#include <evodispatch/search/features.hpp>

namespace evodispatch::search {

enum class Op : std::uint8_t { lt, le, eq, ge, gt };
std::string_view to_string(Op);  // "<", "<=", "==", ">=", ">"
std::optional<Op> parse_op(std::string_view);

struct Condition {
  Feature feature = Feature::batch;
  Op op = Op::le;
  std::int64_t value = 0;
  bool operator==(const Condition&) const = default;
};

// num_splits as a constant or as an expression of the features:
//   clamp(min(num // (den * div), ceil(of / k)), lo, hi)
// where either term may be absent (both absent: the constant). E.g. "fill the SMs once"
// is quotient {num_sms, ctas, 1}; "two KV tiles per split" is ceil_div {nblk, 2}.
struct Quotient {
  Feature num = Feature::num_sms;
  Feature den = Feature::ctas;  // must be a positive feature
  int div = 1;                  // >= 1
  bool operator==(const Quotient&) const = default;
};
struct CeilDiv {
  Feature of = Feature::nblk;
  int k = 1;  // >= 1
  bool operator==(const CeilDiv&) const = default;
};
struct SplitExpr {
  int constant = 1;
  std::optional<Quotient> quotient;
  std::optional<CeilDiv> ceil_div;
  int lo = 1;
  int hi = 64;
  bool is_constant() const { return !quotient && !ceil_div; }
  bool operator==(const SplitExpr&) const = default;
};

struct Rule {
  std::vector<Condition> when;    // a conjunction; empty: always
  // The box of feature values the rule was verified on (verify_boxes), kept apart from
  // `when` so that mutations act on the rule and the box is recomputed from scratch: a
  // further conjunction, >= and <= per feature; empty: no box.
  std::vector<Condition> box;
  // Where inside its box the rule holds: near one of its evidence shapes (verify_boxes'
  // reach_percent), each neighbourhood a conjunction of the bounds it adds to `when` and
  // `box`; the rule holds in their union. Empty: everywhere in its box. A box over each
  // feature's range takes in combinations of values no evidence had (on the H100 a rule
  // verified over 19-52 groups lost 12% at 24 groups of 8 KV tiles); a neighbourhood does not.
  std::vector<std::vector<Condition>> reach;
  SplitExpr num_splits;
  std::optional<bool> pack_gqa;   // unset: the contract's default (true when qpk > 1)
  int sm_margin = 0;
  bool operator==(const Rule&) const = default;
};

struct Program {
  std::vector<Rule> rules;
  std::string base_name;    // a built-in policy name, "seed:FILE", "external", ... (a label)
  std::string base_source;  // the base policy's canonical Lua source (canonical_lua())
  bool operator==(const Program&) const = default;
};

// A program whose rule list is empty, in front of `source` (canonicalised here).
Program base_program(std::string name, std::string_view source);

// The canonical form: conditions (and boxes, apart) become per-feature intervals written
// in feature order (>= and <=; == for a categorical feature, and in a box), trivially true
// bounds and duplicates disappear, expressions are clamped into [1, max_splits] and
// collapse to a constant when they can only give one value, and rules no shape can reach
// (an empty condition, or one inside an earlier rule's) are dropped. Idempotent.
Program normalise(const Program&, int max_splits = kMaxSplits);

// The canonical Lua of a (normalised) program: a deterministic function of its rules
// and base source. The base is embedded verbatim in a do-block whose global dispatch
// becomes the local base_dispatch.
std::string render_lua(const Program&);

// The rules alone, as the dispatch function in front of base_dispatch: what a reader
// wants to see of a program (render_lua's text without the base).
std::string render_rules_text(const Program&);

// The same text with the base replaced by a stub answering the fall-through decision
// below: the rules run in the sandbox alone, and a shape no rule takes comes back as
// that decision (the engine answers it from the base policy, checked on every shape
// once per run). The C++ twin (eval_rules) says whether a rule took the shape, so a
// rule that happened to return the same decision is never mistaken for the stub.
std::string render_rules_lua(const Program&);
Decision fallthrough_decision(const DeviceInfo&);  // 256 splits, sm_margin num_sms - 1

// The base source embedded in a program rendered by render_lua, or nullopt.
std::optional<std::string> extract_base_source(std::string_view rendered);

// What the results store keeps of a rendered program: render_lua's text with an empty
// base block, and the base apart (stored once however many programs embed it).
// stored_source(split.source, split.base) == render_lua(p); stored_source(s, nullopt) == s.
struct SplitSource {
  std::string source;
  std::string base;
};
SplitSource split_source(const Program&);
std::string stored_source(std::string_view source, const std::optional<std::string>& base);
// The base policy of a stored program: `base` when stored apart, else the one embedded in
// `source` (programs stored whole, as schema v1 kept them), else nullopt.
std::optional<std::string> stored_base(std::string_view source, const std::optional<std::string>& base);

// What a reader wants of a stored program: its rules as render_rules_text writes them,
// after a line naming the base; a plain script (no rules) as its stored source.
std::string describe_stored_program(const nlohmann::json& rules, std::string_view source,
                                    const std::optional<std::string>& base, const std::string& where);

// 32 hex digits over the normalised rules and the base source (not the base's label):
// programs equal after normalisation have equal hashes. The second form takes the base
// source's content_hash, which a caller holding many programs of one base computes once.
std::string program_hash(const Program&);
std::string program_hash(const Program&, std::string_view base_hash);
// The compact text the hash covers: one line per rule, every field in a fixed order.
std::string canonical_rules_text(const Program&);

// The rule list as stored in programs.rules: {"base": NAME, "rules": [...]}.
nlohmann::json to_json(const Program&);
nlohmann::json to_json(const Rule&);
nlohmann::json to_json(const SplitExpr&);
// Strict: unknown fields, unknown features or ops and bad values are InputErrors naming
// the JSON path. The base source is not in the JSON; the caller supplies it.
Program program_from_json(const nlohmann::json&, std::string base_source, const std::string& path = "$");
Rule rule_from_json(const nlohmann::json&, const std::string& path);
SplitExpr split_expr_from_json(const nlohmann::json&, const std::string& path);

// Each rule confined to the box it was verified on. Boxes are first removed, then every
// shape of `verified_on` goes to the first rule whose `when` holds. A rule's evidence is the
// shapes it takes or, given the base's decision on every shape of `verified_on`
// (`base_decisions`, resolved), only those on which it decides otherwise than what follows
// it (the later rules, boxed, then the base): a shape where the rule repeats the base
// measured nothing about the rule's own decision. A rule with fewer than `min_support`
// shapes of evidence is dropped (and the shapes go again); each rule left gets as its box,
// for every feature of `features`, the range of values over its evidence (no box when
// `features` is empty). The decision on every shape of `verified_on` is that of the
// program without its boxes and unsupported rules; any other shape outside a rule's box
// falls through to the later rules and to the base, so no rule extrapolates beyond what
// was measured. With `reach_percent` > 0 the rule holds only near its evidence: within
// that factor (200: from half to twice) of one evidence shape in every quantity feature of
// `features`, and at its value of every categorical one (Rule::reach). Normalised (into
// [1, max_splits]); applying it again changes nothing.
Program verify_boxes(const Program&, const std::vector<FeatureValues>& verified_on, const std::vector<Feature>& features,
                     int max_splits = kMaxSplits, int min_support = 1, std::span<const Decision> base_decisions = {},
                     int reach_percent = 0);
// The features a verified box covers: every feature.
std::vector<Feature> box_features();

// The C++ twin of the rendered rules: the decision of the first rule that holds for
// these feature values (pack_gqa left unset when the rule leaves it), or nullopt.
std::optional<Decision> eval_rules(const Program&, const FeatureValues&);
int eval_split(const SplitExpr&, const FeatureValues&);
bool holds(const Rule&, const FeatureValues&);  // `when`, `box` and one of `reach`
bool holds(const std::vector<Condition>&, const FeatureValues&);

// The features a program's rules use (conditions and expressions; boxes aside).
FeatureSet features_used(const Program&);

}  // namespace evodispatch::search

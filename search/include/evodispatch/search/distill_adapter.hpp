#pragma once
// Rule-list programs into the distiller's decision functions (heuristics/distill.hpp).
// The rules translate exactly (same features, same integer conditions, same split
// expression); a base that is the built-in fa3 policy becomes the exact fa3 fallback;
// any other base is fitted by a decision tree over `shapes` and follows the rules.
#include <vector>

#include <evodispatch/heuristics/distill.hpp>
#include <evodispatch/search/program.hpp>

namespace evodispatch::search {

distill::Bound to_bound(const Condition&);
distill::SplitExpr to_split_expr(const SplitExpr&);

// Whether `base_source` is the built-in fa3 policy's (canonical) source.
bool base_is_fa3(const Program&);

// The decision function of `p`. `hw` and `shapes` are used only when the base must be
// fitted (fit_tree's errors pass through).
distill::DecisionFunction to_decision_function(const Program& p, const DeviceInfo& hw,
                                               const std::vector<Shape>& shapes);

}  // namespace evodispatch::search

#pragma once
// The per-shape oracle: the best decision of a bounded decision space, measured.
// It is what `bench --policy oracle` reports and what a search's oracle fraction is
// measured against.
#include <functional>
#include <vector>

#include <evodispatch/evaluator/workload.hpp>
#include <evodispatch/search/bench.hpp>
#include <evodispatch/search/stored_evaluator.hpp>

namespace evodispatch {

struct DecisionSpace {
  static std::vector<int> default_splits();  // 1..64

  std::vector<int> splits = default_splits();
  std::vector<bool> pack_gqa = {true, false};
  std::vector<int> sm_margins = {0};

  // The distinct resolved decisions for one shape, in a stable order. pack_gqa is one
  // choice when qpk = 1 (a KV head serves one query head either way).
  std::vector<Decision> decisions(const Shape&) const;
};

// For every shape, every decision of `space` measured through the store; the row's
// candidate is the fastest (ties: the first in the space's order), compared with
// `baseline` when given. The baseline's own decision counts as one of the space's (after
// the others), so the oracle's speedup over the baseline is never below 1.
BenchReport run_oracle_bench(const DecisionSpace& space, Policy* baseline, const Workload& workload,
                             StoredEvaluator& evaluator,
                             const std::function<void(std::size_t, std::size_t)>& progress = {},
                             const std::function<bool()>& stop = {});

}  // namespace evodispatch

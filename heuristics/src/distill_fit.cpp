// fit_tree of distill.hpp: a classification tree over the features, grown until pure,
// flattened into interval rules.
#include <evodispatch/heuristics/distill.hpp>

#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>

namespace evodispatch::distill {

namespace {

struct Label {
  int splits, pack, margin;
  auto operator<=>(const Label&) const = default;
};

struct Fitter {
  DispatchScript* script = nullptr;
  DeviceInfo hw;
  std::vector<Values> x;
  std::vector<int> y;
  std::vector<Label> labels;
  std::vector<Shape> shapes;
  std::vector<Rule> leaves;

  struct Split {
    int feature = -1;
    std::int64_t threshold = 0;  // left: x < threshold (threshold = smallest right value)
    double score = 0;
  };

  Split best_split(const std::vector<std::size_t>& idx) const {
    Split best;
    const std::size_t n = idx.size();
    std::vector<long> total(labels.size(), 0);
    for (auto i : idx) ++total[y[i]];
    std::vector<std::pair<std::int64_t, int>> v(n);
    std::vector<long> left(labels.size());
    for (int f = 0; f < kNumFeatures; ++f) {
      for (std::size_t k = 0; k < n; ++k) v[k] = {x[idx[k]][f], y[idx[k]]};
      std::sort(v.begin(), v.end());
      if (v.front().first == v.back().first) continue;
      std::fill(left.begin(), left.end(), 0);
      double sumsq_l = 0, sumsq_r = 0;
      for (long t : total) sumsq_r += double(t) * t;
      for (std::size_t k = 0; k + 1 < n; ++k) {
        const int c = v[k].second;
        sumsq_l += 2.0 * left[c] + 1;
        sumsq_r -= 2.0 * (total[c] - left[c]) - 1;
        ++left[c];
        if (v[k].first == v[k + 1].first) continue;
        const double nl = double(k + 1), nr = double(n - k - 1);
        // Weighted Gini impurity (times n): lower is better.
        const double score = (nl - sumsq_l / nl) + (nr - sumsq_r / nr);
        if (best.feature < 0 || score < best.score - 1e-9) {
          best = {f, v[k + 1].first, score};
        }
      }
    }
    return best;
  }

  Label label_of(const Shape& s) const {
    const DispatchOutcome out = script->dispatch(s, hw);
    if (!out.ok()) return Label{-1, -1, -1};
    const Decision d = resolve(out.decision, s);
    return Label{d.num_splits, *d.pack_gqa ? 1 : 0, d.sm_margin};
  }

  // A split on batch or seqlen_k between grid values a < b: the script's own threshold
  // lies in (a, b]. Bisect on a shape of the right side (its field moved down towards a)
  // for the smallest value that still gets the right side's decision.
  Split refine(Split s, const std::vector<std::size_t>& l, const std::vector<std::size_t>& r) const {
    const Feature f = static_cast<Feature>(s.feature);
    if (f != Feature::batch && f != Feature::seqlen_k) return s;
    std::int64_t a = INT64_MIN;
    for (auto i : l) a = std::max(a, x[i][s.feature]);
    if (a == INT64_MIN || s.threshold - a <= 1) return s;
    auto at = [&](std::size_t rep, std::int64_t v) {
      Shape sh = shapes[rep];
      (f == Feature::batch ? sh.batch : sh.seqlen_k) = static_cast<int>(v);
      return label_of(sh);
    };
    // A right-side shape at b whose decision changes when its field is moved to a (the
    // first 256 tried); none: the split stays where it is.
    std::optional<std::size_t> found;
    int tried = 0;
    for (auto i : r) {
      if (x[i][s.feature] != s.threshold) continue;
      if (at(i, a) != labels[y[i]]) {
        found = i;
        break;
      }
      if (++tried == 256) break;
    }
    if (!found) return s;
    const std::size_t rep = *found;
    const Label want = labels[y[rep]];
    std::int64_t lo = a, hi = s.threshold;  // at(lo) != want, at(hi) == want
    while (hi - lo > 1) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      (at(rep, mid) == want ? hi : lo) = mid;
    }
    s.threshold = hi;
    return s;
  }

  void grow(const std::vector<std::size_t>& idx, std::vector<Bound> path, int depth) {
    bool pure = true;
    for (auto i : idx)
      if (y[i] != y[idx[0]]) {
        pure = false;
        break;
      }
    if (pure) {
      const Label& l = labels[y[idx[0]]];
      Rule r;
      r.when = std::move(path);
      r.num_splits.constant = l.splits;
      r.pack_gqa = l.pack != 0;
      r.sm_margin = l.margin;
      leaves.push_back(std::move(r));
      return;
    }
    const Split s = best_split(idx);
    if (s.feature < 0 || depth > 200) {
      // Equal features, different decisions: name two such shapes.
      std::size_t other = idx[0];
      for (auto i : idx)
        if (y[i] != y[idx[0]]) other = i;
      throw InputError("cannot distill: the script decides differently on " + describe(shapes[idx[0]]) + " and " +
                       describe(shapes[other]) +
                       ", whose features are equal; it reads something the distilled function cannot "
                       "(hw.l2_bytes, hw.mem_bw_bytes_per_s, hw.name or a state of its own)");
    }
    std::vector<std::size_t> l, r;
    for (auto i : idx) (x[i][s.feature] < s.threshold ? l : r).push_back(i);
    const Split s2 = refine(s, l, r);
    auto narrowed = [&](bool is_left) {
      std::vector<Bound> p = path;
      const Feature f = static_cast<Feature>(s.feature);
      auto it = std::find_if(p.begin(), p.end(), [&](const Bound& b) { return b.feature == f; });
      if (it == p.end()) {
        p.push_back(Bound{f, INT64_MIN, INT64_MAX});
        it = p.end() - 1;
      }
      if (is_left) it->hi = std::min(it->hi, s2.threshold - 1);
      else it->lo = std::max(it->lo, s2.threshold);
      return p;
    };
    grow(l, narrowed(true), depth + 1);
    grow(r, narrowed(false), depth + 1);
  }
};

}  // namespace

DecisionFunction fit_tree(DispatchScript& script, const DeviceInfo& hw, const std::vector<Shape>& shapes) {
  if (shapes.empty()) throw InputError("fit_tree: no shapes");
  Fitter f;
  f.script = &script;
  f.hw = hw;
  f.shapes = shapes;
  std::map<Label, int> ids;
  for (const Shape& s : shapes) {
    const DispatchOutcome out = script.dispatch(s, hw);
    if (!out.ok()) throw InputError("cannot distill: " + out.error);
    const Decision d = resolve(out.decision, s);
    const Label l{d.num_splits, *d.pack_gqa ? 1 : 0, d.sm_margin};
    auto [it, inserted] = ids.emplace(l, static_cast<int>(f.labels.size()));
    if (inserted) f.labels.push_back(l);
    f.x.push_back(feature_values(s, hw));
    f.y.push_back(it->second);
  }
  std::vector<std::size_t> all(shapes.size());
  std::iota(all.begin(), all.end(), 0);
  f.grow(all, {}, 0);
  DecisionFunction fn;
  fn.method = "tree";
  fn.fallback = Fallback::none;
  fn.rules = std::move(f.leaves);
  // Leaves are disjoint and cover every value: the last one can drop its conditions.
  fn.rules.back().when.clear();
  return fn;
}

}  // namespace evodispatch::distill

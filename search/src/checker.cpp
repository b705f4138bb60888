#include <evodispatch/search/checker.hpp>

#include <algorithm>
#include <atomic>
#include <thread>

#include <evodispatch/search/hash.hpp>

namespace evodispatch::search {

Checker::Checker(std::vector<Shape> shapes, DeviceInfo hw, SandboxLimits limits, int threads)
    : shapes_(std::move(shapes)), hw_(std::move(hw)), limits_(limits) {
  for (const auto& s : shapes_) features_.push_back(feature_values(s, hw_));
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads_ = threads > 0 ? threads : cores;
}

CheckResult Checker::check_full(const std::string& name, const std::string& source) {
  CheckResult r;
  std::unique_ptr<DispatchScript> script;
  try {
    script = DispatchScript::load(name, source, limits_);
  } catch (const InputError& e) {
    r.error = e.what();
    return r;
  }
  r.decisions.reserve(shapes_.size());
  for (const auto& s : shapes_) {
    auto out = script->dispatch(s, hw_);
    if (!out.ok()) {
      r.error = out.error;
      r.decisions.clear();
      return r;
    }
    r.decisions.push_back(out.decision);
  }
  r.ok = true;
  return r;
}

const CheckResult& Checker::base(const std::string& name, const std::string& source) {
  const std::string key = content_hash(source);
  {
    std::lock_guard lock(bases_mu_);
    if (auto it = bases_.find(key); it != bases_.end()) return *it->second;
  }
  auto result = std::make_unique<CheckResult>(check_full("base " + name, source));
  if (!result->ok) result->error = "the base policy fails: " + result->error;
  std::lock_guard lock(bases_mu_);
  auto [it, inserted] = bases_.emplace(key, std::move(result));
  return *it->second;
}

CheckResult Checker::check_rules(const Program& p, const CheckResult& base) {
  if (!base.ok) return base;
  if (p.rules.empty()) return base;
  CheckResult r;
  std::unique_ptr<DispatchScript> script;
  try {
    script = DispatchScript::load("program", render_rules_lua(p), limits_);
  } catch (const InputError& e) {
    r.error = e.what();
    return r;
  }
  const Decision stub = fallthrough_decision(hw_);
  r.decisions.reserve(shapes_.size());
  for (std::size_t i = 0; i < shapes_.size(); ++i) {
    auto out = script->dispatch(shapes_[i], hw_);
    if (!out.ok()) {
      r.error = out.error;
      r.decisions.clear();
      return r;
    }
    // The Lua answer must be what the rules mean: the C++ twin's decision, or the stub's
    // when no rule holds. Anything else is a bug in the renderer or the twin.
    const auto twin = eval_rules(p, features_[i]);
    const Decision expected = twin ? resolve(*twin, shapes_[i]) : resolve(stub, shapes_[i]);
    if (!(out.decision == expected)) {
      r.error = "program: the rendered rules decide " + describe(out.decision) + " but the rule list means " +
                describe(expected) + " (shape: " + describe(shapes_[i]) + ")";
      r.decisions.clear();
      return r;
    }
    r.decisions.push_back(twin ? out.decision : base.decisions[i]);
  }
  r.ok = true;
  return r;
}

CheckResult Checker::check_one(const Program& p) { return check_rules(p, base(p.base_name, p.base_source)); }

std::vector<CheckResult> Checker::check(std::span<const Program* const> programs) {
  std::vector<CheckResult> out(programs.size());
  // Bases first, one at a time: a new base is rare and costs a full run of its script.
  for (const Program* p : programs) base(p->base_name, p->base_source);
  const int n = std::min<int>(threads_, static_cast<int>(programs.size()));
  if (n <= 1) {
    for (std::size_t i = 0; i < programs.size(); ++i) out[i] = check_one(*programs[i]);
    return out;
  }
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < programs.size();) out[i] = check_one(*programs[i]);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < n; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  return out;
}

}  // namespace evodispatch::search

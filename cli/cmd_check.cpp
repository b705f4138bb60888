// evodispatch check SCRIPT: load a script in the sandbox, run it over a workload,
// validate every decision. One line out; exit 1 on the first problem.
#include <iostream>

#include <nlohmann/json.hpp>

#include <evodispatch/search/replay_evaluator.hpp>
#include <evodispatch/evaluator/evaluator.hpp>
#include <evodispatch/evaluator/workload.hpp>
#include <evodispatch/heuristics/policy.hpp>

#include "app.hpp"

namespace evodispatch::cli {

namespace {
struct CheckOptions : CommonOptions {
  std::string script;
  std::string workload = "paper-safety-160";
};

int check(const CheckOptions& o) {
  const Workload workload = load_workload(o.workload);
  const DeviceInfo hw = search::make_any_evaluator(o.device)->device();
  auto policy = make_policy(o.script);  // throws InputError naming the script and line

  std::string first_error;
  int failures = 0, max_splits = 0, min_splits = kMaxSplits, packed = 0;
  for (const auto& shape : workload.shapes) {
    const DispatchOutcome out = policy->decide(shape, hw);
    if (!out.ok()) {
      if (failures++ == 0) first_error = out.error;
      continue;
    }
    min_splits = std::min(min_splits, out.decision.num_splits);
    max_splits = std::max(max_splits, out.decision.num_splits);
    packed += out.decision.pack_gqa.value_or(false) ? 1 : 0;
  }
  const int n = static_cast<int>(workload.shapes.size());
  if (o.json) {
    nlohmann::json j = {{"script", o.script}, {"workload", workload.name}, {"device", hw.name},
                        {"shapes", n}, {"failures", failures}, {"ok", failures == 0}};
    if (failures) j["first_error"] = first_error;
    std::cout << j.dump() << "\n";
  } else if (failures) {
    std::cout << first_error;
    if (failures > 1) std::cout << " [and " << failures - 1 << " more of " << n << " shapes]";
    std::cout << "\n";
  } else {
    std::cout << "ok: " << o.script << ": " << n << " shapes of " << workload.name << " on " << hw.name
              << ", every decision valid (num_splits " << min_splits << ".." << max_splits << ", pack_gqa on "
              << packed << "/" << n << ")\n";
  }
  return failures ? kFailure : kOk;
}
}  // namespace

void add_check(CLI::App& app, Action& action) {
  auto* verb = app.add_subcommand("check", "load a dispatch script in the sandbox, run it over a workload, "
                                           "validate every decision");
  auto o = std::make_shared<CheckOptions>();
  verb->add_option("SCRIPT", o->script, "Lua dispatch script (or a built-in policy name)")->required();
  verb->add_option("--workload", o->workload, "shipped workload name or JSON file")->capture_default_str();
  add_device_option(*verb, *o);
  add_json_option(*verb, *o);
  verb->callback([&action, o] { action = [o] { return check(*o); }; });
}

}  // namespace evodispatch::cli

// evodispatch decide: the decision of a policy or script for each shape of a workload.
#include <iomanip>
#include <iostream>

#include <nlohmann/json.hpp>

#include <evodispatch/search/replay_evaluator.hpp>
#include <evodispatch/evaluator/evaluator.hpp>
#include <evodispatch/evaluator/workload.hpp>
#include <evodispatch/heuristics/policy.hpp>

#include "app.hpp"

namespace evodispatch::cli {

namespace {
struct DecideOptions : CommonOptions {
  std::string policy;
  std::string workload = "paper-safety-160";
};

int decide(const DecideOptions& o) {
  const Workload workload = load_workload(o.workload);
  const DeviceInfo hw = search::make_any_evaluator(o.device)->device();
  auto policy = make_policy(o.policy);
  int failures = 0;
  if (!o.json)
    std::cout << std::left << std::setw(48) << "shape" << std::right << std::setw(6) << "nblk" << std::setw(8)
              << "splits" << std::setw(6) << "pack" << std::setw(8) << "margin" << "\n";
  for (const auto& shape : workload.shapes) {
    const DispatchOutcome out = policy->decide(shape, hw);
    failures += out.ok() ? 0 : 1;
    if (o.json) {
      nlohmann::json j = to_json(shape);
      if (out.ok()) j.update(to_json(out.decision));
      else j["error"] = out.error;
      std::cout << j.dump() << "\n";
      continue;
    }
    std::cout << std::left << std::setw(48) << describe(shape) << std::right << std::setw(6) << features(shape).nblk;
    if (out.ok())
      std::cout << std::setw(8) << out.decision.num_splits << std::setw(6) << (*out.decision.pack_gqa ? "yes" : "no")
                << std::setw(8) << out.decision.sm_margin << "\n";
    else
      std::cout << "  error: " << out.error << "\n";
  }
  if (failures) std::cerr << "evodispatch: " << failures << " of " << workload.shapes.size() << " shapes failed\n";
  return failures ? kFailure : kOk;
}
}  // namespace

void add_decide(CLI::App& app, Action& action) {
  auto* verb = app.add_subcommand("decide", "print the decision of a policy or script for each shape");
  auto o = std::make_shared<DecideOptions>();
  verb->add_option("--policy", o->policy, "fa3 | fa3-kvcache | fa2 | seq-aware | flashinfer | fixed:N | FILE.lua")
      ->required();
  verb->add_option("--workload", o->workload, "shipped workload name or JSON file")->capture_default_str();
  add_device_option(*verb, *o);
  add_json_option(*verb, *o);
  verb->callback([&action, o] { action = [o] { return decide(*o); }; });
}

}  // namespace evodispatch::cli

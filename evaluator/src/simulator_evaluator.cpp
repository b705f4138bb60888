// SimulatorEvaluator: the Evaluator that answers from the wave model.
#include <evodispatch/evaluator/simulator.hpp>

namespace evodispatch {

namespace {
// Changes whenever the model's equations change, so stored predictions of an older model
// are never mistaken for current ones (the profile hash covers its parameters).
constexpr const char* kModelBuild = "wave-model-v1";
}  // namespace

SimulatorEvaluator::SimulatorEvaluator(SimProfile profile, std::string spec)
    : profile_(std::move(profile)),
      spec_(spec.empty() ? "sim:" + profile_.name : std::move(spec)),
      fingerprint_("sim:" + profile_.name + "#" + profile_hash(profile_)),
      kernel_build_(kModelBuild) {}

Measurement SimulatorEvaluator::measure(const Shape& shape, const Decision& decision, const TimingOptions& opts) {
  Measurement m;
  m.key = key(shape, decision, opts);
  // A bad decision or a shape the kernel cannot run is a failed row, never an exception.
  if (auto why = decision_error(decision, profile_.device)) {
    m.error = "invalid decision (" + describe(decision) + "): " + *why;
    return m;
  }
  try {
    const Plan p = sim_plan(profile_, shape, decision);
    m.plan = to_json(p);
    m.median_us = m.p10_us = m.p90_us = predict_us(profile_, p, opts.l2);
    m.samples = 1;
    m.ok = true;
  } catch (const InputError& e) {
    m.error = e.what();
  }
  return m;
}

}  // namespace evodispatch

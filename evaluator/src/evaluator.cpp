// The evaluate facade: measurement keys and the --device spec.
#include <evodispatch/evaluator/evaluator.hpp>

#include <cctype>

#include <evodispatch/evaluator/gpu_probe.hpp>
#include <evodispatch/evaluator/simulator.hpp>

namespace evodispatch {

MeasurementKey Evaluator::key(const Shape& shape, const Decision& decision, const TimingOptions& opts) const {
  return MeasurementKey{fingerprint(), kernel_build(), shape, resolve(decision, shape), opts.l2};
}

namespace {

constexpr const char* kDefaultProfile = "h100-sxm";

// The shipped profile nearest to a real GPU, by its marketing name.
std::string profile_for(const GpuInfo& gpu) {
  const std::string& n = gpu.name;
  if (n.find("H200") != std::string::npos) return "h200";
  if (n.find("H100") != std::string::npos) return n.find("PCIe") != std::string::npos ? "h100-pcie" : "h100-sxm";
  if (n.find("A100") != std::string::npos) return "a100";
  return kDefaultProfile;
}

bool all_digits(std::string_view s) {
  if (s.empty() || s.size() > 4) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

std::unique_ptr<Evaluator> make_cuda(std::string_view spec, int index) {
  std::string why;
  const auto gpus = probe_gpus(&why);
  if (index >= static_cast<int>(gpus.size())) {
    const std::string what = gpus.empty() ? "no GPU (" + why + ")" : std::to_string(gpus.size()) + " GPU(s)";
    throw InputError("--device " + std::string(spec) + ": this machine has " + what + "; use --device sim:" +
                     kDefaultProfile + " (or another sim: profile)");
  }
  throw InputError("--device " + std::string(spec) +
                   ": measuring on the GPU needs the GPU runner (issue 3); use --device sim:" + profile_for(gpus[index]));
}

}  // namespace

std::unique_ptr<Evaluator> make_evaluator(std::string_view spec) {
  if (spec == "auto") {
    // The first GPU once the GPU runner exists (issue 3). Until then a GPU machine gets the
    // simulator profile of its own GPU model, and a machine without one gets h100-sxm.
    const auto gpus = probe_gpus();
    const std::string profile = gpus.empty() ? kDefaultProfile : profile_for(gpus.front());
    return std::make_unique<SimulatorEvaluator>(load_sim_profile(profile), "sim:" + profile);
  }
  if (spec.starts_with("sim:")) {
    const std::string_view name = spec.substr(4);
    if (name.empty()) throw InputError("--device sim:: give a profile name or a profile JSON file after \"sim:\"");
    return std::make_unique<SimulatorEvaluator>(load_sim_profile(name), std::string(spec));
  }
  if (spec.starts_with("cuda:") && all_digits(spec.substr(5))) return make_cuda(spec, std::stoi(std::string(spec.substr(5))));
  std::string names;
  for (const auto& n : sim_profile_names()) names += (names.empty() ? "sim:" : ", sim:") + n;
  throw InputError("--device \"" + std::string(spec) + "\": expected auto, cuda:N or sim:PROFILE (" + names + ")");
}

}  // namespace evodispatch

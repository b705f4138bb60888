// The evaluate facade: measurement keys, the default comparison and the --device spec.
#include <evodispatch/evaluator/evaluator.hpp>

#include <cctype>
#include <cmath>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include <evodispatch/evaluator/gpu_probe.hpp>
#include <evodispatch/evaluator/gpu_runner.hpp>
#include <evodispatch/evaluator/simulator.hpp>
#include <evodispatch/evaluator/worker.hpp>
#include <evodispatch/heuristics/json_reader.hpp>

namespace evodispatch {

MeasurementKey Evaluator::key(const Shape& shape, const Decision& decision, const TimingOptions& opts) const {
  return MeasurementKey{fingerprint(), kernel_build(), shape, resolve(decision, shape), opts.l2, measuring_protocol()};
}

Comparison Evaluator::compare(const Shape& shape, const Decision& a, const Decision& b, const TimingOptions& opts,
                              int /*pairs*/) {
  Comparison c;
  c.a = measure(shape, a, opts);
  c.b = measure(shape, b, opts);
  if (!c.a.ok || !c.b.ok) {
    c.error = !c.a.ok ? "a: " + c.a.error : "b: " + c.b.error;
    return c;
  }
  if (!(c.b.median_us > 0)) {
    c.error = "b: a median of 0 us cannot divide";
    return c;
  }
  c.ratio = c.ratio_lo = c.ratio_hi = c.a.median_us / c.b.median_us;
  c.ok = true;
  return c;
}

nlohmann::json to_json(const Comparison& c) {
  nlohmann::json j = {{"ok", c.ok},       {"a", to_json(c.a)},          {"b", to_json(c.b)},
                      {"ratio", c.ratio}, {"ratio_lo", c.ratio_lo}, {"ratio_hi", c.ratio_hi},
                      {"pairs", c.pairs}};
  if (!c.error.empty()) j["error"] = c.error;
  return j;
}

Comparison comparison_from_json(const nlohmann::json& j, const std::string& path) {
  JsonReader r(j, path);
  Comparison c;
  const auto ok = r.boolean("ok");
  if (!ok) throw InputError(r.path_of("ok") + ": missing (true or false is required)");
  c.ok = *ok;
  c.error = r.string("error").value_or("");
  for (const char* side : {"a", "b"}) {
    const auto* m = r.member(side);
    if (!m) throw InputError(r.path_of(side) + ": missing (a measurement row is required)");
    (side[0] == 'a' ? c.a : c.b) = measurement_from_json(*m, r.path_of(side));
  }
  auto ratio = [&](const char* field) {
    const auto v = r.number(field);
    if (!v || !std::isfinite(*v) || *v < 0) throw InputError(r.path_of(field) + ": a finite ratio >= 0 is required");
    return *v;
  };
  c.ratio = ratio("ratio");
  c.ratio_lo = ratio("ratio_lo");
  c.ratio_hi = ratio("ratio_hi");
  c.pairs = static_cast<int>(r.integer("pairs").value_or(0));
  r.finish();
  if (!c.ok && c.error.empty()) throw InputError(r.path_of("error") + ": a failed comparison must say why");
  return c;
}

namespace {

constexpr const char* kDefaultProfile = "h100-sxm";

bool all_digits(std::string_view s) {
  if (s.empty() || s.size() > 4) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

bool in_process_requested() {
  const char* v = std::getenv("EVODISPATCH_IN_PROCESS");
  return v && std::string_view(v) == "1";
}

// The GPU `spec` names, or an InputError that says what this machine has instead.
void require_gpu(std::string_view spec, int index) {
  std::string why;
  const auto gpus = probe_gpus(&why);
  if (index < static_cast<int>(gpus.size())) return;
  const std::string what = gpus.empty() ? "no GPU (" + why + ")" : std::to_string(gpus.size()) + " GPU(s)";
  throw InputError("--device " + std::string(spec) + ": this machine has " + what + "; use --device sim:" +
                   kDefaultProfile + " (or another sim: profile)");
}

std::unique_ptr<Evaluator> make(std::string_view spec, bool local) {
  if (spec == "auto") {
    if (!probe_gpus().empty()) return make("cuda:0", local);
    return std::make_unique<SimulatorEvaluator>(load_sim_profile(kDefaultProfile), std::string("sim:") + kDefaultProfile);
  }
  if (spec.starts_with("sim:")) {
    const std::string_view name = spec.substr(4);
    if (name.empty()) throw InputError("--device sim:: give a profile name or a profile JSON file after \"sim:\"");
    return std::make_unique<SimulatorEvaluator>(load_sim_profile(name), std::string(spec));
  }
  if (spec.starts_with("cuda:") && all_digits(spec.substr(5))) {
    const int index = std::stoi(std::string(spec.substr(5)));
    require_gpu(spec, index);
    // One worker process per GPU: a kernel that takes the CUDA context down takes the
    // worker with it, and the parent records the row and starts another.
    if (local || in_process_requested()) return std::make_unique<CudaEvaluator>(index);
    return std::make_unique<RemoteEvaluator>(std::string(spec));
  }
  if (spec.starts_with("fa3:cuda:") && all_digits(spec.substr(9))) {
    // FlashAttention-3's kernels, measured by its Python worker on that GPU.
    const int index = std::stoi(std::string(spec.substr(9)));
    require_gpu(spec, index);
    const GpuInfo gpu = probe_gpus().at(index);
    return std::make_unique<RemoteEvaluator>(
        std::string(spec), fa3_worker_command(std::string(spec), index, device_info(gpu), gpu_fingerprint(gpu)));
  }
  std::string names;
  for (const auto& n : sim_profile_names()) names += (names.empty() ? "sim:" : ", sim:") + n;
  throw InputError("--device \"" + std::string(spec) + "\": expected auto, cuda:N, fa3:cuda:N or sim:PROFILE (" +
                   names + ")");
}

}  // namespace

std::unique_ptr<Evaluator> make_evaluator(std::string_view spec) { return make(spec, false); }

DeviceInfo device_for_spec(std::string_view spec) {
  if (spec.starts_with("fa3:")) spec.remove_prefix(4);  // the same GPU, without a worker
  const bool cuda = spec.starts_with("cuda:") && all_digits(spec.substr(5));
  if (!cuda && !(spec == "auto" && !probe_gpus().empty())) return make(spec, true)->device();
  const int index = cuda ? std::stoi(std::string(spec.substr(5))) : 0;
  require_gpu(spec, index);
  return device_info(probe_gpus().at(index));
}
std::unique_ptr<Evaluator> make_local_evaluator(std::string_view spec) { return make(spec, true); }

}  // namespace evodispatch

// evodispatch env: toolchain, GPUs, simulator profiles.
#include <iostream>

#include <nlohmann/json.hpp>

#include <evodispatch/evaluator/gpu_probe.hpp>
#include <evodispatch/evaluator/simulator.hpp>
#include <evodispatch/kernels/toolchain.hpp>

#include "app.hpp"

namespace evodispatch::cli {

namespace {
nlohmann::json env_report() {
  std::string why_none;
  const auto gpus = probe_gpus(&why_none);
  nlohmann::json j;
  j["version"] = "0.1.0";
  j["nvrtc"] = nvrtc_version();
  j["compiler"] = std::string("g++ ") + __VERSION__;
  j["gpus"] = nlohmann::json::array();
  for (const auto& g : gpus) {
    j["gpus"].push_back({{"index", g.index}, {"name", g.name}, {"num_sms", g.num_sms}, {"cc", g.cc},
                         {"memory_bytes", g.memory_bytes}, {"l2_bytes", g.l2_bytes}, {"driver", g.driver}});
  }
  if (gpus.empty()) j["no_gpu_reason"] = why_none;
  j["sim_profiles"] = nlohmann::json::array();
  for (const auto& name : sim_profile_names()) {
    const auto p = load_sim_profile(name);
    j["sim_profiles"].push_back(
        {{"name", "sim:" + name}, {"device", p.device.name}, {"num_sms", p.device.num_sms}});
  }
  return j;
}

void print_env(const nlohmann::json& j) {
  std::cout << "evodispatch " << j["version"].get<std::string>() << "\n"
            << "  compiler  " << j["compiler"].get<std::string>() << "\n"
            << "  nvrtc     " << j["nvrtc"].get<std::string>() << "\n";
  if (j["gpus"].empty()) {
    std::cout << "GPUs: none (" << j["no_gpu_reason"].get<std::string>() << "); --device auto uses sim:h100-sxm\n";
  } else {
    std::cout << "GPUs:\n";
    for (const auto& g : j["gpus"]) {
      std::cout << "  cuda:" << g["index"] << "  " << g["name"].get<std::string>() << ", " << g["num_sms"]
                << " SMs, cc " << g["cc"] << ", " << (g["memory_bytes"].get<double>() / (1 << 30)) << " GiB, driver "
                << g["driver"].get<std::string>() << "\n";
    }
  }
  std::cout << "simulator profiles:\n";
  for (const auto& p : j["sim_profiles"])
    std::cout << "  " << p["name"].get<std::string>() << "  " << p["device"].get<std::string>() << ", "
              << p["num_sms"] << " SMs\n";
}
}  // namespace

void add_env(CLI::App& app, Action& action) {
  auto* verb = app.add_subcommand("env", "toolchain, GPUs (name, SMs, cc, memory), simulator profiles");
  auto opts = std::make_shared<CommonOptions>();
  add_json_option(*verb, *opts);
  verb->callback([&action, opts] {
    action = [opts] {
      const auto j = env_report();
      if (opts->json) std::cout << j.dump() << "\n";
      else print_env(j);
      return kOk;
    };
  });
}

}  // namespace evodispatch::cli

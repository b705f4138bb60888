#pragma once
// The simulator (DESIGN.md §4): predicts a measurement row from the launch plan with a
// wave model, so that everything but real timing works without a GPU.
//
// The model, for one call:
//   latency = launch_first_us + main + [launch_extra_us + combine]   (combine iff splits > 1)
// The main kernel's work items run in waves over the plan's slots (sms_used x CTAs per
// SM); a wave lasts as long as its slowest CTA:
//   cta = cta_start_us + max(tiles x tile_us, KV bytes of its split / bandwidth per CTA)
// where the CTAs of a wave that have KV to read share the bandwidth: none gets more than
// its SM's share of the per-SM bandwidth, all together no more than the global bandwidth
// (DRAM when cold, L2 when the call's KV fits in L2 and the L2 is hot; re-reads of the
// same KV by unpacked query heads come from L2 either way; an fp8 cache gets
// fp8_stream_fraction of both). The combine kernel runs its
// CTAs in waves too: combine_cta_us + splits x rows x combine_split_row_us each, and no
// faster than moving the workspace and the output.
//
// Parameters live in JSON profiles (evaluator/profiles/*.json) that `calibrate` fits.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <evodispatch/evaluator/evaluator.hpp>
#include <evodispatch/evaluator/measurement.hpp>
#include <evodispatch/heuristics/contract.hpp>
#include <evodispatch/kernels/plan.hpp>

namespace evodispatch {

// Every fitted parameter of the wave model. Times in microseconds, bandwidths in bytes/s.
struct SimModel {
  double launch_first_us = 1.6;           // one kernel node of a replayed graph
  double launch_extra_us = 1.0;           // each further node (the combine kernel)
  double dram_efficiency = 0.9;           // achievable fraction of the device's nominal bandwidth
  double l2_bw_bytes_per_s = 5.5e12;      // aggregate L2 read bandwidth
  double l2_fit_fraction = 0.5;           // hot data stays in L2 up to this fraction of it
  double sm_dram_bw_bytes_per_s = 50e9;   // the most one SM streams from DRAM (latency bound)
  double sm_l2_bw_bytes_per_s = 100e9;    // the most one SM streams from L2
  double cta_start_us = 1.2;              // CTA prologue and epilogue: Q load, setup, output write
  double tile_us = 0.4;                   // compute per KV tile (MMA, softmax), overlapped with loads
  double fp8_stream_fraction = 0.92;      // of those bandwidths an fp8 cache streams at (widened in registers)
  double combine_cta_us = 0.8;            // fixed cost of one combine CTA
  double combine_split_row_us = 0.005;    // merging one split's partial of one query row
  int combine_ctas_per_sm = 8;            // the combine kernel's occupancy (the plan's combine_slots)
  int max_ctas_per_sm = 0;                // caps the kernel's occupancy (0 = the plan's own)
  bool operator==(const SimModel&) const = default;
};

struct SimProfile {
  std::string name;         // "h100-sxm"
  std::string description;
  DeviceInfo device;
  SimModel model;
  nlohmann::json calibration;  // provenance written by `calibrate`; null for a hand-set profile
};

nlohmann::json to_json(const SimModel&);
nlohmann::json to_json(const SimProfile&);
// Strict: every model field is required, unknown fields are refused, errors name the path.
SimModel sim_model_from_json(const nlohmann::json&, const std::string& path = "$.model");
SimProfile sim_profile_from_json(const nlohmann::json&, const std::string& path = "$");

// From JSON text; `source` prefixes every error ("profiles/a100.json: $.model.tile_us: ...").
SimProfile parse_sim_profile(std::string_view text, const std::string& source);
// A shipped profile name (sim_profile_names()), else a path to a profile JSON file.
SimProfile load_sim_profile(std::string_view name_or_path);
std::vector<std::string> sim_profile_names();

// 16 hex digits identifying what the predictions depend on (device and model).
std::string profile_hash(const SimProfile&);

// The resources of the kernel variant the GPU would run for (s, d), with the profile's
// occupancy cap applied and its combine occupancy (the plan's combine grid).
KernelResources sim_kernel_resources(const SimProfile&, const Shape& s, const Decision& d);
// plan() on the profile's device with sim_kernel_resources().
Plan sim_plan(const SimProfile&, const Shape&, const Decision&);

// The prediction with its parts, for reports and calibration.
struct Prediction {
  double latency_us = 0;
  double launch_us = 0;
  double main_us = 0;
  double combine_us = 0;  // the combine kernel, or the merge in the clusters (Plan::cluster_merge)
  double kv_bw_bytes_per_s = 0;  // the bandwidth the KV stream is limited by (global)
};
Prediction predict(const SimProfile&, const Plan&, L2Mode l2 = L2Mode::cold);
double predict_us(const SimProfile&, const Plan&, L2Mode l2 = L2Mode::cold);

// The Evaluator for "sim:NAME": deterministic rows whose median is the prediction.
class SimulatorEvaluator : public Evaluator {
 public:
  // `spec` defaults to "sim:" + profile.name.
  explicit SimulatorEvaluator(SimProfile profile, std::string spec = {});

  const std::string& spec() const override { return spec_; }
  const DeviceInfo& device() const override { return profile_.device; }
  const std::string& fingerprint() const override { return fingerprint_; }  // "sim:NAME#HASH"
  const std::string& kernel_build() const override { return kernel_build_; }  // "wave-model-v1"
  Measurement measure(const Shape&, const Decision&, const TimingOptions&) override;

  const SimProfile& profile() const { return profile_; }

 private:
  SimProfile profile_;
  std::string spec_;
  std::string fingerprint_;
  std::string kernel_build_;
};

}  // namespace evodispatch

#pragma once
// Fits the latency model of the model-based program family (heuristics/latency_model.hpp)
// to what the oracle measured on the training shapes: every decision of its space on every
// shape. Two stages of coordinate descent over multiplicative steps, from a prior scaled to
// the device: first the predictions (the squared log error against every measurement, with
// a fitted constant for what the model leaves out, the launch), then the choices: the
// search's own fitness of the model's argmin (geometric-mean speedup over the baseline, the
// floor penalised), ties broken by the prediction error, from the first stage's model and
// from seeded perturbations of the best. Deterministic for a seed.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include <evodispatch/heuristics/latency_model.hpp>
#include <evodispatch/search/fitness.hpp>

namespace evodispatch::search {

struct LatencySamples {
  std::vector<Shape> shapes;
  std::vector<std::unordered_map<std::uint64_t, double>> us;  // per shape: decision_code -> latency
  std::vector<double> baseline_us;                             // per shape
  std::vector<Decision> baseline;                              // per shape: the baseline's decision
  std::vector<double> oracle_us;                               // per shape: the best of `us`
};

struct LatencyFit {
  LatencyModel model;
  double score = kFailedScore;    // the fitness score of its decisions on the samples
  double geomean = 0;             // their speedup over the baseline
  std::optional<double> oracle_fraction;
  double log_error = 0;           // RMS of log(predicted / measured)
  int evaluations = 0;            // objective evaluations the fit took
};
nlohmann::json to_json(const LatencyFit&);

// The least value a model parameter may take on `hw`: its range's, except that DRAM may not
// stream faster than the device's peak (dram_ps_per_kib). The fit and the search's
// mutations of a model both keep to it.
std::int64_t lowest_on(const LatencyParameter&, const DeviceInfo& hw);

// The starting point: the model's own defaults with the bandwidths scaled to the device,
// and the candidate lists of the space the model may answer from.
LatencyModel prior_model(const DeviceInfo&, std::vector<int> splits, std::vector<bool> pack_gqa,
                         std::vector<int> sm_margins);

LatencyFit fit_latency_model(const LatencySamples&, const DeviceInfo&, const LatencyModel& prior,
                             const FitnessOptions&, std::uint64_t seed, int restarts = 4);

// The same latency-model script asking twice the predicted gain (at least 1%) before it
// overrides the baseline: how repair calms a model that put a validation shape under the
// floor. nullopt when the source is no model or already asks the most it can.
std::optional<std::string> more_cautious_model(std::string_view source);

}  // namespace evodispatch::search

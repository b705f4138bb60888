#pragma once
// What the evaluator returns for one (shape, decision): a row, never an exception.
// A failed compile, launch or numeric check is a row with ok = false and the error.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <evodispatch/heuristics/contract.hpp>

namespace evodispatch {

enum class L2Mode { cold, hot };
std::string_view to_string(L2Mode);
std::optional<L2Mode> parse_l2_mode(std::string_view);

struct TimingOptions {
  L2Mode l2 = L2Mode::cold;
  double min_replay_us = 200;  // a captured graph holds enough calls to last this long
  int replays = 30;            // timed replays; the median, p10 and p90 are over these
                               // (0 on a GPU: check only, the row carries no time)
  int warmup = 3;
  bool check = true;           // compare against the reference once per (shape, decision)
};

// The version of the built-in measuring protocol: how a row's numbers are obtained, as
// opposed to what ran (the kernel build) and where (the device). Stored rows of another
// version are never reused, so bump it with any change after which a new row would not be
// comparable with an old one of the same key:
//   * timing: graph capture (calls per graph, min_replay_us's meaning), warm-up, what a
//     replay's time is divided by, which statistic median_us / p10_us / p90_us are;
//   * inputs: their distribution or seeding, the buffer rotation that makes L2 cold, the
//     per-request lengths (cache_seqlens) a shape implies, where the buffers lie;
//   * the numeric check: the reference, the tolerance, the poisoning of outputs, when a
//     row counts as failed;
//   * what a row's fields mean (units, plan fields).
// Not for a kernel or compile change (kernel_build_hash() covers it), a device or driver
// change (the fingerprint), or the simulator's model (its kernel_build names the model).
// 2: every case's buffers at the start of one arena kept for the process (1 allocated them
// per case, and a case then ran up to 16% slower after some others: measuring.md).
inline constexpr int kMeasuringProtocol = 2;

// Identifies a measurement: it is never taken twice for the same key.
struct MeasurementKey {
  std::string device;        // device fingerprint (GPU model, SMs, clocks, driver / sim profile hash)
  std::string kernel_build;  // hash of the kernel sources and compile options (or the sim model)
  Shape shape;
  Decision decision;         // resolved
  L2Mode l2 = L2Mode::cold;
  // How it was measured (kMeasuringProtocol for the built-in evaluators; another backend
  // numbers its own). Last only so that positional initializers of the fields above stay valid.
  int measuring_protocol = kMeasuringProtocol;
};

struct Measurement {
  MeasurementKey key;
  bool ok = false;
  std::string error;           // why it failed, when !ok (compiler log, CUDA error, numeric mismatch)
  double median_us = 0;
  double p10_us = 0;
  double p90_us = 0;
  int samples = 0;
  std::optional<double> rel_error;  // ||out - ref|| / ||ref|| when checked
  nlohmann::json plan;              // the launch plan that produced it (kernels/plan.hpp)
};

// Median, p10 and p90 of samples, interpolating linearly between order statistics.
struct SampleStats {
  double median = 0, p10 = 0, p90 = 0;
};
SampleStats sample_stats(std::vector<double> samples);

// {"l2", "min_replay_us", "replays", "warmup", "check"}; every field optional when read.
nlohmann::json to_json(const TimingOptions&);
TimingOptions timing_from_json(const nlohmann::json&, const std::string& path = "$");

nlohmann::json to_json(const MeasurementKey&);
// A measuring-protocol version read from JSON (`value` null: missing), an integer >= 1;
// InputError at `path` otherwise.
int measuring_protocol_from_json(const nlohmann::json* value, const std::string& path);
nlohmann::json to_json(const Measurement&);
Measurement measurement_from_json(const nlohmann::json&, const std::string& path = "$");

}  // namespace evodispatch

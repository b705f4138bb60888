#include <evodispatch/search/replay_evaluator.hpp>

#include <map>
#include <tuple>

#include <evodispatch/results/database.hpp>
#include <evodispatch/results/devices.hpp>
#include <evodispatch/results/measurements.hpp>

namespace evodispatch::search {

namespace {

// What a replay answers for: one device, one kernel build, one measuring protocol.
struct Replayed {
  std::string device, kernel_build;
  int protocol = kMeasuringProtocol;
};

// The (device, kernel build, protocol) with the most successful rows; a simulator's rows
// only when the file holds no other.
Replayed most_measured(results::Database& db, const std::string& path) {
  std::map<std::tuple<bool, std::string, std::string, int>, long> counts;  // (is sim, ...) -> rows
  results::MeasurementFilter ok_rows;
  ok_rows.ok = true;
  for (const auto& row : results::Measurements(db).list(ok_rows)) {
    const MeasurementKey& k = row.measurement.key;
    ++counts[{k.device.starts_with("sim:"), k.device, k.kernel_build, k.measuring_protocol}];
  }
  if (counts.empty()) throw InputError(path + ": no successful measurement to replay");
  const auto* best = &*counts.begin();
  for (const auto& c : counts) {
    const bool better_kind = std::get<0>(c.first) < std::get<0>(best->first);
    const bool same_kind = std::get<0>(c.first) == std::get<0>(best->first);
    if (better_kind || (same_kind && c.second > best->second)) best = &c;
  }
  return {std::get<1>(best->first), std::get<2>(best->first), std::get<3>(best->first)};
}

class ReplayEvaluator final : public Evaluator {
 public:
  explicit ReplayEvaluator(const std::string& path)
      : db_(results::Database::open(path, read_only())), spec_(std::string(kReplayPrefix) + path) {
    replayed_ = most_measured(db_, path);
    fingerprint_ = std::string(kReplayPrefix) + replayed_.device;
    if (auto row = results::Devices(db_).find(replayed_.device)) device_ = row->info;
    if (device_.num_sms <= 0)
      throw InputError(path + ": the replayed device " + replayed_.device + " has no SM count stored");
  }

  const std::string& spec() const override { return spec_; }
  const DeviceInfo& device() const override { return device_; }
  const std::string& fingerprint() const override { return fingerprint_; }
  const std::string& kernel_build() const override { return replayed_.kernel_build; }
  int measuring_protocol() const override { return replayed_.protocol; }

  Measurement measure(const Shape& shape, const Decision& decision, const TimingOptions& timing) override {
    MeasurementKey stored = key(shape, decision, timing);
    stored.device = replayed_.device;
    Measurement m;
    if (auto row = results::Measurements(db_).find(stored)) m = *row;
    else m.error = "not measured in " + spec_ + " (" + describe(shape) + ", " + describe(stored.decision) + ")";
    m.key = key(shape, decision, timing);
    return m;
  }

 private:
  static results::OpenOptions read_only() {
    results::OpenOptions o;
    o.read_only = true;
    return o;
  }

  results::Database db_;
  std::string spec_, fingerprint_;
  Replayed replayed_;
  DeviceInfo device_;
};

}  // namespace

std::unique_ptr<Evaluator> make_replay_evaluator(const std::string& db_path) {
  return std::make_unique<ReplayEvaluator>(db_path);
}

std::unique_ptr<Evaluator> make_any_evaluator(std::string_view spec) {
  if (spec.starts_with(kReplayPrefix)) {
    const std::string path(spec.substr(kReplayPrefix.size()));
    if (path.empty()) throw InputError("--device replay:DB: the database path is missing");
    return make_replay_evaluator(path);
  }
  return make_evaluator(spec);
}

}  // namespace evodispatch::search

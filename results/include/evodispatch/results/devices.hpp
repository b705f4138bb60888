#pragma once
// Devices and kernel builds: the first two parts of every measurement key.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <evodispatch/heuristics/contract.hpp>
#include <evodispatch/results/database.hpp>

namespace evodispatch::results {

struct DeviceRecord {
  std::int64_t id = 0;       // filled on read
  std::string fingerprint;   // MeasurementKey::device
  DeviceInfo info;
  std::string driver;        // driver / runtime version, or the simulator profile's version
  nlohmann::json extra = nlohmann::json::object();  // clocks, memory size, profile parameters...
  std::string created_at;    // filled on read
};

class Devices {
 public:
  explicit Devices(Database& db) : db_(&db) {}
  // Inserts or updates the row with this fingerprint; returns its id. A row created
  // earlier from a bare fingerprint (by a measurement) gets its details here.
  std::int64_t upsert(const DeviceRecord&);
  std::optional<DeviceRecord> find(const std::string& fingerprint) const;
  std::optional<DeviceRecord> get(std::int64_t id) const;
  std::vector<DeviceRecord> list() const;

 private:
  Database* db_;
};

struct KernelBuildRecord {
  std::int64_t id = 0;       // filled on read
  std::string hash;          // MeasurementKey::kernel_build
  std::string description;   // e.g. "decode-splitkv sm_90a nvrtc 13.0"
  bool ok = true;            // false: it did not compile; compiler_log says why
  std::string compiler_log;
  // The compiler's resource report: registers, spills, shared memory, per variant.
  nlohmann::json resources = nlohmann::json::object();
  std::string created_at;    // filled on read
};

class KernelBuilds {
 public:
  explicit KernelBuilds(Database& db) : db_(&db) {}
  std::int64_t upsert(const KernelBuildRecord&);
  std::optional<KernelBuildRecord> find(const std::string& hash) const;
  std::vector<KernelBuildRecord> list() const;

 private:
  Database* db_;
};

}  // namespace evodispatch::results

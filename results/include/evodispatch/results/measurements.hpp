#pragma once
// The measurement cache (DESIGN.md §4): a row per measurement key, never taken twice
// unless the caller asks to replace it.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <evodispatch/evaluator/measurement.hpp>
#include <evodispatch/results/database.hpp>

namespace evodispatch::results {

struct MeasurementFilter {
  std::optional<std::string> device;        // fingerprint
  std::optional<std::string> kernel_build;  // hash
  std::optional<int> measuring_protocol;    // rows of this protocol only (kMeasuringProtocol: reusable ones)
  std::optional<std::int64_t> run_id;       // the run that took it
  std::optional<Shape> shape;
  std::optional<L2Mode> l2;
  std::optional<bool> ok;
  std::optional<std::int64_t> limit;        // at most this many rows, oldest first
};

struct MeasurementRow {
  std::int64_t id = 0;
  Measurement measurement;
  std::optional<std::int64_t> run_id;
  std::string created_at;
};

class Measurements {
 public:
  explicit Measurements(Database& db) : db_(&db) {}

  // Keys are compared with the decision resolved (resolve(decision, shape)), so a key
  // whose pack_gqa is unset finds the row stored with its default filled in; the
  // returned key always has pack_gqa set. Every part of the key counts, the measuring
  // protocol included: a row of another protocol is a miss.
  std::optional<Measurement> find(const MeasurementKey&) const;
  // Many keys in one read snapshot; the answer has one entry per key, in order.
  std::vector<std::optional<Measurement>> find_many(std::span<const MeasurementKey>) const;

  // Stores a row. A row with the same key is kept unless `replace` (--remeasure).
  // Returns whether the database changed. `run_id` records which run took it.
  // Device and kernel build rows are created from the key when they are missing.
  bool put(const Measurement&, bool replace = false, std::optional<std::int64_t> run_id = std::nullopt);
  // Many rows in one transaction; returns how many were written.
  std::size_t put_many(std::span<const Measurement>, bool replace = false,
                       std::optional<std::int64_t> run_id = std::nullopt);

  std::vector<MeasurementRow> list(const MeasurementFilter& = {}) const;
  std::int64_t count(const MeasurementFilter& = {}) const;

 private:
  Database* db_;
};

}  // namespace evodispatch::results

#pragma once
// Shapes and workloads. A shape row is shared by every measurement of that shape.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <evodispatch/heuristics/contract.hpp>
#include <evodispatch/results/database.hpp>

namespace evodispatch::results {

class Shapes {
 public:
  explicit Shapes(Database& db) : db_(&db) {}
  std::int64_t upsert(const Shape&);                  // the id, creating the row when needed
  std::optional<std::int64_t> find(const Shape&) const;
  std::optional<Shape> get(std::int64_t id) const;

 private:
  Database* db_;
};

struct WorkloadRecord {
  std::int64_t id = 0;        // filled on read
  std::string name;           // the shipped name or the file path given by the user
  nlohmann::json spec;        // the workload JSON as it was run
  std::string created_at;     // filled on read
};

class Workloads {
 public:
  explicit Workloads(Database& db) : db_(&db) {}
  // One row per (name, spec): running the same workload twice reuses the row, while an
  // edited file under the same name gets a new one.
  std::int64_t upsert(const std::string& name, const nlohmann::json& spec);
  std::optional<WorkloadRecord> get(std::int64_t id) const;
  std::vector<WorkloadRecord> list() const;

 private:
  Database* db_;
};

}  // namespace evodispatch::results

#include "schema.hpp"

#include <array>

namespace evodispatch::results {

// Append only: a released migration is never edited, because databases in the field
// already carry its result. A later change is a new entry (ALTER TABLE, or a rebuild
// through a new table and INSERT ... SELECT).
std::span<const Migration> migrations() {
  static const std::array<Migration, 5> kMigrations = {{
      {1, "devices, kernel builds, workloads, shapes, measurements, runs, programs, evaluations, comparisons",
       schema_v1()},
      {2, "program bases stored once", schema_v2()},
      {3, "comparisons name their baseline side; measurement keys carry the measuring protocol", schema_v3()},
      {4, "per-shape results of runs, program steps, run kernel builds, readable views", schema_v4()},
      {5, "an fp8 cache's query dtype is part of a shape", schema_v5(), true},
  }};
  return kMigrations;
}

}  // namespace evodispatch::results

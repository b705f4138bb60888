// Schema version 3: a comparison says which side ran the baseline, and a measurement's
// key carries the version of the measuring protocol.
//
//   comparisons    + baseline_side 'a' | 'b': the argument of Evaluator::compare(shape,
//                  a, b) that was the baseline (the evaluator's ratio is time(a) /
//                  time(b); speedup stays baseline / candidate either way). Rows written
//                  before it: a search's confirmations called compare(baseline,
//                  candidate), side 'a'; `regress` called compare(candidate, baseline),
//                  side 'b'. The run's kind tells them apart. The DEFAULT exists only
//                  because ALTER TABLE needs one; the repository always writes the side.
//   measurements   + measuring_protocol, part of the key and its unique constraint
//                  (kMeasuringProtocol in evaluator/measurement.hpp): a row measured by
//                  another protocol is never reused. Every row before it was measured by
//                  version 1. A table constraint cannot be altered, so the table is
//                  rebuilt with the same ids. The rows wait in a temporary table while
//                  the old one is dropped first: the new table then reuses its pages
//                  (the file does not grow by a copy of it), and a new file ends up no
//                  larger than at version 2 (the DDL is written without padding for
//                  the same reason: the schema's text still fits its three pages).
#include "schema.hpp"

namespace evodispatch::results {

namespace {
constexpr std::string_view kV3 = R"sql(
ALTER TABLE comparisons ADD COLUMN baseline_side TEXT NOT NULL DEFAULT 'a' CHECK (baseline_side IN ('a', 'b'));
UPDATE comparisons SET baseline_side = 'b' WHERE run_id IN (SELECT id FROM runs WHERE kind = 'regress');

CREATE TEMP TABLE measurements_before_v3 AS SELECT * FROM measurements;
DROP TABLE measurements;
CREATE TABLE measurements (
  id INTEGER PRIMARY KEY,
  device_id INTEGER NOT NULL REFERENCES devices(id),
  kernel_build_id INTEGER NOT NULL REFERENCES kernel_builds(id),
  measuring_protocol INTEGER NOT NULL CHECK (measuring_protocol >= 1),
  shape_id INTEGER NOT NULL REFERENCES shapes(id),
  num_splits INTEGER NOT NULL,
  pack_gqa INTEGER NOT NULL CHECK (pack_gqa IN (0, 1)),
  sm_margin INTEGER NOT NULL,
  l2_mode TEXT NOT NULL CHECK (l2_mode IN ('cold', 'hot')),
  ok INTEGER NOT NULL CHECK (ok IN (0, 1)),
  error TEXT NOT NULL DEFAULT '',
  median_us REAL,
  p10_us REAL,
  p90_us REAL,
  samples INTEGER NOT NULL DEFAULT 0,
  rel_error REAL,
  plan_json TEXT NOT NULL DEFAULT 'null' CHECK (json_valid(plan_json)),
  run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL,
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  UNIQUE (device_id, kernel_build_id, measuring_protocol, shape_id, num_splits, pack_gqa, sm_margin, l2_mode)
);
INSERT INTO measurements (id, device_id, kernel_build_id, measuring_protocol, shape_id, num_splits, pack_gqa,
                          sm_margin, l2_mode, ok, error, median_us, p10_us, p90_us, samples, rel_error, plan_json,
                          run_id, created_at)
  SELECT id, device_id, kernel_build_id, 1, shape_id, num_splits, pack_gqa, sm_margin, l2_mode, ok, error, median_us,
         p10_us, p90_us, samples, rel_error, plan_json, run_id, created_at
  FROM temp.measurements_before_v3;
DROP TABLE temp.measurements_before_v3;
CREATE INDEX measurements_by_run ON measurements (run_id);
CREATE INDEX measurements_by_shape ON measurements (shape_id);
)sql";
}  // namespace

std::string_view schema_v3() { return kV3; }

}  // namespace evodispatch::results

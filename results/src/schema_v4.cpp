// Schema version 4: what a run found on each of its shapes, the step that made each
// program, the kernel build a run measured, and views with readable columns for any
// SQLite client (sqlite3, Datasette, a notebook).
//
//   run_shapes     one row per (run, split, shape): the candidate's (a bench policy, a
//                  search winner, a regressed heuristic, a swept policy), the baseline's
//                  and the oracle's decisions and median times, and the speedups the run
//                  reported (regress: the interleaved comparison's). The per-shape table
//                  of `results run N`, the report's heatmaps and `results compare`.
//   programs       + step: the search step that made it (NULL before version 4).
//   runs           + kernel_build_id: the build it measured (filled from its
//                  measurements or comparisons for runs before version 4).
//
// The views decode the JSON columns. KV bytes count K and V of every sequence:
// 2 * batch * seqlen_k * h_kv * head_dim * bytes per element (1 for fp8, else 2).
//   v_runs             one line per run with its headline figures
//   v_measurements     shape and decision fields as columns, KV bytes, TB/s and the
//                      fraction of the device's DRAM bandwidth
//   v_oracle           the fastest measured decision per shape, device, kernel build,
//                      measuring protocol and L2 mode
//   v_search_progress  per search step and island: evaluations, failures, the step's
//                      best training fitness, the best so far, and the best validation
//   v_programs         programs with their rule count and training / validation figures
//   v_run_shapes       run_shapes with the shape's fields
#include "schema.hpp"

namespace evodispatch::results {

namespace {
constexpr std::string_view kV4 = R"sql(
CREATE TABLE run_shapes (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  split TEXT NOT NULL CHECK (split IN ('workload', 'train', 'validation', 'test')),
  shape_id INTEGER NOT NULL REFERENCES shapes(id),
  cand_num_splits INTEGER, cand_pack_gqa INTEGER, cand_sm_margin INTEGER, candidate_us REAL,
  base_num_splits INTEGER, base_pack_gqa INTEGER, base_sm_margin INTEGER, baseline_us REAL,
  oracle_num_splits INTEGER, oracle_pack_gqa INTEGER, oracle_sm_margin INTEGER, oracle_us REAL,
  speedup REAL,
  oracle_speedup REAL,
  error TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (run_id, split, shape_id)
) WITHOUT ROWID;

ALTER TABLE programs ADD COLUMN step INTEGER;
ALTER TABLE runs ADD COLUMN kernel_build_id INTEGER REFERENCES kernel_builds(id);
UPDATE runs SET kernel_build_id = coalesce(
  (SELECT kernel_build_id FROM measurements m WHERE m.run_id = runs.id LIMIT 1),
  (SELECT kernel_build_id FROM comparisons c WHERE c.run_id = runs.id LIMIT 1));

CREATE VIEW v_runs AS
SELECT r.id, r.kind, r.status, w.name AS workload, d.name AS device, d.fingerprint AS device_fingerprint,
  k.hash AS kernel_build, r.seed, r.started_at, r.finished_at,
  round((julianday(r.finished_at) - julianday(r.started_at)) * 86400.0, 3) AS duration_s,
  coalesce(json_extract(r.config_json, '$.policy'), json_extract(r.config_json, '$.heuristic'),
           json_extract(r.config_json, '$.search.name')) AS candidate,
  coalesce(json_extract(r.summary_json, '$.baseline'), json_extract(r.config_json, '$.baseline'),
           json_extract(r.config_json, '$.search.baseline')) AS baseline,
  coalesce(json_extract(r.summary_json, '$.shapes.train') + json_extract(r.summary_json, '$.shapes.validation'),
           json_extract(r.summary_json, '$.shapes'), json_extract(r.config_json, '$.shapes')) AS shapes,
  coalesce(json_extract(r.summary_json, '$.winner.confirmed.geomean'),
           json_extract(r.summary_json, '$.winner.validation.geomean'),
           json_extract(r.summary_json, '$.geomean_speedup')) AS geomean_speedup,
  coalesce(json_extract(r.summary_json, '$.winner.confirmed.worst'),
           json_extract(r.summary_json, '$.winner.validation.worst'),
           json_extract(r.summary_json, '$.worst_speedup')) AS worst_speedup,
  json_extract(r.summary_json, '$.winner.validation.oracle_fraction') AS oracle_fraction,
  json_extract(r.summary_json, '$.test.geomean') AS test_geomean,
  json_extract(r.summary_json, '$.evaluations') AS evaluations,
  json_extract(r.summary_json, '$.winner.program_id') AS winner_program,
  r.config_json, r.summary_json
FROM runs r
LEFT JOIN workloads w ON w.id = r.workload_id
LEFT JOIN devices d ON d.id = r.device_id
LEFT JOIN kernel_builds k ON k.id = r.kernel_build_id;

CREATE VIEW v_measurements AS
SELECT m.id, m.run_id, d.name AS device, d.fingerprint AS device_fingerprint, k.hash AS kernel_build,
  m.measuring_protocol, s.batch, s.seqlen_q, s.seqlen_k, s.h_q, s.h_kv, s.head_dim, s.dtype, s.page_size, s.causal,
  m.num_splits, m.pack_gqa, m.sm_margin, m.l2_mode, m.ok, m.error, m.median_us, m.p10_us, m.p90_us, m.samples,
  m.rel_error,
  2 * s.batch * s.seqlen_k * s.h_kv * s.head_dim * (CASE s.dtype WHEN 'fp8' THEN 1 ELSE 2 END) AS kv_bytes,
  2.0 * s.batch * s.seqlen_k * s.h_kv * s.head_dim * (CASE s.dtype WHEN 'fp8' THEN 1 ELSE 2 END)
    / m.median_us / 1e6 AS tb_per_s,
  2.0 * s.batch * s.seqlen_k * s.h_kv * s.head_dim * (CASE s.dtype WHEN 'fp8' THEN 1 ELSE 2 END)
    / (m.median_us * 1e-6) / nullif(d.mem_bw, 0) AS bw_fraction,
  m.created_at
FROM measurements m
JOIN shapes s ON s.id = m.shape_id
JOIN devices d ON d.id = m.device_id
JOIN kernel_builds k ON k.id = m.kernel_build_id;

CREATE VIEW v_oracle AS
SELECT device, device_fingerprint, kernel_build, measuring_protocol, l2_mode, batch, seqlen_q, seqlen_k, h_q, h_kv,
  head_dim, dtype, page_size, causal, num_splits, pack_gqa, sm_margin, median_us, tb_per_s, bw_fraction,
  decisions_measured
FROM (
  SELECT v.*, row_number() OVER w AS place, count(*) OVER w AS decisions_measured
  FROM v_measurements v
  WHERE v.ok = 1 AND v.median_us IS NOT NULL
  WINDOW w AS (PARTITION BY device_fingerprint, kernel_build, measuring_protocol, l2_mode, batch, seqlen_q, seqlen_k,
                            h_q, h_kv, head_dim, dtype, page_size, causal
               ORDER BY median_us, id ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING))
WHERE place = 1;

CREATE VIEW v_search_progress AS
SELECT run_id, island, step, evaluations, failures, step_best_train,
  max(step_best_train) OVER (PARTITION BY run_id, island ORDER BY step) AS best_train,
  max(step_best_validation) OVER (PARTITION BY run_id, island ORDER BY step) AS best_validation
FROM (
  SELECT e.run_id, p.island, p.step,
    sum(e.split = 'train') AS evaluations,
    sum(e.split = 'train' AND e.ok = 0) AS failures,
    max(CASE WHEN e.split = 'train' AND e.ok = 1 THEN e.fitness END) AS step_best_train,
    max(CASE WHEN e.split = 'validation' AND e.ok = 1 THEN e.fitness END) AS step_best_validation
  FROM evaluations e JOIN programs p ON p.id = e.program_id
  WHERE p.step IS NOT NULL
  GROUP BY e.run_id, p.island, p.step);

CREATE VIEW v_programs AS
SELECT p.id, p.run_id, p.origin, p.island, p.step, p.generation,
  CASE WHEN json_type(p.rules_json, '$.rules') = 'array' THEN json_array_length(p.rules_json, '$.rules') END AS rules,
  t.ok AS train_ok, t.fitness AS train_fitness, t.worst_speedup AS train_worst, t.oracle_fraction AS train_oracle_fraction,
  v.fitness AS validation_fitness, v.worst_speedup AS validation_worst, coalesce(t.error, '') AS error,
  p.parents_json AS parents, p.hash, p.source, p.created_at
FROM programs p
LEFT JOIN evaluations t ON t.id = (SELECT max(id) FROM evaluations WHERE program_id = p.id AND split = 'train')
LEFT JOIN evaluations v ON v.program_id = p.id AND v.split = 'validation' AND v.stage = 'measured';

CREATE VIEW v_run_shapes AS
SELECT rs.run_id, rs.split, s.batch, s.seqlen_q, s.seqlen_k, s.h_q, s.h_kv, s.head_dim, s.dtype, s.page_size, s.causal,
  rs.cand_num_splits, rs.cand_pack_gqa, rs.cand_sm_margin, rs.candidate_us,
  rs.base_num_splits, rs.base_pack_gqa, rs.base_sm_margin, rs.baseline_us,
  rs.oracle_num_splits, rs.oracle_pack_gqa, rs.oracle_sm_margin, rs.oracle_us,
  rs.speedup, rs.oracle_speedup, rs.error, rs.shape_id
FROM run_shapes rs JOIN shapes s ON s.id = rs.shape_id;
)sql";
}  // namespace

std::string_view schema_v4() { return kV4; }

}  // namespace evodispatch::results

// Schema version 5: the query dtype of an fp8 KV cache is part of a shape.
//
//   shapes         + q_dtype 'bf16' | 'fp16' (Shape::q_dtype: an fp8 cache's queries and
//                  output; 'bf16' for the 16-bit dtypes), in the unique constraint. Before
//                  it, an fp8 cache under fp16 queries and the same cache under bf16
//                  queries were one row, so either's measurements were served for the
//                  other. Every row before it is taken as 'bf16': the default, and what
//                  every stored workload of the repository used except
//                  bench/gpu/fp8-shapes.json's one fp16 shape. A table constraint cannot
//                  be altered and other tables reference shapes(id), so the table is
//                  rebuilt with the same ids with foreign keys off (the runner's
//                  Migration::rebuilds_referenced_table); the views over it are dropped
//                  first, since renaming the new table re-reads every view, and come back
//                  with q_dtype beside dtype.
#include "schema.hpp"

namespace evodispatch::results {

namespace {
constexpr std::string_view kV5 = R"sql(
DROP VIEW v_oracle;
DROP VIEW v_measurements;
DROP VIEW v_run_shapes;

CREATE TABLE shapes_v5 (
  id INTEGER PRIMARY KEY,
  batch INTEGER NOT NULL,
  seqlen_q INTEGER NOT NULL,
  seqlen_k INTEGER NOT NULL,
  h_q INTEGER NOT NULL,
  h_kv INTEGER NOT NULL,
  head_dim INTEGER NOT NULL,
  dtype TEXT NOT NULL CHECK (dtype IN ('bf16', 'fp16', 'fp8')),
  page_size INTEGER NOT NULL,
  causal INTEGER NOT NULL CHECK (causal IN (0, 1)),
  q_dtype TEXT NOT NULL DEFAULT 'bf16' CHECK (q_dtype IN ('bf16', 'fp16') AND (dtype = 'fp8' OR q_dtype = 'bf16')),
  UNIQUE (batch, seqlen_q, seqlen_k, h_q, h_kv, head_dim, dtype, page_size, causal, q_dtype)
);
INSERT INTO shapes_v5 (id, batch, seqlen_q, seqlen_k, h_q, h_kv, head_dim, dtype, page_size, causal, q_dtype)
  SELECT id, batch, seqlen_q, seqlen_k, h_q, h_kv, head_dim, dtype, page_size, causal, 'bf16' FROM shapes;
DROP TABLE shapes;
ALTER TABLE shapes_v5 RENAME TO shapes;

CREATE VIEW v_measurements AS
SELECT m.id, m.run_id, d.name AS device, d.fingerprint AS device_fingerprint, k.hash AS kernel_build,
  m.measuring_protocol, s.batch, s.seqlen_q, s.seqlen_k, s.h_q, s.h_kv, s.head_dim, s.dtype, s.q_dtype, s.page_size,
  s.causal, m.num_splits, m.pack_gqa, m.sm_margin, m.l2_mode, m.ok, m.error, m.median_us, m.p10_us, m.p90_us,
  m.samples, m.rel_error,
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
  head_dim, dtype, q_dtype, page_size, causal, num_splits, pack_gqa, sm_margin, median_us, tb_per_s, bw_fraction,
  decisions_measured
FROM (
  SELECT v.*, row_number() OVER w AS place, count(*) OVER w AS decisions_measured
  FROM v_measurements v
  WHERE v.ok = 1 AND v.median_us IS NOT NULL
  WINDOW w AS (PARTITION BY device_fingerprint, kernel_build, measuring_protocol, l2_mode, batch, seqlen_q, seqlen_k,
                            h_q, h_kv, head_dim, dtype, q_dtype, page_size, causal
               ORDER BY median_us, id ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING))
WHERE place = 1;

CREATE VIEW v_run_shapes AS
SELECT rs.run_id, rs.split, s.batch, s.seqlen_q, s.seqlen_k, s.h_q, s.h_kv, s.head_dim, s.dtype, s.q_dtype,
  s.page_size, s.causal,
  rs.cand_num_splits, rs.cand_pack_gqa, rs.cand_sm_margin, rs.candidate_us,
  rs.base_num_splits, rs.base_pack_gqa, rs.base_sm_margin, rs.baseline_us,
  rs.oracle_num_splits, rs.oracle_pack_gqa, rs.oracle_sm_margin, rs.oracle_us,
  rs.speedup, rs.oracle_speedup, rs.error, rs.shape_id
FROM run_shapes rs JOIN shapes s ON s.id = rs.shape_id;
)sql";
}  // namespace

std::string_view schema_v5() { return kV5; }

}  // namespace evodispatch::results

// Schema version 1.
//
//   devices        one row per device fingerprint: a GPU (model, SMs, clocks, driver) or
//                  a simulator profile. Measurements are comparable only within one device.
//   kernel_builds  one row per kernel build hash (sources + compile options, or the
//                  simulator model): compile outcome, compiler log, resource report.
//   workloads      the shape sets runs were given, as JSON, so a run says what it measured.
//   shapes         every Shape field, unique over all of them: measurements, comparisons
//                  and reports share one id per shape.
//   runs           one row per bench / sweep / search / regress / calibrate / distill:
//                  config, seed, device, status, summary, and the resumable search state.
//   measurements   one row per measurement key (device, kernel build, shape, resolved
//                  decision, L2 mode); a re-measurement replaces the row only when asked.
//                  run_id records which run took it (provenance, not part of the key).
//   programs       a search's Lua programs, unique per run by normalized-source hash,
//                  with parents, island and generation.
//   evaluations    a program scored on the train or validation split at one cascade
//                  stage; unique per (program, split, stage) so a resumed search never
//                  scores twice.
//   comparisons    interleaved A/B measurements of a candidate against a baseline on one
//                  shape: a search's confirmations, a regression report's rows; attempt 2
//                  is the re-measurement that confirms a failure.
//
// Conventions: times are UTC ISO-8601 text with milliseconds; JSON columns hold text
// that json_valid() accepts; booleans are 0/1; a REAL that is NULL was not a number
// (or, for rel_error and the fitness columns, was not computed).
#include "schema.hpp"

namespace evodispatch::results {

namespace {

constexpr std::string_view kV1 = R"SQL(
CREATE TABLE devices (
  id           INTEGER PRIMARY KEY,
  fingerprint  TEXT    NOT NULL UNIQUE CHECK (fingerprint <> ''),
  name         TEXT    NOT NULL DEFAULT '',
  num_sms      INTEGER NOT NULL DEFAULT 0,
  l2_bytes     INTEGER NOT NULL DEFAULT 0,
  mem_bw       REAL    NOT NULL DEFAULT 0,      -- bytes per second
  cc           INTEGER NOT NULL DEFAULT 0,      -- major * 10 + minor
  driver       TEXT    NOT NULL DEFAULT '',
  info_json    TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(info_json)),
  created_at   TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE TABLE kernel_builds (
  id              INTEGER PRIMARY KEY,
  hash            TEXT    NOT NULL UNIQUE CHECK (hash <> ''),
  description     TEXT    NOT NULL DEFAULT '',
  ok              INTEGER NOT NULL DEFAULT 1 CHECK (ok IN (0, 1)),
  compiler_log    TEXT    NOT NULL DEFAULT '',
  resources_json  TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(resources_json)),
  created_at      TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE TABLE workloads (
  id          INTEGER PRIMARY KEY,
  name        TEXT NOT NULL,
  spec_json   TEXT NOT NULL CHECK (json_valid(spec_json)),
  created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  UNIQUE (name, spec_json)
);

CREATE TABLE shapes (
  id         INTEGER PRIMARY KEY,
  batch      INTEGER NOT NULL,
  seqlen_q   INTEGER NOT NULL,
  seqlen_k   INTEGER NOT NULL,
  h_q        INTEGER NOT NULL,
  h_kv       INTEGER NOT NULL,
  head_dim   INTEGER NOT NULL,
  dtype      TEXT    NOT NULL CHECK (dtype IN ('bf16', 'fp16', 'fp8')),
  page_size  INTEGER NOT NULL,
  causal     INTEGER NOT NULL CHECK (causal IN (0, 1)),
  UNIQUE (batch, seqlen_q, seqlen_k, h_q, h_kv, head_dim, dtype, page_size, causal)
);

CREATE TABLE runs (
  id            INTEGER PRIMARY KEY,
  kind          TEXT    NOT NULL CHECK (kind <> ''),
  status        TEXT    NOT NULL DEFAULT 'running'
                        CHECK (status IN ('running', 'finished', 'failed', 'interrupted')),
  config_json   TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(config_json)),
  seed          INTEGER,
  device_id     INTEGER REFERENCES devices(id),
  workload_id   INTEGER REFERENCES workloads(id),
  summary_json  TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(summary_json)),
  state_json    TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(state_json)),
  started_at    TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  finished_at   TEXT
);
CREATE INDEX runs_by_kind ON runs (kind, id);

CREATE TABLE measurements (
  id               INTEGER PRIMARY KEY,
  device_id        INTEGER NOT NULL REFERENCES devices(id),
  kernel_build_id  INTEGER NOT NULL REFERENCES kernel_builds(id),
  shape_id         INTEGER NOT NULL REFERENCES shapes(id),
  num_splits       INTEGER NOT NULL,
  pack_gqa         INTEGER NOT NULL CHECK (pack_gqa IN (0, 1)),
  sm_margin        INTEGER NOT NULL,
  l2_mode          TEXT    NOT NULL CHECK (l2_mode IN ('cold', 'hot')),
  ok               INTEGER NOT NULL CHECK (ok IN (0, 1)),
  error            TEXT    NOT NULL DEFAULT '',
  median_us        REAL,
  p10_us           REAL,
  p90_us           REAL,
  samples          INTEGER NOT NULL DEFAULT 0,
  rel_error        REAL,
  plan_json        TEXT    NOT NULL DEFAULT 'null' CHECK (json_valid(plan_json)),
  run_id           INTEGER REFERENCES runs(id) ON DELETE SET NULL,
  created_at       TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  UNIQUE (device_id, kernel_build_id, shape_id, num_splits, pack_gqa, sm_margin, l2_mode)
);
CREATE INDEX measurements_by_run ON measurements (run_id);
CREATE INDEX measurements_by_shape ON measurements (shape_id);

CREATE TABLE programs (
  id            INTEGER PRIMARY KEY,
  run_id        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  hash          TEXT    NOT NULL,
  source        TEXT    NOT NULL,
  rules_json    TEXT    NOT NULL DEFAULT 'null' CHECK (json_valid(rules_json)),
  parents_json  TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(parents_json)),
  origin        TEXT    NOT NULL DEFAULT '',
  island        INTEGER NOT NULL DEFAULT 0,
  generation    INTEGER NOT NULL DEFAULT 0,
  created_at    TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  UNIQUE (run_id, hash)
);

CREATE TABLE evaluations (
  id               INTEGER PRIMARY KEY,
  program_id       INTEGER NOT NULL REFERENCES programs(id) ON DELETE CASCADE,
  run_id           INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  split            TEXT    NOT NULL CHECK (split IN ('train', 'validation')),
  stage            TEXT    NOT NULL DEFAULT 'measured',
  ok               INTEGER NOT NULL CHECK (ok IN (0, 1)),
  error            TEXT    NOT NULL DEFAULT '',
  fitness          REAL,
  worst_speedup    REAL,
  oracle_fraction  REAL,
  shapes           INTEGER NOT NULL DEFAULT 0,
  details_json     TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(details_json)),
  created_at       TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  UNIQUE (program_id, split, stage)
);
CREATE INDEX evaluations_by_run ON evaluations (run_id, split);

CREATE TABLE comparisons (
  id               INTEGER PRIMARY KEY,
  run_id           INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  program_id       INTEGER REFERENCES programs(id) ON DELETE CASCADE,
  shape_id         INTEGER NOT NULL REFERENCES shapes(id),
  attempt          INTEGER NOT NULL DEFAULT 1 CHECK (attempt >= 1),
  device_id        INTEGER NOT NULL REFERENCES devices(id),
  kernel_build_id  INTEGER NOT NULL REFERENCES kernel_builds(id),
  l2_mode          TEXT    NOT NULL CHECK (l2_mode IN ('cold', 'hot')),
  cand_num_splits  INTEGER NOT NULL,
  cand_pack_gqa    INTEGER NOT NULL CHECK (cand_pack_gqa IN (0, 1)),
  cand_sm_margin   INTEGER NOT NULL,
  base_num_splits  INTEGER NOT NULL,
  base_pack_gqa    INTEGER NOT NULL CHECK (base_pack_gqa IN (0, 1)),
  base_sm_margin   INTEGER NOT NULL,
  ok               INTEGER NOT NULL CHECK (ok IN (0, 1)),
  error            TEXT    NOT NULL DEFAULT '',
  candidate_us     REAL,
  baseline_us      REAL,
  speedup          REAL,     -- baseline / candidate, median of the pairwise ratios
  speedup_lo       REAL,
  speedup_hi       REAL,
  pairs            INTEGER NOT NULL DEFAULT 0,
  details_json     TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(details_json)),
  created_at       TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
-- A heuristic outside the database has no program id; ifnull keeps it in the key.
CREATE UNIQUE INDEX comparisons_key ON comparisons (run_id, ifnull(program_id, 0), shape_id, attempt);

PRAGMA application_id = 1163284292;
)SQL";

}  // namespace

std::string_view schema_v1() { return kV1; }

}  // namespace evodispatch::results

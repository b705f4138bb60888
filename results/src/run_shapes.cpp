#include <evodispatch/results/run_shapes.hpp>

#include <array>

#include "access.hpp"
#include "codec.hpp"

namespace evodispatch::results {

namespace {
constexpr std::array<ShapeSplit, 4> kSplits = {ShapeSplit::train, ShapeSplit::validation, ShapeSplit::test,
                                               ShapeSplit::workload};

constexpr std::string_view kColumns[] = {
    "run_id",          "split",          "shape_id",          "cand_num_splits",  "cand_pack_gqa",
    "cand_sm_margin",  "candidate_us",   "base_num_splits",   "base_pack_gqa",    "base_sm_margin",
    "baseline_us",     "oracle_num_splits", "oracle_pack_gqa", "oracle_sm_margin", "oracle_us",
    "speedup",         "oracle_speedup", "error"};

// A decision that may be absent binds its three columns NULL.
void bind_optional_decision(sql::Statement& st, const std::string& prefix, const std::optional<Decision>& d) {
  const std::string p = ":" + prefix;
  if (d) {
    detail::bind_decision(st, prefix, *d);
  } else {
    st.bind(p + "num_splits", std::nullopt).bind(p + "pack_gqa", std::nullopt).bind(p + "sm_margin", std::nullopt);
  }
}

std::optional<Decision> read_optional_decision(const sql::Statement& st, int first) {
  if (st.is_null(first)) return std::nullopt;
  return detail::read_decision(st, first);
}
}  // namespace

std::string_view to_string(ShapeSplit s) {
  switch (s) {
    case ShapeSplit::workload: return "workload";
    case ShapeSplit::train: return "train";
    case ShapeSplit::validation: return "validation";
    case ShapeSplit::test: return "test";
  }
  return "?";
}

std::optional<ShapeSplit> parse_shape_split(std::string_view s) {
  for (ShapeSplit v : kSplits)
    if (to_string(v) == s) return v;
  return std::nullopt;
}

void RunShapes::put(std::int64_t run_id, std::span<const RunShapeRecord> rows) {
  auto& c = detail::connection(*db_);
  sql::Transaction t(c);
  sql::Statement st(c, "INSERT OR REPLACE" + sql::insert_into("run_shapes", kColumns).substr(6));
  for (const RunShapeRecord& r : rows) {
    st.reset();
    st.bind(":run_id", run_id)
        .bind(":split", std::string(to_string(r.split)))
        .bind(":shape_id", detail::ensure_shape(c, r.shape))
        .bind(":candidate_us", r.candidate_us)
        .bind(":baseline_us", r.baseline_us)
        .bind(":oracle_us", r.oracle_us)
        .bind(":speedup", r.speedup)
        .bind(":oracle_speedup", r.oracle_speedup)
        .bind(":error", r.error);
    bind_optional_decision(st, "cand_", r.candidate);
    bind_optional_decision(st, "base_", r.baseline);
    bind_optional_decision(st, "oracle_", r.oracle);
    st.run();
  }
  t.commit();
}

std::vector<RunShapeRecord> RunShapes::list(std::int64_t run_id) const {
  sql::Statement st(detail::connection(*db_),
                    "SELECT rs.split, " + detail::shape_columns("s") +
                        ", cand_num_splits, cand_pack_gqa, cand_sm_margin, base_num_splits, base_pack_gqa, "
                        "base_sm_margin, oracle_num_splits, oracle_pack_gqa, oracle_sm_margin, candidate_us, "
                        "baseline_us, oracle_us, speedup, oracle_speedup, error FROM run_shapes rs "
                        "JOIN shapes s ON s.id = rs.shape_id WHERE rs.run_id = :run_id "
                        "ORDER BY CASE rs.split WHEN 'train' THEN 0 WHEN 'validation' THEN 1 WHEN 'test' THEN 2 "
                        "ELSE 3 END, rs.shape_id");
  st.bind(":run_id", run_id);
  std::vector<RunShapeRecord> out;
  const int d = 1 + detail::kShapeColumnCount;  // the first decision column
  while (st.step()) {
    RunShapeRecord r;
    const std::string split = st.column_text(0);
    const auto parsed = parse_shape_split(split);
    if (!parsed) throw DbError("run " + std::to_string(run_id) + " has a shape of unknown split \"" + split + "\"", st.sql());
    r.split = *parsed;
    r.shape = detail::read_shape(st, 1);
    r.candidate = read_optional_decision(st, d);
    r.baseline = read_optional_decision(st, d + 3);
    r.oracle = read_optional_decision(st, d + 6);
    r.candidate_us = st.column_optional_double(d + 9);
    r.baseline_us = st.column_optional_double(d + 10);
    r.oracle_us = st.column_optional_double(d + 11);
    r.speedup = st.column_optional_double(d + 12);
    r.oracle_speedup = st.column_optional_double(d + 13);
    r.error = st.column_text(d + 14);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace evodispatch::results

#include <evodispatch/results/comparisons.hpp>

#include "access.hpp"
#include "codec.hpp"

namespace evodispatch::results {

namespace {
const std::string& select_sql() {
  static const std::string kSql =
      "SELECT c.id, c.run_id, c.program_id, " + detail::shape_columns("s") +
      ", d.fingerprint, k.hash, c.l2_mode, c.cand_num_splits, c.cand_pack_gqa, c.cand_sm_margin, "
      "c.base_num_splits, c.base_pack_gqa, c.base_sm_margin, c.attempt, c.ok, c.error, c.candidate_us, "
      "c.baseline_us, c.speedup, c.speedup_lo, c.speedup_hi, c.pairs, c.details_json, c.created_at, c.baseline_side "
      "FROM comparisons c JOIN shapes s ON s.id = c.shape_id JOIN devices d ON d.id = c.device_id "
      "JOIN kernel_builds k ON k.id = c.kernel_build_id";
  return kSql;
}

// The baseline_side column's text: the name of compare()'s argument.
std::string_view side_text(BaselineSide side) { return side == BaselineSide::a ? "a" : "b"; }

BaselineSide read_side(const sql::Statement& st, int col) {
  const std::string text = st.column_text(col);
  if (text == "a") return BaselineSide::a;
  if (text == "b") return BaselineSide::b;
  throw DbError("stored comparison has an unknown baseline side \"" + text + "\"", st.sql());
}

ComparisonRecord read_comparison(const sql::Statement& st) {
  ComparisonRecord r;
  r.id = st.column_int64(0);
  r.run_id = st.column_int64(1);
  r.program_id = st.column_optional_int64(2);
  r.shape = detail::read_shape(st, 3);
  const int c = 3 + detail::kShapeColumnCount;  // the columns after the shape's
  r.device = st.column_text(c);
  r.kernel_build = st.column_text(c + 1);
  r.l2 = detail::read_l2(st, c + 2);
  r.candidate = detail::read_decision(st, c + 3);
  r.baseline = detail::read_decision(st, c + 6);
  r.attempt = st.column_int(c + 9);
  r.ok = st.column_bool(c + 10);
  r.error = st.column_text(c + 11);
  r.candidate_us = st.column_double(c + 12);
  r.baseline_us = st.column_double(c + 13);
  r.speedup = st.column_double(c + 14);
  r.speedup_lo = st.column_double(c + 15);
  r.speedup_hi = st.column_double(c + 16);
  r.pairs = st.column_int(c + 17);
  r.details = detail::read_json(st, c + 18);
  r.created_at = st.column_text(c + 19);
  r.baseline_side = read_side(st, c + 20);
  return r;
}

constexpr std::string_view kInsertColumns[] = {
    "run_id", "program_id", "shape_id", "attempt", "device_id", "kernel_build_id", "l2_mode",
    "cand_num_splits", "cand_pack_gqa", "cand_sm_margin", "base_num_splits", "base_pack_gqa", "base_sm_margin",
    "baseline_side", "ok", "error", "candidate_us", "baseline_us", "speedup", "speedup_lo", "speedup_hi", "pairs",
    "details_json"};
}  // namespace

void set_measured(ComparisonRecord& r, const Comparison& cmp, BaselineSide side) {
  const bool base_is_a = side == BaselineSide::a;
  r.baseline_side = side;
  r.pairs = cmp.pairs;
  r.ok = cmp.ok && cmp.ratio > 0;
  r.error = cmp.ok ? (cmp.ratio > 0 ? "" : "a ratio of 0") : cmp.error;
  r.baseline_us = base_is_a ? cmp.a.median_us : cmp.b.median_us;
  r.candidate_us = base_is_a ? cmp.b.median_us : cmp.a.median_us;
  r.speedup = r.speedup_lo = r.speedup_hi = 0;
  if (!r.ok) return;
  const auto invert = [](double x) { return x > 0 ? 1.0 / x : 0.0; };
  // ratio = time(a) / time(b): the speedup when a is the baseline, its inverse otherwise
  // (the interval's ends swap with it).
  r.speedup = base_is_a ? cmp.ratio : invert(cmp.ratio);
  r.speedup_lo = base_is_a ? cmp.ratio_lo : invert(cmp.ratio_hi);
  r.speedup_hi = base_is_a ? cmp.ratio_hi : invert(cmp.ratio_lo);
}

std::int64_t Comparisons::insert(const ComparisonRecord& r) {
  auto& c = detail::connection(*db_);
  sql::Transaction t(c);
  sql::Statement ins(c, sql::insert_into("comparisons", kInsertColumns) + " RETURNING id");
  ins.bind(":run_id", r.run_id)
      .bind(":program_id", r.program_id)
      .bind(":shape_id", detail::ensure_shape(c, r.shape))
      .bind(":attempt", r.attempt)
      .bind(":device_id", detail::ensure_device(c, r.device))
      .bind(":kernel_build_id", detail::ensure_kernel_build(c, r.kernel_build))
      .bind(":l2_mode", detail::l2_text(r.l2))
      .bind(":baseline_side", side_text(r.baseline_side))
      .bind(":ok", r.ok)
      .bind(":error", r.error)
      .bind(":candidate_us", r.candidate_us)
      .bind(":baseline_us", r.baseline_us)
      .bind(":speedup", r.speedup)
      .bind(":speedup_lo", r.speedup_lo)
      .bind(":speedup_hi", r.speedup_hi)
      .bind(":pairs", r.pairs)
      .bind(":details_json", detail::json_text(r.details.is_null() ? nlohmann::json::object() : r.details));
  detail::bind_decision(ins, "cand_", resolve(r.candidate, r.shape));
  detail::bind_decision(ins, "base_", resolve(r.baseline, r.shape));
  const std::int64_t id = detail::insert_returning_id(ins).value();
  t.commit();
  return id;
}

std::vector<ComparisonRecord> Comparisons::list_by_run(std::int64_t run_id, std::optional<std::int64_t> program_id) const {
  sql::Statement st(detail::connection(*db_),
                    select_sql() + " WHERE c.run_id = :run_id AND (:program_id IS NULL OR c.program_id = :program_id) "
                                   "ORDER BY c.id");
  st.bind(":run_id", run_id).bind(":program_id", program_id);
  std::vector<ComparisonRecord> out;
  while (st.step()) out.push_back(read_comparison(st));
  return out;
}

}  // namespace evodispatch::results

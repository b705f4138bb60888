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
      "c.baseline_us, c.speedup, c.speedup_lo, c.speedup_hi, c.pairs, c.details_json, c.created_at "
      "FROM comparisons c JOIN shapes s ON s.id = c.shape_id JOIN devices d ON d.id = c.device_id "
      "JOIN kernel_builds k ON k.id = c.kernel_build_id";
  return kSql;
}

ComparisonRecord read_comparison(const sql::Statement& st) {
  ComparisonRecord r;
  r.id = st.column_int64(0);
  r.run_id = st.column_int64(1);
  r.program_id = st.column_optional_int64(2);
  r.shape = detail::read_shape(st, 3);
  r.device = st.column_text(12);
  r.kernel_build = st.column_text(13);
  r.l2 = detail::read_l2(st, 14);
  r.candidate = detail::read_decision(st, 15);
  r.baseline = detail::read_decision(st, 18);
  r.attempt = st.column_int(21);
  r.ok = st.column_bool(22);
  r.error = st.column_text(23);
  r.candidate_us = st.column_double(24);
  r.baseline_us = st.column_double(25);
  r.speedup = st.column_double(26);
  r.speedup_lo = st.column_double(27);
  r.speedup_hi = st.column_double(28);
  r.pairs = st.column_int(29);
  r.details = detail::read_json(st, 30);
  r.created_at = st.column_text(31);
  return r;
}
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
  const Decision cand = resolve(r.candidate, r.shape);
  const Decision base = resolve(r.baseline, r.shape);
  sql::Statement ins(c,
                     "INSERT INTO comparisons (run_id, program_id, shape_id, attempt, device_id, kernel_build_id, "
                     "l2_mode, cand_num_splits, cand_pack_gqa, cand_sm_margin, base_num_splits, base_pack_gqa, "
                     "base_sm_margin, ok, error, candidate_us, baseline_us, speedup, speedup_lo, speedup_hi, pairs, "
                     "details_json) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, "
                     "?17, ?18, ?19, ?20, ?21, ?22) RETURNING id");
  ins.bind(1, r.run_id)
      .bind(2, r.program_id)
      .bind(3, detail::ensure_shape(c, r.shape))
      .bind(4, r.attempt)
      .bind(5, detail::ensure_device(c, r.device))
      .bind(6, detail::ensure_kernel_build(c, r.kernel_build))
      .bind(7, detail::l2_text(r.l2))
      .bind(8, cand.num_splits)
      .bind(9, *cand.pack_gqa)
      .bind(10, cand.sm_margin)
      .bind(11, base.num_splits)
      .bind(12, *base.pack_gqa)
      .bind(13, base.sm_margin)
      .bind(14, r.ok)
      .bind(15, r.error)
      .bind(16, r.candidate_us)
      .bind(17, r.baseline_us)
      .bind(18, r.speedup)
      .bind(19, r.speedup_lo)
      .bind(20, r.speedup_hi)
      .bind(21, r.pairs)
      .bind(22, detail::json_text(r.details.is_null() ? nlohmann::json::object() : r.details));
  const std::int64_t id = detail::insert_returning_id(ins).value();
  t.commit();
  return id;
}

std::vector<ComparisonRecord> Comparisons::list_by_run(std::int64_t run_id, std::optional<std::int64_t> program_id) const {
  sql::Statement st(detail::connection(*db_),
                    select_sql() + " WHERE c.run_id = ?1 AND (?2 IS NULL OR c.program_id = ?2) ORDER BY c.id");
  st.bind(1, run_id).bind(2, program_id);
  std::vector<ComparisonRecord> out;
  while (st.step()) out.push_back(read_comparison(st));
  return out;
}

}  // namespace evodispatch::results

#include <evodispatch/results/measurements.hpp>

#include <algorithm>

#include "access.hpp"
#include "codec.hpp"

namespace evodispatch::results {

namespace {

// One SELECT for find, find_many and list, so every path reads a row the same way.
const std::string& select_sql() {
  static const std::string kSql =
      "SELECT m.id, d.fingerprint, k.hash, " + detail::shape_columns("s") +
      ", m.num_splits, m.pack_gqa, m.sm_margin, m.l2_mode, m.ok, m.error, m.median_us, m.p10_us, m.p90_us, "
      "m.samples, m.rel_error, m.plan_json, m.run_id, m.created_at, m.measuring_protocol "
      "FROM measurements m "
      "JOIN devices d ON d.id = m.device_id "
      "JOIN kernel_builds k ON k.id = m.kernel_build_id "
      "JOIN shapes s ON s.id = m.shape_id";
  return kSql;
}

MeasurementRow read_row(const sql::Statement& st) {
  MeasurementRow r;
  Measurement& m = r.measurement;
  r.id = st.column_int64(0);
  m.key.device = st.column_text(1);
  m.key.kernel_build = st.column_text(2);
  m.key.shape = detail::read_shape(st, 3);
  const int c = 3 + detail::kShapeColumnCount;  // the columns after the shape's
  m.key.decision = detail::read_decision(st, c);
  m.key.l2 = detail::read_l2(st, c + 3);
  m.ok = st.column_bool(c + 4);
  m.error = st.column_text(c + 5);
  m.median_us = st.column_double(c + 6);
  m.p10_us = st.column_double(c + 7);
  m.p90_us = st.column_double(c + 8);
  m.samples = st.column_int(c + 9);
  m.rel_error = st.column_optional_double(c + 10);
  m.plan = detail::read_json(st, c + 11);
  r.run_id = st.column_optional_int64(c + 12);
  r.created_at = st.column_text(c + 13);
  m.key.measuring_protocol = st.column_int(c + 14);
  return r;
}

// The key with its decision resolved, as it is stored.
MeasurementKey normalized(const MeasurementKey& k) {
  MeasurementKey n = k;
  n.decision = resolve(k.decision, k.shape);
  return n;
}

std::string key_sql() {
  return select_sql() + " WHERE d.fingerprint = :device AND k.hash = :kernel_build AND " +
         "m.measuring_protocol = :measuring_protocol AND " + detail::shape_match("s") +
         " AND m.num_splits = :num_splits AND m.pack_gqa = :pack_gqa AND m.sm_margin = :sm_margin"
         " AND m.l2_mode = :l2_mode";
}

// `k` normalized: its decision resolved.
void bind_key(sql::Statement& st, const MeasurementKey& k) {
  st.bind(":device", k.device)
      .bind(":kernel_build", k.kernel_build)
      .bind(":measuring_protocol", k.measuring_protocol)
      .bind(":l2_mode", detail::l2_text(k.l2));
  detail::bind_shape(st, k.shape);
  detail::bind_decision(st, "", k.decision);
}

std::optional<Measurement> find_with(sql::Statement& st, const MeasurementKey& key) {
  const MeasurementKey k = normalized(key);
  st.reset();
  bind_key(st, k);
  std::optional<Measurement> out;
  if (st.step()) out = read_row(st).measurement;
  st.reset();
  return out;
}

struct Where {
  std::string sql;
  void add(const std::string& cond) { sql += (sql.empty() ? " WHERE " : " AND ") + cond; }
};

Where filter_where(const MeasurementFilter& f) {
  Where w;
  if (f.device) w.add("d.fingerprint = :device");
  if (f.kernel_build) w.add("k.hash = :build");
  if (f.measuring_protocol) w.add("m.measuring_protocol = :measuring_protocol");
  if (f.run_id) w.add("m.run_id = :run");
  if (f.shape) w.add(detail::shape_match("s"));
  if (f.l2) w.add("m.l2_mode = :l2");
  if (f.ok) w.add("m.ok = :ok");
  return w;
}

void bind_filter(sql::Statement& st, const MeasurementFilter& f) {
  if (f.device) st.bind(":device", *f.device);
  if (f.kernel_build) st.bind(":build", *f.kernel_build);
  if (f.measuring_protocol) st.bind(":measuring_protocol", *f.measuring_protocol);
  if (f.run_id) st.bind(":run", *f.run_id);
  if (f.shape) detail::bind_shape(st, *f.shape);
  if (f.l2) st.bind(":l2", detail::l2_text(*f.l2));
  if (f.ok) st.bind(":ok", *f.ok);
}

}  // namespace

std::optional<Measurement> Measurements::find(const MeasurementKey& key) const {
  sql::Statement st(detail::connection(*db_), key_sql());
  return find_with(st, key);
}

std::vector<std::optional<Measurement>> Measurements::find_many(std::span<const MeasurementKey> keys) const {
  auto& c = detail::connection(*db_);
  // A deferred transaction pins one snapshot, so a concurrent writer cannot make the
  // answer a mix of two states, and the statement is prepared once for all keys.
  sql::Transaction t(c, sql::Mode::deferred);
  sql::Statement st(c, key_sql());
  std::vector<std::optional<Measurement>> out;
  out.reserve(keys.size());
  for (const MeasurementKey& k : keys) out.push_back(find_with(st, k));
  t.commit();
  return out;
}

namespace {
bool put_one(sql::Connection& c, sql::Statement& ins, const Measurement& m, std::optional<std::int64_t> run_id) {
  const MeasurementKey k = normalized(m.key);
  ins.reset();
  ins.bind(":device_id", detail::ensure_device(c, k.device))
      .bind(":kernel_build_id", detail::ensure_kernel_build(c, k.kernel_build))
      .bind(":measuring_protocol", k.measuring_protocol)
      .bind(":shape_id", detail::ensure_shape(c, k.shape))
      .bind(":l2_mode", detail::l2_text(k.l2))
      .bind(":ok", m.ok)
      .bind(":error", m.error)
      .bind(":median_us", m.median_us)
      .bind(":p10_us", m.p10_us)
      .bind(":p90_us", m.p90_us)
      .bind(":samples", m.samples)
      .bind(":rel_error", m.rel_error)
      .bind(":plan_json", detail::json_text(m.plan))
      .bind(":run_id", run_id);
  detail::bind_decision(ins, "", k.decision);
  ins.run();
  ins.reset();
  return c.changes() > 0;
}

constexpr std::string_view kInsertColumns[] = {
    "device_id", "kernel_build_id", "measuring_protocol", "shape_id", "num_splits", "pack_gqa", "sm_margin", "l2_mode",
    "ok", "error", "median_us", "p10_us", "p90_us", "samples", "rel_error", "plan_json", "run_id"};

std::string insert_sql(bool replace) {
  std::string s = sql::insert_into("measurements", kInsertColumns) +
                  " ON CONFLICT (device_id, kernel_build_id, measuring_protocol, shape_id, num_splits, pack_gqa, "
                  "sm_margin, l2_mode) ";
  if (replace) {
    s += "DO UPDATE SET ok = excluded.ok, error = excluded.error, median_us = excluded.median_us, "
         "p10_us = excluded.p10_us, p90_us = excluded.p90_us, samples = excluded.samples, "
         "rel_error = excluded.rel_error, plan_json = excluded.plan_json, run_id = excluded.run_id, "
         "created_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";
  } else {
    s += "DO NOTHING";
  }
  return s;
}
}  // namespace

bool Measurements::put(const Measurement& m, bool replace, std::optional<std::int64_t> run_id) {
  return put_many(std::span<const Measurement>(&m, 1), replace, run_id) == 1;
}

std::size_t Measurements::put_many(std::span<const Measurement> rows, bool replace,
                                   std::optional<std::int64_t> run_id) {
  auto& c = detail::connection(*db_);
  sql::Transaction t(c);  // the key rows and the measurement land together or not at all
  sql::Statement ins(c, insert_sql(replace));
  std::size_t written = 0;
  for (const Measurement& m : rows) written += put_one(c, ins, m, run_id) ? 1 : 0;
  t.commit();
  return written;
}

std::vector<MeasurementRow> Measurements::list(const MeasurementFilter& f) const {
  std::string q = select_sql() + filter_where(f).sql + " ORDER BY m.id";
  if (f.limit) q += " LIMIT :limit";
  sql::Statement st(detail::connection(*db_), q);
  bind_filter(st, f);
  if (f.limit) st.bind(":limit", *f.limit);
  std::vector<MeasurementRow> out;
  while (st.step()) out.push_back(read_row(st));
  return out;
}

std::int64_t Measurements::count(const MeasurementFilter& f) const {
  std::string q =
      "SELECT count(*) FROM measurements m JOIN devices d ON d.id = m.device_id "
      "JOIN kernel_builds k ON k.id = m.kernel_build_id JOIN shapes s ON s.id = m.shape_id" +
      filter_where(f).sql;
  sql::Statement st(detail::connection(*db_), q);
  bind_filter(st, f);
  st.step();
  const std::int64_t n = st.column_int64(0);
  return f.limit ? std::min(n, *f.limit) : n;
}

}  // namespace evodispatch::results

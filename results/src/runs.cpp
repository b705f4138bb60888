#include <evodispatch/results/runs.hpp>

#include "access.hpp"
#include "codec.hpp"

namespace evodispatch::results {

std::string_view to_string(RunStatus s) {
  switch (s) {
    case RunStatus::running: return "running";
    case RunStatus::finished: return "finished";
    case RunStatus::failed: return "failed";
    case RunStatus::interrupted: return "interrupted";
  }
  return "?";
}

std::optional<RunStatus> parse_run_status(std::string_view s) {
  for (RunStatus v : {RunStatus::running, RunStatus::finished, RunStatus::failed, RunStatus::interrupted}) {
    if (to_string(v) == s) return v;
  }
  return std::nullopt;
}

namespace {
constexpr const char* kRunSelect =
    "SELECT r.id, r.kind, r.status, r.config_json, r.seed, d.fingerprint, r.workload_id, r.summary_json, "
    "r.state_json, r.started_at, r.finished_at, k.hash FROM runs r LEFT JOIN devices d ON d.id = r.device_id "
    "LEFT JOIN kernel_builds k ON k.id = r.kernel_build_id";

RunRecord read_run(const sql::Statement& st) {
  RunRecord r;
  r.id = st.column_int64(0);
  r.kind = st.column_text(1);
  const std::string status = st.column_text(2);
  const auto s = parse_run_status(status);
  if (!s) throw DbError("run " + std::to_string(r.id) + " has an unknown status \"" + status + "\"", st.sql());
  r.status = *s;
  r.config = detail::read_json(st, 3);
  r.seed = st.column_optional_int64(4);
  r.device = st.column_text(5);  // NULL (no device) reads as ""
  r.workload_id = st.column_optional_int64(6);
  r.summary = detail::read_json(st, 7);
  r.state = detail::read_json(st, 8);
  r.started_at = st.column_text(9);
  r.finished_at = st.column_optional_text(10);
  r.kernel_build = st.column_text(11);  // NULL (none) reads as ""
  return r;
}

nlohmann::json object_or_empty(const nlohmann::json& j) { return j.is_null() ? nlohmann::json::object() : j; }

void require_one_row(sql::Connection& c, std::int64_t id, std::string_view what) {
  if (c.changes() != 1) throw DbError(std::string(what) + ": no run with id " + std::to_string(id));
}
}  // namespace

std::int64_t Runs::create(const RunRecord& r) {
  if (r.kind.empty()) throw std::invalid_argument("Runs::create: empty kind");
  auto& c = detail::connection(*db_);
  sql::Transaction t(c);
  std::optional<std::int64_t> device_id;
  if (!r.device.empty()) device_id = detail::ensure_device(c, r.device);
  static constexpr std::string_view kColumns[] = {"kind",         "status",     "config_json",
                                                  "seed",         "device_id",  "workload_id",
                                                  "summary_json", "state_json", "kernel_build_id"};
  // Without a build the column is left out, so a file at schema < 4 (a migration test's)
  // still takes runs.
  const std::span<const std::string_view> columns(kColumns, r.kernel_build.empty() ? 8 : 9);
  sql::Statement st(c, sql::insert_into("runs", columns) + " RETURNING id");
  st.bind(":kind", r.kind)
      .bind(":status", to_string(RunStatus::running))
      .bind(":config_json", detail::json_text(object_or_empty(r.config)))
      .bind(":seed", r.seed)
      .bind(":device_id", device_id)
      .bind(":workload_id", r.workload_id)
      .bind(":summary_json", detail::json_text(object_or_empty(r.summary)))
      .bind(":state_json", detail::json_text(object_or_empty(r.state)));
  if (!r.kernel_build.empty()) st.bind(":kernel_build_id", detail::ensure_kernel_build(c, r.kernel_build));
  const std::int64_t id = detail::insert_returning_id(st).value();
  t.commit();
  return id;
}

void Runs::finish(std::int64_t id, RunStatus status, const nlohmann::json& summary) {
  auto& c = detail::connection(*db_);
  sql::Statement st(c,
                    "UPDATE runs SET status = :status, summary_json = :summary_json, "
                    "finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = :id");
  st.bind(":id", id)
      .bind(":status", to_string(status))
      .bind(":summary_json", detail::json_text(object_or_empty(summary)));
  st.run();
  require_one_row(c, id, "Runs::finish");
}

void Runs::set_status(std::int64_t id, RunStatus status) {
  auto& c = detail::connection(*db_);
  sql::Statement st(c,
                    "UPDATE runs SET status = :status, "
                    "finished_at = CASE WHEN :status = 'running' THEN NULL ELSE finished_at END WHERE id = :id");
  st.bind(":id", id).bind(":status", to_string(status));
  st.run();
  require_one_row(c, id, "Runs::set_status");
}

void Runs::save_state(std::int64_t id, const nlohmann::json& state) {
  auto& c = detail::connection(*db_);
  sql::Statement st(c, "UPDATE runs SET state_json = :state_json WHERE id = :id");
  st.bind(":id", id).bind(":state_json", detail::json_text(object_or_empty(state)));
  st.run();
  require_one_row(c, id, "Runs::save_state");
}

std::optional<RunRecord> Runs::get(std::int64_t id) const {
  sql::Statement st(detail::connection(*db_), std::string(kRunSelect) + " WHERE r.id = :id");
  st.bind(":id", id);
  if (st.step()) return read_run(st);
  return std::nullopt;
}

std::vector<RunRecord> Runs::list(const RunFilter& f) const {
  std::string q = kRunSelect;
  std::string where;
  auto add = [&](const char* cond) { where += (where.empty() ? " WHERE " : " AND ") + std::string(cond); };
  if (f.kind) add("r.kind = :kind");
  if (f.status) add("r.status = :status");
  q += where + " ORDER BY r.id DESC";
  if (f.limit) q += " LIMIT :limit";
  sql::Statement st(detail::connection(*db_), q);
  if (f.kind) st.bind(":kind", *f.kind);
  if (f.status) st.bind(":status", to_string(*f.status));
  if (f.limit) st.bind(":limit", *f.limit);
  std::vector<RunRecord> out;
  while (st.step()) out.push_back(read_run(st));
  return out;
}

}  // namespace evodispatch::results

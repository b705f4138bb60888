#include <evodispatch/results/shapes.hpp>

#include "access.hpp"
#include "codec.hpp"

namespace evodispatch::results {

namespace {
WorkloadRecord read_workload(const sql::Statement& st) {
  WorkloadRecord r;
  r.id = st.column_int64(0);
  r.name = st.column_text(1);
  r.spec = detail::read_json(st, 2);
  r.created_at = st.column_text(3);
  return r;
}
}  // namespace

// The spec is stored in nlohmann's canonical dump (keys sorted), so equal JSON from
// differently formatted files is one row.
std::int64_t Workloads::upsert(const std::string& name, const nlohmann::json& spec) {
  auto& c = detail::connection(*db_);
  const std::string text = detail::json_text(spec);
  sql::Statement find(c, "SELECT id FROM workloads WHERE name = :name AND spec_json = :spec_json");
  find.bind(":name", name).bind(":spec_json", text);
  if (find.step()) return find.column_int64(0);
  sql::Statement ins(c, "INSERT INTO workloads (name, spec_json) VALUES (:name, :spec_json) "
                        "ON CONFLICT (name, spec_json) DO NOTHING RETURNING id");
  ins.bind(":name", name).bind(":spec_json", text);
  if (auto id = detail::insert_returning_id(ins)) return *id;
  find.reset();  // another connection inserted it in between
  if (find.step()) return find.column_int64(0);
  throw DbError("workload row vanished while inserting " + name);
}

std::optional<WorkloadRecord> Workloads::get(std::int64_t id) const {
  sql::Statement st(detail::connection(*db_), "SELECT id, name, spec_json, created_at FROM workloads WHERE id = :id");
  st.bind(":id", id);
  if (st.step()) return read_workload(st);
  return std::nullopt;
}

std::vector<WorkloadRecord> Workloads::list() const {
  sql::Statement st(detail::connection(*db_), "SELECT id, name, spec_json, created_at FROM workloads ORDER BY id");
  std::vector<WorkloadRecord> out;
  while (st.step()) out.push_back(read_workload(st));
  return out;
}

}  // namespace evodispatch::results

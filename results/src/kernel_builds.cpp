#include <evodispatch/results/devices.hpp>

#include "access.hpp"
#include "codec.hpp"

namespace evodispatch::results {

namespace {
constexpr const char* kBuildSelect =
    "SELECT id, hash, description, ok, compiler_log, resources_json, created_at FROM kernel_builds";

constexpr std::string_view kUpsertColumns[] = {"hash", "description", "ok", "compiler_log", "resources_json"};

KernelBuildRecord read_build(const sql::Statement& st) {
  KernelBuildRecord r;
  r.id = st.column_int64(0);
  r.hash = st.column_text(1);
  r.description = st.column_text(2);
  r.ok = st.column_bool(3);
  r.compiler_log = st.column_text(4);
  r.resources = detail::read_json(st, 5);
  r.created_at = st.column_text(6);
  return r;
}
}  // namespace

std::int64_t KernelBuilds::upsert(const KernelBuildRecord& r) {
  if (r.hash.empty()) throw std::invalid_argument("KernelBuilds::upsert: empty hash");
  sql::Statement st(detail::connection(*db_),
                    sql::insert_into("kernel_builds", kUpsertColumns) +
                        " ON CONFLICT (hash) DO UPDATE SET description = excluded.description, ok = excluded.ok, "
                        "compiler_log = excluded.compiler_log, resources_json = excluded.resources_json RETURNING id");
  st.bind(":hash", r.hash)
      .bind(":description", r.description)
      .bind(":ok", r.ok)
      .bind(":compiler_log", r.compiler_log)
      .bind(":resources_json", detail::json_text(r.resources.is_null() ? nlohmann::json::object() : r.resources));
  if (auto id = detail::insert_returning_id(st)) return *id;
  throw DbError("upsert of kernel build " + r.hash + " returned no id", st.sql());
}

std::optional<KernelBuildRecord> KernelBuilds::find(const std::string& hash) const {
  sql::Statement st(detail::connection(*db_), std::string(kBuildSelect) + " WHERE hash = :hash");
  st.bind(":hash", hash);
  if (st.step()) return read_build(st);
  return std::nullopt;
}

std::vector<KernelBuildRecord> KernelBuilds::list() const {
  sql::Statement st(detail::connection(*db_), std::string(kBuildSelect) + " ORDER BY id");
  std::vector<KernelBuildRecord> out;
  while (st.step()) out.push_back(read_build(st));
  return out;
}

}  // namespace evodispatch::results

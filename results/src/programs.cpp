#include <evodispatch/results/programs.hpp>

#include "access.hpp"
#include "codec.hpp"

namespace evodispatch::results {

namespace {
constexpr const char* kProgramSelect =
    "SELECT p.id, p.run_id, p.hash, p.source, p.rules_json, p.parents_json, p.origin, p.island, p.generation, "
    "p.created_at, b.text, p.step FROM programs p LEFT JOIN program_bases b ON b.id = p.base_id";

ProgramRecord read_program(const sql::Statement& st) {
  ProgramRecord p;
  p.id = st.column_int64(0);
  p.run_id = st.column_int64(1);
  p.hash = st.column_text(2);
  p.source = st.column_text(3);
  p.rules = detail::read_json(st, 4);
  const nlohmann::json parents = detail::read_json(st, 5);
  if (!parents.is_array()) throw DbError("program " + std::to_string(p.id) + ": parents_json is not an array", st.sql());
  for (const auto& v : parents) {
    if (!v.is_number_integer()) throw DbError("program " + std::to_string(p.id) + ": a parent id is not an integer", st.sql());
    p.parents.push_back(v.get<std::int64_t>());
  }
  p.origin = st.column_text(6);
  p.island = st.column_int(7);
  p.generation = st.column_int(8);
  p.created_at = st.column_text(9);
  p.base = st.column_optional_text(10);
  p.step = st.column_optional_int64(11);
  return p;
}

constexpr std::string_view kInsertColumns[] = {"run_id", "hash",   "source",     "rules_json", "parents_json",
                                               "origin", "island", "generation", "base_id", "step"};
// Without a step the column is left out, so a file at schema < 4 still takes programs.
constexpr std::size_t kColumnsWithoutStep = std::size(kInsertColumns) - 1;

std::optional<ProgramRecord> first(sql::Statement& st) {
  if (st.step()) return read_program(st);
  return std::nullopt;
}
}  // namespace

InsertResult Programs::insert(const ProgramRecord& p) {
  if (p.hash.empty()) throw std::invalid_argument("Programs::insert: empty hash");
  auto& c = detail::connection(*db_);
  std::optional<std::int64_t> base_id;
  if (p.base) base_id = detail::ensure_program_base(c, *p.base);  // one row however many programs share it
  const std::span<const std::string_view> columns(kInsertColumns, p.step ? std::size(kInsertColumns) : kColumnsWithoutStep);
  sql::Statement ins(c, sql::insert_into("programs", columns) + " ON CONFLICT (run_id, hash) DO NOTHING RETURNING id");
  ins.bind(":run_id", p.run_id)
      .bind(":hash", p.hash)
      .bind(":source", p.source)
      .bind(":rules_json", detail::json_text(p.rules))
      .bind(":parents_json", detail::json_text(nlohmann::json(p.parents)))
      .bind(":origin", p.origin)
      .bind(":island", p.island)
      .bind(":generation", p.generation)
      .bind(":base_id", base_id);
  if (p.step) ins.bind(":step", *p.step);
  if (auto id = detail::insert_returning_id(ins)) return {*id, true};
  if (auto existing = find_by_hash(p.run_id, p.hash)) return {existing->id, false};
  throw DbError("program " + p.hash + " of run " + std::to_string(p.run_id) + " vanished while inserting it");
}

std::optional<ProgramRecord> Programs::get(std::int64_t id) const {
  sql::Statement st(detail::connection(*db_), std::string(kProgramSelect) + " WHERE p.id = :id");
  st.bind(":id", id);
  return first(st);
}

std::optional<ProgramRecord> Programs::find_by_hash(std::int64_t run_id, const std::string& hash) const {
  sql::Statement st(detail::connection(*db_),
                    std::string(kProgramSelect) + " WHERE p.run_id = :run_id AND p.hash = :hash");
  st.bind(":run_id", run_id).bind(":hash", hash);
  return first(st);
}

std::vector<ProgramRecord> Programs::list_by_run(std::int64_t run_id) const {
  sql::Statement st(detail::connection(*db_), std::string(kProgramSelect) + " WHERE p.run_id = :run_id ORDER BY p.id");
  st.bind(":run_id", run_id);
  std::vector<ProgramRecord> out;
  while (st.step()) out.push_back(read_program(st));
  return out;
}

}  // namespace evodispatch::results

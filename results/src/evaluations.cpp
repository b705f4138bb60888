#include <evodispatch/results/programs.hpp>

#include "access.hpp"
#include "codec.hpp"

namespace evodispatch::results {

std::string_view to_string(Split s) { return s == Split::train ? "train" : "validation"; }

std::optional<Split> parse_split(std::string_view s) {
  if (s == "train") return Split::train;
  if (s == "validation") return Split::validation;
  return std::nullopt;
}

namespace {
constexpr const char* kEvaluationSelect =
    "SELECT id, program_id, run_id, split, stage, ok, error, fitness, worst_speedup, oracle_fraction, shapes, "
    "details_json, created_at FROM evaluations";

EvaluationRecord read_evaluation(const sql::Statement& st) {
  EvaluationRecord e;
  e.id = st.column_int64(0);
  e.program_id = st.column_int64(1);
  e.run_id = st.column_int64(2);
  const std::string split = st.column_text(3);
  const auto s = parse_split(split);
  if (!s) throw DbError("evaluation " + std::to_string(e.id) + " has an unknown split \"" + split + "\"", st.sql());
  e.split = *s;
  e.stage = st.column_text(4);
  e.ok = st.column_bool(5);
  e.error = st.column_text(6);
  e.fitness = st.column_optional_double(7);
  e.worst_speedup = st.column_optional_double(8);
  e.oracle_fraction = st.column_optional_double(9);
  e.shapes = st.column_int(10);
  e.details = detail::read_json(st, 11);
  e.created_at = st.column_text(12);
  return e;
}

std::vector<EvaluationRecord> read_all(sql::Statement& st) {
  std::vector<EvaluationRecord> out;
  while (st.step()) out.push_back(read_evaluation(st));
  return out;
}
}  // namespace

// run_id is copied from the program, so an evaluation can never name another run.
InsertResult Evaluations::insert(const EvaluationRecord& e) {
  auto& c = detail::connection(*db_);
  sql::Statement ins(c,
                     "INSERT INTO evaluations (program_id, run_id, split, stage, ok, error, fitness, worst_speedup, "
                     "oracle_fraction, shapes, details_json) "
                     "SELECT p.id, p.run_id, :split, :stage, :ok, :error, :fitness, :worst_speedup, :oracle_fraction, "
                     ":shapes, :details_json FROM programs p WHERE p.id = :program_id "
                     "ON CONFLICT (program_id, split, stage) DO NOTHING RETURNING id");
  ins.bind(":program_id", e.program_id)
      .bind(":split", to_string(e.split))
      .bind(":stage", e.stage)
      .bind(":ok", e.ok)
      .bind(":error", e.error)
      .bind(":fitness", e.fitness)
      .bind(":worst_speedup", e.worst_speedup)
      .bind(":oracle_fraction", e.oracle_fraction)
      .bind(":shapes", e.shapes)
      .bind(":details_json", detail::json_text(e.details.is_null() ? nlohmann::json::object() : e.details));
  if (auto id = detail::insert_returning_id(ins)) return {*id, true};
  if (auto existing = find(e.program_id, e.split, e.stage)) return {existing->id, false};
  throw DbError("Evaluations::insert: no program with id " + std::to_string(e.program_id));
}

std::optional<EvaluationRecord> Evaluations::find(std::int64_t program_id, Split split, const std::string& stage) const {
  sql::Statement st(detail::connection(*db_),
                    std::string(kEvaluationSelect) +
                        " WHERE program_id = :program_id AND split = :split AND stage = :stage");
  st.bind(":program_id", program_id).bind(":split", to_string(split)).bind(":stage", stage);
  if (st.step()) return read_evaluation(st);
  return std::nullopt;
}

std::vector<EvaluationRecord> Evaluations::list_by_program(std::int64_t program_id) const {
  sql::Statement st(detail::connection(*db_),
                    std::string(kEvaluationSelect) + " WHERE program_id = :program_id ORDER BY id");
  st.bind(":program_id", program_id);
  return read_all(st);
}

std::vector<EvaluationRecord> Evaluations::list_by_run(std::int64_t run_id, std::optional<Split> split) const {
  sql::Statement st(detail::connection(*db_),
                    std::string(kEvaluationSelect) +
                        " WHERE run_id = :run_id AND (:split IS NULL OR split = :split) ORDER BY id");
  st.bind(":run_id", run_id);
  if (split) st.bind(":split", to_string(*split));
  else st.bind(":split", std::nullopt);
  return read_all(st);
}

}  // namespace evodispatch::results

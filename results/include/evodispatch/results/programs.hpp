#pragma once
// The search's programs and their scores.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <evodispatch/results/database.hpp>

namespace evodispatch::results {

struct ProgramRecord {
  std::int64_t id = 0;                 // filled on insert / read
  std::int64_t run_id = 0;
  std::string hash;                    // of the normalized source: unique within a run
  std::string source;                  // the Lua program, or the part of it that is not `base`
  // A text many programs share (a search's base policy), stored once by content; the
  // search puts it back into `source` (search::stored_source). Unset: `source` is whole.
  std::optional<std::string> base;
  nlohmann::json rules;                // the rule list it was rendered from; null for a plain script
  std::vector<std::int64_t> parents;   // program ids, in operator order
  std::string origin;                  // "seed", "perturb", "crossover", "external", ...
  int island = 0;
  int generation = 0;
  std::optional<std::int64_t> step;    // the search step that made it; unset before schema 4
  std::string created_at;              // filled on read
};

class Programs {
 public:
  explicit Programs(Database& db) : db_(&db) {}
  // Inserts unless the run already has a program with this hash; then returns that
  // program's id with inserted = false and changes nothing (programs equal after
  // normalisation are never scored twice).
  InsertResult insert(const ProgramRecord&);
  std::optional<ProgramRecord> get(std::int64_t id) const;
  std::optional<ProgramRecord> find_by_hash(std::int64_t run_id, const std::string& hash) const;
  std::vector<ProgramRecord> list_by_run(std::int64_t run_id) const;  // in insertion order

 private:
  Database* db_;
};

enum class Split { train, validation };
std::string_view to_string(Split);
std::optional<Split> parse_split(std::string_view);

struct EvaluationRecord {
  std::int64_t id = 0;                  // filled on insert / read
  std::int64_t program_id = 0;
  std::int64_t run_id = 0;              // filled on read (always the program's run)
  Split split = Split::train;
  std::string stage = "measured";       // cascade stage: "sandbox", "estimate", "measured", "confirmed"
  bool ok = false;                      // false: error says why (sandbox error, floor, failed shapes)
  std::string error;
  std::optional<double> fitness;        // geometric-mean speedup over the baseline
  std::optional<double> worst_speedup;  // the lowest per-shape speedup
  std::optional<double> oracle_fraction;
  int shapes = 0;                       // shapes scored
  nlohmann::json details = nlohmann::json::object();  // per-shape ratios and anything else
  std::string created_at;               // filled on read
};

class Evaluations {
 public:
  explicit Evaluations(Database& db) : db_(&db) {}
  // One evaluation per (program, split, stage): a second insert for the same triple
  // returns the first row's id with inserted = false and changes nothing.
  InsertResult insert(const EvaluationRecord&);
  std::optional<EvaluationRecord> find(std::int64_t program_id, Split, const std::string& stage = "measured") const;
  std::vector<EvaluationRecord> list_by_program(std::int64_t program_id) const;
  std::vector<EvaluationRecord> list_by_run(std::int64_t run_id, std::optional<Split> = std::nullopt) const;

 private:
  Database* db_;
};

}  // namespace evodispatch::results

#pragma once
// Conversions between the contract's structs and columns, shared by the repositories
// so a shape or a decision is written and read the same way everywhere.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include <evodispatch/evaluator/measurement.hpp>
#include <evodispatch/heuristics/contract.hpp>

#include "sql.hpp"

namespace evodispatch::results::detail {

// The shape columns in table order; read_shape reads them in this order, and each is
// bound as the parameter named after it (":batch", ":seqlen_q", ...).
inline constexpr std::array<std::string_view, 10> kShapeColumns = {
    "batch", "seqlen_q", "seqlen_k", "h_q", "h_kv", "head_dim", "dtype", "page_size", "causal", "q_dtype"};
inline constexpr int kShapeColumnCount = static_cast<int>(kShapeColumns.size());
// "s.batch, s.seqlen_q, ..." for a table aliased as `alias`.
std::string shape_columns(std::string_view alias);
// "s.batch = :batch AND ...": a shape bound by bind_shape.
std::string shape_match(std::string_view alias);

void bind_shape(sql::Statement&, const Shape&);
Shape read_shape(const sql::Statement&, int first);

// A decision's columns are num_splits, pack_gqa and sm_margin behind a prefix ("" in
// measurements, "cand_" and "base_" in comparisons). bind_decision binds a resolved
// decision to the parameters named after them (":cand_num_splits", ...); read_decision
// reads the three columns from `first` on.
void bind_decision(sql::Statement&, std::string_view prefix, const Decision&);
Decision read_decision(const sql::Statement&, int first);

std::string l2_text(L2Mode);
L2Mode read_l2(const sql::Statement&, int col);

std::string json_text(const nlohmann::json&);
nlohmann::json read_json(const sql::Statement&, int col);

// Ids of the rows a key refers to. ensure_* creates a bare row when missing (inside
// the caller's transaction); find_* only looks.
std::int64_t ensure_device(sql::Connection&, const std::string& fingerprint);
std::int64_t ensure_kernel_build(sql::Connection&, const std::string& hash);
std::int64_t ensure_program_base(sql::Connection&, const std::string& text);
std::int64_t ensure_shape(sql::Connection&, const Shape&);
std::optional<std::int64_t> find_shape(sql::Connection&, const Shape&);

// Runs `st` (an INSERT ... ON CONFLICT DO NOTHING RETURNING id); returns the new id,
// or nullopt when the row existed.
std::optional<std::int64_t> insert_returning_id(sql::Statement& st);

}  // namespace evodispatch::results::detail

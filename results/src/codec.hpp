#pragma once
// Conversions between the contract's structs and columns, shared by the repositories
// so a shape or a decision is written and read the same way everywhere.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include <evodispatch/evaluator/measurement.hpp>
#include <evodispatch/heuristics/contract.hpp>

#include "sql.hpp"

namespace evodispatch::results::detail {

// The shape columns in table order; bind_shape / read_shape use the same order.
inline constexpr std::string_view kShapeColumns =
    "batch, seqlen_q, seqlen_k, h_q, h_kv, head_dim, dtype, page_size, causal";
inline constexpr int kShapeColumnCount = 9;
// "s.batch, s.seqlen_q, ..." for a table aliased as `alias`.
std::string shape_columns(std::string_view alias);
// "s.batch = ?N AND ..." with parameters first .. first + 8.
std::string shape_match(std::string_view alias, int first);

void bind_shape(sql::Statement&, int first, const Shape&);
Shape read_shape(const sql::Statement&, int first);

// Reads num_splits, pack_gqa, sm_margin from three consecutive columns.
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

#include "codec.hpp"

#include <evodispatch/results/errors.hpp>

namespace evodispatch::results::detail {

namespace {
constexpr std::string_view kShapeNames[kShapeColumnCount] = {"batch", "seqlen_q", "seqlen_k", "h_q",    "h_kv",
                                                             "head_dim", "dtype", "page_size", "causal"};
}

std::string shape_columns(std::string_view alias) {
  std::string out;
  for (int i = 0; i < kShapeColumnCount; ++i) {
    if (i) out += ", ";
    out += std::string(alias) + "." + std::string(kShapeNames[i]);
  }
  return out;
}

std::string shape_match(std::string_view alias, int first) {
  std::string out;
  for (int i = 0; i < kShapeColumnCount; ++i) {
    if (i) out += " AND ";
    out += std::string(alias) + "." + std::string(kShapeNames[i]) + " = ?" + std::to_string(first + i);
  }
  return out;
}

void bind_shape(sql::Statement& st, int first, const Shape& s) {
  st.bind(first + 0, s.batch)
      .bind(first + 1, s.seqlen_q)
      .bind(first + 2, s.seqlen_k)
      .bind(first + 3, s.h_q)
      .bind(first + 4, s.h_kv)
      .bind(first + 5, s.head_dim)
      .bind(first + 6, to_string(s.dtype))
      .bind(first + 7, s.page_size)
      .bind(first + 8, s.causal);
}

Shape read_shape(const sql::Statement& st, int first) {
  Shape s;
  s.batch = st.column_int(first + 0);
  s.seqlen_q = st.column_int(first + 1);
  s.seqlen_k = st.column_int(first + 2);
  s.h_q = st.column_int(first + 3);
  s.h_kv = st.column_int(first + 4);
  s.head_dim = st.column_int(first + 5);
  const std::string dtype = st.column_text(first + 6);
  const auto d = parse_dtype(dtype);
  if (!d) throw DbError("stored shape has an unknown dtype \"" + dtype + "\"", st.sql());
  s.dtype = *d;
  s.page_size = st.column_int(first + 7);
  s.causal = st.column_bool(first + 8);
  return s;
}

Decision read_decision(const sql::Statement& st, int first) {
  Decision d;
  d.num_splits = st.column_int(first);
  d.pack_gqa = st.column_bool(first + 1);
  d.sm_margin = st.column_int(first + 2);
  return d;
}

std::string l2_text(L2Mode m) { return std::string(to_string(m)); }

L2Mode read_l2(const sql::Statement& st, int col) {
  const std::string text = st.column_text(col);
  const auto m = parse_l2_mode(text);
  if (!m) throw DbError("stored row has an unknown L2 mode \"" + text + "\"", st.sql());
  return *m;
}

std::string json_text(const nlohmann::json& j) {
  // `replace` keeps invalid UTF-8 in a compiler log or a plan from aborting a write.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json read_json(const sql::Statement& st, int col) {
  const std::string text = st.column_text(col);
  if (text.empty()) return nullptr;
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw DbError("stored JSON in column " + std::to_string(col) + " does not parse: " + e.what(), st.sql());
  }
}

std::optional<std::int64_t> insert_returning_id(sql::Statement& st) {
  std::optional<std::int64_t> id;
  if (st.step()) {
    id = st.column_int64(0);
    st.run();  // drain it: stepping a finished statement again would re-run the insert
  }
  st.reset();
  return id;
}

namespace {
// Select first, then insert: an existing row (the common case) costs no write lock.
// ON CONFLICT DO NOTHING covers a row inserted by another connection in between.
std::int64_t ensure_by_text(sql::Connection& c, std::string_view table, std::string_view column,
                            const std::string& value) {
  const std::string t(table), col(column);
  sql::Statement find(c, "SELECT id FROM " + t + " WHERE " + col + " = ?1");
  find.bind(1, value);
  if (find.step()) return find.column_int64(0);
  sql::Statement ins(c, "INSERT INTO " + t + " (" + col + ") VALUES (?1) ON CONFLICT (" + col +
                            ") DO NOTHING RETURNING id");
  ins.bind(1, value);
  if (auto id = insert_returning_id(ins)) return *id;
  find.reset();
  if (find.step()) return find.column_int64(0);
  throw DbError("row vanished while inserting " + col + " = " + value + " into " + t);
}
}  // namespace

std::int64_t ensure_device(sql::Connection& c, const std::string& fingerprint) {
  if (fingerprint.empty()) throw std::invalid_argument("empty device fingerprint");
  return ensure_by_text(c, "devices", "fingerprint", fingerprint);
}

std::int64_t ensure_kernel_build(sql::Connection& c, const std::string& hash) {
  if (hash.empty()) throw std::invalid_argument("empty kernel build hash");
  return ensure_by_text(c, "kernel_builds", "hash", hash);
}

std::int64_t ensure_program_base(sql::Connection& c, const std::string& text) {
  return ensure_by_text(c, "program_bases", "text", text);
}

std::optional<std::int64_t> find_shape(sql::Connection& c, const Shape& s) {
  sql::Statement st(c, "SELECT s.id FROM shapes s WHERE " + shape_match("s", 1));
  bind_shape(st, 1, s);
  if (st.step()) return st.column_int64(0);
  return std::nullopt;
}

std::int64_t ensure_shape(sql::Connection& c, const Shape& s) {
  if (auto id = find_shape(c, s)) return *id;
  sql::Statement ins(c, "INSERT INTO shapes (" + std::string(kShapeColumns) +
                            ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT DO NOTHING RETURNING id");
  bind_shape(ins, 1, s);
  if (auto id = insert_returning_id(ins)) return *id;
  if (auto id = find_shape(c, s)) return *id;
  throw DbError("shape row vanished while inserting " + describe(s));
}

}  // namespace evodispatch::results::detail

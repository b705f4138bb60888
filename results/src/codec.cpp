#include "codec.hpp"

#include <evodispatch/results/errors.hpp>

namespace evodispatch::results::detail {

std::string shape_columns(std::string_view alias) {
  std::string out;
  for (const std::string_view column : kShapeColumns) {
    if (!out.empty()) out += ", ";
    out += std::string(alias) + "." + std::string(column);
  }
  return out;
}

std::string shape_match(std::string_view alias) {
  std::string out;
  for (const std::string_view column : kShapeColumns) {
    if (!out.empty()) out += " AND ";
    out += std::string(alias) + "." + std::string(column) + " = :" + std::string(column);
  }
  return out;
}

void bind_shape(sql::Statement& st, const Shape& s) {
  st.bind(":batch", s.batch)
      .bind(":seqlen_q", s.seqlen_q)
      .bind(":seqlen_k", s.seqlen_k)
      .bind(":h_q", s.h_q)
      .bind(":h_kv", s.h_kv)
      .bind(":head_dim", s.head_dim)
      .bind(":dtype", to_string(s.dtype))
      .bind(":page_size", s.page_size)
      .bind(":causal", s.causal)
      .bind(":q_dtype", to_string(s.q_dtype));
}

Shape read_shape(const sql::Statement& st, int first) {
  Shape s;
  s.batch = st.column_int(first + 0);
  s.seqlen_q = st.column_int(first + 1);
  s.seqlen_k = st.column_int(first + 2);
  s.h_q = st.column_int(first + 3);
  s.h_kv = st.column_int(first + 4);
  s.head_dim = st.column_int(first + 5);
  auto dtype_at = [&](int col) {
    const std::string text = st.column_text(col);
    const auto d = parse_dtype(text);
    if (!d) throw DbError("stored shape has an unknown dtype \"" + text + "\"", st.sql());
    return *d;
  };
  s.dtype = dtype_at(first + 6);
  s.page_size = st.column_int(first + 7);
  s.causal = st.column_bool(first + 8);
  s.q_dtype = dtype_at(first + 9);
  return s;
}

void bind_decision(sql::Statement& st, std::string_view prefix, const Decision& d) {
  const std::string p = ":" + std::string(prefix);
  st.bind(p + "num_splits", d.num_splits).bind(p + "pack_gqa", d.pack_gqa.value()).bind(p + "sm_margin", d.sm_margin);
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
  sql::Statement find(c, "SELECT id FROM " + t + " WHERE " + col + " = :value");
  find.bind(":value", value);
  if (find.step()) return find.column_int64(0);
  sql::Statement ins(c, "INSERT INTO " + t + " (" + col + ") VALUES (:value) ON CONFLICT (" + col +
                            ") DO NOTHING RETURNING id");
  ins.bind(":value", value);
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
  sql::Statement st(c, "SELECT s.id FROM shapes s WHERE " + shape_match("s"));
  bind_shape(st, s);
  if (st.step()) return st.column_int64(0);
  return std::nullopt;
}

std::int64_t ensure_shape(sql::Connection& c, const Shape& s) {
  if (auto id = find_shape(c, s)) return *id;
  sql::Statement ins(c, sql::insert_into("shapes", kShapeColumns) + " ON CONFLICT DO NOTHING RETURNING id");
  bind_shape(ins, s);
  if (auto id = insert_returning_id(ins)) return *id;
  if (auto id = find_shape(c, s)) return *id;
  throw DbError("shape row vanished while inserting " + describe(s));
}

}  // namespace evodispatch::results::detail

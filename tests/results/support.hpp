#pragma once
// Shared helpers for the results tests: a temporary directory per test and sample rows.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <evodispatch/results/results.hpp>

#include "../support/scratch.hpp"

namespace evodispatch::results::test {

// A fresh directory removed when the test ends, so file-backed tests never share state.
using TempDir = evodispatch::test::ScratchDir;

// Records with one field set. (GCC 12 warns about designated initializers that leave
// members to their defaults, so the tests build records this way instead.)
inline RunRecord run(std::string kind) {
  RunRecord r;
  r.kind = std::move(kind);
  return r;
}

inline OpenOptions at_version(int version) {
  OpenOptions o;
  o.schema_version = version;
  return o;
}

template <class T, class Set>
T with(Set set) {
  T t;
  set(t);
  return t;
}

inline Shape sample_shape(int batch = 1, int seqlen_k = 512) {
  Shape s;
  s.batch = batch;
  s.seqlen_k = seqlen_k;
  s.h_q = 64;
  s.h_kv = 8;
  s.head_dim = 128;
  return s;
}

// A shape row as versions 1 to 4 stored it (without q_dtype), for the migration tests
// that fill an old file: the repositories write the newest columns.
inline void insert_shape_before_v5(Database& db, std::int64_t id, const Shape& s) {
  db.execute("INSERT INTO shapes (id, batch, seqlen_q, seqlen_k, h_q, h_kv, head_dim, dtype, page_size, causal) "
             "VALUES (" + std::to_string(id) + ", " + std::to_string(s.batch) + ", " + std::to_string(s.seqlen_q) + ", " + std::to_string(s.seqlen_k) + ", " +
             std::to_string(s.h_q) + ", " + std::to_string(s.h_kv) + ", " + std::to_string(s.head_dim) + ", '" +
             std::string(to_string(s.dtype)) + "', " + std::to_string(s.page_size) + ", " +
             std::to_string(s.causal ? 1 : 0) + ")");
}

inline Measurement sample_measurement(int batch = 1, int splits = 3) {
  Measurement m;
  m.key.device = "h100-sxm-80gb/132sm/driver-580";
  m.key.kernel_build = "build-abc123";
  m.key.shape = sample_shape(batch);
  m.key.decision = Decision{splits, true, 0};
  m.key.l2 = L2Mode::cold;
  m.ok = true;
  m.median_us = 10.25;
  m.p10_us = 10.0;
  m.p90_us = 10.75;
  m.samples = 30;
  m.rel_error = 1.5e-3;
  m.plan = {{"grid", {3, 8, 1}}, {"block", 128}, {"combine", true}, {"smem_bytes", 65536}};
  return m;
}

}  // namespace evodispatch::results::test

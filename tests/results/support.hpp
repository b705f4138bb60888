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
